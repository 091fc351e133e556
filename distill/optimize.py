"""The distillation loop: render the trajectory, score it with video SDS, regularize, step Adam.

Every step (``p`` = progress in [0, 1])::

    pose  = trajectory()                                  # body-root translation + 6D rotations per frame
    world = FK(pose); points, normals = LBS(world)        # Warp, through sim.torch_ops.TorchRig
    video = render(points, normals, follow cameras)       # Warp soft rasterizer, B views
    L = w_sds SDS(video, p) + w_smooth smoothness + w_ground ground + w_self self-collision (+ w_prior prior)

Outputs in the run folder: ``config.json`` (the resolved config, the character's fingerprint and the oracle
target's digest), ``checkpoint.pt`` (every N steps and at the end; ``resume=True`` continues from it, and a fresh
run refuses to overwrite it unless asked to), ``loss_log.csv`` (every loss term per step), ``previews/*.gif``,
``motion.usda`` (UsdSkel: the rig with the distilled clip) and, for oracle runs, ``oracle_metrics.json``.

A step whose loss or gradient is not finite (a degenerate render, a broken model) raises ``FloatingPointError``
before the optimizer moves and before any checkpoint is written: the last checkpoint stays resumable.

Determinism: each step draws its timestep and noise from a generator seeded by ``(seed, step)``, the Warp CPU
kernels accumulate in a fixed order, and the checkpoint holds the trajectory, the Adam state and the log, so a
resumed run retraces the unbroken one.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from sim import Motion, Rig, RigError
from sim._numbers import is_finite_real, plain
from sim.torch_ops import TorchRig

from ._run_state import (
    RENDERER_VERSION,
    ResumeError,
    clear_derived_outputs,
    motion_digest,
    read_checkpoint,
    rig_fingerprint,
)
from .devices import resolve_device
from .guidance import GuidanceConfig, VideoSDS, build_guidance, step_generator
from .losses import PosePrior, SelfCollisionCapsules, ground_penalty, smoothness
from .renderer import RenderConfig, RenderResult, VideoRenderer
from .trajectory import Trajectory

__all__ = [
    "DistillConfig",
    "DistillResult",
    "Distiller",
    "LossWeights",
    "OptimConfig",
    "ResumeError",
    "check_run_folder",
    "config_to_dict",
]


LOSS_TERMS = ("sds", "smoothness", "ground", "self_collision", "pose_prior")
SOFTNESS_LEVELS = 8
"""The coarse-to-fine softness decays in this many geometric steps."""
LOSSES_VERSION = 2
"""Version of the loss terms' definitions, recorded in config.json and compared on resume (a weight's meaning
changes with it): 2 measures smoothness per second (squared accelerations [body lengths^2 / s^4]), 1 (checkpoints
without the key) per frame."""
MIN_COVERAGE_PX = 1.0
"""A view whose character covers fewer pixels (summed alpha) than this in a frame is reported at the start."""


@dataclass(frozen=True)
class LossWeights:
    """Weights of the loss terms (see :mod:`distill.losses`)."""

    sds: float = 1.0
    """Score distillation."""
    smoothness: float = 100.0 / 12.0**4
    """Mean squared acceleration of world joint positions [body lengths^2 / s^4] (:func:`distill.losses.smoothness`).
    The default, 100 / 12^4, weighs a 12 fps run (DistillConfig's and the oracle preset's rate) exactly as the
    earlier weight 100 did the per-frame second differences; at other rates it weighs the same motion the same."""
    ground: float = 100.0
    """Squared depth of skinned points below the ground [body lengths^2], summed over the vertices: the term grows
    with the mesh's vertex count, so scale this weight by V0 / V to treat a mesh of V vertices as one of V0
    (:func:`distill.losses.ground_penalty`)."""
    self_collision: float = 10.0
    """Squared overlap of capsules of distant body parts [body lengths^2]."""
    pose_prior: float = 1.0
    """The pose-prior hook's value (ignored when no hook is given)."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _check_number(f"LossWeights.{f.name}", getattr(self, f.name), positive=False)
            _set_float(self, f.name)


@dataclass(frozen=True)
class OptimConfig:
    """Adam and the schedules of the run."""

    steps: int = 400
    """Optimization steps."""
    lr_rotation: float = 0.02
    """Adam step size of the 6D rotation parameters [unitless]."""
    lr_translation: float = 0.005
    """Adam step size of the body-root translation [body lengths]."""
    lr_final_fraction: float = 0.1
    """Cosine decay of both step sizes down to this fraction at the last step."""
    key_count: int | None = None
    """Spline keys of the trajectory (None: every frame is a key)."""
    sigma_start: float | None = None
    """Coarse-to-fine: raster softness [px^2 at full resolution] at step 0, decaying geometrically (in 8 levels)
    to render.raster.sigma over the coarse phase (None: constant)."""
    coarse_fraction: float = 0.5
    """Fraction of the steps over which the softness decays (the coarse phase)."""
    coarse_scale: float = 1.0
    """Render resolution factor during the coarse phase (softness in pixels scales with its square), e.g. 0.5
    renders the coarse phase at half resolution, ~4x cheaper."""
    seed: int = 0
    """Seed of the per-step random streams (timesteps, noise)."""
    checkpoint_every: int = 50
    """Steps between checkpoints (the last step always writes one)."""
    preview_every: int = 100
    """Steps between preview renders (0: only the final one)."""
    preview_format: Literal["gif", "mp4"] = "gif"
    """Preview file format (mp4 needs imageio-ffmpeg)."""
    oracle_eval_every: int = 25
    """Oracle runs: steps between evaluations of the error against the target motion."""

    def __post_init__(self):
        for name, low in (("steps", 1), ("checkpoint_every", 1), ("preview_every", 0), ("oracle_eval_every", 1)):
            _check_int(f"OptimConfig.{name}", getattr(self, name), low)
        # any integer (the step streams take it modulo 2^63); None, 1.5 or "7" failed at step 0 or were truncated
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"OptimConfig.seed: must be an integer, got {self.seed!r}")
        if self.preview_format not in ("gif", "mp4"):  # "txt" failed after the whole run, "png" wrote a still
            raise ValueError(f"OptimConfig.preview_format: must be 'gif' or 'mp4', got {self.preview_format!r}")
        if self.key_count is not None:
            _check_int("OptimConfig.key_count", self.key_count, 2)
        for name in ("lr_rotation", "lr_translation"):
            _check_number(f"OptimConfig.{name}", getattr(self, name), positive=True)
        for name in ("lr_final_fraction", "coarse_fraction"):
            _check_number(f"OptimConfig.{name}", getattr(self, name), positive=False)
            if getattr(self, name) > 1.0:  # a coarse phase past the last step never reached the target softness
                raise ValueError(f"OptimConfig.{name}: must be a fraction in [0, 1], got {getattr(self, name)!r}")
        _check_number("OptimConfig.coarse_scale", self.coarse_scale, positive=True)
        if self.sigma_start is not None:
            _check_number("OptimConfig.sigma_start", self.sigma_start, positive=True)
        # a NumPy scalar (np.float32(0.02), a value computed with NumPy) reached Adam's param groups, the log and
        # the checkpoint, which torch.load(weights_only=True) then refused on resume: plain floats from here on
        for name in ("lr_rotation", "lr_translation", "lr_final_fraction", "coarse_fraction", "coarse_scale"):
            _set_float(self, name)
        if self.sigma_start is not None:
            _set_float(self, "sigma_start")


@dataclass(frozen=True)
class DistillConfig:
    """A distillation run."""

    prompt: str = "a fox walking"
    """Text prompt."""
    frames: int = 13
    """Frames of the trajectory, at least 2 (a motion; CogVideoX and Wan need 4k + 1)."""
    fps: float = 12.0
    """Frame rate of the trajectory and the rendered videos [1/s]."""
    render: RenderConfig = field(default_factory=RenderConfig)
    """Renderer settings."""
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig)
    """Video model and SDS settings."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimizer and schedules."""
    weights: LossWeights = field(default_factory=LossWeights)
    """Loss weights."""

    def __post_init__(self):
        _check_int("DistillConfig.frames", self.frames, 2)  # one frame is a pose, not a motion
        _check_number("DistillConfig.fps", self.fps, positive=True)
        _set_float(self, "fps")  # a NumPy scalar reached the motions' frame rate and the checkpoint
        if self.guidance.kind != "oracle":
            self._check_video_size()
        if self.guidance.kind != "oracle" and (self.frames - 1) % 4 != 0:
            # the video VAEs encode the first frame alone, then 4 frames per latent frame: Wan would drop the
            # extra frames (zero gradient), CogVideoX would mix the first frame with its neighbours
            raise ValueError(
                f"DistillConfig.frames: {self.guidance.kind} needs 4k + 1 frames (the video VAE's temporal "
                f"compression), got {self.frames}; e.g. {max(5, 4 * ((self.frames - 1) // 4) + 1)} or "
                f"{max(9, 4 * ((self.frames - 1) // 4 + 1) + 1)}"
            )

    def _check_video_size(self) -> None:
        """The video VAEs downsample 8x and the transformers take 2x2 patches: the encoded size must be a multiple of
        16 px (36 px floored to 4x4 latents, leaving 4 px unguided; 40 px failed at step 0).

        The error names the field to change (``DistillConfig.render.width:``, or ``.height`` when only the height is
        off), so a CLI maps it to its flag."""
        g, r, o = self.guidance, self.render, self.optim
        # (what is encoded, the fields that set its width and height, width, height)
        sizes = [("the render size", "render.width", "render.height", r.width, r.height)]
        if o.coarse_scale != 1.0 and o.coarse_fraction > 0:  # no coarse phase: never rendered at that size
            cw, ch = max(1, round(r.width * o.coarse_scale)), max(1, round(r.height * o.coarse_scale))
            what = f"the coarse phase's size (render size {r.width}x{r.height} x {o.coarse_scale:g})"
            sizes.append((what, "optim.coarse_scale", "optim.coarse_scale", cw, ch))
        if g.model_height is not None:
            sizes = [
                ("the model's size", "guidance.model_width", "guidance.model_height", g.model_width, g.model_height)
            ]
        m = VIDEO_SIZE_MULTIPLE
        for what, width_field, height_field, w, h in sizes:
            if w % m or h % m:
                near = lambda x: f"{m * (x // m)} or {m * (x // m + 1)}" if x > m else f"{m}"  # noqa: E731
                field_name = width_field if w % m else height_field
                hint = ", ".join(f"{n} {near(x)}" for n, x in (("width", w), ("height", h)) if x % m)
                raise ValueError(
                    f"DistillConfig.{field_name}: {g.kind} needs multiples of {m} px (8x VAE downsampling, 2x2 "
                    f"patches) for {what}, got {w}x{h}; e.g. {hint}"
                )


VIDEO_SIZE_MULTIPLE = 16
"""Pixels per transformer patch of the video models (8x VAE downsampling x 2x2 patches)."""


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")


def _check_number(name: str, value, positive: bool) -> None:
    # one rule with the render settings: NumPy scalars are numbers, bools are not (sds=True weighed 1)
    ok = is_finite_real(value) and (value > 0 if positive else value >= 0)
    if not ok:
        raise ValueError(f"{name}: must be a finite number {'>' if positive else '>='} 0, got {value!r}")


def _set_float(cfg, name: str) -> None:
    """Stores field ``name`` of a frozen config as a Python float (the value is checked to be a real number)."""
    object.__setattr__(cfg, name, float(getattr(cfg, name)))


def config_to_dict(cfg) -> dict:
    """A JSON-ready dict of a (nested) config dataclass (NumPy scalars as the numbers they hold, not strings)."""
    return json.loads(json.dumps(plain(dataclasses.asdict(cfg)), default=str))


def check_run_folder(output_dir: str | Path, config: DistillConfig, oracle: bool = False) -> None:
    """Raises ``usd_io.InputError`` naming the first file a run of ``config`` could not write in run folder
    ``output_dir``: the folder (or a parent) is a file, ``previews`` is a file, or a folder sits where an output file
    goes (``checkpoint.pt``, ``motion.usda``, a preview, ...). :meth:`Distiller.run` checks this before its first
    step (a ``motion.usda`` folder failed after the whole optimization, a ``checkpoint.pt`` folder at the first
    checkpoint); a caller may check it before loading the models. Creates nothing.

    Args:
        oracle: the run writes ``oracle_metrics.json`` too.
    """
    from usd_io import InputError, check_folder

    out, o = Path(output_dir), config.optim
    names = ["config.json", "checkpoint.pt", "loss_log.csv", "motion.usda"]
    names += ["oracle_metrics.json"] if oracle else []
    steps = range(0, o.steps, o.preview_every) if o.preview_every else range(0)
    names += [f"previews/{n}.{o.preview_format}" for n in ("final", *(f"step_{s:05d}" for s in steps))]
    if not check_folder(out):
        return  # created by the run: nothing in it yet
    try:
        previews = out / "previews"
        if previews.exists() and not previews.is_dir():
            raise InputError(previews, "output", "the previews folder is a file, not a folder")
        for name in names:
            if (out / name).is_dir():
                raise InputError(out / name, "output", "is a folder, not a file")
    except OSError as e:  # a parent that cannot be entered (Path.exists re-raises EACCES)
        raise InputError(out, "output", f"cannot reach the folder ({e.strerror or e})") from e


@dataclass
class DistillResult:
    """What a run produced.

    Attributes:
        motion: the distilled motion.
        log: one dict per step (step, every loss term, total, timestep, lr_scale (the step sizes' fraction of
            their base), sigma, seconds).
        output_dir: the run folder.
        steps_run: steps executed by this call (0 when a finished checkpoint was resumed).
        oracle_metrics: errors against the oracle's target motion (oracle runs).
    """

    motion: Motion
    log: list[dict]
    output_dir: Path
    steps_run: int
    oracle_metrics: dict | None = None


class Distiller:
    """One distillation run of a rig (see the module docstring).

    Attributes:
        trajectory: the optimized trajectory.
        renderer: the video renderer.
        guidance: the SDS guidance.
    """

    def __init__(
        self,
        rig: Rig,
        config: DistillConfig,
        output_dir: str | Path,
        init: Motion | None = None,
        oracle_motion: Motion | None = None,
        pose_prior: PosePrior | None = None,
        guidance: VideoSDS | None = None,
        device: str | torch.device = "cpu",
        source: str | None = None,
    ):
        """Prepares a run.

        Args:
            rig: the character (with a skinned mesh).
            config: the run's configuration.
            output_dir: the run folder (created).
            init: initial motion (default: the rest pose held for ``config.frames`` frames at ``config.fps``).
            oracle_motion: the oracle's target motion (``config.guidance.kind == "oracle"``), same frame count.
            pose_prior: optional pose-prior callable (see :data:`distill.losses.PosePrior`).
            guidance: a prebuilt guidance (overrides ``config.guidance``).
            device: torch device of the trajectory and renderer.
            source: where the character came from (a path, ``procedural:NAME``), recorded in config.json; a
                resume compares the rig's fingerprint, not this.
        """
        self.rig, self.config, self.source = rig, config, source
        if config.optim.preview_format == "mp4":
            try:
                import imageio_ffmpeg  # noqa: F401
            except ImportError:
                raise ValueError("preview_format 'mp4' needs imageio-ffmpeg (pip install imageio-ffmpeg)") from None
        self.output_dir = Path(output_dir)
        self.device = resolve_device(device, "device")
        self.trig = TorchRig(rig, device=self.device)
        init = init if init is not None else Motion.rest(rig, config.frames, config.fps)
        for name, clip in (("init", init), ("oracle_motion", oracle_motion)):
            if clip is not None and clip.frame_count != config.frames:
                raise ValueError(f"{name}: {clip.frame_count} frames, config.frames is {config.frames}")
            if clip is not None and not math.isclose(clip.fps, config.fps, rel_tol=1e-6):
                # the trajectory, its renders and motion.usda would play at the clip's rate, config.json at the other
                raise ValueError(f"{name}: {clip.fps:g} fps, config.fps is {config.fps:g} (resample the clip first)")
            if clip is not None and not clip.is_uniform():
                # rendered (camera follow) at its own times, while smoothness and the video model assume 1 / fps
                raise ValueError(f"{name}: key times are not on the 1/fps grid (resample the clip first, e.g. "
                                 "distill.sample_clip)")  # fmt: skip
            if clip is not None:  # guidance other than the oracle's failed after a whole step, not naming it
                try:
                    clip.check_rig(rig)
                except RigError as e:
                    raise RigError(f"{name}: {e}") from None
        self.trajectory = Trajectory(rig, init, config.optim.key_count).to(self.device)
        self.renderer = VideoRenderer(rig, config.render, device=self.device, body_root=self.trajectory.body_root)
        self.body_length = self.renderer.body_length
        self.self_collision = SelfCollisionCapsules(rig)
        self.pose_prior = pose_prior
        # the prior's identity (its ``key`` attribute, e.g. PoseSpace.pose_prior's) is part of the run's config
        self.pose_prior_key = None if pose_prior is None else str(getattr(pose_prior, "key", "unnamed callable"))
        self.oracle_motion = oracle_motion
        if guidance is None:
            target = None
            if config.guidance.kind == "oracle":
                if oracle_motion is None:
                    raise ValueError("oracle guidance needs oracle_motion (the motion whose renders are the target)")
                target = self.render_motion(oracle_motion).detach()
            # the guidance runs where config.guidance.device says; 'auto' follows the trajectory's device
            device = str(self.device) if config.guidance.device == "auto" else None
            guidance = build_guidance(config.guidance, config.prompt, oracle_target=target, device=device)
        self.guidance = guidance
        o = config.optim
        self.optimizer = torch.optim.Adam(
            [
                {"params": [self.trajectory.rotations_6d], "lr": o.lr_rotation},
                {"params": [self.trajectory.translation], "lr": o.lr_translation * self.body_length},
            ]
        )
        self._base_lr = [g["lr"] for g in self.optimizer.param_groups]
        # what a fresh start restores: a second run() with overwrite on this object continued the first one's
        # trajectory and Adam moments
        self._fresh_state = copy.deepcopy((self.trajectory.state_dict(), self.optimizer.state_dict()))

    # -- rendering ------------------------------------------------------------------------------------
    def render_motion(self, motion: Motion) -> torch.Tensor:
        """Renders a motion of this rig with the run's renderer, shape (B, F, 3, H, W)."""
        traj = Trajectory(self.rig, motion).to(self.device)
        with torch.no_grad():
            pose = traj()
            world = traj.world(self.trig, pose)
            points, normals = self.trig.skin(world)
            return self.renderer.render(points, normals, world[:, traj.body_root], traj.times).video

    # -- schedules -----------------------------------------------------------------------------------
    def _progress(self, step: int) -> float:
        return step / max(self.config.optim.steps - 1, 1)

    def _set_schedules(self, step: int) -> tuple[float, float]:
        o, p, r = self.config.optim, self._progress(step), self.config.render
        scale = o.lr_final_fraction + (1.0 - o.lr_final_fraction) * 0.5 * (1.0 + math.cos(math.pi * p))
        for group, base in zip(self.optimizer.param_groups, self._base_lr):
            group["lr"] = base * scale
        sigma = r.raster.sigma
        coarse = p < o.coarse_fraction
        if o.sigma_start is not None:
            # geometric decay in SOFTNESS_LEVELS steps (the oracle re-renders its target only when it changes)
            c = math.floor(min(p / max(o.coarse_fraction, 1e-9), 1.0) * SOFTNESS_LEVELS) / SOFTNESS_LEVELS
            sigma = o.sigma_start * (sigma / o.sigma_start) ** c
        res = o.coarse_scale if coarse else 1.0
        width, height = max(1, round(r.width * res)), max(1, round(r.height * res))
        sigma_px = sigma * res**2
        now = self.renderer.config
        if (sigma_px, width, height) != (now.raster.sigma, now.width, now.height):
            raster = dataclasses.replace(now.raster, sigma=sigma_px)
            self.renderer.config = dataclasses.replace(now, raster=raster, width=width, height=height)
            if self.oracle_motion is not None and self.config.guidance.kind == "oracle":
                self._retarget_oracle()
        return scale, sigma

    def _retarget_oracle(self) -> None:
        """Re-renders the oracle's target at the current softness (the teacher sees renders like the student's)."""
        target = self.render_motion(self.oracle_motion)
        with torch.no_grad():
            self.guidance.transformer.target = self.guidance.encode(target.to(self.guidance.device))

    # -- the loop ------------------------------------------------------------------------------------
    def loss_terms(self, step: int) -> tuple[dict[str, torch.Tensor], RenderResult, float]:
        """Every loss term of the current trajectory at ``step``, the renders and the SDS timestep."""
        pose = self.trajectory()
        world = self.trajectory.world(self.trig, pose)
        points, normals = self.trig.skin(world)
        render = self.renderer.render(points, normals, world[:, self.trajectory.body_root], self.trajectory.times)
        sds = self.guidance(render.video, self._progress(step), step_generator(self.config.optim.seed, step))
        terms = {
            "sds": sds.loss,
            "smoothness": smoothness(world, self.body_length, self.config.fps),
            "ground": ground_penalty(points, self.renderer.ground_z, self.body_length),
            "self_collision": self.self_collision(world),
        }
        if self.pose_prior is not None:
            terms["pose_prior"] = self.pose_prior(pose.rotations, world)
        return terms, render, sds.timestep

    def run(
        self, resume: bool = False, stop_after: int | None = None, progress: bool = True,
        callback: Callable[[int, dict], None] | None = None, overwrite: bool = False, stale: Sequence[str] = (),
    ) -> DistillResult:  # fmt: skip
        """Runs (or resumes) the optimization.

        Args:
            resume: continue from ``checkpoint.pt`` in the run folder when it exists.
            stop_after: stop (as if interrupted, after the step's checkpoint logic) once this many steps are done.
            progress: show a tqdm progress bar with every loss term.
            callback: called with ``(step, log row)`` after every step.
            overwrite: start afresh even where the folder holds an earlier run's checkpoint (it is replaced).
            stale: further files of the folder (relative paths, e.g. an audit the caller writes afterwards) that a
                fresh start removes along with an earlier run's derived outputs.

        Raises:
            usd_io.InputError: an output of the run folder cannot be written (:func:`check_run_folder`; found before
                the first step).
            ResumeError: the checkpoint cannot be continued, or (without ``resume`` or ``overwrite``) the folder
                holds an earlier run's checkpoint.
            FloatingPointError: a step's loss or gradient is not finite (nothing of that step is saved).
        """
        from tqdm import tqdm

        cfg, o = self.config, self.config.optim
        from usd_io import atomic_output, make_folder

        check_run_folder(self.output_dir, cfg, oracle=self.oracle_motion is not None)  # not after the whole run
        out = make_folder(self.output_dir)
        ckpt = out / "checkpoint.pt"
        start, log = 0, []
        if resume and ckpt.is_file():
            start, log = self._load_checkpoint(ckpt)
        else:
            if resume:  # e.g. a typo in --output, or a first run of a job that always passes --resume
                warnings.warn(f"{ckpt}: no checkpoint to resume: starting from step 0", stacklevel=2)
            if ckpt.is_file() and not overwrite:
                raise ResumeError(
                    f"{ckpt}: the folder holds an earlier run's checkpoint; continue it with --resume (resume=True), "
                    "start afresh here with --overwrite (overwrite=True), or choose another output folder"
                )
            clear_derived_outputs(out, checkpoint=True, extra=stale)  # an earlier run's must not pass for this one's
            trajectory, optimizer = copy.deepcopy(self._fresh_state)
            self.trajectory.load_state_dict(trajectory)
            self.optimizer.load_state_dict(optimizer)
        with atomic_output(out / "config.json") as tmp:
            tmp.write_text(json.dumps(self._config_dict(), indent=2))
        weights = dataclasses.asdict(cfg.weights)
        if stop_after is not None and start >= stop_after and start < o.steps:  # already that far: nothing to run
            return DistillResult(self.trajectory.to_motion(), log, out, 0)
        bar = tqdm(range(start, o.steps), initial=start, total=o.steps, disable=not progress, desc="distill")
        video, ran = None, 0
        for step in bar:
            t0 = time.perf_counter()
            lr_scale, sigma = self._set_schedules(step)
            terms, render, timestep = self.loss_terms(step)
            video = render.video
            if ran == 0:
                self._warn_uncovered_views(render.alpha)
            total = sum(weights[k] * v for k, v in terms.items())
            self.optimizer.zero_grad(set_to_none=True)
            total.backward()
            self._check_finite(step, terms, total, weights)
            self.optimizer.step()
            row = {"step": step, "total": total.item()}
            row.update({k: terms[k].item() if k in terms else 0.0 for k in LOSS_TERMS})
            row.update(timestep=timestep, lr_scale=lr_scale, sigma=sigma, seconds=time.perf_counter() - t0)
            if self.oracle_motion is not None and (step % o.oracle_eval_every == 0 or step == o.steps - 1):
                err = self.oracle_error()
                row.update(oracle_angle_deg=err.mean_joint_angle_deg, oracle_root_error=err.root_path_error)
            log.append(row)
            ran += 1
            bar.set_postfix({k: f"{row[k]:.3g}" for k in ("total", *LOSS_TERMS) if k in terms or k == "total"})
            if callback is not None:
                callback(step, row)
            done = step + 1
            if done % o.checkpoint_every == 0 or done == o.steps:
                self._save_checkpoint(ckpt, done, log)
            if o.preview_every and step % o.preview_every == 0:
                self._preview(video, f"step_{step:05d}")
            if stop_after is not None and done >= stop_after and done < o.steps:
                self._save_checkpoint(ckpt, done, log)
                bar.close()
                return DistillResult(self.trajectory.to_motion(), log, out, ran)
        bar.close()
        return self._finish(log, ran)

    def _check_finite(
        self, step: int, terms: dict[str, torch.Tensor], total: torch.Tensor, weights: dict[str, float]
    ) -> None:
        """Raises before the optimizer moves when the loss or a parameter gradient is not finite.

        The message names the loss terms to blame: those whose value is not finite or, for a non-finite gradient,
        those whose own gradient is not (found by recomputing the step, whose draws are seeded by ``(seed, step)``,
        and backpropagating each term alone; this costs one more forward pass, on the failing step only).
        """
        params = {"rotations_6d": self.trajectory.rotations_6d, "translation": self.trajectory.translation}
        bad_grads = [n for n, p in params.items() if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
        if bool(torch.isfinite(total)) and not bad_grads:
            return
        values = ", ".join(f"{k} {v.item():.4g}" for k, v in terms.items())
        if not bool(torch.isfinite(total)):
            culprits = [k for k, v in terms.items() if not bool(torch.isfinite(weights[k] * v))]
            what = "loss"
        else:
            culprits = self._terms_with_bad_gradients(step, weights, list(params.values()))
            what = f"gradient of {', '.join(bad_grads)}"
        blame = f" from {', '.join(culprits)}" if culprits else ""
        raise FloatingPointError(
            f"step {step}: non-finite {what}{blame} (loss terms: {values}); nothing of this step was saved, the last "
            "checkpoint is intact"
        )

    def _terms_with_bad_gradients(self, step: int, weights: dict[str, float], params: list[torch.Tensor]) -> list[str]:
        """The weighted loss terms of ``step`` whose gradient alone is not finite (the step recomputed)."""
        terms, _, _ = self.loss_terms(step)
        bad = []
        for k, v in terms.items():
            if not v.requires_grad:
                continue
            grads = torch.autograd.grad(weights[k] * v, params, retain_graph=True, allow_unused=True)
            if any(g is not None and not bool(torch.isfinite(g).all()) for g in grads):
                bad.append(k)
        return bad

    def _warn_uncovered_views(self, alpha: torch.Tensor) -> None:
        """Warns about views in which the character covers (almost) no pixels (alpha (B, F, H, W))."""
        coverage = alpha.detach().sum((-1, -2))  # (B, F) [px]
        for b, az in enumerate(self.config.render.camera.azimuths_deg):
            empty = int((coverage[b] < MIN_COVERAGE_PX).sum())
            if empty:
                warnings.warn(
                    f"view at azimuth {az:g} deg: the character covers less than {MIN_COVERAGE_PX:g} px in {empty} of "
                    f"{coverage.shape[1]} frames (a single-sided mesh seen from behind is culled, or it is out of "
                    "frame): the video model sees only the ground there",
                    stacklevel=3,
                )

    def oracle_error(self):
        from .metrics import motion_error

        return motion_error(self.rig, self.trajectory.to_motion(), self.oracle_motion)

    # -- outputs --------------------------------------------------------------------------------------
    def _preview(self, video: torch.Tensor, name: str) -> None:
        from .preview import write_preview

        write_preview(
            self.output_dir / "previews" / f"{name}.{self.config.optim.preview_format}", video, self.config.fps
        )

    def _finish(self, log: list[dict], ran: int) -> DistillResult:
        from usd_io import write_usdskel

        out = self.output_dir
        motion = self.trajectory.to_motion()
        write_usdskel(out / "motion.usda", self.rig, [motion])
        self._write_log(out / "loss_log.csv", log)
        # the written motion, after the last step (the loop's last render is the one before it)
        self._preview(self.render_motion(motion), "final")
        metrics = None
        if self.oracle_motion is not None:
            err = self.oracle_error()
            metrics = {
                "mean_joint_angle_deg": err.mean_joint_angle_deg,
                "mean_joint_angle_deg_optimized_joints": float(err.per_joint_deg[self.trajectory.joints].mean()),
                "root_path_error": err.root_path_error,
                "root_path_error_m": err.root_path_error_m,
                "body_length_m": err.body_length,
                "per_joint_deg": {n: float(d) for n, d in zip(self.rig.joint_names, err.per_joint_deg)},
                "steps": len(log),
                "seconds": float(sum(r["seconds"] for r in log)),
            }
            from usd_io import atomic_output

            with atomic_output(out / "oracle_metrics.json") as tmp:
                tmp.write_text(json.dumps(metrics, indent=2))
        return DistillResult(motion, log, out, ran, metrics)

    @staticmethod
    def _write_log(path: Path, log: list[dict]) -> None:
        from usd_io import atomic_output

        keys = list(dict.fromkeys(k for row in log for k in row))
        with atomic_output(path) as tmp, open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            writer.writerows(log)

    def _save_checkpoint(self, path: Path, step: int, log: list[dict]) -> None:
        from usd_io import atomic_output

        optimizer = self.optimizer.state_dict()
        # hyperparameters and log rows as plain numbers (a callback's NumPy value too): the resume reads the file
        # with torch.load(weights_only=True), which refuses NumPy scalars
        optimizer["param_groups"] = plain(optimizer["param_groups"])
        state = {
            "step": step,
            "trajectory": self.trajectory.state_dict(),
            "optimizer": optimizer,
            "log": plain(log),
            "config": self._config_dict(),
        }
        with atomic_output(path) as tmp:
            torch.save(state, tmp)
        self._write_log(self.output_dir / "loss_log.csv", log)

    def _config_dict(self) -> dict:
        """The run's config as written to config.json and checked on resume: the config, the renderer's and the
        loss terms' versions, the pose prior's identity, the character's fingerprint and the oracle target's digest
        (plus the rig's name, a glTF's file stem, and the asset's source, recorded but not compared)."""
        oracle = None
        if self.oracle_motion is not None:
            oracle = {"clip": self.oracle_motion.name, "digest": motion_digest(self.oracle_motion)}
        return {
            **config_to_dict(self.config),
            "renderer": RENDERER_VERSION,
            "losses": LOSSES_VERSION,
            "pose_prior": self.pose_prior_key,
            "rig": {"name": self.rig.name, "fingerprint": rig_fingerprint(self.rig)},
            "oracle": oracle,
            "source": self.source,
        }

    def _load_checkpoint(self, path: Path) -> tuple[int, list[dict]]:
        state = read_checkpoint(path, self.device)
        saved, now = dict(state["config"]), self._config_dict()
        saved.setdefault("pose_prior", None)  # checkpoints from before the prior's identity was recorded
        saved.pop("source", None)
        source = now.pop("source")
        if saved.get("renderer") != now["renderer"]:
            raise ResumeError(
                f"{path}: checkpoint was written by renderer version {saved.get('renderer', 1)} (this is "
                f"{now['renderer']}: the same settings render other images); start afresh with another --output"
            )
        if saved.get("losses", 1) != now["losses"]:
            raise ResumeError(
                f"{path}: checkpoint was written with loss terms of version {saved.get('losses', 1)} (this is "
                f"{now['losses']}: smoothness is now measured per second, so its weight means another loss); start "
                "afresh with another --output"
            )
        was = saved.pop("rig", None) or {}
        if was.get("fingerprint") != now["rig"]["fingerprint"]:
            # the fingerprint only: the rig's name is a glTF's file stem, and a renamed copy of the asset still resumes
            raise ResumeError(
                f"{path}: checkpoint was written for another character (rig {was.get('name')!r}, fingerprint "
                f"{was.get('fingerprint')}; this run: {source or now['rig']['name']!r}, {now['rig']['fingerprint']})"
            )
        now.pop("rig")
        if saved.get("oracle") != now["oracle"]:
            name = lambda o: "none" if not o else f"clip {o.get('clip')!r} ({o.get('digest')})"  # noqa: E731
            raise ResumeError(
                f"{path}: checkpoint was written with another oracle target ({name(saved.get('oracle'))}; this run: "
                f"{name(now['oracle'])})"
            )
        diff = sorted(_diff_keys(saved, now))
        blocking = [k for k in diff if k not in RESUME_FREE_SETTINGS]
        if blocking:
            raise ResumeError(
                f"{path}: checkpoint was written with a different config (differs in: {', '.join(blocking)}); "
                "resume with the same settings or start afresh with another --output"
            )
        if diff:  # bookkeeping, where the weights are and how they run: allowed, said
            changes = ", ".join(f"{k} {_dotted(saved, k)!r} -> {_dotted(now, k)!r}" for k in diff)
            warnings.warn(f"{path}: resuming with changed settings: {changes}", stacklevel=3)
        try:
            self.trajectory.load_state_dict(state["trajectory"])
            self.optimizer.load_state_dict(state["optimizer"])
            return int(state["step"]), list(state["log"])
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ResumeError(f"{path}: the checkpoint's state does not fit this run ({reason})") from None


RESUME_FREE_SETTINGS = frozenset({
    "optim.checkpoint_every", "optim.preview_every", "optim.preview_format", "optim.oracle_eval_every",
    "guidance.model", "guidance.device", "guidance.allow_download", "guidance.dtype",
})  # fmt: skip
"""Settings a resumed run may change (with a warning): when it checkpoints, previews and evaluates the oracle
(nothing of the optimization), where the model's weights are read from (a copy on a local disk; the same weights are
the user's responsibility) and the dtype and device the model runs in (e.g. bfloat16 after a float16 overflow: the
remaining steps then compute in the new dtype)."""


def _dotted(d: dict, key: str):
    for part in key.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _diff_keys(a, b, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in set(a) | set(b):
            out += _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]
