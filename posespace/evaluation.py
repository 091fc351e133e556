"""Evaluation of a pose space against held-out poses: every acceptance figure of the pose-space issue.

Per held-out skeleton: sample validity, APD, PRDC precision/coverage against the held-out poses, IK handle error
and time per pose, projection (displacement of real poses, idempotence, repair of corrupted poses),
interpolation path validity against per-joint slerp, the validators' pass rate on the held-out poses themselves
(their calibration), and for skinned rigs the exact mesh self-intersection of samples and held-out poses.
Zero-shot skeletons (absent from training) get sample validity, APD and exact self-intersection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sim import Rig

from .data import PoseSet, _clip_identity
from .metrics import apd, joint_positions, pose_features, prdc, slerp_path
from .space import PoseSpace

__all__ = [
    "EvalConfig",
    "end_effectors",
    "evaluate",
    "evaluate_rig",
    "evaluate_zero_shot",
    "exact_self_intersection",
    "heldout_clips_in_training",
    "load_zero_shot",
]


@dataclass(frozen=True)
class EvalConfig:
    """What to measure and how much."""

    samples: int = 500
    """Poses sampled per skeleton."""
    prdc_k: int = 5
    """k of the PRDC k-NN balls."""
    prdc_stride: int = 6
    """PRDC compares samples with every n-th held-out pose (of the ``max_real`` subsampled ones): 10 fps at the
    default 60 fps for clips of at most ``max_real`` frames, fewer for longer ones. Consecutive frames
    are near-duplicates whose tiny k-NN balls would measure the frame spacing along one trajectory rather than
    the pose distribution. (Shorter strides only for clips with fewer than k + 2 poses at this one.)"""
    max_real: int = 500
    """Held-out poses used (evenly subsampled)."""
    ik_poses: int = 100
    """IK problems per skeleton (held-out poses' end-effector positions as handles)."""
    ik_tolerance: float = 0.01
    """IK succeeds when every handle is within this fraction of the rig height."""
    projection_poses: int = 100
    """Held-out poses projected."""
    corruption_deg: float = 75.0
    """Corrupted poses: three random joints turned by this angle about random axes [deg]."""
    interpolation_pairs: int = 50
    """Random pose pairs interpolated (held-out pairs, and held-out / training pairs)."""
    interpolation_steps: int = 12
    """Poses per interpolation path (ends included)."""
    zero_shot: tuple[str, ...] = ("procedural:biped",)
    """Skeletons absent from training to sample zero-shot."""
    seed: int = 0
    """Random seed."""

    def check(self) -> EvalConfig:
        """Returns self when every setting is in range (:func:`evaluate` calls this first); ValueError naming the
        field otherwise."""
        from ._checks import check_int, check_number

        check_int("EvalConfig.prdc_k", self.prdc_k, 1)
        check_int("EvalConfig.samples", self.samples, 1)
        if self.samples <= self.prdc_k:
            raise ValueError(f"EvalConfig.samples: PRDC needs more samples than EvalConfig.prdc_k ({self.prdc_k}), "
                             f"got {self.samples}")  # fmt: skip
        if self.prdc_k >= UNGUIDED_SAMPLES:  # the unguided samples' PRDC (they are at most this many)
            raise ValueError(f"EvalConfig.prdc_k: must be below {UNGUIDED_SAMPLES} (the unguided samples' count), got"
                             f" {self.prdc_k}")  # fmt: skip
        for name in ("prdc_stride", "max_real", "ik_poses", "projection_poses", "interpolation_pairs"):
            check_int(f"EvalConfig.{name}", getattr(self, name), 1)
        check_int("EvalConfig.interpolation_steps", self.interpolation_steps, 3)  # 2: no inner pose to score
        check_int("EvalConfig.seed", self.seed, 0)
        check_number("EvalConfig.ik_tolerance", self.ik_tolerance, 0.0, strict=True)
        check_number("EvalConfig.corruption_deg", self.corruption_deg, 0.0)
        return self


UNGUIDED_SAMPLES = 200
"""At most this many unguided samples (their validity and PRDC)."""


def end_effectors(pose_rig) -> list[int]:
    """Leaf joints (hands, feet, head, tail tip, BVH end sites): their positions depend on every joint above."""
    children = pose_rig.rig.children()
    return [j for j in range(1, pose_rig.joint_count) if not children[j]]


def _subsample(x: np.ndarray, n: int) -> np.ndarray:
    return x if len(x) <= n else x[np.linspace(0, len(x) - 1, n).round().astype(int)]


def evaluate_rig(
    space: PoseSpace, rig: Rig, real: np.ndarray, cfg: EvalConfig | None = None, train_poses: np.ndarray | None = None
) -> dict:
    """Every figure for one skeleton against its held-out 6D poses ``real`` (N, J, 6).

    Args:
        train_poses: the skeleton's training poses, when known: PRDC of the training data itself against the
            held-out poses is reported as ``prdc_training_data`` (what a model that reproduced its training set
            exactly would score).
    """
    cfg = (cfg or EvalConfig()).check()
    # one stream per section: the IK, corruption and interpolation sets do not depend on whether the training
    # data's PRDC ran or on how many samples it drew
    rng_train, rng_ik, rng_corrupt, rng_interp = map(np.random.default_rng, np.random.SeedSequence(cfg.seed).spawn(4))
    pr = space.pose_rig(rig)
    val = space.validators(rig)
    real = _subsample(real, cfg.max_real)
    out: dict = {"rig": rig.name, "joints": rig.joint_count, "heldout_poses": len(real), "known": space.is_known(rig)}
    out["heldout_validity"] = val.check(real).rates()

    t0 = time.perf_counter()
    samples = space.sample_poses(rig, cfg.samples, seed=cfg.seed)
    out["sample_seconds_per_pose"] = (time.perf_counter() - t0) / cfg.samples
    out["sample_validity"] = val.check(samples).rates()
    unguided = space.sample_poses(rig, min(cfg.samples, UNGUIDED_SAMPLES), seed=cfg.seed, guidance=False)
    out["unguided_sample_validity"] = val.check(unguided).rates()["valid"]
    out["apd"] = apd(pr, samples)
    out["apd_heldout"] = apd(pr, real)
    stride = max(1, min(cfg.prdc_stride, len(real) // (cfg.prdc_k + 2)))
    real_prdc = pose_features(pr, real[::stride])
    out["prdc_heldout_poses"] = len(real_prdc)
    if len(real_prdc) <= cfg.prdc_k:  # k-NN balls need k + 1 held-out poses: the other figures still count
        out["prdc"] = out["prdc_unguided"] = None
        out["prdc_skipped"] = (f"{len(real_prdc)} held-out poses, PRDC needs more than k = {cfg.prdc_k} (hold out "
                               "a longer clip or lower --eval.prdc-k)")  # fmt: skip
    else:
        out["prdc"] = prdc(real_prdc, pose_features(pr, samples), cfg.prdc_k)
        out["prdc_unguided"] = prdc(real_prdc, pose_features(pr, unguided), cfg.prdc_k)
        if train_poses is not None and len(train_poses) > cfg.prdc_k:
            pick = rng_train.choice(len(train_poses), min(cfg.samples, len(train_poses)), replace=False)
            out["prdc_training_data"] = prdc(real_prdc, pose_features(pr, train_poses[pick]), cfg.prdc_k)

    if rig.meshes:
        out["exact_self_intersection"] = {
            "heldout": exact_self_intersection(space, rig, real),
            "samples": exact_self_intersection(space, rig, samples),
        }

    # IK: end-effector positions of held-out poses as handles
    ik_real = real[rng_ik.choice(len(real), min(cfg.ik_poses, len(real)), replace=False)]
    effectors = end_effectors(pr)
    root = rig.rest_translations[0]
    pos = joint_positions(pr, ik_real) + root
    handles = {j: pos[:, j] for j in effectors}
    t0 = time.perf_counter()
    solved = space.ik_poses(rig, handles, seed=cfg.seed)
    ik_seconds = time.perf_counter() - t0
    err = np.linalg.norm(joint_positions(pr, solved)[:, effectors] + root - pos[:, effectors], axis=-1) / pr.height
    worst = err.max(axis=1)
    out["ik"] = {
        "handles": [rig.joint_names[j] for j in effectors],
        "mean_error": float(err.mean()),
        "median_worst_error": float(np.median(worst)),
        "success_rate": float((worst < cfg.ik_tolerance).mean()),
        "ms_per_pose": 1000.0 * ik_seconds / len(ik_real),
        "validity": val.check(solved).rates()["valid"],
    }

    # projection: real poses barely move, projecting twice changes nothing, corrupted poses become valid
    proj_real = _subsample(real, cfg.projection_poses)
    p1 = space.project_poses(rig, proj_real)
    p2 = space.project_poses(rig, p1)
    rel = lambda a, b: float(  # noqa: E731
        np.linalg.norm(joint_positions(pr, a) - joint_positions(pr, b), axis=-1).mean() / pr.height
    )
    corrupted = _corrupt(pr, proj_real, cfg.corruption_deg, rng_corrupt)
    pc = space.project_poses(rig, corrupted)
    out["projection"] = {
        "displacement_real": rel(p1, proj_real),
        "idempotence": rel(p2, p1),
        "validity_real_after": val.check(p1).rates()["valid"],
        "corrupted_validity_before": val.check(corrupted).rates()["valid"],
        "corrupted_validity_after": val.check(pc).rates()["valid"],
        "corrupted_displacement": rel(pc, corrupted),
    }

    # interpolation between random held-out pairs (and held-out / training pairs): ours vs per-joint slerp
    out["interpolation"] = _interpolation(space, rig, real, real, cfg, rng_interp)
    if train_poses is not None and len(train_poses) > 1:
        out["interpolation_heldout_to_train"] = _interpolation(space, rig, real, train_poses, cfg, rng_interp)
    return out


def exact_self_intersection(space: PoseSpace, rig: Rig, poses: np.ndarray) -> dict:
    """Exact triangle-triangle self-intersection of the skinned mesh (:mod:`sim.mesh_intersection`) of 6D poses:
    share of poses with any intersecting face pair, and with a penetration deeper than the validator tolerance.

    An independent check of the sphere proxy the validators use (it is not differentiable, so it cannot guide).
    """
    import sim
    from sim.mesh_intersection import MeshSelfIntersection

    pr = space.pose_rig(rig)
    mesh = rig.merged_mesh()
    motion = pr.decode(poses, on_ground=False)  # translation does not change intersections
    points, _ = sim.skin_motion(rig, sim.Motion(motion.fps, motion.root_translations, motion.rotations))
    report = MeshSelfIntersection(mesh.triangles, mesh.points).motion(points)
    depth = report.depth_m / pr.height
    return {
        "any": float((report.pair_count > 0).mean()),
        "deeper_than_tolerance": float((depth > space.validator_config.penetration_tolerance).mean()),
        "max_depth": float(depth.max(initial=0.0)),
    }


def _interpolation(space: PoseSpace, rig: Rig, first: np.ndarray, second: np.ndarray, cfg: EvalConfig, rng) -> dict:
    """Path validity (inner poses) of pose-space interpolation and of per-joint slerp between random pairs."""
    pr, val = space.pose_rig(rig), space.validators(rig)
    ours, slerp = [], []
    for _ in range(cfg.interpolation_pairs):
        a, b = first[rng.integers(len(first))], second[rng.integers(len(second))]
        ours.append(val.check(space.interpolate_poses(rig, a, b, cfg.interpolation_steps)).valid[1:-1])
        slerp.append(val.check(slerp_path(pr, a, b, cfg.interpolation_steps)).valid[1:-1])
    return {
        "path_validity": float(np.mean(ours)),
        "slerp_path_validity": float(np.mean(slerp)),
        "paths_fully_valid": float(np.mean([v.all() for v in ours])),
        "slerp_paths_fully_valid": float(np.mean([v.all() for v in slerp])),
    }


def _corrupt(pose_rig, poses: np.ndarray, degrees: float, rng) -> np.ndarray:
    from sim.rotations import axis_angle_to_quat, quat_multiply, quat_to_rot6d, rot6d_to_quat

    q = rot6d_to_quat(poses)
    active = np.flatnonzero(pose_rig.active[1:]) + 1
    for n in range(len(q)):
        for j in rng.choice(active, min(3, len(active)), replace=False):
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            q[n, j] = quat_multiply(q[n, j], axis_angle_to_quat(axis * np.radians(degrees)))
    return quat_to_rot6d(q)


def load_zero_shot(space: PoseSpace, sources: Sequence[str]) -> dict:
    """The zero-shot skeletons' assets by source, each loaded and its pose rig resolved: a bad source fails here,
    before any (long) evaluation.

    Raises:
        InputError (a ValueError) naming the source: a file or procedural name that does not load, or a skeleton
        the pose space cannot represent.
    """
    from sim import RigError
    from usd_io import InputError, load_asset

    assets = {}
    for source in sources:
        asset = load_asset(source)  # its errors name the source
        try:
            space.pose_rig(asset.rig)
        except (RigError, ValueError) as e:
            raise InputError(source, "zero_shot", f"cannot evaluate the skeleton {asset.rig.name!r}: {e}") from e
        assets[source] = asset
    return assets


def evaluate_zero_shot(space: PoseSpace, source: str, cfg: EvalConfig | None = None, asset=None) -> dict:
    """Sample validity and APD of a skeleton absent from training (default validators).

    Args:
        asset: ``source`` already loaded (see :func:`load_zero_shot`); None loads it.
    """
    cfg = cfg or EvalConfig()
    if asset is None:
        asset = load_zero_shot(space, [source])[source]
    rig = asset.rig
    pr = space.pose_rig(rig)
    samples = space.sample_poses(rig, cfg.samples, seed=cfg.seed)
    val = space.validators(rig)
    unguided = space.sample_poses(rig, min(cfg.samples, UNGUIDED_SAMPLES), seed=cfg.seed, guidance=False)
    out = {
        "rig": rig.name,
        "source": source,
        "known": space.is_known(rig),
        "sample_validity": val.check(samples).rates(),
        "exact_self_intersection": exact_self_intersection(space, rig, samples) if rig.meshes else None,
        "unguided_sample_validity": val.check(unguided).rates()["valid"],
        "apd": apd(pr, samples),
    }
    if asset.clips:
        real = np.concatenate([pr.encode(c) for c in asset.clips.values()])
        out["apd_own_clips"] = apd(pr, real)
        out["own_clips_validity"] = val.check(real).rates()["valid"]
    return out


def heldout_clips_in_training(space: PoseSpace, names: list[str]) -> list[str]:
    """Those of ``names`` (``"source#clip"``) that are among the pose space's training clips (empty when the
    checkpoint does not record them)."""
    seen = {_clip_identity(n) for n in space.training_clips}
    return [n for n in names if _clip_identity(n) in seen]


def evaluate(
    space: PoseSpace, heldout: PoseSet, cfg: EvalConfig | None = None, train: PoseSet | None = None,
    progress: Callable[[int, int, str], None] | None = None, zero_shot: Mapping | None = None,
) -> dict:  # fmt: skip
    """Figures for every held-out skeleton and every zero-shot skeleton.

    Args:
        train: the training poses (optional): adds each skeleton's ``prdc_training_data`` reference.
        progress: called before each skeleton with (skeletons done, skeletons in all, what comes next).
        zero_shot: ``cfg.zero_shot``'s assets by source, from :func:`load_zero_shot`; None loads them first (a bad
            source fails before the held-out evaluation).
    """
    cfg = (cfg or EvalConfig()).check()
    if zero_shot is None:
        zero_shot = load_zero_shot(space, cfg.zero_shot)
    missing = [s for s in cfg.zero_shot if s not in zero_shot]
    if missing:
        raise ValueError(f"zero_shot: the assets of {', '.join(missing)} were not loaded (see load_zero_shot)")
    out: dict = {"heldout": {}, "zero_shot": {}}
    # a held-out clip the model was trained on measures memory, not generalization
    out["heldout_clips_in_training"] = heldout_clips_in_training(space, heldout.clip_names())
    total = len(heldout.rigs) + len(cfg.zero_shot)
    for i, r in enumerate(heldout.rigs):
        rig = r.pose_rig.rig
        if progress is not None:
            progress(i, total, f"held-out {', '.join(r.clip_names)}")
        seen = train.find(rig) if train is not None else None
        figures = evaluate_rig(space, rig, r.poses, cfg, None if seen is None else seen.poses)
        out["heldout"][rig.name] = {"clips": r.clip_names, **figures}
    for i, source in enumerate(cfg.zero_shot):
        if progress is not None:
            progress(len(heldout.rigs) + i, total, f"zero-shot {source}")
        out["zero_shot"][source] = evaluate_zero_shot(space, source, cfg, zero_shot[source])
    if progress is not None:
        progress(total, total, "done")
    return out
