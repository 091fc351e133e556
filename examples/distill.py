# Distil a joint trajectory of a rigged character from a text-to-video model (AKD) and write it as UsdSkel.
#
#   Oracle check (CPU, ~3-5 min): recovers the Fox's Walk clip from the rest pose through the whole SDS path
#     .venv/bin/python examples/distill.py --asset ../shared/assets/gltf/Fox.glb --guidance oracle \
#         --oracle-clip Walk --output out/fox_oracle
#   CPU smoke run with a tiny random CogVideoX:
#     .venv/bin/python examples/distill.py --asset procedural:quadruped --guidance tiny --output out/smoke
#   GPU run with released weights from a local diffusers folder:
#     .venv/bin/python examples/distill.py --asset ../shared/assets/gltf/Fox.glb --prompt "a fox jumping" \
#         --guidance cogvideox-2b --guidance-model /models/CogVideoX-2b --device cuda --output out/fox_jump
#
# Exit status: 0 on success; 2 on bad input (asset, clip, settings, device, missing model weights, a checkpoint
# that cannot be continued, an earlier run's checkpoint in OUTPUT without --resume/--overwrite, an OUTPUT file (e.g.
# motion.usda, checkpoint.pt) or OUTPUT/audit that cannot be written: all checked before the optimization; weights
# options given to tiny / oracle guidance, which loads none), with a one-line error; 1 when a step's loss or
# gradient is not finite (the last checkpoint is kept); 130 on Ctrl-C, 143 on SIGTERM (kill, docker stop, a Slurm
# time limit: handled as Ctrl-C is).
"""Distil a motion for a rigged character (glTF / USD / procedural) by video score distillation."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# this file is examples/distill.py: keep its folder off the import path so `distill` is the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402
import tyro  # noqa: E402

from distill.devices import resolve_device  # noqa: E402
from distill.guidance import MODEL_PRESETS, GuidanceKind, GuidanceModelError  # noqa: E402
from distill.optimize import Distiller, ResumeError, check_run_folder  # noqa: E402
from distill.presets import preset  # noqa: E402
from distill.trajectory import sample_clip  # noqa: E402
from sim import RigError  # noqa: E402
from sim.audit import AuditConfig  # noqa: E402
from sim.contact_metrics import joint_limits_from_motions  # noqa: E402
from usd_io import AUDIT_FILES, InputError, interrupt_exit_status, load_asset, stop_on_sigterm, write_audit  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for the examples' shared helpers only
from _example_cli import audit_verdict, check_not_empty, format_warning, print_error  # noqa: E402

sys.path.pop(0)

FLAGS = {
    "DistillConfig.frames": "--frames",
    "DistillConfig.fps": "--fps",
    "OptimConfig.steps": "--steps",
    "OptimConfig.key_count": "--key-count",
    "OptimConfig.seed": "--seed",
    "OptimConfig.checkpoint_every": "--checkpoint-every",
    "OptimConfig.preview_every": "--preview-every",
    "RenderConfig.width": "--width",
    "RenderConfig.height": "--height",
    "DistillConfig.render.width": "--width",  # the video models' 16 px rule
    "DistillConfig.render.height": "--height",
    "CameraConfig.azimuths_deg": "--azimuths",
    "GuidanceConfig.model": "--guidance-model",
    "GuidanceConfig.dtype": "--guidance-dtype",
    "GuidanceConfig.device": "--guidance-device",
    "GuidanceConfig.guidance_scale": "--guidance-scale",
    "LossWeights.pose_prior": "--pose-prior-weight",
}
"""The settings of the run's config (the preset's, DistillConfig) that flags of this CLI set: error lines name the
flag, not the field (``--steps: must be an integer >= 1``, not ``OptimConfig.steps: ...``)."""


@dataclass
class DistillCLI:
    asset: str
    """Character: a .gltf/.glb or .usd/.usda/.usdc file with a skinned mesh, or procedural:NAME."""
    output: Path
    """Run folder: config.json, checkpoint.pt, loss_log.csv, previews/, motion.usda, audit/ (+ oracle_metrics.json)."""
    skeleton: str | None = None
    """USD asset holding several characters: the Skeleton prim path to read (default: the one under the stage's
    defaultPrim; when several remain, the first, with a warning naming the others)."""
    prompt: str = "a fox walking"
    """Text prompt (ignored by the oracle)."""
    guidance: GuidanceKind = "tiny"
    """Video model: cogvideox-2b, cogvideox-5b, wan2.1-1.3b (weights needed), tiny / tiny-wan (random, offline),
    oracle (a teacher that knows renders of --oracle-clip)."""
    guidance_model: str | None = None
    """Local diffusers folder or hub id of the weights (default: the preset's hub id, from the local HF cache)."""
    guidance_dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    """Weights dtype; auto = the model's dtype on CUDA, float32 on CPU."""
    guidance_device: str = "auto"
    """Device of the video model; auto = the --device (videos move to it, their gradients come back)."""
    guidance_allow_download: bool = False
    """Let from_pretrained download missing weights (needs internet)."""
    guidance_scale: float | None = None
    """Classifier-free guidance scale (default: the preset's)."""
    oracle_clip: str | None = None
    """Oracle: the asset's clip whose renders are the target (looped when shorter than the run, each cycle
    carrying on from where the last ended)."""
    frames: int | None = None
    """Frames to distil, at least 2 (default: the preset's; 13 for the oracle, the model's native count otherwise)."""
    fps: float | None = None
    """Frame rate [1/s] (default: the preset's)."""
    width: int | None = None
    """Render width [px] (default: the preset's)."""
    height: int | None = None
    """Render height [px] (default: the preset's)."""
    azimuths: tuple[float, ...] | None = None
    """Camera azimuths [deg], one view each per step (default: the preset's)."""
    steps: int | None = None
    """Optimization steps (default: the preset's)."""
    key_count: int | None = None
    """Catmull-Rom keyframes of the trajectory (default: every frame is a key)."""
    seed: int = 0
    """Seed of the per-step timesteps and noise."""
    checkpoint_every: int | None = None
    """Steps between checkpoints (default: the preset's)."""
    preview_every: int | None = None
    """Steps between preview GIFs (default: the preset's; 0 = final only)."""
    resume: bool = False
    """Continue from OUTPUT/checkpoint.pt (the config, character and oracle target must match)."""
    overwrite: bool = False
    """Start afresh in an OUTPUT that holds an earlier run's checkpoint (it and that run's outputs are replaced)."""
    device: str = "cpu"
    """Device of the trajectory, skinning and renderer (cpu, cuda, cuda:N, or auto: cuda when available)."""
    threads: int | None = None
    """Torch CPU threads (default: 1 for the oracle on CPU, whose small torch ops lose more to thread overhead
    than they gain, measured 2-4x on a busy 2-core machine; torch's default otherwise)."""
    pose_prior: Path | None = None
    """A pose-space checkpoint (examples/posespace.py train) as the pose-prior loss term: its validators' smooth loss
    (self-intersection, hyperextension, twist) plus a small pull towards its learned pose distribution."""
    pose_prior_weight: float | None = None
    """Weight of the pose-prior term (default: the preset's ``weights.pose_prior``; needs --pose-prior)."""
    quiet: bool = False
    """No progress bar."""
    audit: bool = True
    """Write the plausibility audit of the distilled motion to OUTPUT/audit/ (report.json, timeline.png,
    worst_frame.png)."""


def build_config(cli: DistillCLI):
    """The preset of ``cli.guidance`` with the command line's overrides applied."""
    cfg = preset(cli.guidance, cli.prompt)
    g = dataclasses.replace(
        cfg.guidance,
        model=cli.guidance_model,
        dtype=cli.guidance_dtype,
        device=cli.guidance_device,
        allow_download=cli.guidance_allow_download,
        **({} if cli.guidance_scale is None else {"guidance_scale": cli.guidance_scale}),
    )
    r = cfg.render
    r = dataclasses.replace(
        r, width=r.width if cli.width is None else cli.width, height=r.height if cli.height is None else cli.height
    )
    if cli.azimuths is not None:
        r = dataclasses.replace(r, camera=dataclasses.replace(r.camera, azimuths_deg=tuple(cli.azimuths)))
    o = dataclasses.replace(cfg.optim, seed=cli.seed, key_count=cli.key_count)
    for name in ("steps", "checkpoint_every", "preview_every"):
        if getattr(cli, name) is not None:
            o = dataclasses.replace(o, **{name: getattr(cli, name)})
    frames = cfg.frames if cli.frames is None else cli.frames
    fps = cfg.fps if cli.fps is None else cli.fps
    w = cfg.weights
    if cli.pose_prior_weight is not None:
        if not 0.0 <= cli.pose_prior_weight < float("inf"):
            raise ValueError(f"--pose-prior-weight: must be a finite number >= 0, got {cli.pose_prior_weight}")
        w = dataclasses.replace(w, pose_prior=cli.pose_prior_weight)
    return dataclasses.replace(cfg, frames=frames, fps=fps, render=r, guidance=g, optim=o, weights=w)


def _check_cli(cli: DistillCLI) -> None:
    """The checks of options that only make sense together (ValueError naming the option)."""
    if cli.threads is not None and cli.threads < 1:
        raise ValueError(f"--threads: must be >= 1, got {cli.threads}")
    if cli.pose_prior_weight is not None and cli.pose_prior is None:
        raise ValueError("--pose-prior-weight: needs --pose-prior CHECKPOINT")
    if cli.oracle_clip is not None and cli.guidance != "oracle":
        raise ValueError(f"--oracle-clip: only the oracle uses a target clip (--guidance oracle), not {cli.guidance}")
    if cli.guidance == "oracle" and cli.oracle_clip is None:
        raise ValueError("--guidance oracle needs --oracle-clip NAME")
    if cli.resume and cli.overwrite:
        raise ValueError("--resume and --overwrite: choose one (continue the checkpoint, or replace it)")
    if cli.guidance not in MODEL_PRESETS:  # tiny, tiny-wan, oracle: built here, no weights to load
        released = ", ".join(MODEL_PRESETS)
        for flag, given in (
            ("--guidance-model", cli.guidance_model is not None),
            ("--guidance-dtype", cli.guidance_dtype != "auto"),
            ("--guidance-allow-download", cli.guidance_allow_download),
        ):
            if given:
                raise ValueError(f"{flag}: only a released model's weights are loaded (--guidance {released}), "
                                 f"not {cli.guidance}'s")  # fmt: skip
    if cli.guidance == "oracle" and cli.guidance_scale is not None:
        raise ValueError("--guidance-scale: the oracle ignores the prompt, so it has no classifier-free guidance scale")


def _check_audit_folder(cli: DistillCLI) -> None:
    """InputError when OUTPUT/audit cannot take the audit (a file there, or a folder where one of its files goes):
    found before the optimization, not after it. Creates nothing."""
    audit_dir = cli.output / "audit"
    try:
        if audit_dir.exists() and not audit_dir.is_dir():
            raise InputError(audit_dir, "output", "the audit folder is a file (or pass --no-audit)")
        for name in AUDIT_FILES:
            if (audit_dir / name).is_dir():
                raise InputError(audit_dir / name, "output", "is a folder, not a file (or pass --no-audit)")
    except OSError as e:  # a parent that cannot be entered (Path.exists re-raises EACCES)
        raise InputError(audit_dir, "output", f"cannot reach the folder ({e.strerror or e})") from e


def main(cli: DistillCLI) -> int:
    try:
        check_not_empty(cli.asset, "--asset", "the character (a file or procedural:NAME)")
        _check_cli(cli)
        device = resolve_device(cli.device, "--device")
        if cli.guidance_device != "auto":
            resolve_device(cli.guidance_device, "--guidance-device")
        cfg = build_config(cli)  # every setting is checked here (ValueError naming the field)
    except ValueError as e:
        print_error(e, cli, FLAGS)
        return 2
    if cli.threads is not None:
        torch.set_num_threads(cli.threads)
    elif cli.guidance == "oracle" and device.type == "cpu":
        torch.set_num_threads(1)
    ckpt = cli.output / "checkpoint.pt"
    try:
        # OUTPUT/motion.usda or checkpoint.pt a folder failed after the whole optimization (or its first checkpoint)
        check_run_folder(cli.output, cfg, oracle=cli.guidance == "oracle")
        if cli.audit:
            _check_audit_folder(cli)
        asset = load_asset(cli.asset, skeleton=cli.skeleton)
        if not asset.rig.meshes:
            raise InputError(cli.asset, "meshes", "the character has no skinned mesh to render")
        oracle = None
        if cli.guidance == "oracle":
            oracle = sample_clip(asset.clip(cli.oracle_clip), cfg.frames, cfg.fps, rig=asset.rig)
        prior, prior_warning = None, None
        if cli.pose_prior is not None:
            from posespace import PoseSpace

            space = PoseSpace.load(cli.pose_prior)
            prior_warning = space.training_warning()  # e.g. trained for only 3 steps, as track and posespace say
            prior = space.pose_prior(asset.rig)
        distiller = Distiller(
            asset.rig, cfg, cli.output, oracle_motion=oracle, device=device, pose_prior=prior, source=cli.asset
        )
    except (InputError, RigError, GuidanceModelError, FileNotFoundError, ValueError, KeyError) as e:
        print_error(e, cli, FLAGS)  # ValueError: settings only the models can check, a bad pose space; KeyError: clip
        return 2
    if prior_warning:
        print(f"warning: {prior_warning}", file=sys.stderr)
    try:
        # starting afresh also removes an earlier run's audit, which would pass for this one's
        stale = [f"audit/{name}" for name in AUDIT_FILES]
        result = distiller.run(resume=cli.resume, progress=not cli.quiet, overwrite=cli.overwrite, stale=stale)
    except (ResumeError, InputError) as e:
        print_error(e, cli, FLAGS)  # "continue it with --resume", without the API's "(resume=True)"
        return 2
    except FloatingPointError as e:  # a non-finite loss or gradient; nothing of that step was saved
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        if ckpt.is_file():
            print(f"interrupted: continue with --resume (checkpoint {ckpt})", file=sys.stderr)
        else:
            print("interrupted before the first checkpoint was written; nothing to resume", file=sys.stderr)
        return interrupt_exit_status(e)
    seconds = sum(r["seconds"] for r in result.log)
    print(f"wrote {cli.output / 'motion.usda'}: {cfg.frames} frames at {cfg.fps:g} fps, {len(result.log)} steps")
    print(f"optimization time {seconds:.1f} s ({result.steps_run} steps in this call)")
    if result.oracle_metrics is not None:
        m = result.oracle_metrics
        print(
            f"oracle: mean joint-angle error {m['mean_joint_angle_deg']:.2f} deg (all joints; "
            f"{m['mean_joint_angle_deg_optimized_joints']:.2f} over the optimized ones), root-path error "
            f"{100 * m['root_path_error']:.2f}% of body length ({m['root_path_error_m']:.4g} m of "
            f"{m['body_length_m']:.4g} m)"
        )
    if cli.audit:
        return _audit(cli, asset, result.motion)
    return 0


def _audit(cli: DistillCLI, asset, motion) -> int:
    """Audits the distilled motion; joint limits come from the asset's own clips (the motion's own range, the
    audit's default, cannot fail on a whole-clip error)."""
    limits, basis = None, "the distilled motion itself"
    if asset.clips:
        audit_cfg = AuditConfig()
        rotations = [c.rotations for c in asset.clips.values()]
        limits = joint_limits_from_motions(
            asset.rig.rest_rotations, rotations, audit_cfg.limit_margin_deg, audit_cfg.limit_quantile
        )
        basis = f"the asset's {len(rotations)} clip(s)"
    audit_dir = cli.output / "audit"

    def remove_report() -> None:  # an earlier (resumed run) or half-written report would pass for this motion's
        for name in AUDIT_FILES:
            if (audit_dir / name).is_file():
                (audit_dir / name).unlink()

    try:
        remove_report()
        report = write_audit(audit_dir, asset.rig, motion, limits=limits, source=f"{cli.asset} (distilled)")
    except InputError as e:  # e.g. no space left (OUTPUT/audit being a file is refused before the optimization)
        print_error(e, cli)
        return 2
    except (RigError, ValueError) as e:  # a motion the audit cannot measure; the run's outputs are kept
        print(f"error: {cli.asset}: audit: {e} (the distilled motion and the checkpoint are kept)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        remove_report()
        raise
    print(f"audit: {audit_verdict(report)} (joint limits from {basis}; {cli.output / 'audit' / 'report.json'})")
    return 0


if __name__ == "__main__":
    import warnings

    warnings.formatwarning = format_warning  # one line, no source echo, flags for the library's API names
    stop_on_sigterm()
    cli = tyro.cli(DistillCLI, description=__doc__)
    try:
        status = main(cli)
    except KeyboardInterrupt as e:  # outside the optimization (loading the models, the audit): one line, no traceback
        ckpt = cli.output / "checkpoint.pt"
        resume = f"continue with --resume (checkpoint {ckpt})" if ckpt.is_file() else "nothing to resume"
        print(f"interrupted: {resume}", file=sys.stderr)
        status = interrupt_exit_status(e)
    sys.exit(status)
