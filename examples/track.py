# Track a kinematic motion with a physically simulated character (Newton) and write USD.
#
#   .venv/bin/python examples/track.py                                    # procedural quadruped walk
#   .venv/bin/python examples/track.py --motion ../shared/assets/gltf/Fox.glb --clip Walk --loops 3 \
#       --target-height-m 0.5 --method projection --output out/fox_walk
#   .venv/bin/python examples/track.py --method pd                         # plain PD tracking (baseline)
#
# Writes OUTPUT/tracked.usda (skinned character, physical motion; the reference as a second, unbound clip),
# OUTPUT/physics.usda (UsdPhysics articulation), OUTPUT/metrics.json, OUTPUT/config.json, OUTPUT/preview.gif
# (reference ghosted beside it) and OUTPUT/audit/ (plausibility report of the physical motion). The projection
# checkpoints to OUTPUT/projection_checkpoint.npz; an interrupted run continues with --resume.
# The checkpoint is kept after a finished run (--resume then rewrites the outputs from it without simulating).
# A run into a folder holding an earlier run removes that run's outputs (all but the checkpoint) before it writes
# its own (a `note: replacing OUTPUT/` line names them), and writes metrics.json last, with "complete": true: a
# folder without it holds an interrupted run. A folder holding config.json, preview.gif or audit/ but none of
# metrics.json, tracked.usda, physics.usda or the checkpoint is somebody else's: refused, not cleared; so is
# --motion naming a file the run would replace. --resume without a checkpoint in OUTPUT says so and starts afresh.
# Exit status: 0 done (see metrics.json "success"), 1 the simulation blew up (no tracked.usda, no preview),
# 2 bad input, a checkpoint of another job or an unwritable checkpoint, 130 interrupted by Ctrl-C (a projection
# continues with --resume), 143 stopped by SIGTERM (kill, docker stop, a Slurm time limit: handled as Ctrl-C is).
"""Physically track a clip: PD tracking or AKD-style physics projection with ground contact and self-collision."""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import tyro

from sim import RigError
from sim.physics import (
    CharacterConfig,
    CheckpointError,
    ProjectionCheckpoint,
    ProjectionConfig,
    ReferenceConfig,
    TrackingConfig,
    apply_target_filter,
    build_character,
    contact_material,
    dynamic_feasibility,
    prepare_reference,
    project,
    reference_trajectory,
    substeps_for,
    track,
    tracking_metrics,
)
from sim.physics.config import MAX_LOOPED_SAMPLES, MAX_REFERENCE_FRAMES
from sim.physics.preview import render_preview
from usd_io import (
    InputError,
    atomic_output,
    interrupt_exit_status,
    load_asset,
    make_folder,
    stop_on_sigterm,
    write_usdskel,
)
from usd_io.physics_usd import write_physics_stage

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for the examples' shared helpers only
from _example_cli import audit_verdict, check_not_empty, flag_message, format_warning, print_error, strict_json

sys.path.pop(0)

FLAGS = {"ProjectionCheckpoint.interval_s": "--checkpoint-interval-s"}
"""Settings this CLI hands to classes outside TrackConfig: error lines name the flag, not the field."""


@dataclass
class TrackConfig:
    motion: str = "procedural:quadruped-walk"
    """Source of rig and clip: procedural:NAME, or a .gltf/.glb, .bvh or .usd file."""
    clip: str | None = None
    """Clip name (default: the source's first clip)."""
    skeleton: str | None = None
    """USD input holding several skeletons: the Skeleton prim path to read (default: the one under the stage's
    defaultPrim; when several remain, the first, with a warning naming the others)."""
    output: Path = Path("out/track")
    """Output folder."""
    method: Literal["pd", "projection"] = "projection"
    """``pd``: PD tracking of the reference joint angles; ``projection``: optimize the PD targets (MPPI)."""
    loops: int = 1
    """Repeat a cyclic clip this many times."""
    target_height_m: float | None = None
    """Scale the character to this height [m] (e.g. 0.5 for the Fox glTF, whose units are not metres)."""
    preview: bool = True
    """Write preview.gif."""
    preview_frames: int = 96
    """At most this many preview frames (every n-th frame is drawn); at least 1 (--no-preview writes none)."""
    audit: bool = True
    """Write the plausibility audit of the physical motion to OUTPUT/audit/."""
    pose_space: Path | None = None
    """A pose-space checkpoint (examples/posespace.py train): its target filter projects the PD target frames that
    fail its validators (self-intersection, hyperextension, twist) onto the pose space before they are tracked."""
    pose_space_strength: float | None = None
    """Projection strength of the pose-space filter (default: the checkpoint's sampling setting)."""
    pose_space_all_frames: bool = False
    """Project every target frame through the pose space, not only the frames failing a validator."""
    resume: bool = False
    """Projection: continue an interrupted run from OUTPUT/projection_checkpoint.npz (same motion and settings)."""
    checkpoint_interval_s: float = 30.0
    """Projection: save OUTPUT/projection_checkpoint.npz at least this often [s] (0: after every window)."""
    character: CharacterConfig = field(default_factory=CharacterConfig)
    reference: ReferenceConfig = field(default_factory=ReferenceConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    projection: ProjectionConfig = field(default_factory=ProjectionConfig)


INFEASIBLE_ZMP_EXCESS_HEIGHTS = 0.2
"""A reference whose centre of pressure lies on average more than this many character heights outside its support
polygon asks for ground forces no joint-driven character gets (the Fox Walk: 0.07, the Fox Run: 0.55)."""


def _write_json(path: Path, data) -> None:
    """Writes ``data`` as indented JSON atomically (temporary file, then rename)."""
    with atomic_output(path) as tmp:
        tmp.write_text(strict_json(data, indent=2) + "\n")


def _feasibility_note(character, ref, cfg: TrackConfig) -> str | None:
    """A warning line when the reference is far from centroidally feasible (expect a large body error)."""
    if ref.frame_count < 3:
        return None
    feas = dynamic_feasibility(
        character, ref.body_pos, ref.body_rot, ref.fps, friction=cfg.tracking.contact.friction,
        ground_height=cfg.tracking.contact.ground_height_m,
    )  # fmt: skip
    excess = feas["mean_zmp_excess_m"]
    if not excess > INFEASIBLE_ZMP_EXCESS_HEIGHTS * character.height:
        return None
    return (
        f"note: the reference is centroidally infeasible in {feas['infeasible_ratio']:.0%} of its frames (centre of "
        f"pressure on average {excess:.3g} m = {excess / character.height:.2f} heights outside the feet): no "
        "joint-driven character can follow it closely; expect a large body_pos_error_rel "
        "(design/physics_tracking.md, 'Known limit: Fox Run')"
    )


CHECKPOINT_NAME = "projection_checkpoint.npz"
OUTPUT_FILES = ("metrics.json", "tracked.usda", "physics.usda", "config.json", "preview.gif")
"""The files of a run (besides audit/ and the checkpoint, which --resume needs); metrics.json is removed first and
written last."""
RUN_MARKERS = ("metrics.json", "tracked.usda", "physics.usda")
"""Files only a track run writes: a folder holding config.json, preview.gif or audit/ without one of them (or the
checkpoint) is refused rather than cleared."""


def _remove_earlier_outputs(out: Path) -> None:
    """Removes an earlier run's outputs from ``out`` (and temporary files of writes killed midway), all but the
    projection checkpoint: none of them may pass for this run's. A ``note: replacing OUT/ (...)`` line on stderr
    names the ones there were."""
    earlier = [name for name in OUTPUT_FILES if (out / name).is_file()]
    if (out / "audit").is_dir() and any((out / "audit").iterdir()):
        earlier.append("audit/")
    if earlier:
        print(f"note: replacing {out}/ (the earlier run's {', '.join(earlier)})", file=sys.stderr)
    for name in OUTPUT_FILES:
        path = out / name
        path.unlink(missing_ok=True)
        for tmp in out.glob(f".{path.stem}.*.tmp{path.suffix}"):  # atomic_output's temporary names
            tmp.unlink(missing_ok=True)
    if (out / "audit").is_dir():
        shutil.rmtree(out / "audit")


def _check_device(name: str, option: str = "--tracking.solver.device") -> None:
    """Raises ValueError naming ``option`` when the Warp device ``name`` (spelling checked by SolverConfig) does
    not exist on this machine: a missing GPU fails in one line before any work, not deep inside Warp."""
    if name == "cpu":
        return
    import warp as wp

    from sim._warp_setup import init_warp

    init_warp()  # quietly, as the simulation does
    if not wp.is_cuda_available():
        raise ValueError(
            f"{option}: {name!r}: no CUDA device is available on this machine (warp {wp.__version__} finds no CUDA"
            " driver or GPU); use --tracking.solver.device cpu"
        )
    count = wp.get_cuda_device_count()
    index = int(name.partition(":")[2] or 0)
    if index >= count:
        raise ValueError(f"{option}: {name!r}: this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")


MAX_STEPS = 2**31 - 1
"""Physics steps a run can take: the simulation counts them in int32."""


def _check_length(cfg: TrackConfig, clip) -> None:
    """Raises ValueError naming the options when the reference would be too long: more than MAX_REFERENCE_FRAMES
    frames made by ``--loops`` / ``--reference.fps``, more than MAX_LOOPED_SAMPLES samples looped (``--loops
    1000000000000`` never got to its simulation), or more physics steps than the simulation can count
    (``--tracking.solver.max-dt-s``). Computed from the clip before it is looped, as prepare_reference loops and
    resamples it (upper bounds)."""
    loops, frames = cfg.loops, clip.frame_count
    if isinstance(loops, bool) or not isinstance(loops, int) or loops < 1:
        return  # prepare_reference names it
    fps = cfg.reference.fps or min(clip.fps, cfg.reference.max_fps)
    period = clip.duration * frames / (frames - 1) if frames > 1 else 0.0  # one loop, seam included
    span = clip.duration if loops == 1 else loops * period
    tracked = math.floor(span * fps) + 1
    looped = loops * frames if loops > 1 else 0  # samples of the looped clip before it is resampled
    options = [f"--loops {loops}"] if loops > 1 else []
    if cfg.reference.fps is not None:
        options.append(f"--reference.fps {cfg.reference.fps:g}")
    source = f"clip {clip.name!r}: {frames} frames over {clip.duration:.3g} s"
    if options and tracked > max(MAX_REFERENCE_FRAMES, frames):
        raise ValueError(
            f"{', '.join(options)}: the reference would have {tracked:.3g} frames at {fps:g} fps ({source}); a run"
            f" takes at most {MAX_REFERENCE_FRAMES} ({MAX_REFERENCE_FRAMES / 30 / 60:.0f} minutes at 30 fps)"
        )
    if looped > MAX_LOOPED_SAMPLES:
        raise ValueError(
            f"{', '.join(options)}: the looped clip would have {looped:.3g} samples before it is resampled ({source});"
            f" a run loops at most {MAX_LOOPED_SAMPLES}"
        )
    substeps = substeps_for(fps, cfg.tracking.solver.step_limit_s())
    if tracked * substeps > MAX_STEPS:
        if cfg.reference.fps is None and cfg.reference.max_fps < clip.fps:
            options.append(f"--reference.max-fps {cfg.reference.max_fps:g}")
        options.insert(0, f"--tracking.solver.max-dt-s {cfg.tracking.solver.step_limit_s():g}")
        raise ValueError(
            f"{', '.join(options)}: {tracked:.3g} frame(s) at {fps:g} fps of {substeps:.3g} physics steps each"
            f" exceed the {MAX_STEPS + 1:.3g} steps the simulation can count; use a larger step or a shorter reference"
        )


_MASS_OPTIONS = ("character.density_kg_m3", "character.total_mass_kg", "character.mass_from",
                 "character.tail_density_scale", "character.density_scale", "target_height_m")  # fmt: skip
_GAIN_OPTIONS = ("character.stiffness_hz", "character.damping_ratio", "character.armature_fraction")
_CONTACT_OPTIONS = ("tracking.contact.penalty_stiffness_per_kg",)
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _settings(cfg: TrackConfig, names) -> str:
    """The options among ``names`` set away from their defaults (``--character.density-kg-m3 1e+300``), or a note
    that all of them are at their defaults."""
    default = TrackConfig()
    changed = [
        f"--{name.replace('_', '-')} {operator.attrgetter(name)(cfg)!r}"
        for name in names
        if operator.attrgetter(name)(cfg) != operator.attrgetter(name)(default)
    ]
    return ", ".join(changed) if changed else "the rig's size (every option involved is at its default)"


def _derived_error(cfg: TrackConfig, what: str, values, names, smallest: float = 0.0) -> ValueError:
    """The error for derived ``values`` outside float32 (or below ``smallest``), showing the first such value."""
    with np.errstate(all="ignore"):
        flat = np.asarray(values, dtype=np.float64).ravel()
        bad = flat[~((np.abs(flat) <= FLOAT32_MAX) & (np.abs(flat) >= smallest))]
    shown = f"{bad[0]:.3g}" if bad.size else "?"
    return ValueError(
        f"{cfg.motion}: the character's {what} do not fit the simulation's float32 numbers (got {shown}); they follow"
        f" from {_settings(cfg, names)}"
    )


def _check_scale(cfg: TrackConfig, rig, clip) -> None:
    """Raises ValueError when ``--target-height-m`` scales the rig or its clip beyond float32 numbers (the
    simulation's): 1e300 overflowed inside the reference preparation and gave the character NaN kg."""
    height = cfg.target_height_m
    if height is None or isinstance(height, bool) or not 0 < height < math.inf or not rig.height() > 0:
        return  # prepare_reference names it (NaN, inf and values <= 0 alike: "must be a positive finite number")
    scale = cfg.target_height_m / rig.height()
    with np.errstate(all="ignore"):
        reach = scale * max(rig.height(), float(np.max(np.abs(clip.root_translations), initial=0.0)))
    if not reach <= FLOAT32_MAX:
        raise ValueError(
            f"--target-height-m {cfg.target_height_m:g}: scales {cfg.motion} by {scale:.3g}, to {reach:.3g} m, beyond"
            f" the simulation's float32 numbers (at most {FLOAT32_MAX:.3g})"
        )


def _build_character(cfg: TrackConfig, prepared):
    """build_character, with masses, gains and contact stiffness that overflow (or vanish in) float32 refused in
    one line naming the options they follow from: ``--character.stiffness-hz 1e300`` raised OverflowError in the
    builder, ``--character.density-kg-m3 1e300`` a Newton ValueError (an infinite contact damping)."""
    try:
        character = build_character(prepared.rig, prepared.motion, cfg.character)  # e.g. an unknown joint name
    except OverflowError as e:
        raise ValueError(
            f"{cfg.motion}: the character's masses or PD gains overflow ({e.args[-1]}); they follow from"
            f" {_settings(cfg, _MASS_OPTIONS + _GAIN_OPTIONS)}"
        ) from None
    ct = cfg.tracking.contact
    size = [character.height, ct.contact_gap_fraction * character.height, *character.capsule_radii]
    mass = np.concatenate([character.body_mass, character.body_inertia.ravel()])
    # the joint limits are springs of 4x the drive stiffness (newton_model, physics.usda)
    gains = np.concatenate([4.0 * character.stiffness.ravel(), character.damping.ravel(), character.armature.ravel()])
    with np.errstate(all="ignore"):
        finite = [np.all(np.abs(np.asarray(v, dtype=np.float64)) <= FLOAT32_MAX) for v in (size, mass, gains)]
        if not finite[0]:
            raise _derived_error(cfg, "sizes", size, ("target_height_m",))
        if not finite[1]:
            raise _derived_error(cfg, "body masses and inertias", mass, _MASS_OPTIONS)
        if not np.all(character.body_mass >= FLOAT32_TINY):  # 0 kg in float32: no dynamics
            raise _derived_error(cfg, "body masses", character.body_mass, _MASS_OPTIONS, smallest=FLOAT32_TINY)
        if not finite[2]:
            raise _derived_error(cfg, "PD gains", gains, _GAIN_OPTIONS + _MASS_OPTIONS)
    names = _CONTACT_OPTIONS + _MASS_OPTIONS
    try:  # checked by the masses above, so what is left is the stiffness per kg
        material = contact_material(character, ct)
    except ValueError:  # an infinite stiffness or damping
        raise _derived_error(cfg, "contact stiffness and damping", [np.inf], names) from None
    contact = [material.stiffness, material.damping, material.friction_gain]
    with np.errstate(all="ignore"):
        if not np.all(np.abs(np.asarray(contact, dtype=np.float64)) <= FLOAT32_MAX):
            raise _derived_error(cfg, "contact stiffness and damping", contact, names)
    return character


def _check_reference(cfg: TrackConfig, ref) -> None:
    """Raises ValueError when the reference's body positions do not fit float32 (the simulation's numbers)."""
    with np.errstate(all="ignore"):
        if not np.all(np.abs(ref.body_pos) <= FLOAT32_MAX):
            raise _derived_error(cfg, "reference body positions", ref.body_pos, ("target_height_m",))


def _check_outputs(cfg: TrackConfig) -> None:
    """Raises InputError for what in an existing OUTPUT would make the run fail after simulating: a folder where
    a file of the run goes (its removal raised IsADirectoryError), a file where audit/ goes, a folder that cannot
    be written into."""
    out = cfg.output
    try:
        if not out.is_dir():
            return  # make_folder creates it or names the problem
        for name in OUTPUT_FILES:
            path = out / name
            for p in [path, *out.glob(f".{path.stem}.*.tmp{path.suffix}")]:  # atomic_output's temporary names
                if p.is_dir() and not p.is_symlink():
                    raise InputError(p, "output", f"is a folder where the run writes {name}: remove it or choose"
                                     " another --output")  # fmt: skip
        audit = out / "audit"
        if audit.is_symlink() and audit.is_dir():
            raise InputError(audit, "output", "is a link to a folder where the run replaces its audit/ folder: remove"
                             " it or choose another --output")  # fmt: skip
        if cfg.audit and (audit.exists() or audit.is_symlink()) and not audit.is_dir():
            raise InputError(audit, "output", "is a file where the run writes its audit/ folder: remove it, pass"
                             " --no-audit or choose another --output")  # fmt: skip
        source = Path(cfg.motion)
        for name in OUTPUT_FILES:  # the run replaces its own outputs: tracking OUT/tracked.usda overwrote its input
            if source.exists() and (out / name).exists() and (out / name).samefile(source):
                raise InputError(cfg.motion, "motion", f"is the {name} this run writes into --output {out}: choose "
                                 "another --output")  # fmt: skip
        generic = [n for n in ("config.json", "preview.gif") if (out / n).exists()]
        generic += ["audit/"] if audit.is_dir() and any(audit.iterdir()) else []
        if generic and not any((out / n).exists() for n in (*RUN_MARKERS, CHECKPOINT_NAME)):
            # the run removes an earlier run's outputs; names this common were somebody else's files
            marks = ", ".join(RUN_MARKERS)
            raise InputError(out, "output", f"holds {', '.join(generic)} but no {marks} of an earlier track run: "
                             "remove them or choose another --output")  # fmt: skip
        ckpt = out / CHECKPOINT_NAME
        if cfg.method == "projection" and ckpt.is_dir() and not ckpt.is_symlink():
            raise InputError(ckpt, "output", "is a folder where the projection writes its checkpoint: remove it or"
                             " choose another --output")  # fmt: skip
        if not os.access(out, os.W_OK | os.X_OK):
            raise InputError(out, "output", "cannot write into the folder (no permission)")
    except OSError as e:
        raise InputError(out, "output", f"cannot read the folder ({e.strerror or e})") from e


def _stage_lift(character, body_pos: np.ndarray, body_rot: np.ndarray, ground_m: float, gap_m: float) -> float:
    """How far [m] to raise the physics stage's pose so that its lowest capsule point lies at the ground plus the
    contact gap (0 when it lies there or higher).

    The stage pose is the reference pose (mean joint angles) placed at the first simulated frame's root; it can
    reach lower than that frame (the Fox's front paws started 1-1.25 cm below the ground).
    """
    a, b = character.capsule_world(body_pos, body_rot)
    lowest = float(np.min(np.minimum(a[:, 2], b[:, 2]) - character.capsule_radii))
    return max(0.0, ground_m + gap_m - lowest)


def _pose_space_filter(cfg: TrackConfig, rig):
    """The pose-space target filter of ``--pose-space`` and its pose space (or None, None)."""
    if cfg.pose_space is None:
        if cfg.pose_space_strength is not None or cfg.pose_space_all_frames:
            raise ValueError("--pose-space-strength / --pose-space-all-frames: need --pose-space CHECKPOINT")
        return None, None
    # examples/posespace.py sits beside this file: keep this folder off the path so the package is imported
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from posespace import PoseSpace

    strength = cfg.pose_space_strength
    if strength is not None and (isinstance(strength, bool) or not 0.0 <= strength <= 1.0):  # NaN fails too
        raise ValueError(f"--pose-space-strength: must be a diffusion time in [0, 1], got {strength!r}")
    space = PoseSpace.load(cfg.pose_space)
    if strength is not None:
        space = space.with_sampling(project_strength=strength)
    return space.target_filter(rig, only_invalid=not cfg.pose_space_all_frames), space


def _excluded_pairs(space, rig) -> tuple[list[list[str]], str | None]:
    """The part pairs the rig's calibration leaves out of the self-intersection test (by joint name) and a note
    saying so (None when there are none): the filter cannot see an intersection of those parts. Only checkpoints
    calibrated before pair allowances exclude pairs; newer ones test them beyond an allowance."""
    names = space.validators(rig).calibration.excluded_part_names(rig.joint_names)
    if not names:
        return [], None
    rate = space.validator_config.exclusion_rate
    return [list(p) for p in names], (
        f"note: pose space does not test self-intersection between: {', '.join(f'{a}/{b}' for a, b in names)} (its "
        f"calibration excluded them: their proxies overlap in more than {rate:.0%} of the training poses; "
        f"retrain the pose space to test them beyond an allowance instead)"
    )


def _filter_info(cfg: TrackConfig, space, character, ref, target_filter):
    """What the pose-space filter does to the reference's PD targets (the Motion the controller hands it): the
    metrics.json entry and the filtered targets as a rig Motion (written to tracked.usda as a clip)."""
    import numpy as np

    seen = {}

    def spy(targets):
        seen["in"] = targets
        seen["out"] = target_filter(targets)
        return seen["out"]

    apply_target_filter(character, ref, ref.coords, spy)
    rig, before, after = character.rig, seen["in"], seen["out"]
    invalid = ~space.validators(rig).check(space.pose_rig(rig).encode(before)).valid
    info = {
        "pose_space": str(cfg.pose_space),
        "known_skeleton": space.is_known(rig),
        "strength": space.sampling.project_strength,
        "all_frames": cfg.pose_space_all_frames,
        "reference_frames_failing_validators": int(invalid.sum()),
        "reference_frames_projected": int(np.any(after.rotations != before.rotations, axis=(1, 2)).sum()),
        "model_training": space.training,  # steps trained and final loss (None: not recorded in the checkpoint)
    }
    info["excluded_self_intersection_pairs"], note = _excluded_pairs(space, rig)
    # pairs whose proxies overlap routinely in the training poses: tested beyond this depth [m]
    height = space.pose_rig(rig).height
    calibration = space.validators(rig).calibration
    info["self_intersection_pair_allowances_m"] = [
        [a, b, v * height] for a, b, v in calibration.allowance_names(rig.joint_names)
    ]
    print(
        f"pose space {cfg.pose_space}: {info['reference_frames_failing_validators']} of {before.frame_count} reference "
        f"frames fail its validators; the filter changes {info['reference_frames_projected']}"
        + ("" if info["known_skeleton"] else " (a skeleton it was not trained on: zero-shot)")
        + f"; model {space.training_summary()}"
    )
    warning = space.training_warning()
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    if note:
        print(note)
    if cfg.pose_space_all_frames and cfg.method == "projection":
        print("note: --pose-space-all-frames with the projection projects every frame in each MPPI iteration (slow)")
    return info, after


def _project(character, ref, cfg: TrackConfig, checkpoint: ProjectionCheckpoint, target_filter=None):
    """The physics projection with a progress bar and a checkpoint in the output folder."""
    from tqdm import tqdm

    if cfg.resume and checkpoint.path.is_file():
        print(f"resuming from {checkpoint.path}")
    elif cfg.resume:
        print(f"note: no checkpoint in {cfg.output}; starting afresh")
    bar = None  # made at the first report, with its real total (a "0/1" bar stood through a finished resume)

    def progress(done: int, total: int, cost: float) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc="projection", unit="frame", dynamic_ncols=True)
        bar.total = total
        bar.set_postfix(window_cost=f"{cost:.4g}", refresh=False)
        bar.update(done - bar.n)

    try:
        result = project(character, ref, cfg.tracking, cfg.projection, target_filter=target_filter,
                         progress=progress, checkpoint=checkpoint)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    if result.info.get("resumed"):
        print(_resumed_text(result.info["resumed"], result.info["passes"], max(1, cfg.projection.passes)))
    return result


def _resumed_text(resumed: dict, passes_run: int, passes: int) -> str:
    """Where a resumed projection continued: ``resumed`` is ``info["resumed"]`` of :func:`sim.physics.project`
    (``pass``: index of the checkpoint's last pass, ``finished``: that pass is done), ``passes_run`` the passes
    the result holds, ``passes`` the passes asked for (a blown-up pass ends the run early)."""
    done = resumed["pass"] + 1
    if not resumed["finished"]:
        return f"resumed from pass {done} of {passes}, frame {resumed['frame']}"
    if passes_run == done:  # nothing was left to simulate
        return f"resumed from its finished state ({done} of {passes} passes done)"
    return f"resumed after pass {done} of {passes}"


def main(cfg: TrackConfig) -> int:
    try:
        return _run(cfg)
    except KeyboardInterrupt as e:  # while loading or preparing: nothing written
        print(f"interrupted before the simulation: nothing written{_earlier_run_note(cfg.output)}", file=sys.stderr)
        return interrupt_exit_status(e)


def _earlier_run_note(out: Path) -> str:
    if (out / "metrics.json").is_file():
        return f" ({out} still holds the earlier run's outputs)"
    return ""


def _run(cfg: TrackConfig) -> int:
    try:
        check_not_empty(cfg.motion, "--motion", "the clip's source (a file or procedural:NAME)")
        for part in (cfg.reference, cfg.character, cfg.tracking, cfg.projection):
            part.check()  # a bad setting fails here, in one line, before any work
        if cfg.preview_frames < 1:
            raise ValueError(f"--preview-frames: must be at least 1, got {cfg.preview_frames} (--no-preview: none)")
        _check_device(cfg.tracking.solver.device)
        checkpoint = ProjectionCheckpoint(cfg.output / CHECKPOINT_NAME, cfg.checkpoint_interval_s, cfg.resume)
        asset = load_asset(cfg.motion, skeleton=cfg.skeleton)
        clip = asset.clip(cfg.clip)
        _check_length(cfg, clip)
        _check_scale(cfg, asset.rig, clip)
        prepared = prepare_reference(
            asset.rig, clip, cfg.reference, loops=cfg.loops, target_height_m=cfg.target_height_m,
            ground_height_m=cfg.tracking.contact.ground_height_m,
        )  # fmt: skip
        character = _build_character(cfg, prepared)
        ref = reference_trajectory(character, prepared.motion)
        _check_reference(cfg, ref)
        target_filter, space = _pose_space_filter(cfg, prepared.rig)
        _check_outputs(cfg)
        make_folder(cfg.output)  # the inputs are good: fail on the output before a long simulation, not after it
    except RigError as e:  # the library names the rig, not the file it came from
        text = str(e)
        print(f"error: {text if text.startswith(cfg.motion) else f'{cfg.motion}: {text}'}", file=sys.stderr)
        return 2
    except (InputError, ValueError, FileNotFoundError, KeyError) as e:  # KeyError: an unknown clip, listing the others
        print_error(e, cfg, FLAGS)  # naming the flag (--reference.max-fps), not the field (ReferenceConfig.max_fps)
        return 2
    rig = prepared.rig
    if rig.height() > 3.0 and cfg.target_height_m is None:
        print(
            f"warning: {rig.name!r} is {rig.height():.3g} m tall; pass --target-height-m for a real size",
            file=sys.stderr,
        )
    root_motion = "added" if prepared.root_motion_added else "kept"
    print(
        f"{rig.name}: {character.body_count} bodies, {character.total_mass:.3g} kg, height {character.height:.3g} m;"
        f" {ref.frame_count} frames at {ref.fps:g} fps, root motion {root_motion}"
    )
    for remark in character.notes:
        print(f"note: {flag_message(remark, cfg)}")  # CharacterConfig.x -> --character.x
    note = _feasibility_note(character, ref, cfg)
    if note:
        print(note)
    filter_info, filtered_targets = None, None
    if target_filter is not None:
        filter_info, filtered_targets = _filter_info(cfg, space, character, ref, target_filter)
    ckpt = checkpoint.path
    if cfg.method == "pd":
        if cfg.resume:
            print(
                "warning: --resume applies to --method projection only; PD tracking runs from the start",
                file=sys.stderr,
            )
        try:
            result = track(character, ref, cfg.tracking, target_filter=target_filter)
        except KeyboardInterrupt as e:
            print(
                "interrupted during the simulation: nothing written (PD tracking keeps no checkpoint: run it again)"
                + _earlier_run_note(cfg.output),
                file=sys.stderr,
            )
            return interrupt_exit_status(e)
    else:
        try:
            result = _project(character, ref, cfg, checkpoint, target_filter)
        except CheckpointError as e:
            print_error(e, cfg, FLAGS)
            return 2
        except OSError as e:  # the checkpoint could not be written (disk full, permissions)
            print(f"error: {ckpt}: cannot write the checkpoint ({e.strerror or e})", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            if ckpt.is_file():
                print(f"interrupted: continue with --resume (checkpoint {ckpt})", file=sys.stderr)
            else:
                print("interrupted before the first checkpoint was written; nothing to resume", file=sys.stderr)
            return interrupt_exit_status(e)
    writing = False  # set once _write_outputs may have removed or written a file
    try:
        metrics = tracking_metrics(
            character, ref, result, prepared.kinematic_input, cfg.tracking.contact.ground_height_m
        )
        metrics.update(
            method=cfg.method,
            source=cfg.motion,
            clip=clip.name,
            loops=cfg.loops,
            scale=prepared.scale,
            root_motion_added=prepared.root_motion_added,
            solver=result.info.get("solver"),
            substeps=result.info.get("substeps"),
            target_filter=filter_info,
            info=result.info,
        )
        writing = True
        status, report = _write_outputs(cfg, character, prepared, clip.name, result, metrics, filtered_targets)
    except KeyboardInterrupt as e:
        again = _rerun_hint(cfg, ckpt)
        if not writing:  # nothing of this run written, an earlier run's outputs untouched
            print(f"interrupted after the simulation: nothing written{_earlier_run_note(cfg.output)}; {again}",
                  file=sys.stderr)  # fmt: skip
        else:
            print(f"interrupted while writing the outputs: {cfg.output} holds an incomplete run (no metrics.json);"
                  f" {again}", file=sys.stderr)  # fmt: skip
        return interrupt_exit_status(e)
    except (OSError, InputError) as e:  # disk full, permissions changed, a file in the way while writing
        again = _rerun_hint(cfg, ckpt)
        if isinstance(e, OSError):
            where = e.filename if e.filename is not None else cfg.output
            what = f"{where}: cannot write ({e.strerror or e})"
        else:
            what = str(e)
        print(f"error: {what}; {cfg.output} holds an incomplete run (no metrics.json); {again}", file=sys.stderr)
        return 2
    if status:
        return status
    keys = ("body_pos_error_rel", "joint_angle_error_deg", "fell", "max_ground_penetration_m", "foot_skate_ratio",
            "reference_foot_skate_ratio", "max_self_penetration_m", "realtime_factor")  # fmt: skip
    print(
        "  "
        + ", ".join(f"{k}={metrics[k]:.4g}" if isinstance(metrics[k], float) else f"{k}={metrics[k]}" for k in keys)
    )
    print(_written_text(cfg, ckpt.is_file()))
    if report is not None:  # as convert and distill say it
        where = cfg.output / "audit" / "report.json"
        print(f"audit: {audit_verdict(report)} (joint limits from the tracked target; {where})")
    if not result.ok:
        print("warning: the character fell; metrics.json reports success=false", file=sys.stderr)
    return 0


def _rerun_hint(cfg: TrackConfig, ckpt: Path) -> str:
    """How to get the outputs after a run stopped while (or before) writing them."""
    resumable = cfg.method == "projection" and ckpt.is_file()
    return "--resume rewrites the outputs from the checkpoint" if resumable else "run it again"


def _written_text(cfg: TrackConfig, checkpoint: bool) -> str:
    """The final ``wrote OUTPUT/ (...)`` line: every file of the run, the checkpoint when there is one."""
    names = ["tracked.usda", "physics.usda", "metrics.json", "config.json"]
    names += ["preview.gif"] * cfg.preview + ["audit/"] * cfg.audit
    if checkpoint and cfg.method == "projection":
        names.append(f"{CHECKPOINT_NAME} (kept: --resume rewrites the outputs from it)")
    return f"wrote {cfg.output}/ ({', '.join(names)})"


def audit_physical(folder: Path, rig, physical, target, ground_height_m: float, source: str):
    """Audits the physical motion into ``folder`` on the simulated ground, with joint limits from the tracked
    ``target`` (the audit's default, the audited motion's own range, cannot fail). Returns the report."""
    from sim.audit import AuditConfig
    from sim.contact_metrics import ContactConfig as AuditContact
    from sim.contact_metrics import joint_limits_from_motions
    from usd_io import write_audit

    cfg = AuditConfig(contact=AuditContact(ground_height=ground_height_m))
    limits = joint_limits_from_motions(rig.rest_rotations, [target.rotations], cfg.limit_margin_deg, cfg.limit_quantile)
    return write_audit(folder, rig, physical, cfg, limits=limits, source=source)


def _write_outputs(cfg: TrackConfig, character, prepared, clip_name: str, result, metrics: dict, filtered_targets=None):
    """Writes the run's outputs into ``cfg.output``, metrics.json last (with ``"complete": true``), after removing
    an earlier run's; returns the exit status (1: the simulation blew up, only config.json, physics.usda and
    metrics.json) and the audit report (None without one)."""
    out = cfg.output
    _remove_earlier_outputs(out)
    _write_json(out / "config.json", dataclasses.asdict(cfg))
    # the articulation at its zero-coordinate pose (no joint state is authored: Newton starts from zero joint
    # positions, PhysX from the body transforms; they agree on this pose), placed at the first frame's root and
    # raised where it would start in the ground
    contact = contact_material(character, cfg.tracking.contact)
    ground = cfg.tracking.contact.ground_height_m
    stage_pos, stage_rot = character.reference_body_transforms(result.body_pos[0, 0], result.body_rot[0, 0])
    stage_pos[:, 2] += _stage_lift(character, stage_pos, stage_rot, ground, contact.gap_m)
    write_physics_stage(
        out / "physics.usda", character, stage_pos, stage_rot,
        friction=cfg.tracking.contact.friction, restitution=cfg.tracking.contact.restitution,
        ground_height_m=ground, contact=contact, time_step_s=result.info.get("dt_s"),
    )  # fmt: skip
    if result.blowup is not None:
        _write_json(out / "metrics.json", {**metrics, "complete": True})
        print(f"error: {result.blowup}; wrote config.json, physics.usda and metrics.json only", file=sys.stderr)
        return 1, None
    rig = prepared.rig
    target_clip = prepared.motion  # what the controller tracked (the target_* metrics); reference_* is the input's
    target_clip.name = "target"
    result.motion.name = "physical"
    clips = [result.motion, target_clip]
    if filtered_targets is not None:  # the reference's PD targets after the pose-space filter
        filtered_targets.name = "pose_space_targets"
        clips.append(filtered_targets)
    write_usdskel(out / "tracked.usda", rig, clips)
    if cfg.preview:
        render_preview(out / "preview.gif", rig, result.motion, prepared.motion, max_frames=cfg.preview_frames,
                       ground_height=ground, title=f"{rig.name} {clip_name} ({cfg.method})")  # fmt: skip
    report = None
    if cfg.audit:
        source = f"{cfg.motion} ({cfg.method})"
        report = audit_physical(out / "audit", rig, result.motion, prepared.motion, ground, source)
        metrics["audit_passed"] = bool(report.passed)
    metrics["complete"] = True
    _write_json(out / "metrics.json", metrics)
    return 0, report


if __name__ == "__main__":
    import warnings

    warnings.formatwarning = format_warning  # one line, no source echo, flags for the library's API names
    stop_on_sigterm()
    sys.exit(main(tyro.cli(TrackConfig, description=__doc__)))
