"""Pose space (ViPS): train | sample | ik | interpolate | evaluate; `posespace.py COMMAND --help` lists its options.

Trains a pose diffusion model over several skeletons, then samples, solves IK, interpolates and evaluates it. Every
command that writes poses writes a UsdSkel stage (one SkelAnimation, one pose per frame; an existing one is replaced,
with a `note: replacing PATH` line); sample and ik stand each pose on the ground (lowest point at z = 0), interpolate
carries its ends' placement.

  .venv/bin/python examples/posespace.py train --output runs/posespace                 # acceptance training
  .venv/bin/torchrun --nproc_per_node 4 examples/posespace.py train --output runs/ps   # several processes
      (or `accelerate launch [--multi_gpu] [--num_machines N ...] examples/posespace.py train ...`)
  .venv/bin/python examples/posespace.py sample --checkpoint runs/posespace/posespace.pt \\
      --rig ../shared/assets/gltf/Fox.glb --count 64 --output out/fox_samples.usda
  .venv/bin/python examples/posespace.py ik --checkpoint runs/posespace/posespace.pt \\
      --rig ../shared/assets/bvh/131_02.bvh --handles-from-frames 0 100 200 --output out/ik.usda
  .venv/bin/python examples/posespace.py interpolate --checkpoint runs/posespace/posespace.pt \\
      --rig ../shared/assets/gltf/Fox.glb --a Run:0 --b Survey:40 --steps 30 --output out/interp.usda
  .venv/bin/python examples/posespace.py evaluate --checkpoint runs/posespace/posespace.pt --output out/eval

train refuses an --output folder holding an earlier run (checkpoint.pt or posespace.pt): --resume continues
it, and --overwrite starts afresh there. The default --data paths are relative to the repository's root folder.

Exit status: 0 on success, 1 when training diverges (the last good checkpoint is kept), 2 on bad input or a refused
folder (one line naming the file and the problem), 130 on Ctrl-C (train names the checkpoint to --resume from),
and 143 on SIGTERM (kill, docker stop, a Slurm time limit: handled as Ctrl-C is).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import tyro

# this file is called posespace.py: keep its own folder off the path so `import posespace` finds the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from posespace import (  # noqa: E402
    EvalConfig,
    PoseSet,
    PoseSpace,
    SamplingConfig,
    TrainConfig,
    end_effectors,
    evaluate,
    heldout_clips_in_training,
    joint_positions,
    train,
)
from posespace.evaluation import load_zero_shot  # noqa: E402
from posespace.training import DEFAULT_HELDOUT, DEFAULT_TRAIN_DATA  # noqa: E402
from sim import Motion, RigError, pose_motion  # noqa: E402
from sim.audit import audit_motion, derived_joint_limits  # noqa: E402
from usd_io import (  # noqa: E402
    AUDIT_FILES,
    InputError,
    atomic_output,
    interrupt_exit_status,
    load_asset,
    make_folder,
    stop_on_sigterm,
    write_audit,
    write_usdskel,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for the examples' shared helpers only
from _example_cli import (  # noqa: E402
    audit_verdict,
    check_not_empty,
    format_warning,
    note_replacing,
    print_error,
    strict_json,
)

sys.path.pop(0)


@dataclass
class Sample:
    """Sample plausible poses of a rig."""

    checkpoint: Path
    """A pose space written by `train` (posespace.pt or checkpoint.pt)."""
    rig: str
    """The character: a .gltf/.glb, .bvh or .usd file, or procedural:NAME (any skeleton, seen or not)."""
    output: Path
    """UsdSkel stage to write (.usda/.usdc)."""
    skeleton: str | None = None
    """USD input with several Skeletons: the prim path of the one to use (default: the first, with a warning)."""
    count: int = 32
    """Poses to sample (one per frame)."""
    seed: int = 0
    """Random seed."""
    guidance: bool = True
    """Validator guidance while sampling."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Sampler settings."""
    threads: int = 1
    """torch CPU threads (the model is small: one thread is fastest on a shared machine)."""


@dataclass
class Ik:
    """Solve inverse kinematics for end-effector handles."""

    checkpoint: Path
    """A pose space written by `train`."""
    rig: str
    """The character (file or procedural:NAME)."""
    output: Path
    """UsdSkel stage to write: one solved pose per frame, each standing on the ground (its lowest point at z = 0,
    the root above its rest x, y; the handles are met relative to the root)."""
    skeleton: str | None = None
    """USD input with several Skeletons: the prim path of the one to use (default: the first, with a warning)."""
    handles: tuple[str, ...] = ()
    """Handles as JOINT=X,Y,Z [m] (one pose, each joint once) in skeleton space with the root at its rest position
    (the rig's rest translation; BVH rigs have the hips at the origin there, feet near z = -0.9), e.g.
    lhand=0.15,-0.3,0.1 on CMU 131 (facing -y): the left hand in front of the belly. The written stage is then
    moved up or down onto the ground."""
    handles_from_frames: tuple[int, ...] = ()
    """Instead of --handles: take the end-effector positions of these frames of the rig's clip (one pose each)."""
    clip: str | None = None
    """Clip for --handles-from-frames (default: the first)."""
    heading_deg: float = 0.0
    """The character's facing [deg], counter-clockwise about up from its rest heading, for handles measured on a
    turned character: poses have no heading, so the handles are turned back by it, solved, and the written poses
    turned by it (without it a turned character's handles are reached by twisting the body)."""
    seed: int = 0
    """Random seed."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Sampler settings."""
    threads: int = 1
    """torch CPU threads (the model is small: one thread is fastest on a shared machine)."""


@dataclass
class Interpolate:
    """Interpolate between two poses through the pose space."""

    checkpoint: Path
    """A pose space written by `train`."""
    rig: str
    """The character (file or procedural:NAME)."""
    output: Path
    """UsdSkel stage to write: the path, one pose per frame."""
    skeleton: str | None = None
    """USD input with several Skeletons: the prim path of the one to use (default: the first, with a warning)."""
    a: str = "0"
    """Start pose as CLIP:FRAME or FRAME (of the first clip)."""
    b: str = "-1"
    """End pose as CLIP:FRAME or FRAME."""
    steps: int = 30
    """Poses on the path, ends included."""
    audit: bool = True
    """Write the plausibility audit of the path next to the output (OUTPUT.audit/: report.json, timeline.png,
    worst_frame.png); an earlier run's audit there is removed, also with --no-audit."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Sampler settings."""
    threads: int = 1
    """torch CPU threads (the model is small: one thread is fastest on a shared machine)."""


@dataclass
class Evaluate:
    """Measure a pose space on held-out clips and zero-shot skeletons; writes OUTPUT/metrics.json."""

    checkpoint: Path
    """A pose space written by `train`."""
    output: Path
    """Folder for metrics.json."""
    data: tuple[str, ...] = DEFAULT_TRAIN_DATA
    """Clip specs (as in train); only the held-out clips are used."""
    heldout: tuple[str, ...] = DEFAULT_HELDOUT
    """Held-out clip names."""
    fps: float = 60.0
    """Clips are resampled to this rate [1/s]."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """What to measure."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Sampler settings."""
    threads: int = 1
    """torch CPU threads (the model is small: one thread is fastest on a shared machine)."""


Command = (
    Annotated[TrainConfig, tyro.conf.subcommand("train", description="Train a pose space (accelerate-ready).")]
    | Annotated[Sample, tyro.conf.subcommand("sample")]
    | Annotated[Ik, tyro.conf.subcommand("ik")]
    | Annotated[Interpolate, tyro.conf.subcommand("interpolate")]
    | Annotated[Evaluate, tyro.conf.subcommand("evaluate")]
)


USD_SUFFIXES = (".usda", ".usdc", ".usd")
IK_WARN_ERROR = 0.01
"""ik warns when a handle stays farther than this fraction of the rig height from its target."""
IK_MAX_HANDLE_HEIGHTS = 100.0
"""ik refuses a --handles target farther than this many rig heights from the root (no pose comes near it, and the
solver's float32 arithmetic overflows on far larger ones)."""


def _save_config(cfg, path: Path) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(asdict(cfg), indent=2, default=str))


def _beside(output: Path, suffix: str) -> Path:
    """OUTPUT.config.json, OUTPUT.audit: written next to OUTPUT."""
    return output.with_name(output.name + suffix)


def _check_folder_can_be_made(folder: Path) -> None:
    """InputError naming ``folder`` when it (or a parent) is a file; creates nothing (a run that fails later must
    not leave an empty folder behind)."""
    try:
        for parent in [folder, *folder.parents]:
            if parent.exists() and not parent.is_dir():
                raise InputError(folder, "output", f"cannot create the folder: {parent} is a file")
    except OSError as e:  # a parent that cannot be entered (Path.exists re-raises EACCES)
        raise InputError(folder, "output", f"cannot reach the folder ({e.strerror or e})") from e


def _check_output(cfg) -> None:
    """Fails at once, before the model runs, when OUTPUT, OUTPUT.config.json or (interpolate) OUTPUT.audit/ cannot
    be written (wrong extension, a folder that cannot be made, a folder where a file goes or a file where the
    audit folder goes) or OUTPUT would overwrite the input rig."""
    check_not_empty(cfg.rig, "--rig", "the character (a file or procedural:NAME)")
    out = Path(cfg.output)
    if not out.name:  # "", "." or "/"
        raise InputError(out, "--output", "names no file: give the stage to write (e.g. out/poses.usda)")
    if out.suffix.lower() not in USD_SUFFIXES:
        raise InputError(out, "--output", f"a USD stage must end in {', '.join(USD_SUFFIXES)}, not {out.suffix!r}")
    rig = Path(cfg.rig)
    if rig.exists() and out.exists() and rig.resolve() == out.resolve():
        raise InputError(out, "--output", "is the input --rig: choose another file")
    if out.is_dir():
        raise InputError(out, "--output", "is a folder: give a file name")
    _check_folder_can_be_made(out.parent)
    config = _beside(out, ".config.json")
    if config.is_dir():
        raise InputError(config, "output", "is a folder, not a file (the run's settings are written there)")
    if getattr(cfg, "audit", False):
        audit = _beside(out, ".audit")
        if audit.exists() and not audit.is_dir():
            raise InputError(audit, "output", "the audit folder is a file (or pass --no-audit)")
        for name in AUDIT_FILES:
            if (audit / name).is_dir():
                raise InputError(audit / name, "output", "is a folder, not a file (or pass --no-audit)")


def _frame_index(asset, motion, index: int) -> int:
    """``index`` (negative counts from the end) as a frame of ``motion``, or InputError naming the clip."""
    if not -motion.frame_count <= index < motion.frame_count:
        raise InputError(asset.source, f"{motion.name}[{index}]", f"frame out of range ({motion.frame_count} frames)")
    return index % motion.frame_count


def _frame(asset, text: str, flag: str) -> tuple[str, int]:
    clip, _, frame = text.rpartition(":")
    try:
        index = int(frame)
    except ValueError:
        raise InputError(asset.source, flag, f"expected CLIP:FRAME or FRAME (an integer), got {text!r}") from None
    motion = asset.clip(clip or None)
    return motion.name, _frame_index(asset, motion, index)


_WARNINGS: list[str] = []
"""One-line warnings of the current command, printed after its summary (a failing command prints its error only)."""


_UNGUIDED = ("batch", "steps", "temperature")
_GUIDED = ("guidance_damping", "guidance_from", "guidance_iters", "max_step", "polish_iters")
SAMPLING_USED: dict[type, tuple[str, ...]] = {
    Sample: (*_UNGUIDED, *_GUIDED),
    Ik: ("batch", "guidance_damping", "max_step", "ik_steps", "ik_guidance_iters", "ik_validator_weight",
         "ik_dls_iters", "ik_damping", "ik_handle_tolerance_start", "ik_handle_tolerance"),
    Interpolate: ("interpolation_steps", "interpolation_time", *_GUIDED),
}  # fmt: skip
"""The SamplingConfig fields each command reads (evaluate reads them all); --sample --no-guidance reads only
batch, steps and temperature. Checked against the fields a run actually reads by the tests."""


def sampling_fields_used(cfg) -> tuple[str, ...] | None:
    """The --sampling fields ``cfg``'s command reads (None: all)."""
    if isinstance(cfg, Sample) and not cfg.guidance:
        return _UNGUIDED
    return SAMPLING_USED.get(type(cfg))


def _unused_sampling_warning(cfg) -> str | None:
    """A warning naming the --sampling options set away from their defaults that ``cfg``'s command never reads
    (every command listed all 19, and `interpolate --sampling.steps 1` wrote the same stage as 40)."""
    used = sampling_fields_used(cfg)
    if used is None:
        return None
    default = SamplingConfig()
    unused = [f.name for f in dataclasses.fields(SamplingConfig)
              if f.name not in used and getattr(cfg.sampling, f.name) != getattr(default, f.name)]  # fmt: skip
    if not unused:
        return None
    flag = lambda name: "--sampling." + name.replace("_", "-")  # noqa: E731
    command = {Sample: "sample", Ik: "ik", Interpolate: "interpolate"}[type(cfg)]
    extra = " without guidance" if isinstance(cfg, Sample) and not cfg.guidance else ""
    return (f"{', '.join(flag(n) for n in unused)}: not used by {command}{extra} (it reads "
            f"{', '.join(flag(n) for n in used)})")  # fmt: skip


def _load_space(cfg) -> PoseSpace:
    """The --checkpoint's pose space; queues a warning when it was trained for too few steps."""
    space = PoseSpace.load(cfg.checkpoint, cfg.sampling)
    warning = space.training_warning()
    if warning:
        _WARNINGS.append(warning)
    return space


def run_sample(cfg: Sample) -> str:
    if isinstance(cfg.count, bool) or not isinstance(cfg.count, int) or cfg.count < 1:
        raise ValueError(f"--count: must be an integer >= 1, got {cfg.count!r}")
    _check_output(cfg)
    space = _load_space(cfg)
    rig = load_asset(cfg.rig, skeleton=cfg.skeleton).rig
    motion = space.sample(rig, cfg.count, seed=cfg.seed, guidance=cfg.guidance)
    rates = space.validators(rig).check(space.pose_rig(rig).encode(motion)).rates()
    note_replacing(cfg.output)
    write_usdskel(cfg.output, rig, [motion])
    return (f"{cfg.count} samples of {rig.name!r} (standing on z = 0), validity {rates['valid']:.3f}; model "
            f"{space.training_summary()}")  # fmt: skip


def _parse_handles(cfg: Ik, rig) -> dict[str, np.ndarray]:
    handles = {}
    for h in cfg.handles:
        name, _, xyz = h.partition("=")
        try:
            rig.joint_index(name)
        except KeyError as e:
            raise InputError(cfg.rig, f"--handles {h!r}", e.args[0]) from None
        if name in handles:
            raise InputError(cfg.rig, f"--handles {h!r}", f"joint {name!r} has two handles; give each joint once")
        try:
            handles[name] = np.array([float(v) for v in xyz.split(",")], dtype=np.float64)
        except ValueError:
            handles[name] = np.empty(0)
        if handles[name].shape != (3,) or not np.isfinite(handles[name]).all():
            raise InputError(cfg.rig, f"--handles {h!r}", "expected JOINT=X,Y,Z with three finite numbers [m]")
        distance, height = float(np.linalg.norm(handles[name] - rig.rest_translations[0])), rig.height()
        if not distance <= IK_MAX_HANDLE_HEIGHTS * height:
            raise InputError(cfg.rig, f"--handles {h!r}", f"{distance:.3g} m from the root, farther than "
                             f"{IK_MAX_HANDLE_HEIGHTS:g} x the rig's height ({height:.3g} m): out of any reach "
                             "(handles are in metres, relative to the rig's rest root position)")  # fmt: skip
    return handles


def run_ik(cfg: Ik) -> str:
    if cfg.handles and cfg.handles_from_frames:
        raise ValueError("--handles / --handles-from-frames: give one or the other")
    if not cfg.handles and not cfg.handles_from_frames:
        raise ValueError("--handles: give --handles JOINT=X,Y,Z or --handles-from-frames")
    if cfg.clip is not None and not cfg.handles_from_frames:  # it was ignored, even a clip the rig does not have
        raise ValueError(f"--clip: picks the clip of --handles-from-frames; --handles takes none (got {cfg.clip!r})")
    if not math.isfinite(cfg.heading_deg):
        raise ValueError(f"--heading-deg: must be a finite angle [deg], got {cfg.heading_deg}")
    _check_output(cfg)
    space = _load_space(cfg)
    asset = load_asset(cfg.rig, skeleton=cfg.skeleton)
    rig = asset.rig
    pr = space.pose_rig(rig)
    if cfg.handles_from_frames:
        motion = asset.clip(cfg.clip)
        frames = [_frame_index(asset, motion, f) for f in cfg.handles_from_frames]
        pos = joint_positions(pr, pr.encode(motion)[frames]) + rig.rest_translations[0]
        handles = {rig.joint_names[j]: pos[:, j] for j in end_effectors(pr)}
    else:
        handles = _parse_handles(cfg, rig)
    space.validators(rig)  # the rig's one-time setup, outside the timing
    t0 = time.perf_counter()
    flag = "--handles" if cfg.handles else "--handles-from-frames"
    try:
        motion = space.ik(rig, handles, seed=cfg.seed, heading=math.radians(cfg.heading_deg))
    except InputError:
        raise
    except (ValueError, FloatingPointError) as e:  # e.g. a solve gone non-finite: name the handles, not a quaternion
        raise InputError(cfg.rig, flag, f"the IK solve for these handles failed ({e})") from e
    if not (np.isfinite(motion.rotations).all() and np.isfinite(motion.root_translations).all()):
        raise InputError(cfg.rig, flag, "the IK solve for these handles gave non-finite poses")
    seconds = time.perf_counter() - t0
    poses = pr.encode(motion)
    pos = pose_motion(rig, motion)[0]  # the poses as solved, turned by the heading
    idx = [rig.joint_index(k) for k in handles]
    target = np.stack([np.atleast_2d(v) for v in handles.values()], axis=1)
    err = np.linalg.norm(pos[:, idx] - target, axis=-1) / rig.height()
    valid = space.validators(rig).check(poses).rates()["valid"]
    # the handles are relative to the root; the written stage stands on the ground like sample's (lowest point at
    # z = 0 per frame, the root above its rest x, y): BVH rigs rest with the hips at the origin, feet ~1 m under
    root = motion.root_translations.copy()
    root[:, 2] = pr.ground_heights(motion.rotations)
    note_replacing(cfg.output)
    write_usdskel(cfg.output, rig, [Motion(motion.fps, root, motion.rotations, name=motion.name)])
    if err.max() > IK_WARN_ERROR:
        f, h = np.unravel_index(err.argmax(), err.shape)
        print(f"warning: handle {list(handles)[h]!r} of pose {f} not reached ({err.max():.3f} x height away): out of "
              "reach? handles are relative to the rig's rest root position (see --help)", file=sys.stderr)  # fmt: skip
    # the poses are solved as one batch whose time barely grows with its size: per pose, a few poses look slow
    ms = 1000 * seconds / motion.frame_count
    return (f"{motion.frame_count} IK poses of {rig.name!r}, validity {valid:.3f}, worst handle error "
            f"{err.max():.4f} x height, solved together in {seconds:.2f} s ({ms:.1f} ms/pose; the batch time "
            f"barely grows with its size); written standing on z = 0; model {space.training_summary()}")  # fmt: skip


def run_interpolate(cfg: Interpolate) -> str:
    _check_output(cfg)
    space = _load_space(cfg)
    asset = load_asset(cfg.rig, skeleton=cfg.skeleton)
    rig = asset.rig
    ends = []
    for text, flag in ((cfg.a, "--a"), (cfg.b, "--b")):
        clip, frame = _frame(asset, text, flag)
        ends.append(asset.clips[clip].slice(frame, frame + 1))
    # the path starts where frame a stands and ends where frame b stands (root position and heading carried along)
    motion = space.interpolate(rig, ends[0], ends[1], cfg.steps)
    rates = space.validators(rig).check(space.pose_rig(rig).encode(motion)).rates()
    folder = _beside(cfg.output, ".audit")
    report = None
    if cfg.audit:  # audited before anything is written: a path the audit cannot measure leaves no stage behind
        source = f"{cfg.rig} (pose-space interpolation)"
        try:
            # limits from the file's clips (as convert.py and audit.py derive them): the path's own range could
            # not fail
            limits = derived_joint_limits(rig, list(asset.clips.values()))
            report = audit_motion(rig, motion, limits=limits, source=source)
        except (RigError, ValueError) as e:
            raise InputError(cfg.rig, "audit", f"cannot audit the path: {e} (or pass --no-audit)") from e
    note_replacing(cfg.output, folder)
    _remove_audit(folder)  # an earlier run's audit would pass for this path (also with --no-audit)
    write_usdskel(cfg.output, rig, [motion])
    try:
        if report is not None:
            write_audit(folder, rig, motion, report=report)
    except BaseException:  # no stage without its audit (the error, or Ctrl-C's "nothing written", says so)
        cfg.output.unlink(missing_ok=True)
        with contextlib.suppress(InputError):  # best effort: the error being raised is the one to report
            _remove_audit(folder)
        raise
    message = f"{cfg.steps}-pose path of {rig.name!r}, validity {rates['valid']:.3f}; model {space.training_summary()}"
    if report is not None:
        message += f"; audit {audit_verdict(report)} ({folder}/)"
    return message


def _remove_audit(folder: Path) -> None:
    """Removes the audit files in ``folder`` (and the folder, when that empties it); InputError naming the file
    when one cannot be removed (a PermissionError traceback, exit 1, before)."""
    if not folder.is_dir():
        return
    for name in AUDIT_FILES:
        try:
            if (folder / name).is_file():
                (folder / name).unlink()
        except OSError as e:
            raise InputError(folder / name, "output", f"cannot remove the earlier audit ({e.strerror or e})") from e
    with contextlib.suppress(OSError):
        if not any(folder.iterdir()):
            folder.rmdir()


def run_evaluate(cfg: Evaluate) -> str:
    cfg.eval.check()  # e.g. too few samples for PRDC: say so before the long evaluation
    for name in ("metrics.json", "config.json"):  # written after the long evaluation
        if (Path(cfg.output) / name).is_dir():
            raise InputError(Path(cfg.output) / name, "output", "is a folder, not a file")
    created = not Path(cfg.output).exists()
    make_folder(cfg.output)  # fail before the long evaluation when the folder cannot be made
    try:
        return _evaluate(cfg)
    except BaseException:
        if created and not any(Path(cfg.output).iterdir()):
            Path(cfg.output).rmdir()  # leave no empty folder behind a failed evaluation
        raise


def _evaluate(cfg: Evaluate) -> str:
    space = _load_space(cfg)
    zero_shot = load_zero_shot(space, cfg.eval.zero_shot)  # a bad source fails before the long evaluation
    train_set, heldout = PoseSet.from_specs(cfg.data, cfg.fps).split_by_clip(cfg.heldout)
    if not heldout.rigs:
        raise InputError(", ".join(cfg.data), "heldout", f"no clip named {', '.join(cfg.heldout)}")
    seen = heldout_clips_in_training(space, heldout.clip_names())
    if seen:
        print(f"warning: {cfg.checkpoint} was trained on the held-out clip(s) {', '.join(seen)}: their figures "
              "measure memory, not generalization", file=sys.stderr)  # fmt: skip
    from tqdm import tqdm

    t0 = time.perf_counter()
    with tqdm(total=len(heldout.rigs) + len(cfg.eval.zero_shot), desc="evaluate", unit="skeleton") as bar:

        def progress(done: int, total: int, label: str) -> None:
            bar.set_postfix_str(label, refresh=False)
            bar.update(done - bar.n)

        metrics = evaluate(space, heldout, cfg.eval, train_set, progress=progress, zero_shot=zero_shot)
    metrics["seconds"] = time.perf_counter() - t0
    metrics["model_training"] = space.training  # steps trained and final loss (None: not recorded)
    with atomic_output(cfg.output / "metrics.json") as tmp:
        tmp.write_text(strict_json(metrics, indent=2))
    return (f"wrote {cfg.output / 'metrics.json'}; model {space.training_summary()}; "
            + "; ".join(_heldout_summary(n, m) for n, m in metrics["heldout"].items()))  # fmt: skip


def _heldout_summary(skeleton: str, m: dict) -> str:
    """One held-out skeleton's headline figures, named by its held-out clips (the key is the skeleton's name, which
    is the first file that brought it, e.g. a training clip)."""
    clips = ", ".join(c.rpartition("#")[2] or c for c in m.get("clips", [])) or skeleton
    text = f"{clips} ({skeleton} skeleton): validity {m['sample_validity']['valid']:.3f}, "
    if m.get("prdc") is None:
        return text + f"no PRDC ({m.get('prdc_skipped', 'too few held-out poses')})"
    text += f"precision {m['prdc']['precision']:.3f}, coverage {m['prdc']['coverage']:.3f}"
    ceiling = m.get("prdc_training_data")
    if ceiling:
        text += f" (training poses alone: {ceiling['precision']:.3f} / {ceiling['coverage']:.3f})"
    return text


def _interrupted_training(cfg: TrainConfig) -> str:
    ckpt = Path(cfg.output) / "checkpoint.pt"
    if not ckpt.is_file():
        return "interrupted before the first checkpoint: nothing to resume"
    try:
        step = torch.load(ckpt, map_location="cpu", weights_only=False)["train"]["step"]
    except Exception:  # only for the message
        step = "?"
    return f"interrupted: the last checkpoint is {ckpt} (step {step}); continue with the same command and --resume"


def main(cfg) -> int:
    try:
        if isinstance(cfg, TrainConfig):
            train(cfg)
            if os.environ.get("RANK", "0") == "0":  # torchrun / accelerate launch: one line from the main process
                print(f"wrote {Path(cfg.output) / 'posespace.pt'}")
            return 0
        if cfg.threads < 1:
            raise ValueError(f"--threads: must be >= 1, got {cfg.threads}")
        torch.set_num_threads(cfg.threads)
        run = {Sample: run_sample, Ik: run_ik, Interpolate: run_interpolate, Evaluate: run_evaluate}[type(cfg)]
        _WARNINGS.clear()
        unused = _unused_sampling_warning(cfg)
        if unused:
            _WARNINGS.append(unused)
        message = run(cfg)  # checks OUTPUT first (also that it names a file, for the config beside it)
        # OUTPUT.config.json, as OUTPUT.audit/
        out = cfg.output / "config.json" if isinstance(cfg, Evaluate) else _beside(cfg.output, ".config.json")
        _save_config(cfg, out)
        print(message)
        for warning in _WARNINGS:
            print(f"warning: {warning}", file=sys.stderr)
        return 0
    except KeyboardInterrupt as e:
        if isinstance(cfg, TrainConfig):
            print(_interrupted_training(cfg), file=sys.stderr)
        else:
            print("interrupted: nothing written", file=sys.stderr)
        return interrupt_exit_status(e)
    except FloatingPointError as e:  # training diverged; the last good checkpoint is kept
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (InputError, RigError, ValueError, FileNotFoundError, KeyError) as e:
        print_error(e, cfg)  # naming the flag (--sampling.steps), a missing default --data path said to be one
        return 2


if __name__ == "__main__":
    import warnings

    warnings.formatwarning = format_warning  # one line, no source echo, flags for the library's API names
    stop_on_sigterm()
    sys.exit(main(tyro.cli(Command, description=__doc__)))
