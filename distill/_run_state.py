"""What pins a distillation run folder to one run: fingerprints of the character and the oracle's target, the
checkpoint file's reading, and the removal of an earlier run's derived outputs when a run starts afresh."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sim import Motion, Rig

__all__ = [
    "CHECKPOINT_KEYS",
    "DERIVED_OUTPUTS",
    "RENDERER_VERSION",
    "ResumeError",
    "clear_derived_outputs",
    "motion_digest",
    "read_checkpoint",
    "rig_fingerprint",
]

RENDERER_VERSION = 2
"""Bumped when the same config renders different images (2: framing of the bind pose's bounding sphere about the
body centre, local-linear follow smoothing); a checkpoint of another version is not resumed."""

CHECKPOINT_KEYS = ("step", "trajectory", "optimizer", "log", "config")
"""Entries of a distill checkpoint."""

DERIVED_OUTPUTS = ("motion.usda", "loss_log.csv", "oracle_metrics.json")
"""Files of a run folder derived from the optimization (rewritten by every run; removed when a run starts afresh so
that an earlier run's results do not sit beside a new run's)."""


class ResumeError(ValueError):
    """A run folder this run cannot continue: a checkpoint written with another config, character, oracle target or
    pose prior, an unreadable checkpoint, or an earlier run's checkpoint where a fresh run was asked for."""


def _hash_arrays(h, *arrays) -> None:
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())


def rig_fingerprint(rig: Rig) -> str:
    """SHA-256 (hex, 16 digits) of everything about a rig that the distillation sees: joints, rest and bind poses,
    meshes and skin weights."""
    h = hashlib.sha256()
    h.update("\0".join(rig.joint_names).encode())
    _hash_arrays(h, rig.parents, rig.rest_translations, rig.rest_rotations, rig.inverse_bind_matrices)
    for m in rig.meshes:
        _hash_arrays(h, m.points, m.triangles, m.influence_joints, m.influence_weights)
    return h.hexdigest()[:16]


def motion_digest(motion: Motion) -> str:
    """SHA-256 (hex, 16 digits) of a motion's samples (times, root path, rotations, translations)."""
    h = hashlib.sha256()
    _hash_arrays(h, motion.times, motion.root_translations, motion.rotations)
    if motion.translations is not None:
        _hash_arrays(h, motion.translations)
    return h.hexdigest()[:16]


def read_checkpoint(path: Path, device: torch.device) -> dict:
    """The checkpoint's entries (see :data:`CHECKPOINT_KEYS`).

    Raises:
        ResumeError: the file is not a readable distill checkpoint (truncated, another kind of file).
    """
    try:
        # tensors, dicts, lists, strings and numbers only: an unpickler that runs no code from the file
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # unpickling a damaged file raises anything from EOFError to KeyError
        reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ResumeError(
            f"{path}: not a readable distill checkpoint ({type(e).__name__}{': ' + reason if reason else ''}); "
            "start afresh with another --output (or delete the file)"
        ) from None
    missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ResumeError(f"{path}: not a distill checkpoint (no {', '.join(missing)})")
    return state


def clear_derived_outputs(folder: Path, checkpoint: bool, extra: Sequence[str] = ()) -> None:
    """Removes an earlier run's :data:`DERIVED_OUTPUTS`, its previews (``previews/step_*`` and ``previews/final.*``),
    the ``extra`` files (relative paths) and, with ``checkpoint``, its ``checkpoint.pt``. Other files are left
    alone."""
    names = [*DERIVED_OUTPUTS, *(["checkpoint.pt"] if checkpoint else []), *extra]
    paths = [folder / n for n in names]
    previews = folder / "previews"
    if previews.is_dir():
        ours = lambda p: p.suffix in (".gif", ".mp4") and (p.stem == "final" or p.stem.startswith("step_"))  # noqa: E731
        paths += [p for p in previews.iterdir() if ours(p)]
    for p in paths:
        if p.is_file() or p.is_symlink():
            p.unlink()
