"""The pose space of a trained model: sample, project, inverse kinematics, interpolation, a controller filter.

All uses run the same machinery: DDIM over the denoiser (:mod:`posespace.diffusion`) with guidance on the
predicted clean pose, plus a short final descent ("polish") of the same loss on the clean pose.

* ``sample(rig, n)``: from noise, guided by the validators.
* ``project(rig, poses)``: DDIM inversion to ``t = strength`` and guided re-denoising: poses on the learned
  manifold come back almost unchanged (inversion and denoising are inverse maps of the same ODE), poses that fail
  a validator are pushed to pass.
* ``ik(rig, handles)``: sparse joint-position targets; guidance is the handle error (plus validators) for a
  plausible start, then damped least squares on the local rotations pulls it onto the handles with the validator
  loss as one more residual (the smallest change that meets the handles and keeps the pose valid).
* ``interpolate(rig, a, b, steps)``: invert both ends to noise, slerp the noise, denoise every step.
* ``target_filter(rig)``: a plain callable ``Motion -> Motion`` for the physics controller that projects the
  target frames that fail a validator and passes valid ones through.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from sim import Motion, Rig
from sim._numbers import is_real
from sim.rotations import axis_angle_to_quat, quat_multiply, quat_rotate, quat_to_rot6d, rot6d_to_quat

from ._checks import check_int, check_number
from ._solvers import damped_least_squares_ik
from .data import collate_poses
from .diffusion import Conditioning, DiffusionConfig, GaussianDiffusion
from .model import ModelConfig, PoseDenoiser
from .pose_rig import IDENTITY_6D, PoseRig
from .validators import PoseValidators, RigCalibration, ValidatorConfig

__all__ = ["CHECKPOINT_FORMAT", "MIN_TRAINING_STEPS", "PoseSpace", "SamplingConfig", "tokens_to_poses"]

CHECKPOINT_FORMAT = "kinedistill-posespace-1"

CHECKSUM_VERSION = 2
"""What a checkpoint's ``checksum`` covers, stored as ``checksum_version``: 1 (checkpoints without the field) the
weights, calibrations and scale; 2 also the format and the model, validator and diffusion settings."""
CHECKSUM_SETTINGS = ("format", "model_config", "validator_config", "diffusion_config")
"""The checkpoint fields a version-2 checksum covers besides the weights, calibrations and scale."""

MIN_TRAINING_STEPS = 500
"""A model trained for fewer steps is flagged (:meth:`PoseSpace.training_warning`): ``train --steps 5`` makes a
useless model whose samples still pass the validators (guidance and polish do that alone)."""


@dataclass(frozen=True)
class SamplingConfig:
    """How the pose space samples and guides."""

    steps: int = 40
    """DDIM steps from noise."""
    temperature: float = 1.0
    """Scale of the initial DDIM noise of :meth:`PoseSpace.sample` (truncation): 1 samples the learned
    distribution; below 1 the deterministic DDIM map carries a narrower noise ball to poses nearer the modes
    (fewer rare poses, less diversity: APD drops), 0 gives one pose per skeleton. IK, projection and
    interpolation are not affected."""
    guidance_from: float = 0.7
    """Validator guidance acts on predictions at times t <= this."""
    guidance_iters: int = 2
    """Damped Polyak steps of the validator loss per denoising step."""
    guidance_damping: float = 0.8
    """Fraction of the Polyak step taken (1 = jump to the linearized zero of the loss)."""
    polish_iters: int = 20
    """Final validator descent steps on the clean pose."""
    max_step: float = 0.5
    """Largest change of a pose per guidance step [model units, RMS per joint]."""
    project_strength: float = 0.35
    """Projection inverts to this time in [0, 1] before re-denoising."""
    project_steps: int = 12
    """DDIM steps each way in a projection."""
    interpolation_steps: int = 30
    """DDIM steps each way in an interpolation."""
    interpolation_time: float = 0.9
    """Interpolation inverts both ends to this time."""
    ik_steps: int = 6
    """DDIM steps of an IK solve's start (guided by the handles and the validators)."""
    ik_guidance_iters: int = 1
    """Polyak steps of the handle + validator loss per IK denoising step."""
    ik_validator_weight: float = 1.0
    """Weight of the validator loss against the handle loss [(fraction of height)^2] while guiding the start."""
    ik_dls_iters: int = 30
    """Iterations of the validator-constrained damped least squares that pulls the start onto the handles."""
    ik_damping: float = 0.1
    """Initial damping of the least-squares steps [fraction of the rig height]: the first steps stay short, so the
    validator residual takes part before a long step lands in a violation it cannot undo in place."""
    ik_handle_tolerance_start: float = 0.1
    """Handle error that weighs as much as a validator loss of 1 in the first least-squares iteration [fraction of
    the rig height]; it shrinks geometrically to ``ik_handle_tolerance`` (a continuation: early iterations may
    move the handles to leave an arrangement the validators cannot repair in place)."""
    ik_handle_tolerance: float = 0.001
    """... in the last iteration [fraction of the rig height]. Where the validators pass, the handles are met to
    round-off; where a validator is active they trade a handle error of a small fraction of this (CMU 131_02: mean
    3e-7 of the height)."""
    batch: int = 512
    """Poses per batch."""

    def check(self) -> SamplingConfig:
        """Returns self when every setting is in range (PoseSpace calls this); ValueError naming the field
        otherwise. (Not run on construction, so command lines report it as one line.)"""
        for name in ("steps", "project_steps", "interpolation_steps", "ik_steps", "batch"):
            check_int(f"SamplingConfig.{name}", getattr(self, name), 1)
        for name in ("guidance_iters", "polish_iters", "ik_guidance_iters", "ik_dls_iters"):
            check_int(f"SamplingConfig.{name}", getattr(self, name), 0)
        for name in ("temperature", "max_step", "ik_validator_weight", "guidance_damping"):
            check_number(f"SamplingConfig.{name}", getattr(self, name), 0.0)
        for name in ("ik_damping", "ik_handle_tolerance_start", "ik_handle_tolerance"):  # no damping: singular
            check_number(f"SamplingConfig.{name}", getattr(self, name), 0.0, strict=True)
        for name in ("guidance_from", "project_strength", "interpolation_time"):
            value = getattr(self, name)
            if not (is_real(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"SamplingConfig.{name}: must be a diffusion time in [0, 1], got {value!r}")
        return self


class _RigContext:
    def __init__(self, space: PoseSpace, rig: Rig):
        self.pose_rig = PoseRig(rig)
        key = space.calibration_key(rig, self.pose_rig)
        cal = space.calibrations.get(key) if key is not None else None
        self.calibration = _parse_calibration(key, cal) if isinstance(cal, dict) else cal
        if self.calibration is not None:
            _check_calibration_fits(self.calibration, key, rig, space.source)
        self.validators = PoseValidators(self.pose_rig, self.calibration, space.validator_config)
        b = collate_poses([self.pose_rig], np.zeros(1, dtype=np.int64), [self.pose_rig.rest_pose(1)[0]], space.scale)
        self.cond1 = Conditioning(b.features, b.distances, b.mask)
        self.mask = b.mask[0]  # all True: one token per active joint
        self.active_index = torch.as_tensor(self.pose_rig.active_index, dtype=torch.long)

    def cond(self, n: int) -> Conditioning:
        c = self.cond1
        return Conditioning(c.features.expand(n, -1, -1), c.distances.expand(n, -1, -1), c.mask.expand(n, -1))


class PoseSpace:
    """A trained pose model and per-skeleton validator calibrations.

    Args:
        model: the denoiser (eval mode is set here).
        scale: data scale (model units = ``(6D - identity) / scale``).
        calibrations: per skeleton signature, a :class:`RigCalibration` (or its dict form).
        validator_config: validator thresholds.
        sampling: sampling settings.
        diffusion: the schedule.
        training_clips: names (``"source#clip"``) of the clips the model was trained on (recorded in checkpoints
            so an evaluation can tell when a held-out clip was seen in training; empty when unknown).
        training: provenance of the weights, ``{"steps": int, "final_loss": float}`` (the denoising loss averaged
            over the last steps); None when unknown (checkpoints written before it was recorded).
    """

    def __init__(
        self,
        model: PoseDenoiser,
        scale: float,
        calibrations: Mapping[str, RigCalibration | dict] | None = None,
        validator_config: ValidatorConfig | None = None,
        sampling: SamplingConfig | None = None,
        diffusion: DiffusionConfig | None = None,
        training_clips: Sequence[str] = (),
        training: Mapping | None = None,
    ):
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.scale = check_number("scale", scale, 0.0, strict=True)  # 0 / NaN failed deep inside; < 0 flipped tokens
        self.calibrations = dict(calibrations or {})
        # checked as load() checks them: a space built with bad settings saved a file that load() refused
        self.validator_config = (validator_config or ValidatorConfig()).check()
        self.sampling = (sampling or SamplingConfig()).check()
        self.diffusion = GaussianDiffusion((diffusion or DiffusionConfig()).check())
        self.training_clips = tuple(str(c) for c in training_clips)
        self.training = None if training is None else _check_training(training)
        self.source = "pose space"
        """Where the pose space came from (the checkpoint file after :meth:`load`), for error messages."""
        self._contexts: dict[int, tuple[Rig, _RigContext]] = {}

    # -- persistence ----------------------------------------------------------------------------------------
    def state(self) -> dict:
        """Checkpoint payload (see :meth:`load`)."""
        cals = {k: (v.to_dict() if isinstance(v, RigCalibration) else v) for k, v in self.calibrations.items()}
        state = {
            "format": CHECKPOINT_FORMAT,
            "model_config": asdict(self.model.config),
            "model": self.model.state_dict(),
            "scale": self.scale,
            "calibrations": cals,
            "validator_config": asdict(self.validator_config),
            "diffusion_config": asdict(self.diffusion.config),
            "training_clips": list(self.training_clips),
            **({} if self.training is None else {"training": dict(self.training)}),
            "checksum_version": CHECKSUM_VERSION,
        }
        state["checksum"] = _checksum(state["model"], cals, self.scale, {k: state[k] for k in CHECKSUM_SETTINGS})
        return state

    def fingerprint(self) -> str:
        """A short SHA-256 of the model weights, calibrations and validator, diffusion and sampling settings: the
        identity of this pose space's outputs (used to refuse resuming an optimization with another one)."""
        import hashlib
        import json

        h = hashlib.sha256()
        for name, t in sorted(self.model.state_dict().items()):
            h.update(name.encode())
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        # the training clip names and provenance do not change any output (and older checkpoints lack them); the
        # checksum repeats the weights and calibrations
        skip = ("model", "training_clips", "training", "checksum", "checksum_version")
        rest = {k: v for k, v in self.state().items() if k not in skip}
        rest["sampling"] = asdict(self.sampling)
        h.update(json.dumps(rest, sort_keys=True, default=lambda a: np.asarray(a).tolist()).encode())
        return h.hexdigest()[:16]

    def save(self, path: str | Path) -> None:
        """Writes the pose space to ``path`` (a torch file), atomically."""
        from usd_io import atomic_output

        with atomic_output(path) as tmp:
            torch.save(self.state(), tmp)

    @classmethod
    def load(cls, path: str | Path, sampling: SamplingConfig | None = None) -> PoseSpace:
        """Reads a pose space written by :meth:`save` or a training checkpoint.

        Raises:
            FileNotFoundError: no such file; ValueError: not a pose-space checkpoint (the message names the file).
        """
        path = Path(path)
        if sampling is not None:
            sampling.check()  # a bad setting is not the file's fault: report it before reading
        if path.is_dir():  # e.g. the training run's folder
            inside = path / "posespace.pt"
            hint = f"did you mean {inside}?" if inside.is_file() else "give the posespace.pt a training run writes"
            raise FileNotFoundError(f"{path}: is a folder, not a pose-space checkpoint; {hint}")
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such pose-space checkpoint")
        try:
            # full unpickling (the checkpoint holds NumPy calibration arrays): load only checkpoints you trust
            state = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as e:  # torch raises pickle, zip and runtime errors alike for a foreign file
            raise ValueError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e})") from e
        try:
            space = cls.from_state(state, sampling)
        except KeyError as e:
            raise ValueError(f"{path}: pose-space checkpoint lacks the field {e.args[0]!r}") from e
        except (TypeError, RuntimeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from e
        space.source = str(path)
        return space

    @classmethod
    def from_state(cls, state: dict, sampling: SamplingConfig | None = None) -> PoseSpace:
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"not a pose-space checkpoint (expected format {CHECKPOINT_FORMAT!r})")
        version = state.get("checksum_version", 1)
        if "checksum" in state and version not in (1, CHECKSUM_VERSION):
            raise ValueError(f"checksum_version: unknown version {version!r} (this code reads 1 and "
                             f"{CHECKSUM_VERSION}): written by a newer kinedistill?")  # fmt: skip
        if "checksum" in state and not _checksum_matches(state):  # older checkpoints (no checksum) load unchecked
            raise ValueError("checksum mismatch: the file is damaged (its weights, calibrations or settings are not "
                             "the ones it was saved with)")  # fmt: skip
        training = state.get("training")
        if training is not None:
            _check_training(training)
        cfg = state["model_config"]
        model = PoseDenoiser(ModelConfig(**cfg).check())
        model.load_state_dict(state["model"])
        bad = [name for name, t in model.state_dict().items() if not bool(torch.isfinite(t).all())]
        if bad:  # e.g. written by a run that diverged
            raise ValueError(f"non-finite model weights ({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''})")
        scale = state["scale"]
        if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: must be a finite number > 0, got {scale!r}")
        cals = state.get("calibrations", {})
        if not isinstance(cals, dict):
            raise ValueError(f"calibrations: expected a mapping skeleton -> calibration, got {type(cals).__name__}")
        for key, cal in cals.items():  # a damaged calibration is named here, not at its first use
            if not isinstance(cal, RigCalibration):
                _parse_calibration(key, cal)
        vcfg = dict(state.get("validator_config", {}))
        if "loss_weights" in vcfg:
            vcfg["loss_weights"] = tuple(vcfg["loss_weights"])
        return cls(model, scale, state.get("calibrations", {}), ValidatorConfig(**vcfg).check(), sampling,
                   DiffusionConfig(**state.get("diffusion_config", {})).check(),
                   state.get("training_clips", ()), training)  # fmt: skip

    # -- provenance -----------------------------------------------------------------------------------------
    def training_summary(self) -> str:
        """One phrase on how the weights were trained, e.g. ``"trained 5000 steps, final loss 0.0312"``."""
        if self.training is None:
            return "training steps not recorded"
        loss = self.training.get("final_loss")
        text = f"trained {self.training['steps']} steps"
        return text + (f", final loss {loss:.4g}" if isinstance(loss, (int, float)) else "")

    def training_warning(self, min_steps: int = MIN_TRAINING_STEPS) -> str | None:
        """A one-line warning when the model was trained for fewer than ``min_steps`` steps (None otherwise or
        when unknown): such a model's samples still pass the validators, which guidance enforces by itself."""
        if self.training is None or self.training["steps"] >= min_steps:
            return None
        return (f"{self.source} was trained for only {self.training['steps']} steps (< {min_steps}): its poses come "
                "from the validators' guidance more than from learned data; train longer for real use")  # fmt: skip

    # -- per-rig state --------------------------------------------------------------------------------------
    def context(self, rig: Rig) -> _RigContext:
        key = id(rig)
        if key not in self._contexts or self._contexts[key][0] is not rig:
            self._contexts[key] = (rig, _RigContext(self, rig))
        return self._contexts[key][1]

    def pose_rig(self, rig: Rig) -> PoseRig:
        """The prepared rig (cached)."""
        return self.context(rig).pose_rig

    def validators(self, rig: Rig) -> PoseValidators:
        """The rig's validators: calibrated when its skeleton was in training, default limits otherwise."""
        return self.context(rig).validators

    def is_known(self, rig: Rig) -> bool:
        """Whether the rig's skeleton was calibrated in training."""
        return self.calibration_key(rig) is not None

    def calibration_key(self, rig: Rig, pose_rig: PoseRig | None = None) -> str | None:
        """The key of ``rig``'s calibration in :attr:`calibrations`: its signature, or the legacy signature
        checkpoints written before rest rotations were hashed used; None when the skeleton was not calibrated."""
        from .skeleton import legacy_rig_signature

        key = (pose_rig or self.pose_rig(rig)).signature
        if key in self.calibrations:
            return key
        legacy = legacy_rig_signature(rig)
        return legacy if legacy in self.calibrations else None

    # -- unit conversions -----------------------------------------------------------------------------------
    def to_model(self, ctx: _RigContext, poses: np.ndarray | torch.Tensor) -> torch.Tensor:
        """6D poses (N, J, 6) -> model tokens (N, A, 6): the active joints, in model units."""
        x = torch.as_tensor(np.asarray(poses) if not torch.is_tensor(poses) else poses, dtype=torch.float32)
        ident = torch.as_tensor(IDENTITY_6D, dtype=torch.float32)
        return (x[:, ctx.active_index] - ident) / self.scale

    def to_pose(self, ctx: _RigContext, x: torch.Tensor) -> torch.Tensor:
        """Model tokens (N, A, 6) -> 6D poses (N, J, 6), inactive joints at rest (differentiable)."""
        return tokens_to_poses(x, ctx.active_index, ctx.pose_rig.joint_count, self.scale)

    # -- guidance -------------------------------------------------------------------------------------------
    def _polyak(self, ctx: _RigContext, x: torch.Tensor, loss_fn, iters: int, damping: float) -> torch.Tensor:
        """Damped Polyak steps ``x -= damping * L / |grad L|^2 * grad L`` per pose, capped at ``max_step``.

        ``loss_fn(x_rows, rows)`` gets the poses still above zero loss and their indices in the batch.
        """
        cap = self.sampling.max_step * float(ctx.mask.sum()) ** 0.5
        x = x.detach().clone()
        todo = torch.arange(len(x))
        for _ in range(iters):
            xs = x[todo].requires_grad_(True)
            loss = loss_fn(xs, todo)
            keep = loss > 0
            if not bool(keep.any()):
                break
            (g,) = torch.autograd.grad(loss.sum(), xs)
            g2 = (g * g).sum(dim=(1, 2)).clamp_min(1e-12)
            step = (damping * loss / g2)[:, None, None] * g
            norm = step.flatten(1).norm(dim=1).clamp_min(1e-12)
            step = step * (cap / norm).clamp(max=1.0)[:, None, None]
            x[todo] = (xs - step).detach()
            todo = todo[keep]  # poses already at zero loss are done
        return x

    def _validator_loss(self, ctx: _RigContext) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        return lambda x, rows=None: ctx.validators.loss(self.to_pose(ctx, x))

    def _guide(self, ctx: _RigContext, loss_fn) -> Callable[[torch.Tensor, float], torch.Tensor]:
        s = self.sampling

        def x0_fn(x0: torch.Tensor, t: float) -> torch.Tensor:
            if t > s.guidance_from:
                return x0
            return self._polyak(ctx, x0, loss_fn, s.guidance_iters, s.guidance_damping)

        return x0_fn

    # -- uses -----------------------------------------------------------------------------------------------
    def sample_poses(self, rig: Rig, n: int, seed: int | None = None, guidance: bool = True) -> np.ndarray:
        """``n`` sampled poses in 6D form, shape (n, J, 6)."""
        n = check_int("n", n, 1)
        seed = _check_seed(seed)
        ctx = self.context(rig)
        loss = self._validator_loss(ctx)
        out = []
        for start in range(0, n, self.sampling.batch):
            m = min(self.sampling.batch, n - start)
            cond = ctx.cond(m)
            x = self.diffusion.sample(self.model, cond, self.sampling.steps, None,
                                      self._guide(ctx, loss) if guidance else None, self.sampling.temperature,
                                      _seeded_noise(seed, start, cond))  # fmt: skip
            if guidance:
                x = self._polyak(ctx, x, loss, self.sampling.polish_iters, self.sampling.guidance_damping)
            out.append(self.to_pose(ctx, x).numpy())
        return _orthonormal(np.concatenate(out))

    def sample(self, rig: Rig, n: int, seed: int | None = None, guidance: bool = True) -> Motion:
        """``n`` plausible poses of ``rig``, one per frame, each standing on the ground (its lowest point at z = 0,
        see :meth:`PoseRig.decode`), facing the rest heading."""
        return self.pose_rig(rig).decode(self.sample_poses(rig, n, seed, guidance), name="samples")

    def project_poses(self, rig: Rig, poses: np.ndarray, strength: float | None = None) -> np.ndarray:
        """Projection of 6D poses (N, J, 6) onto the pose space (module docstring), shape (N, J, 6)."""
        ctx, s = self.context(rig), self.sampling
        poses = _check_poses("poses", poses, ctx.pose_rig, batched=True)
        if strength is None:
            strength = s.project_strength
        elif not (is_real(strength) and 0.0 <= strength <= 1.0):  # True ran at strength 1
            raise ValueError(f"strength: must be a diffusion time in [0, 1], got {strength!r}")
        strength = float(strength)
        loss = self._validator_loss(ctx)
        out = []
        for start in range(0, len(poses), s.batch):
            x0 = self.to_model(ctx, poses[start : start + s.batch])
            cond = ctx.cond(len(x0))
            if strength > 0:
                x_t = self.diffusion.invert(self.model, x0, cond, strength, s.project_steps)
                x0 = self.diffusion.ddim(self.model, x_t, cond, self.diffusion.schedule(s.project_steps, strength),
                                         self._guide(ctx, loss))  # fmt: skip
            x0 = self._polyak(ctx, x0, loss, s.polish_iters, s.guidance_damping)
            out.append(self.to_pose(ctx, x0).numpy())
        return _orthonormal(np.concatenate(out))

    def project(self, rig: Rig, poses: Motion, strength: float | None = None) -> Motion:
        """Every frame of ``poses`` projected onto the pose space; root translation and heading are kept."""
        pr = self.pose_rig(rig)
        return pr.decode(self.project_poses(rig, pr.encode(poses), strength), like=poses)

    def ik_poses(
        self,
        rig: Rig,
        handles: Mapping[str | int, np.ndarray],
        root_translation: np.ndarray | None = None,
        seed: int | None = None,
    ) -> np.ndarray:
        """Poses whose joints reach the handle positions, shape (N, J, 6).

        Poses have no heading: the handles are read with the character facing its rest heading (the root may
        tilt, not turn about up). Handles taken from a character turned about up are reached by twisting the body,
        which the validators then flag: turn them back about the root first.

        Args:
            handles: joint name or index -> target position(s) in skeleton space [m], shape (3,) or (N, 3). A
                handle on the root places it (as ``root_translation``, which it must then agree with).
            root_translation: root position(s) [m], (3,) or (N, 3); the rest position when None.
        """
        seed = _check_seed(seed)
        ctx, s = self.context(rig), self.sampling
        pr = ctx.pose_rig
        idx, targets, root = _check_handles(rig, handles, root_translation)
        targets = targets - root[:, None, :]
        n = len(targets)
        val = self._validator_loss(ctx)
        out = []
        for start in range(0, n, s.batch):
            tgt = torch.as_tensor(targets[start : start + s.batch], dtype=torch.float32)
            m = len(tgt)

            def residuals(x, rows, tgt=tgt):
                _, local = pr.decode_torch(self.to_pose(ctx, x))
                pos = ctx.validators.world(local)[:, idx, :3]
                return (pos - tgt[rows]).flatten(1) / pr.height

            def both(x, rows, r=residuals):
                return (r(x, rows) ** 2).sum(1) + s.ik_validator_weight * val(x)

            cond = ctx.cond(m)
            x0 = self.diffusion.sample(self.model, cond, s.ik_steps, None, self._guide_all(ctx, both),
                                       noise=_seeded_noise(seed, start, cond))  # fmt: skip
            out.append(self._constrained_dls(ctx, x0, idx, targets[start : start + s.batch]))
        return _orthonormal(np.concatenate(out))

    def _constrained_dls(self, ctx: _RigContext, x: torch.Tensor, idx: list[int], tgt: np.ndarray) -> np.ndarray:
        """Validator-constrained damped least squares from model tokens ``x`` onto handles ``tgt`` (M, H, 3) [m,
        relative to the root]; returns 6D poses (M, J, 6)."""
        pr, val, s = ctx.pose_rig, ctx.validators, self.sampling

        def penalty(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            with torch.enable_grad():
                qt = torch.tensor(q, dtype=torch.float64, requires_grad=True)
                loss = val.loss(pr.encode_torch(qt).to(val.dtype))
                (grad,) = torch.autograd.grad(loss.sum(), qt)
            return loss.detach().double().numpy(), grad.numpy()

        def project(q: np.ndarray) -> np.ndarray:  # poses have no heading: drop what tilting a tilted root adds
            return pr.decode_quats(pr.encode_rotations(q))

        local = pr.decode_quats(rot6d_to_quat(self.to_pose(ctx, x).detach().double().numpy()))
        # shrinks to the final tolerance by the last iteration (a single iteration solves at the final one)
        start = s.ik_handle_tolerance_start if s.ik_dls_iters > 1 else s.ik_handle_tolerance
        tol = np.geomspace(start, s.ik_handle_tolerance, s.ik_dls_iters) * pr.height
        local = damped_least_squares_ik(pr.rig, local, pr.active, idx, tgt, s.ik_dls_iters, s.ik_damping * pr.height,
                                        np.zeros(3), penalty, tol, project)  # fmt: skip
        return quat_to_rot6d(pr.encode_rotations(local))

    def _guide_all(self, ctx: _RigContext, loss_fn):
        s = self.sampling
        return lambda x0, t: self._polyak(ctx, x0, loss_fn, s.ik_guidance_iters, s.guidance_damping)

    def ik(
        self,
        rig: Rig,
        handles: Mapping[str | int, np.ndarray],
        root_translation: np.ndarray | None = None,
        seed: int | None = None,
        heading: float = 0.0,
    ) -> Motion:
        """Poses reaching sparse joint-position handles (see :meth:`ik_poses`), one per frame, the root at
        ``root_translation`` (the rest position when None): the frame the handles are given in.

        Args:
            heading: the character's facing [rad], counter-clockwise about up from its rest heading: the handles are
                turned back about the root by it, solved, and the poses turned by it (poses have no heading, so
                handles of a turned character are otherwise reached by twisting the body).
        """
        if not (is_real(heading) and math.isfinite(heading)):
            raise ValueError(f"heading: must be a finite angle [rad], got {heading!r}")
        heading = float(heading)
        idx, targets, root = _check_handles(rig, handles, root_translation)  # a handle on the root places it
        pr = self.pose_rig(rig)
        up = pr.frame.axes[:, 2]
        back = axis_angle_to_quat(-heading * up)
        turned = root[:, None] + quat_rotate(np.broadcast_to(back, (*targets.shape[:2], 4)), targets - root[:, None])
        poses = self.ik_poses(rig, {j: turned[:, k] for k, j in enumerate(idx)}, root, seed)
        motion = pr.decode(poses, name="ik", on_ground=False)
        rot = motion.rotations.copy()
        rot[:, 0] = quat_multiply(np.broadcast_to(axis_angle_to_quat(heading * up), rot[:, 0].shape), rot[:, 0])
        return Motion(motion.fps, np.broadcast_to(root, (len(poses), 3)).astype(np.float64), rot, name="ik")

    def interpolate_poses(self, rig: Rig, a: np.ndarray, b: np.ndarray, steps: int) -> np.ndarray:
        """Noise-space interpolation between 6D poses ``a`` and ``b`` (J, 6), shape (steps, J, 6).

        Both ends are DDIM-inverted to ``interpolation_time``, the latents are slerped, every latent is
        denoised (validator guidance on), and the ends' reconstruction errors are spread along the path (see
        ``_pinned_ends``): its ends are the given poses (made exact rotations, without heading, the inactive
        joints at rest, as every pose of the path) and it has no jump at its first or last step.
        """
        ctx, s = self.context(rig), self.sampling
        a = _check_poses("a", a, ctx.pose_rig, batched=False)
        b = _check_poses("b", b, ctx.pose_rig, batched=False)
        steps = check_int("steps", steps, 2)
        # the ends as the path's poses are: exact rotations, no heading, inactive joints at rest (copied raw they
        # made the path jump at its first and last step)
        a, b = _orthonormal(np.stack([a, b]))
        a[~ctx.pose_rig.active] = b[~ctx.pose_rig.active] = IDENTITY_6D
        x0 = self.to_model(ctx, np.stack([a, b]))
        cond2 = ctx.cond(2)
        z = self.diffusion.invert(self.model, x0, cond2, s.interpolation_time, s.interpolation_steps)
        u = torch.linspace(0.0, 1.0, steps)
        za, zb = z[0].flatten(), z[1].flatten()
        omega = torch.arccos((za @ zb / (za.norm() * zb.norm()).clamp_min(1e-12)).clamp(-1, 1))
        if float(omega) < 1e-4:
            lat = (1 - u)[:, None] * za + u[:, None] * zb
        else:
            lat = (torch.sin((1 - u) * omega)[:, None] * za + torch.sin(u * omega)[:, None] * zb) / torch.sin(omega)
        lat = lat.view(steps, *z.shape[1:])
        x = self.diffusion.ddim(self.model, lat, ctx.cond(steps),
                                self.diffusion.schedule(s.interpolation_steps, s.interpolation_time),
                                self._guide(ctx, self._validator_loss(ctx)))  # fmt: skip
        x = self._polyak(ctx, x, self._validator_loss(ctx), s.polish_iters, s.guidance_damping)
        path = _pinned_ends(_orthonormal(self.to_pose(ctx, x).numpy()), a, b)
        # the correction moved the inner poses off what the polish left valid: polish them again, the ends kept
        if steps > 2:
            inner = self._polyak(ctx, self.to_model(ctx, path[1:-1]), self._validator_loss(ctx), s.polish_iters,
                                 s.guidance_damping)  # fmt: skip
            path[1:-1] = _orthonormal(self.to_pose(ctx, inner).numpy())
        return path

    def interpolate(self, rig: Rig, a: Motion, b: Motion, steps: int) -> Motion:
        """A ``steps``-frame path from the first frame of ``a`` to the first frame of ``b`` through the pose space.

        The poses come from :meth:`interpolate_poses`; the root carries the ends' placement along: it moves in a
        straight line over the ground from ``a``'s root position to ``b``'s, turns from ``a``'s heading to ``b``'s
        (slerp about up), and keeps each pose's lowest point at a height blended linearly from the ends' (so the
        path's ends are the given frames, and a path between two poses standing on the ground stands on it).
        Inactive joints (e.g. fingers) slerp from ``a``'s rotations to ``b``'s; joint translations (clips that move
        joints away from rest, e.g. the Fox's hips) blend linearly from ``a``'s to ``b``'s (exact at the ends).
        """
        pr = self.pose_rig(rig)
        path = self.interpolate_poses(rig, pr.encode(a)[0], pr.encode(b)[0], steps)
        return _placed_path(pr, path, a.slice(0, 1), b.slice(0, 1), a.fps)

    def target_filter(
        self, rig: Rig, strength: float | None = None, only_invalid: bool = True
    ) -> Callable[[Motion], Motion]:
        """A controller target filter: ``Motion -> Motion`` that projects target frames onto the pose space.

        Args:
            rig: the tracked rig.
            strength: projection strength (default: the sampling config's).
            only_invalid: project only frames failing a validator; valid frames pass through unchanged.
        """
        pr = self.pose_rig(rig)
        s = self.sampling.project_strength if strength is None else strength
        if not is_real(s) or not 0.0 <= s <= 1.0:  # NaN fails too
            raise ValueError(f"strength: must be a diffusion time in [0, 1], got {strength!r}")
        s = float(s)

        def target_filter(targets: Motion) -> Motion:
            bad = np.argwhere(~np.isfinite(targets.rotations))
            if len(bad):  # name the frame of the input, not a row of the frames left to project
                raise ValueError(f"targets {targets.name!r}: non-finite rotation at frame {bad[0][0]}, joint "
                                 f"{bad[0][1]} ({rig.joint_names[bad[0][1]]})")  # fmt: skip
            poses = pr.encode(targets)
            todo = np.arange(len(poses))
            if only_invalid:
                todo = np.flatnonzero(~self.validators(rig).check(poses).valid)
            if len(todo) == 0:
                return targets
            poses[todo] = self.project_poses(rig, poses[todo], s)
            out = pr.decode(poses, like=targets)
            keep = np.setdiff1d(np.arange(len(poses)), todo)
            out.rotations[keep] = targets.rotations[keep]  # untouched frames stay bit-identical
            return out

        # identifies the filter (checkpoints of a projection refuse to resume with another one)
        target_filter.key = f"posespace-filter:{self.fingerprint()}:strength={s!r}:only_invalid={only_invalid}"
        return target_filter

    def pose_prior(
        self, rig: Rig, manifold_weight: float = 0.02, manifold_time: float = 0.1, seed: int = 0
    ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """A differentiable pose prior for trajectory optimization (``distill.losses.PosePrior``).

        ``prior(rotations (F, J, 4) local quats xyzw, world (F, J, 7)) -> scalar``: the mean over frames of the
        validators' smooth loss plus ``manifold_weight`` x the squared distance (model units) between each pose
        and the denoiser's clean estimate of it noised to ``manifold_time`` (fixed noise from ``seed``: a
        deterministic function of the poses). Gradients flow to ``rotations``; ``world`` is not used.
        """
        from ._prior import make_pose_prior

        return make_pose_prior(self, rig, manifold_weight, manifold_time, seed)

    def with_sampling(self, **changes) -> PoseSpace:
        """A view of this pose space with changed sampling settings (shares the model)."""
        out = PoseSpace.__new__(PoseSpace)
        out.__dict__.update(self.__dict__)
        out.sampling = replace(self.sampling, **changes).check()
        return out


def _pinned_ends(path: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """6D path (S, J, 6) corrected to start at pose ``a`` and end at ``b`` (J, 6) without a jump.

    Per joint, the rotations taking the path's first pose to ``a`` and its last to ``b`` (left-multiplied, in the
    parent's frame) are slerped along the path (fraction 0 at the first step, 1 at the last) and applied to every
    pose: the ends are exact, and a step changes by at most the path's own step plus 1 / (S - 1) of the ends'
    difference in error (overwriting the ends left their whole reconstruction error as the first and last steps).
    The root keeps no heading (twist about up), as :func:`_orthonormal` makes it.
    """
    from sim.rotations import quat_conjugate, quat_multiply, quat_slerp

    from ._rotations import remove_twist_x

    q = rot6d_to_quat(path)
    fix_a = quat_multiply(rot6d_to_quat(a), quat_conjugate(q[0]))  # (J, 4) xyzw
    fix_b = quat_multiply(rot6d_to_quat(b), quat_conjugate(q[-1]))
    u = np.linspace(0.0, 1.0, len(path))
    fixed = quat_multiply(quat_slerp(fix_a, fix_b, u[:, None]), q)
    fixed[:, 0] = remove_twist_x(fixed[:, 0])  # a pose has no heading (as _orthonormal makes them)
    out = quat_to_rot6d(fixed)
    out[0], out[-1] = a, b  # exact (the corrected ends differ from them by round-off)
    return out


def _placed_path(pr: PoseRig, path: np.ndarray, a: Motion, b: Motion, fps: float) -> Motion:
    """6D path (S, J, 6) as a Motion placed between one-frame motions ``a`` and ``b`` (see ``interpolate``)."""
    from sim.rotations import quat_slerp

    u = np.linspace(0.0, 1.0, len(path))
    headings = quat_slerp(pr.headings(a.rotations), pr.headings(b.rotations), u)
    rot = pr.decode_quats(rot6d_to_quat(path), headings)
    inactive = ~pr.active
    rot[:, inactive] = quat_slerp(a.rotations[:, inactive], b.rotations[:, inactive], u[:, None])
    trans = None
    if a.translations is not None or b.translations is not None:  # clips that move joints (Fox: b_Hip_01)
        ta, tb = a.local_translations(pr.rig)[0], b.local_translations(pr.rig)[0]
        trans = (1 - u)[:, None, None] * ta + u[:, None, None] * tb
    ends_rot = np.concatenate([a.rotations, b.rotations])
    ends_trans = None if trans is None else trans[[0, -1]]
    clearance = np.concatenate([a.root_translations, b.root_translations])[:, 2] + pr.lowest_points(
        ends_rot, ends_trans
    )
    root = (1 - u)[:, None] * a.root_translations + u[:, None] * b.root_translations
    root[:, 2] = pr.ground_heights(rot, trans) + (1 - u) * clearance[0] + u * clearance[1]
    return Motion(fps, root, rot, trans, name="interpolation")


def _checksum_matches(state: dict) -> bool:
    """Whether a saved state's ``checksum`` is that of its weights, calibrations and scale, and for
    ``checksum_version`` 2 its :data:`CHECKSUM_SETTINGS` (False also when those fields are too damaged to hash, or
    for an unknown version)."""
    try:
        version = state.get("checksum_version", 1)
        if version == 1:  # checkpoints written before the settings were covered
            settings = None
        elif version == CHECKSUM_VERSION:
            settings = {k: state[k] for k in CHECKSUM_SETTINGS}
        else:
            return False
        return state["checksum"] == _checksum(state["model"], state.get("calibrations", {}), state["scale"], settings)
    except Exception:  # a damaged field (a list for a mapping, a float for a tensor, ...) cannot match
        return False


def _checksum(
    model_state: Mapping[str, torch.Tensor], calibrations: Mapping, scale, settings: Mapping | None = None
) -> str:
    """SHA-256 of a checkpoint's weights (names and bytes), calibrations (canonical JSON) and data scale, and when
    given (version 2) its ``settings`` (:data:`CHECKSUM_SETTINGS`' fields, canonical JSON)."""
    import hashlib
    import json

    h = hashlib.sha256()
    for name in sorted(model_state):
        t = model_state[name]
        h.update(name.encode())
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    cals = {k: (v.to_dict() if isinstance(v, RigCalibration) else v) for k, v in calibrations.items()}
    h.update(json.dumps(cals, sort_keys=True, default=lambda a: np.asarray(a).tolist()).encode())
    h.update(repr(float(scale)).encode())
    if settings is not None:
        h.update(json.dumps(dict(settings), sort_keys=True, default=lambda a: np.asarray(a).tolist()).encode())
    return "sha256:" + h.hexdigest()


def _parse_calibration(key: str, data) -> RigCalibration:
    """A checkpoint's calibration dict as a :class:`RigCalibration`, or ValueError naming ``calibrations[key]``
    and what is wrong (shapes, finiteness, the excluded part pairs and pair allowances)."""
    where = f"calibrations[{key!r}]"
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a calibration (dict), got {type(data).__name__}")
    limits = data.get("limits")
    if not isinstance(limits, dict):
        raise ValueError(f"{where}: lacks the joint limits ('limits'; fields {sorted(map(str, data))})")
    arrays = {}
    for name, ndim in (("swing", 2), ("twist_lo", 1), ("twist_hi", 1), ("weight", 1)):
        if name not in limits:
            raise ValueError(f"{where}: limits lack {name!r}")
        try:
            arrays[name] = np.asarray(limits[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: limits.{name} is not numeric") from None
        if arrays[name].ndim != ndim:
            raise ValueError(f"{where}: limits.{name}: expected a {ndim}-D array, got shape {arrays[name].shape}")
        if not bool(np.isfinite(arrays[name]).all()):
            raise ValueError(f"{where}: limits.{name}: non-finite values")
    joints = len(arrays["swing"])
    if any(len(arrays[n]) != joints for n in ("twist_lo", "twist_hi", "weight")):
        shapes = ", ".join(f"{n} {arrays[n].shape}" for n in arrays)
        raise ValueError(f"{where}: limits of inconsistent shapes ({shapes})")
    extra = set(limits) - {"swing", "twist_lo", "twist_hi", "weight", "source"}
    if extra:
        raise ValueError(f"{where}: limits have unknown fields {sorted(map(str, extra))}")
    pairs = data.get("excluded_parts", [])
    try:
        pairs = [tuple(int(i) for i in p) for p in pairs]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: excluded_parts: expected pairs of joint indices") from None
    if any(len(p) != 2 or min(p) < 0 or max(p) >= joints for p in pairs):
        raise ValueError(f"{where}: excluded_parts: expected pairs of joint indices in [0, {joints})")
    try:
        allowances = [(int(a), int(b), float(v)) for a, b, v in data.get("part_allowances", [])]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: part_allowances: expected [joint, joint, allowance] triples") from None
    if any(min(a, b) < 0 or max(a, b) >= joints or not (math.isfinite(v) and v >= 0) for a, b, v in allowances):
        raise ValueError(f"{where}: part_allowances: expected joint indices in [0, {joints}) and finite allowances "
                         f">= 0")  # fmt: skip
    keys = [tuple(sorted((a, b))) for a, b, _ in allowances]
    if any(a == b for a, b in keys) or len(set(keys)) != len(keys):
        raise ValueError(f"{where}: part_allowances: expected one entry per pair of two different joints")
    return RigCalibration.from_dict(data)


def _check_calibration_fits(cal: RigCalibration, key: str, rig: Rig, source: str) -> None:
    """ValueError naming ``source`` when a calibration's joint count differs from the rig's (a calibration stored
    under another skeleton's key: the validators would fail on a tensor shape deep inside)."""
    joints = len(cal.limits.swing)
    if joints != rig.joint_count:
        raise ValueError(f"{source}: calibrations[{key!r}] has limits for {joints} joints but rig {rig.name!r} has "
                         f"{rig.joint_count}: the checkpoint's calibration of this skeleton is damaged")  # fmt: skip


def _finite(name: str, value, shape_text: str) -> np.ndarray:
    """``value`` as a float64 array, or ValueError naming ``name`` when it is not numeric or not finite."""
    if torch.is_tensor(value):
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: expected numbers of shape {shape_text}, got {type(value).__name__} ({e})") from None
    bad = np.argwhere(~np.isfinite(arr))
    if len(bad):
        raise ValueError(f"{name}: non-finite value at index {tuple(int(i) for i in bad[0])}")
    return arr


def _check_poses(name: str, poses, pr: PoseRig, batched: bool) -> np.ndarray:
    """6D poses of ``pr``'s rig: shape (N, J, 6) when ``batched`` (N >= 1), (J, 6) otherwise; finite."""
    j = pr.joint_count
    text = f"(N, {j}, 6)" if batched else f"({j}, 6)"
    arr = _finite(name, poses, text)
    if arr.shape[-2:] != (j, 6) or arr.ndim != (3 if batched else 2) or (batched and len(arr) == 0):
        raise ValueError(f"{name}: expected 6D poses of rig {pr.rig.name!r} of shape {text}, got {arr.shape}")
    return arr


def _check_handles(
    rig: Rig, handles: Mapping[str | int, np.ndarray], root_translation
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Joint indices, targets (N, H, 3) and root positions (N, 3) of :meth:`PoseSpace.ik_poses`'s arguments."""
    if not handles:
        raise ValueError("handles: empty; give at least one joint name or index -> position [m]")
    idx = []
    for key in handles:
        if isinstance(key, str):
            idx.append(rig.joint_index(key))  # KeyError naming the joint and the rig
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= key < rig.joint_count:
            idx.append(int(key))
        else:
            raise ValueError(f"handles: key {key!r} is neither a joint name nor an index in [0, {rig.joint_count})")
        if idx.count(idx[-1]) > 1:
            first = next(k for k, i in zip(handles, idx) if i == idx[-1])
            raise ValueError(f"handles: {first!r} and {key!r} are the same joint "
                             f"({rig.joint_names[idx[-1]]!r}); give one target per joint")  # fmt: skip
    rows = []
    for key, value in handles.items():
        arr = _finite(f"handles[{key!r}]", value, "(3,) or (N, 3)")
        if arr.shape[-1:] != (3,) or arr.ndim not in (1, 2) or arr.size == 0:
            raise ValueError(f"handles[{key!r}]: expected a position of shape (3,) or (N, 3) [m], got {arr.shape}")
        rows.append(np.atleast_2d(arr))
    keys = list(handles)
    on_root = [k for k, i in enumerate(idx) if rig.parents[i] < 0]
    if on_root:  # the IK holds the root in place: a handle on it is where the root goes
        k = on_root[0]
        if root_translation is not None:
            given = np.atleast_2d(_finite("root_translation", root_translation, "(3,) or (N, 3)"))
            if given.shape[-1:] != (3,) or not np.allclose(given, rows[k], rtol=0.0, atol=1e-9):
                raise ValueError(f"handles[{keys[k]!r}] (the root) and root_translation disagree; give one of them")
        root_translation = rows[k]
        del idx[k], rows[k]
        if not idx:
            raise ValueError(f"handles: only the root ({keys[k]!r}) has a handle, which places it; give at least one"
                             " other joint")  # fmt: skip
    root = rig.rest_translations[0] if root_translation is None else root_translation
    root = np.atleast_2d(_finite("root_translation", root, "(3,) or (N, 3)"))
    if root.shape[-1] != 3 or root.ndim != 2 or len(root) == 0:
        raise ValueError(f"root_translation: expected shape (3,) or (N, 3) [m], got {np.shape(root_translation)}")
    counts = {len(r) for r in [*rows, root]} - {1}
    if len(counts) > 1:
        raise ValueError(f"handles / root_translation: different pose counts {sorted(counts)}; use (3,) or (N, 3)")
    n = counts.pop() if counts else 1
    targets = np.stack([np.broadcast_to(r, (n, 3)) for r in rows], axis=1)
    return idx, targets, np.broadcast_to(root, (n, 3))


def tokens_to_poses(x: torch.Tensor, active_index: torch.Tensor, joint_count: int, scale: float) -> torch.Tensor:
    """Model tokens (N, A, 6) -> 6D poses (N, J, 6): identity plus ``scale * x`` at the active joints."""
    full = x.new_zeros((x.shape[0], joint_count, 6))
    full[:, active_index] = scale * x
    return torch.as_tensor(IDENTITY_6D, dtype=x.dtype, device=x.device) + full


def _check_training(training) -> dict:
    """A copy of the training record ``{'steps': int >= 0, 'final_loss': number or None, ...}``; ValueError
    naming ``training`` otherwise (``{'steps': True}`` read "trained True steps")."""
    ok = isinstance(training, Mapping) and not isinstance(training.get("steps"), bool)
    ok = ok and isinstance(training.get("steps"), int | np.integer) and training["steps"] >= 0
    loss = training.get("final_loss") if ok else None
    if not ok or not (loss is None or is_real(loss)):
        raise ValueError(f"training: expected {{'steps': int >= 0, 'final_loss': float}}, got {training!r}")
    return dict(training)


def _check_seed(seed) -> int | None:
    """``seed`` as an int (any integer >= 0) or None; ValueError naming it otherwise (True, 1.9 and 2**63 were
    seeds 1, 1 and 0: a modulo and int() let different seeds collide)."""
    return None if seed is None else check_int("seed", seed, 0)


def _seeded_noise(seed: int | None, first: int, cond: Conditioning) -> torch.Tensor | None:
    """Unit initial noise (M, A, 6) for poses ``first .. first + M - 1`` of a seeded call, each pose from its own
    stream of ``seed``: a pose does not depend on how many poses the call asks for nor on ``SamplingConfig.batch``
    (one generator over the chunks gave pose 0 of n = 1 and of n = 2 different noise: torch draws normals in
    blocks of 16). None without a seed (fresh noise)."""
    if seed is None:
        return None
    shape = (*cond.mask.shape[1:], 6)
    out = torch.empty((cond.mask.shape[0], *shape))
    for k in range(len(out)):
        state = np.random.SeedSequence([int(seed), first + k]).generate_state(1, np.uint64)[0]
        out[k] = torch.randn(shape, generator=torch.Generator().manual_seed(int(state) >> 1))
    return out


def _orthonormal(poses: np.ndarray) -> np.ndarray:
    """6D poses (N, J, 6) made exact rotations (Gram-Schmidt), with the root's heading (twist about up) removed:
    a pose has no heading, whatever small twist the network put there."""
    from sim.rotations import quat_to_rot6d, rot6d_to_quat

    from ._rotations import remove_twist_x

    q = rot6d_to_quat(poses)
    q[..., 0, :] = remove_twist_x(q[..., 0, :])
    return quat_to_rot6d(q)
