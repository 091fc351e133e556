"""Checkpoints of the physics projection: a long MPPI run saves its state at window boundaries and resumes exactly.

The public names are re-exported by :mod:`sim.physics`.

A checkpoint is one ``.npz`` file (no pickles): the sweeps done and the sweep in progress (plan, committed joint
state, simulated frames so far, counters), the random generator's state, the elapsed time, and a fingerprint of
the settings and of the character and reference it was made for, so a checkpoint of another job is refused.
Each window starts from the committed generalized state with the solver reset, so a resumed run steps the same
floats in the same order as an unbroken one.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._atomic import atomic_file
from .._numbers import is_finite_real

__all__ = ["CheckpointError", "ProjectionCheckpoint"]

FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A projection checkpoint that cannot be resumed: unreadable, or written for another job."""


@dataclass
class ProjectionCheckpoint:
    """Where and how often :func:`sim.physics.project` saves its state.

    Attributes:
        path: the checkpoint file (``.npz``); written atomically (temporary file, then rename).
        interval_s: least wall-clock time between two window checkpoints [s]; 0 saves after every window. The
            end of every sweep and of the run are always saved.
        resume: continue from ``path`` when it exists (a finished checkpoint returns its result without
            simulating); otherwise a new run overwrites it.
    """

    path: Path
    interval_s: float = 30.0
    resume: bool = False

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        s = self.interval_s
        if not (is_finite_real(s) and s >= 0):
            raise ValueError(f"ProjectionCheckpoint.interval_s: must be a finite number >= 0 [s], got {s!r}")
        if not isinstance(self.resume, bool | np.bool_):  # resume="false" resumed (a non-empty string is true)
            raise ValueError(f"ProjectionCheckpoint.resume: must be True or False, got {self.resume!r}")


@dataclass
class Sweep:
    """One receding-horizon MPPI sweep over the clip, at a window boundary.

    Attributes:
        f0: frames committed so far (the next window starts at frame ``f0``).
        plan: PD targets [rad] (F, C), optimized up to the last window.
        q, qd: committed generalized state of one world (coords,), (dofs,) (float32, as the simulation holds it).
        pos, rot, vel: simulated body origins (F, B, 3), rotations (F, B, 4), twists (F, B, 6), valid to ``f0``.
        rollout_frames: world-frames simulated by this sweep.
        window_costs: best cost of every committed window.
        assist_sum, assist_max: root-assist force statistics of the committed windows.
        blowup: (frame, reason) of a blow-up, or None.
        done: the sweep reached the clip's end (or blew up).
        error: mean body error [heights] of a finished sweep.
    """

    f0: int
    plan: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    pos: np.ndarray
    rot: np.ndarray
    vel: np.ndarray
    rollout_frames: int = 0
    window_costs: list[float] = field(default_factory=list)
    assist_sum: float = 0.0
    assist_max: float = 0.0
    blowup: tuple[int, str] | None = None
    done: bool = False
    error: float = float("nan")


_SWEEP_ARRAYS = ("plan", "q", "qd", "pos", "rot", "vel")
_SWEEP_SCALARS = ("f0", "rollout_frames", "window_costs", "assist_sum", "assist_max", "blowup", "done", "error")


@dataclass
class ProjectionState:
    """Everything a resumed projection needs.

    Attributes:
        start_plan: the plan the first sweep starts from (after the target filter and the ILC passes), (F, C).
        sweeps: the sweeps so far, the last one possibly unfinished.
        rng_state: the random generator's ``bit_generator.state``.
        elapsed_s: wall-clock time spent so far [s] (all calls together).
        ilc_time_s: wall-clock time of the ILC passes [s].
    """

    start_plan: np.ndarray
    sweeps: list[Sweep]
    rng_state: dict
    elapsed_s: float
    ilc_time_s: float


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def settings_dict(tracking, projection, character_config, filter_key: str | None) -> dict:
    """The settings a checkpoint must match, JSON-normalized (tuples become lists): tracking and projection
    settings (less those that only set the speed), the character builder's settings, the target filter's key (its
    ``key`` attribute or a digest of its output; None without a filter) and the Warp and Newton versions (another
    solver build steps other floats)."""
    import newton
    import warp

    proj = dataclasses.asdict(projection)
    proj.pop("threads", None)  # speed only: a run may resume with another thread count
    track = dataclasses.asdict(tracking)
    track["solver"].pop("capture", None)  # a captured graph replays the eager launches' floats
    raw = {
        "tracking": track,
        "projection": proj,
        "character": dataclasses.asdict(character_config),
        "target_filter": filter_key,
        "versions": {"warp": warp.config.version, "newton": newton.__version__},
    }
    return json.loads(json.dumps(raw, default=str))


def filter_digest(coords: np.ndarray) -> str:
    """Digest of a target filter's output on the reference's joint coordinates (identifies the filter)."""
    return hashlib.sha256(np.ascontiguousarray(coords, dtype=np.float64).tobytes()).hexdigest()[:16]


def data_fingerprint(character, ref) -> str:
    """SHA-256 over the character's physical arrays and the reference the projection tracks."""
    h = hashlib.sha256()
    arrays = [
        ref.coords, ref.body_pos, ref.body_rot, ref.com_vel, np.array([ref.fps, character.height]),
        character.body_parent, character.body_mass, character.body_com, character.body_inertia,
        character.stiffness, character.damping, character.armature, character.limit_lower, character.limit_upper,
        character.capsule_radii, character.parent_anchor_pos, character.parent_anchor_rot, character.child_anchor_rot,
        [c.endpoints for c in character.capsules], character.support_body,
        np.array(sorted(character.collision_filter_pairs), dtype=np.float64).reshape(-1, 2),
    ]  # fmt: skip
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(path: Path, state: ProjectionState, settings: dict, fingerprint: str) -> None:
    """Writes ``state`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {"start_plan": np.asarray(state.start_plan)}
    sweeps_meta = []
    for i, s in enumerate(state.sweeps):
        for name in _SWEEP_ARRAYS:
            arrays[f"sweep{i}_{name}"] = np.asarray(getattr(s, name))
        meta = {name: getattr(s, name) for name in _SWEEP_SCALARS}
        meta["blowup"] = list(s.blowup) if s.blowup is not None else None
        sweeps_meta.append(meta)
    meta = {
        "format": "kinedistill projection checkpoint",
        "version": FORMAT_VERSION,
        "settings": settings,
        "fingerprint": fingerprint,
        "rng_state": state.rng_state,
        "elapsed_s": state.elapsed_s,
        "ilc_time_s": state.ilc_time_s,
        "sweeps": sweeps_meta,
    }
    arrays["meta"] = np.array(json.dumps(meta))
    with atomic_file(path) as tmp:  # .NAME.PID.NS.tmp: what remove_stale_temporaries finds after a kill
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def remove_stale_temporaries(path: Path) -> None:
    """Removes temporary files a killed save left beside ``path``."""
    path = Path(path)
    if path.parent.is_dir():
        for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):  # "run[1].npz" matched ".run1.npz.*"
            stale.unlink(missing_ok=True)


def load(path: Path, settings: dict, fingerprint: str) -> ProjectionState:
    """Reads a checkpoint written by :func:`save`; raises :class:`CheckpointError` naming the file when it is
    unreadable or was written with other settings or for another character or reference."""
    path = Path(path)
    if path.is_file() and not zipfile.is_zipfile(path):  # np.load would suggest unpickling it
        raise CheckpointError(
            f"{path}: not a readable projection checkpoint (not an .npz archive); remove it to start afresh"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data.pop("meta")))
        if meta.get("format") != "kinedistill projection checkpoint" or meta.get("version") != FORMAT_VERSION:
            raise CheckpointError(f"{path}: not a projection checkpoint of format version {FORMAT_VERSION}")
        saved_settings, saved_fingerprint = meta["settings"], meta["fingerprint"]
    except CheckpointError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile, EOFError) as e:
        raise CheckpointError(f"{path}: not a readable projection checkpoint ({type(e).__name__}: {e})") from e
    if saved_settings != settings:
        old, new = _flat(saved_settings), _flat(settings)
        diff = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        raise CheckpointError(
            f"{path}: checkpoint was written with different settings (differs in: {', '.join(diff)}); "
            "run without resume to start over"
        )
    if saved_fingerprint != fingerprint:
        raise CheckpointError(
            f"{path}: checkpoint was written for a different character or reference motion; "
            "run without resume to start over"
        )
    try:
        sweeps = []
        for i, sm in enumerate(meta["sweeps"]):
            kw = {name: data[f"sweep{i}_{name}"] for name in _SWEEP_ARRAYS}
            kw.update({name: sm[name] for name in _SWEEP_SCALARS})
            kw["f0"], kw["rollout_frames"], kw["done"] = int(sm["f0"]), int(sm["rollout_frames"]), bool(sm["done"])
            kw["blowup"] = (int(sm["blowup"][0]), str(sm["blowup"][1])) if sm["blowup"] is not None else None
            kw["window_costs"] = [float(c) for c in sm["window_costs"]]
            sweeps.append(Sweep(**kw))
        return ProjectionState(
            start_plan=data["start_plan"],
            sweeps=sweeps,
            rng_state=dict(meta["rng_state"]),
            elapsed_s=float(meta["elapsed_s"]),
            ilc_time_s=float(meta["ilc_time_s"]),
        )
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CheckpointError(f"{path}: not a readable projection checkpoint ({type(e).__name__}: {e})") from e
