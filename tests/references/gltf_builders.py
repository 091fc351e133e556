"""Builders of small synthetic glTF files for tests (written into pytest tmp dirs).

:class:`GltfBuilder` accumulates a JSON document and one binary buffer and writes it as ``.gltf`` with a data URI,
``.gltf`` with an external ``.bin``, or ``.glb``. Accessors can be written with any componentType, ``normalized``,
an interleaving ``byteStride``, a ``byteOffset``, sparse blocks, or without a bufferView.
:func:`make_character` builds a configurable little skinned character used by several tests.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np

FLOAT, BYTE, UBYTE, SHORT, USHORT, UINT = 5126, 5120, 5121, 5122, 5123, 5125
_DTYPES = {BYTE: "<i1", UBYTE: "<u1", SHORT: "<i2", USHORT: "<u2", UINT: "<u4", FLOAT: "<f4"}
_TYPES = {1: "SCALAR", 2: "VEC2", 3: "VEC3", 4: "VEC4", 16: "MAT4"}


def quat_axis_angle(axis, angle: float) -> list[float]:
    """Unit quaternion [x, y, z, w] for ``angle`` [rad] about ``axis``."""
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    return [*(axis * np.sin(angle / 2)).tolist(), float(np.cos(angle / 2))]


def trs_matrix(t=(0, 0, 0), q=(0, 0, 0, 1), s=(1, 1, 1)) -> np.ndarray:
    """4x4 ``T @ R @ S`` (column vectors)."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    r = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    m = np.eye(4)
    m[:3, :3] = r * np.asarray(s, dtype=np.float64)
    m[:3, 3] = t
    return m


class GltfBuilder:
    """A glTF document under construction (one buffer)."""

    def __init__(self):
        self.doc: dict = {"asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": []}]}
        self.data = bytearray()

    def _table(self, name: str) -> list:
        return self.doc.setdefault(name, [])

    def _append(self, name: str, item: dict) -> int:
        table = self._table(name)
        table.append(item)
        return len(table) - 1

    def view(self, payload: bytes, stride: int | None = None) -> int:
        """Appends ``payload`` (4-byte aligned) as a new bufferView."""
        self.data.extend(b"\0" * (-len(self.data) % 4))
        view = {"buffer": 0, "byteOffset": len(self.data), "byteLength": len(payload)}
        if stride is not None:
            view["byteStride"] = stride
        self.data.extend(payload)
        return self._append("bufferViews", view)

    def accessor(
        self,
        values,
        ctype: int = FLOAT,
        *,
        normalized: bool = False,
        stride: int | None = None,
        offset: int = 0,
        sparse: tuple | None = None,
        view: bool = True,
        index_ctype: int = USHORT,
    ) -> int:
        """Adds an accessor holding ``values`` (raw component values; (N,), (N, n) or (N, 4, 4) row-major).

        Args:
            ctype: componentType; values are cast to it.
            normalized: set the ``normalized`` flag (values are stored as given).
            stride: interleaving byteStride (elements padded with 0xEE bytes up to it).
            offset: accessor byteOffset (that many 0xEE bytes precede the first element).
            sparse: ``(indices, replacement_values)``: stored as a sparse block on top of ``values``.
            view: when False the accessor has no bufferView (``values`` must then be zeros).
        """
        arr = np.asarray(values)
        if arr.ndim == 3:  # matrices -> column-major 16-vectors
            arr = arr.transpose(0, 2, 1).reshape(len(arr), 16)
        arr2 = arr.reshape(len(arr), -1)
        width = arr2.shape[1]
        acc = {"componentType": ctype, "count": len(arr2), "type": _TYPES[width]}
        if normalized:
            acc["normalized"] = True
        if view:
            elements = arr2.astype(_DTYPES[ctype])
            size = elements.itemsize * width
            step = stride or size
            payload = bytearray(b"\xee" * offset)
            for row in elements:
                payload.extend(row.tobytes() + b"\xee" * (step - size))
            acc["bufferView"] = self.view(bytes(payload), stride)
            if offset:
                acc["byteOffset"] = offset
        else:
            assert not np.any(arr2), "an accessor without a bufferView holds zeros"
        if sparse is not None:
            idx, vals = (np.asarray(x) for x in sparse)
            vals = vals.reshape(len(idx), width).astype(_DTYPES[ctype])
            index_view = self.view(idx.astype(_DTYPES[index_ctype]).tobytes())
            acc["sparse"] = {
                "count": len(idx),
                "indices": {"bufferView": index_view, "componentType": index_ctype},
                "values": {"bufferView": self.view(vals.tobytes())},
            }
        return self._append("accessors", acc)

    def node(self, name: str | None = None, *, children=(), **fields) -> int:
        """Adds a node (fields: translation, rotation, scale, matrix, mesh, skin, weights)."""
        node = {k: (list(map(float, v)) if k in ("translation", "rotation", "scale", "matrix") else v)
                for k, v in fields.items() if v is not None}  # fmt: skip
        if name is not None:
            node["name"] = name
        if children:
            node["children"] = list(children)
        return self._append("nodes", node)

    def add_children(self, parent: int, *children: int) -> None:
        self.doc["nodes"][parent].setdefault("children", []).extend(children)

    def roots(self, *nodes: int) -> None:
        """Sets the scene's root nodes."""
        self.doc["scenes"][0]["nodes"] = list(nodes)

    def mesh(self, primitives: list[dict], name: str | None = None) -> int:
        mesh = {"primitives": primitives}
        if name is not None:
            mesh["name"] = name
        return self._append("meshes", mesh)

    def skin(self, joints: list[int], ibm: np.ndarray | None = None) -> int:
        """Adds a skin; ``ibm`` (J, 4, 4) row-major inverse bind matrices (absent: identity)."""
        skin = {"joints": list(joints)}
        if ibm is not None:
            skin["inverseBindMatrices"] = self.accessor(np.asarray(ibm, dtype=np.float64))
        return self._append("skins", skin)

    def animation(self, name: str | None, channels: list[tuple]) -> int:
        """Adds an animation from ``(node, path, times, values, interpolation[, ctype, normalized])`` tuples.

        For CUBICSPLINE ``values`` are (K, 3, width): in-tangent, value, out-tangent per key.
        """
        samplers, out = [], []
        for ch in channels:
            node, path, times, values, interpolation = ch[:5]
            ctype, normalized = (ch[5], ch[6]) if len(ch) > 5 else (FLOAT, False)
            width = {"translation": 3, "rotation": 4, "scale": 3, "weights": 1}[path]
            values = np.asarray(values, dtype=np.float64).reshape(-1, width)
            sampler = {
                "input": self.accessor(np.asarray(times, dtype=np.float64)),
                "output": self.accessor(values, ctype, normalized=normalized),
                "interpolation": interpolation,
            }
            samplers.append(sampler)
            out.append({"sampler": len(samplers) - 1, "target": {"node": node, "path": path}})
        anim = {"samplers": samplers, "channels": out}
        if name is not None:
            anim["name"] = name
        return self._append("animations", anim)

    def write(self, path: str | Path, mode: str | None = None) -> Path:
        """Writes ``path``; mode ``"glb"`` (default for .glb), ``"data"`` (default for .gltf) or ``"external"``."""
        path = Path(path)
        mode = mode or ("glb" if path.suffix == ".glb" else "data")
        doc = json.loads(json.dumps(self.doc))
        payload = bytes(self.data)
        custom = "buffers" in doc  # a test put its own buffers in the document: keep them as they are
        if payload and not custom:
            doc["buffers"] = [{"byteLength": len(payload)}]
        if custom or not payload:
            pass
        elif mode == "data":
            doc["buffers"][0]["uri"] = "data:application/octet-stream;base64," + base64.b64encode(payload).decode()
        elif mode == "external":
            bin_name = path.stem + " data.bin"  # a space, to exercise URI percent-decoding
            (path.parent / bin_name).write_bytes(payload)
            doc["buffers"][0]["uri"] = bin_name.replace(" ", "%20")
        text = json.dumps(doc).encode()
        if mode != "glb":
            path.write_bytes(text)
            return path
        text += b" " * (-len(text) % 4)
        payload += b"\0" * (-len(payload) % 4)
        chunks = struct.pack("<I4s", len(text), b"JSON") + text
        if payload:
            chunks += struct.pack("<I4s", len(payload), b"BIN\0") + payload
        path.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(chunks)) + chunks)
        return path


def strip_points(rows: int = 5, width: float = 0.4, height: float = 2.0, x0: float = -0.2) -> np.ndarray:
    """Vertices of a vertical strip (two columns, ``rows`` rows from y = 0 to ``height``), shape (2 * rows, 3)."""
    ys = np.linspace(0.0, height, rows)
    return np.array([[x, y, 0.0] for y in ys for x in (x0, x0 + width)])


def strip_indices(rows: int = 5) -> np.ndarray:
    """Triangle indices of :func:`strip_points`, shape (2 * (rows - 1) * 3,)."""
    tris = []
    for r in range(rows - 1):
        a, b, c, d = 2 * r, 2 * r + 1, 2 * r + 2, 2 * r + 3
        tris += [a, b, d, a, d, c]
    return np.array(tris)


def random_weights(rng: np.random.Generator, count: int, joints: int, influences: int) -> tuple[np.ndarray, np.ndarray]:
    """Joint indices (count, influences) and weights summing to 1 (count, influences); influences beyond
    ``joints`` are zero-weight padding pointing at arbitrary joints."""
    used = min(joints, influences)
    idx = np.stack([rng.permutation(joints)[:used] for _ in range(count)])
    w = rng.uniform(0.1, 1.0, (count, used))
    pad = influences - used
    idx = np.concatenate([idx, rng.integers(0, joints, (count, pad))], axis=1)
    w = np.concatenate([w / w.sum(axis=1, keepdims=True), np.zeros((count, pad))], axis=1)
    return idx, w


def ubyte_weights(weights: np.ndarray, total: int) -> np.ndarray:
    """Weights quantized to integers summing exactly to ``total`` per row (largest remainder)."""
    scaled = weights / weights.sum(axis=1, keepdims=True) * total
    q = np.floor(scaled).astype(np.int64)
    for row, s in zip(q, scaled):
        row[np.argsort(-(s - np.floor(s)))[: total - row.sum()]] += 1
    return q


def minimal_skin(b: GltfBuilder | None = None, *, rotation_keys=None, times=None, weight_scale=1.0) -> GltfBuilder:
    """SimpleSkin-like: a mesh node with a 2-joint chain (``root`` -> ``tip``) and one LINEAR rotation clip
    ``Bend`` (keys every 0.5 s unless ``times`` is given); ``weight_scale`` scales the stored weights."""
    b = b or GltfBuilder()
    pts = strip_points()
    tip = b.node("tip", translation=[0, 1, 0])
    root = b.node("root", children=[tip])
    w = np.clip(pts[:, 1:2] - 0.5, 0.0, 1.0)
    joints = np.tile([0, 1, 0, 0], (len(pts), 1))
    weights = np.concatenate([1 - w, w, np.zeros((len(pts), 2))], axis=1)
    prim = {
        "attributes": {
            "POSITION": b.accessor(pts),
            "JOINTS_0": b.accessor(joints, UBYTE),
            "WEIGHTS_0": b.accessor(weights * weight_scale),
        },
        "indices": b.accessor(strip_indices(), USHORT),
    }
    skin = b.skin([root, tip], np.linalg.inv([trs_matrix(), trs_matrix(t=(0, 1, 0))]))
    body = b.node("body", mesh=b.mesh([prim], "strip"), skin=skin)
    b.roots(body, root)
    keys = rotation_keys if rotation_keys is not None else [quat_axis_angle([0, 0, 1], a) for a in (0, 0.6, 0)]
    times = np.arange(len(keys)) * 0.5 if times is None else times
    keys = [keys[k % len(keys)] for k in range(len(times))]
    b.animation("Bend", [(tip, "rotation", times, keys, "LINEAR")])
    return b


def _hermite_keys(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """CUBICSPLINE key triples (in-tangent, value, out-tangent) with random tangents, shape (K, 3, width)."""
    values = np.asarray(values, dtype=np.float64)
    tangents = rng.normal(0.0, 0.3, (2, *values.shape))
    return np.stack([tangents[0], values, tangents[1]], axis=1)


def folded_character(seed: int = 7) -> GltfBuilder:
    """A character that exercises the skeleton folding and most of the accessor and sampler features.

    Node tree (glTF Y-up)::

        Armature (non-joint: rotated, translated, uniform scale 0.5; animated)
          Offset (non-joint: translated; animated in the second clip)
            hips (root joint, uniform scale 2)
              spine -> spine (duplicate name) -> <unnamed> (uniform scale 1.5)
              tail
        body (skinned mesh node with its own transform, which glTF ignores)

    The skin lists its joints shuffled; inverse bind matrices come from a bind pose that differs from the rest
    pose. The mesh has three primitives: indexed triangles with 8 influences (JOINTS_0 ubyte + normalized
    ubyte WEIGHTS_0, JOINTS_1 ushort + float WEIGHTS_1), non-indexed triangles with 4, and an indexed
    triangle strip. Clip ``Wave`` mixes LINEAR / STEP / CUBICSPLINE channels with different key times (and
    non-unit quaternions); the second, unnamed clip has normalized-short rotations at 30 fps.
    """
    rng = np.random.default_rng(seed)
    b = GltfBuilder()
    n_tail = b.node("tail", translation=[0, -0.2, 0.1], rotation=quat_axis_angle([1, 0, 0], 2.1))
    n_tip = b.node(None, translation=[0, 0.4, 0], scale=[1.5, 1.5, 1.5])
    n_spine2 = b.node("spine", translation=[0, 0.5, 0], rotation=quat_axis_angle([1, 0, 0], 0.17), children=[n_tip])
    n_spine = b.node("spine", translation=[0, 0.5, 0], children=[n_spine2])
    n_hips = b.node(
        "hips", translation=[0, 1, 0], rotation=quat_axis_angle([0, 1, 0], 0.35), scale=[2, 2, 2],
        children=[n_spine, n_tail],
    )  # fmt: skip
    n_offset = b.node("Offset", translation=[0, 0.1, 0], children=[n_hips])
    n_arm = b.node(
        "Armature", translation=[0.3, 0, -0.2], rotation=quat_axis_angle([0, 0, 1], 0.52), scale=[0.5] * 3,
        children=[n_offset],
    )  # fmt: skip
    joints = [n_spine2, n_hips, n_tail, n_tip, n_spine]  # shuffled
    # bind pose: the rest pose with every joint nudged (so bind != rest)
    rest = {}

    def world(n):
        node = b.doc["nodes"][n]
        local = trs_matrix(node.get("translation", (0, 0, 0)), node.get("rotation", (0, 0, 0, 1)),
                           node.get("scale", (1, 1, 1)))  # fmt: skip
        parent = next((p for p, nd in enumerate(b.doc["nodes"]) if n in nd.get("children", [])), None)
        return local if parent is None else world(parent) @ local

    for n in joints:
        rest[n] = world(n)
    bind = [rest[n] @ trs_matrix(rng.normal(0, 0.02, 3), quat_axis_angle(rng.normal(size=3), 0.1)) for n in joints]
    skin = b.skin(joints, np.linalg.inv(bind))

    pts0 = strip_points(rows=6, height=2.5) + np.array([0, 0.5, 0])
    idx0, w0 = random_weights(rng, len(pts0), len(joints), 8)
    wq = ubyte_weights(w0[:, :4], 153)  # 153 / 255 = 0.6 of the weight in the first set
    w1 = w0[:, 4:] / w0[:, 4:].sum(axis=1, keepdims=True) * 0.4
    prim0 = {
        "attributes": {
            "POSITION": b.accessor(pts0),
            "JOINTS_0": b.accessor(idx0[:, :4], UBYTE),
            "WEIGHTS_0": b.accessor(wq, UBYTE, normalized=True),
            "JOINTS_1": b.accessor(idx0[:, 4:], USHORT),
            "WEIGHTS_1": b.accessor(w1),
        },
        "indices": b.accessor(strip_indices(rows=6), USHORT),
    }
    pts1 = rng.uniform(-0.5, 0.5, (6, 3)) + np.array([0, 1.5, 0])
    idx1, w1b = random_weights(rng, 6, len(joints), 4)
    prim1 = {"attributes": {"POSITION": b.accessor(pts1), "JOINTS_0": b.accessor(idx1, USHORT),
                            "WEIGHTS_0": b.accessor(w1b)}}  # fmt: skip
    pts2 = strip_points(rows=4, height=1.0, x0=0.3) + np.array([0, 2.0, 0])
    idx2, w2 = random_weights(rng, len(pts2), len(joints), 4)
    prim2 = {
        "attributes": {"POSITION": b.accessor(pts2), "JOINTS_0": b.accessor(idx2, UBYTE), "WEIGHTS_0": b.accessor(w2)},
        "indices": b.accessor(np.arange(len(pts2)), UINT),
        "mode": 5,
    }
    body = b.node("body", mesh=b.mesh([prim0, prim1, prim2], "body"), skin=skin, translation=[5, 5, 5])
    b.roots(n_arm, body)

    def rot_keys(count, scale=1.0):
        return [np.array(quat_axis_angle(rng.normal(size=3), rng.uniform(0.2, 1.5))) * scale for _ in range(count)]

    cubic_rot = _hermite_keys(rot_keys(3), rng)
    b.animation("Wave", [
        (n_hips, "rotation", [0.0, 0.5, 1.0], rot_keys(3, 1.3), "LINEAR"),
        (n_spine, "rotation", [0.0, 0.25, 0.75], rot_keys(3), "STEP"),
        (n_hips, "translation", [0.0, 0.6, 1.2], _hermite_keys(rng.normal(0, 0.3, (3, 3)) + np.array([0, 1, 0]), rng),
         "CUBICSPLINE"),
        (n_arm, "rotation", [0.0, 1.2], rot_keys(2), "LINEAR"),
        (n_spine2, "translation", [0.1, 0.9], [[0, 0.5, 0], [0.1, 0.7, -0.1]], "LINEAR"),
        (n_tip, "rotation", [0.0, 0.5, 1.0], cubic_rot, "CUBICSPLINE"),
    ])  # fmt: skip
    short_keys = np.round(np.array(rot_keys(3)) * 32767)
    b.animation(None, [
        (n_tail, "rotation", np.arange(3) / 30, short_keys, "LINEAR", SHORT, True),
        (n_offset, "translation", np.arange(3) / 30, [[0, 0.1, 0], [0.05, 0.1, 0], [0.1, 0.2, 0]], "LINEAR"),
    ])  # fmt: skip
    return b


def rigid_character(animate_holder: bool = False) -> GltfBuilder:
    """A 2-joint chain (root scaled by 1.5) with unskinned meshes: one on a joint node, one below a joint through a
    non-joint node with a non-uniform scale (allowed below the skeleton), one unattached at the scene root (skipped).
    Bind pose = rest pose. Clip ``Swing`` rotates the arm and translates the root."""
    b = GltfBuilder()
    box = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.1, 0.1)])
    box_tris = np.array([0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1, 2, 3, 7, 2, 7, 6])
    prop = b.mesh([{"attributes": {"POSITION": b.accessor(box)}, "indices": b.accessor(box_tris, UBYTE)}], "prop")
    holder = b.node("holder", translation=[0.2, 0, 0], scale=[1, 2, 0.5], rotation=quat_axis_angle([0, 1, 0], 0.4),
                    mesh=prop)  # fmt: skip
    arm = b.node("arm", translation=[0.5, 0, 0], rotation=quat_axis_angle([0, 0, 1], -1.2), children=[holder],
                 mesh=prop)  # fmt: skip
    root = b.node("root", translation=[0, 1, 0], scale=[1.5] * 3, children=[arm])
    pts = strip_points(rows=3, height=1.0) + np.array([0, 0.5, 0])
    prim = {"attributes": {"POSITION": b.accessor(pts), "JOINTS_0": b.accessor(np.zeros((len(pts), 4)), UBYTE),
                           "WEIGHTS_0": b.accessor(np.tile([1.0, 0, 0, 0], (len(pts), 1)))}}  # fmt: skip
    root_rest = trs_matrix((0, 1, 0), s=(1.5, 1.5, 1.5))
    rest = [root_rest, root_rest @ trs_matrix((0.5, 0, 0), quat_axis_angle([0, 0, 1], -1.2))]
    body = b.node("body", mesh=b.mesh([prim]), skin=b.skin([root, arm], np.linalg.inv(rest)))
    lamp = b.node("lamp", translation=[3, 0, 0], mesh=prop)
    b.roots(root, body, lamp)
    channels = [
        (arm, "rotation", [0, 0.5, 1], [quat_axis_angle([0, 0, 1], a) for a in (-1.2, 0.3, -0.5)], "LINEAR"),
        (root, "translation", [0, 1], [[0, 1, 0], [0.5, 1.2, 0.1]], "LINEAR"),
    ]
    if animate_holder:
        channels.append((holder, "rotation", [0, 1], [quat_axis_angle([0, 1, 0], a) for a in (0.4, 1.0)], "LINEAR"))
    b.animation("Swing", channels)
    return b


def forest_character() -> GltfBuilder:
    """Two joint chains (``legL -> footL``, ``legR -> footR``) under one non-joint ``Armature`` node."""
    b = GltfBuilder()
    foot_l = b.node("footL", translation=[0, -0.5, 0.1])
    leg_l = b.node("legL", translation=[0.2, 1.0, 0], rotation=quat_axis_angle([1, 0, 0], 0.1), children=[foot_l])
    foot_r = b.node("footR", translation=[0, -0.5, 0.1])
    leg_r = b.node("legR", translation=[-0.2, 1.0, 0], children=[foot_r])
    arm = b.node("Armature", translation=[0, 0.1, 0.3], rotation=quat_axis_angle([0, 1, 0], 0.7),
                 children=[leg_l, leg_r])  # fmt: skip
    rng = np.random.default_rng(3)
    pts = strip_points(rows=4, height=1.0, width=0.6, x0=-0.3)
    idx, w = random_weights(rng, len(pts), 4, 4)
    attributes = {"POSITION": b.accessor(pts), "JOINTS_0": b.accessor(idx, UBYTE), "WEIGHTS_0": b.accessor(w)}
    prim = {"attributes": attributes, "indices": b.accessor(strip_indices(rows=4), UBYTE)}
    body = b.node("body", mesh=b.mesh([prim]), skin=b.skin([leg_l, foot_l, leg_r, foot_r]))
    b.roots(arm, body)
    b.animation("Kick", [
        (leg_l, "rotation", [0, 0.5], [quat_axis_angle([1, 0, 0], a) for a in (0.1, 0.9)], "LINEAR"),
        (arm, "translation", [0, 0.25, 0.5], [[0, 0.1, 0.3], [0, 0.3, 0.3], [0.2, 0.1, 0.3]], "LINEAR"),
    ])  # fmt: skip
    return b
