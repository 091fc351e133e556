"""glTF animations: channel decoding, LINEAR / STEP / CUBICSPLINE sampling, and a clip's nominal frame rate.

Sampling follows glTF 2.0 Appendix C: LINEAR lerps translations and scales and slerps rotations (shortest arc,
keys normalized first); STEP holds the previous key; CUBICSPLINE is the Hermite spline of the key values and
their in/out tangents scaled by the key interval, rotations normalized afterwards. Times before the first key
or after the last clamp to the end keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.rotations import quat_slerp

from ._gltf_accessors import read_accessor
from ._gltf_document import GltfDocument
from ._limits import MAX_MAGNITUDE, too_large

__all__ = ["COMMON_FPS", "Channel", "nominal_fps", "read_animation", "sample_channel"]

COMMON_FPS = (12.0, 15.0, 24.0, 25.0, 30.0, 48.0, 50.0, 60.0, 72.0, 90.0, 100.0, 120.0, 144.0, 240.0)
"""Frame rates a clip's raw rate snaps to when within :data:`FPS_SNAP_TOLERANCE`."""

FPS_SNAP_TOLERANCE = 0.01
"""Relative distance of ``1 / min key spacing`` to a common rate that snaps it to that rate."""

INTEGER_SNAP_TOLERANCE = 1e-5
"""Relative distance to the nearest integer rate that snaps a raw rate to it (float32 rounding of key times)."""

DEFAULT_FPS = 30.0
"""Nominal rate of a single-key clip [1/s]."""

_WIDTHS = {"translation": 3, "rotation": 4, "scale": 3}
_FLOAT = 5126
_INTERPOLATIONS = ("LINEAR", "STEP", "CUBICSPLINE")


@dataclass
class Channel:
    """One animated property of one node.

    Attributes:
        node: target node index.
        path: ``"translation"``, ``"rotation"``, ``"scale"`` or ``"weights"``.
        times: key times [s], strictly increasing, shape (K,).
        values: key values, shape (K, width); for CUBICSPLINE (K, 3, width) as (in-tangent, value, out-tangent).
            None for ``weights`` (morph channels are not decoded).
        interpolation: ``"LINEAR"``, ``"STEP"`` or ``"CUBICSPLINE"``.
        where: the channel's field path, for messages.
    """

    node: int
    path: str
    times: np.ndarray
    values: np.ndarray | None
    interpolation: str
    where: str


def read_animation(doc: GltfDocument, index: int) -> tuple[str | None, list[Channel]]:
    """Name and channels of ``animations[index]`` (channels without a target node are skipped).

    Raises:
        InputError: bad sampler/target indices, unknown path or interpolation, key times not FLOAT, negative or
            not strictly increasing, output counts or widths that do not match.
    """
    where = f"animations[{index}]"
    anim = doc.table("animations")[index]
    name = doc.get_str(anim, "name", where, None)
    samplers = doc.get_list(anim, "samplers", where)
    channels = doc.get_list(anim, "channels", where)
    out = []
    for c, channel in enumerate(channels):
        cw = f"{where}.channels[{c}]"
        if not isinstance(channel, dict):
            raise doc.error(cw, "must be an object")
        s = doc.get_int(channel, "sampler", cw)
        if s >= len(samplers) or not isinstance(samplers[s], dict):
            raise doc.error(cw, f"sampler {s} does not exist ({len(samplers)} samplers in {where})")
        target = doc.get_dict(channel, "target", cw)
        node = doc.get_index(target, "node", f"{cw}.target", "nodes", None)
        path = doc.get_str(target, "path", f"{cw}.target")
        if path not in (*_WIDTHS, "weights"):
            raise doc.error(f"{cw}.target.path", f"unknown path {path!r} (translation, rotation, scale, weights)")
        if node is None:
            continue
        sw = f"{where}.samplers[{s}]"
        sampler = samplers[s]
        interpolation = doc.get_str(sampler, "interpolation", sw, "LINEAR")
        if interpolation not in _INTERPOLATIONS:
            raise doc.error(f"{sw}.interpolation", f"unknown interpolation {interpolation!r}")
        times = _key_times(doc, doc.get_index(sampler, "input", sw, "accessors"), f"{sw}.input")
        values = None
        if path != "weights":
            values = _key_values(doc, sampler, sw, path, interpolation, len(times))
        out.append(Channel(node, path, times, values, interpolation, cw))
    return name, out


def _key_times(doc: GltfDocument, accessor: int, where: str) -> np.ndarray:
    """A sampler's key times [s], shape (K,): FLOAT scalars, finite, >= 0 and strictly increasing (glTF 2.0 3.11).

    Raises:
        InputError: naming ``where`` (the sampler's ``input``) and the accessor.
    """
    raw = read_accessor(doc, accessor)
    ctype = doc.table("accessors")[accessor].get("componentType")
    if ctype != _FLOAT:
        raise doc.error(where, f"accessors[{accessor}] has componentType {ctype}: key times must be FLOAT ({_FLOAT})")
    times = np.asarray(raw, dtype=np.float64)
    if times.ndim != 1:
        raise doc.error(where, f"accessors[{accessor}] must be SCALAR key times, got shape {times.shape[1:]}")
    if not np.all(np.isfinite(times)):
        raise doc.error(where, f"accessors[{accessor}] holds non-finite key times")
    if too_large(times).any():
        raise doc.error(where, f"accessors[{accessor}] holds key times out of range (> {MAX_MAGNITUDE:g})")
    if len(times) and times.min() < 0:
        k = int(np.argmax(times < 0))
        raise doc.error(where, f"accessors[{accessor}] key {k} is at {times[k]:g} s: key times must be >= 0")
    if len(times) > 1 and not np.all(np.diff(times) > 0):
        k = int(np.argmax(np.diff(times) <= 0))
        raise doc.error(where, f"key times not strictly increasing (key {k + 1}: {times[k + 1]} after {times[k]})")
    return times


def _key_values(doc, sampler: dict, sw: str, path: str, interpolation: str, key_count: int) -> np.ndarray:
    accessor = doc.get_index(sampler, "output", sw, "accessors")
    values = np.asarray(read_accessor(doc, accessor), dtype=np.float64)
    width = _WIDTHS[path]
    if values.ndim != 2 or values.shape[1] != width:
        raise doc.error(f"{sw}.output", f"accessors[{accessor}] must be VEC{width} for {path}, got {values.shape[1:]}")
    if not np.all(np.isfinite(values)):
        raise doc.error(f"{sw}.output", f"accessors[{accessor}] holds non-finite values")
    if too_large(values).any():
        raise doc.error(f"{sw}.output", f"accessors[{accessor}] holds values out of range (> {MAX_MAGNITUDE:g})")
    per_key = 3 if interpolation == "CUBICSPLINE" else 1
    if len(values) != per_key * key_count:
        raise doc.error(
            f"{sw}.output",
            f"accessors[{accessor}] has {len(values)} values for {key_count} keys ({interpolation} needs "
            f"{per_key * key_count})",
        )
    if per_key == 3:
        return values.reshape(key_count, 3, width)
    if path == "rotation":
        norm = np.linalg.norm(values, axis=1, keepdims=True)
        if (norm < 1e-12).any():
            raise doc.error(f"{sw}.output", f"accessors[{accessor}] holds a zero-length quaternion")
        values = values / norm
    return values


ZERO_QUATERNION_NORM = 1e-12
"""A CUBICSPLINE rotation whose length falls below this at a sample time has no direction: an InputError."""


def sample_channel(doc: GltfDocument, channel: Channel, times: np.ndarray) -> np.ndarray:
    """The channel's value at ``times`` [s] (clamped to its key range), shape (len(times), width).

    Raises:
        InputError: a CUBICSPLINE rotation that evaluates to a zero quaternion at one of ``times`` (names the
            channel and the time).
    """
    keys = channel.times
    t = np.clip(np.asarray(times, dtype=np.float64), keys[0], keys[-1])
    k = np.clip(np.searchsorted(keys, t, side="right") - 1, 0, len(keys) - 1)
    nxt = np.minimum(k + 1, len(keys) - 1)
    span = np.where(nxt > k, keys[nxt] - keys[k], 1.0)
    u = np.where(nxt > k, (t - keys[k]) / span, 0.0)[:, None]
    v = channel.values
    if channel.interpolation == "STEP":
        return v[k].copy()
    if channel.interpolation == "LINEAR":
        if channel.path == "rotation":
            return quat_slerp(v[k], v[nxt], u[:, 0])
        return v[k] + (v[nxt] - v[k]) * u
    # CUBICSPLINE: v[:, 0] in-tangent, v[:, 1] value, v[:, 2] out-tangent
    u2, u3 = u * u, u * u * u
    dt = span[:, None]
    out = (
        (2 * u3 - 3 * u2 + 1) * v[k, 1]
        + dt * (u3 - 2 * u2 + u) * v[k, 2]
        + (-2 * u3 + 3 * u2) * v[nxt, 1]
        + dt * (u3 - u2) * v[nxt, 0]
    )
    if channel.path == "rotation":
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        if (norm < ZERO_QUATERNION_NORM).any():
            bad = int(np.argmax(norm[:, 0] < ZERO_QUATERNION_NORM))
            raise doc.error(
                channel.where,
                f"CUBICSPLINE rotation is a zero quaternion at t={t[bad]:g} s (length {norm[bad, 0]:.3g}): it has no"
                " direction",
            )
        out = out / norm
    return out


def nominal_fps(times: np.ndarray) -> float:
    """A clip's nominal frame rate [1/s]: ``1 / min key spacing``, snapped to a :data:`COMMON_FPS` rate within
    :data:`FPS_SNAP_TOLERANCE`, else to the nearest integer within :data:`INTEGER_SNAP_TOLERANCE`, else raw.

    A single-key clip gets :data:`DEFAULT_FPS`.
    """
    if len(times) < 2:
        return DEFAULT_FPS
    raw = 1.0 / float(np.min(np.diff(times)))
    for rate in COMMON_FPS:
        if abs(raw / rate - 1.0) <= FPS_SNAP_TOLERANCE:
            return rate
    if abs(raw - round(raw)) <= INTEGER_SNAP_TOLERANCE * raw:  # float32 key times: 9.99999985 -> 10
        return float(round(raw))
    return raw
