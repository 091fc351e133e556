"""Training: DDPM (v-prediction) with a validator loss, on one CPU or many processes through ``accelerate``.

``train(config)`` loads the clip specs, splits off held-out clips, calibrates the validators of every training
skeleton on its training poses, and optimizes the denoiser. Run it in plain Python for one process or under
``accelerate launch`` (multi-GPU / multi-node): every process draws its own random batches, diffusion times and
noise (seeded from seed and rank; the weights start alike), the model and optimizer are wrapped by
:class:`accelerate.Accelerator` (gradients all-reduced), and only the main process shows a progress bar and
writes checkpoints. A checkpoint holds the EMA weights as a loadable
:class:`PoseSpace` plus the raw weights, optimizer state, step, random streams and the last steps' losses (the
final loss a model records), so ``resume=True`` continues a single-process run as if unbroken (the same weights,
losses and final loss). A distributed run does not: only the main process's streams are saved, the other processes
draw their batches, times and noise afresh (seeded from seed, rank and the resumed step), so its weights after a
resume differ from the unbroken run's as another seed's would. A folder
holding an earlier run is refused unless the run resumes it or ``overwrite=True`` starts afresh there. Training
draws from torch's default generators seeded with ``seed`` and restores the caller's random state afterwards.
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from sim._numbers import is_finite_real, is_integer, plain

from ._checks import check_int, check_number
from .data import AugmentConfig, PoseBatchSampler, PoseSet, _clip_identity, data_scale
from .diffusion import Conditioning, DiffusionConfig, GaussianDiffusion
from .model import ModelConfig, PoseDenoiser
from .space import PoseSpace, _checksum_matches, tokens_to_poses
from .validators import PoseValidators, ValidatorConfig, calibrate

__all__ = ["DEFAULT_HELDOUT", "DEFAULT_TRAIN_DATA", "TrainConfig", "train"]

DEFAULT_TRAIN_DATA = (
    "../shared/assets/bvh/131_01.bvh",
    "../shared/assets/bvh/131_02.bvh",
    "../shared/assets/gltf/Fox.glb#Survey,Walk,Run",
    "procedural:quadruped",
    "gaits:quadruped*8",
)
"""The acceptance data: CMU 131, the Fox, and procedural quadruped gaits (the biped is left out: zero-shot)."""

DEFAULT_HELDOUT = ("Run", "131_02")
"""Clips held out of training by default (Fox Run, CMU 131_02)."""


@dataclass
class TrainConfig:
    """A training run."""

    output: Path = Path("runs/posespace")
    """Folder for checkpoints, the resolved config and the training log."""
    data: tuple[str, ...] = DEFAULT_TRAIN_DATA
    """Clip specs (see posespace.data): files, procedural:NAME, gaits:NAME*COUNT, with #clip,clip selections."""
    heldout: tuple[str, ...] = DEFAULT_HELDOUT
    """Clip names (or source#clip) held out of training."""
    fps: float = 60.0
    """Clips are resampled to this rate [1/s]."""
    steps: int = 5000
    """Optimizer steps; also the length of the learning-rate schedule: linear warmup (step ``i`` < ``warmup``
    at ``(i + 1) / warmup`` x ``lr``), then a half cosine from ``lr`` that would reach 5% of ``lr`` at step
    ``steps``, one past the last (index ``steps - 1``), which so runs slightly above that floor (e.g. 6% of ``lr``
    at steps 20, warmup 5; 5.00001% at the defaults). A resume with more steps than its checkpoint's run continues
    on the longer schedule (the steps after the checkpoint get the longer run's rates, so the rate steps back up
    from where the shorter schedule had decayed it); the steps before it keep the shorter schedule's rates."""
    batch_size: int = 64
    """Poses per step and process."""
    lr: float = 1e-3
    """Peak AdamW learning rate."""
    warmup: int = 200
    """Linear warm-up steps."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient norm clip (0: no clipping)."""
    ema: float = 0.999
    """EMA decay of the weights written to checkpoints."""
    validator_weight: float = 0.05
    """Weight of the validator loss on predicted clean poses (weighted by alpha_bar(t))."""
    validator_poses: int = 32
    """Per skeleton and step, the validator loss looks at this many of the least noisy poses of the batch."""
    rig_weights: tuple[float, ...] | None = None
    """Sampling weight per skeleton (default: equal)."""
    checkpoint_every: int = 1000
    """Steps between checkpoints."""
    resume: bool = False
    """Continue from OUTPUT/checkpoint.pt when it exists."""
    overwrite: bool = False
    """Start afresh where OUTPUT holds an earlier run (its checkpoint.pt, posespace.pt and train_log.json are
    removed once the data has loaded); without it, such a folder is refused unless resume continues its checkpoint.
    Given with resume, an existing checkpoint is continued."""
    seed: int = 0
    """Random seed."""
    threads: int | None = 1
    """torch CPU threads per process (None: torch's choice). The model is small: one thread per process is
    fastest, and several threads spin against each other on a busy machine; scale with processes instead."""
    progress: bool = True
    """Show a progress bar."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Denoiser size."""
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    """Augmentation."""
    validators: ValidatorConfig = field(default_factory=ValidatorConfig)
    """Validator thresholds and calibration."""
    diffusion: DiffusionConfig = field(default_factory=DiffusionConfig)
    """Noise schedule."""

    def check(self) -> TrainConfig:
        """Returns self when every setting is in range (:func:`train` calls this first); ValueError naming the
        field otherwise. (Not run on construction, so command lines report it as one line.)"""
        for name, low in (("steps", 1), ("batch_size", 1), ("warmup", 0), ("validator_poses", 1),
                          ("checkpoint_every", 1), ("seed", 0)):  # fmt: skip
            check_int(f"TrainConfig.{name}", getattr(self, name), low)
        if self.threads is not None and not (is_integer(self.threads) and self.threads >= 0):
            raise ValueError(f"TrainConfig.threads: must be None or an integer >= 0, got {self.threads!r}")
        for name, positive in (("fps", True), ("lr", True), ("grad_clip", False), ("weight_decay", False),
                               ("validator_weight", False)):  # fmt: skip
            check_number(f"TrainConfig.{name}", getattr(self, name), 0.0, strict=positive)
        if not (is_finite_real(self.ema) and 0.0 <= self.ema < 1.0):
            raise ValueError(f"TrainConfig.ema: must be a decay in [0, 1), got {self.ema!r}")
        if self.rig_weights is not None:
            w = list(self.rig_weights)
            if not w or not all(is_finite_real(x) and x >= 0 for x in w) or sum(w) <= 0:
                raise ValueError(f"TrainConfig.rig_weights: must be finite weights >= 0 with a positive sum, got {w}")
        # NumPy scalars are numbers too (sim._numbers); the run, its config.json and a resume's comparison see them
        # as the Python numbers they are (Python values are left exactly as given)
        for name in ("steps", "batch_size", "warmup", "validator_poses", "checkpoint_every", "seed", "threads",
                     "fps", "lr", "grad_clip", "weight_decay", "validator_weight", "ema"):  # fmt: skip
            setattr(self, name, plain(getattr(self, name)))
        if self.rig_weights is not None:
            self.rig_weights = plain(tuple(self.rig_weights))
        self.model.check()
        self.augment.check()
        self.validators.check()
        self.diffusion.check()
        return self


def _lr_factor(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(cfg.steps - cfg.warmup, 1)
    return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def train(cfg: TrainConfig, pose_set: PoseSet | None = None) -> PoseSpace:
    """Trains a pose space (module docstring) and returns it (EMA weights).

    Args:
        cfg: the run.
        pose_set: poses to use instead of loading ``cfg.data`` (held-out clips are still split off).

    Returns:
        The trained pose space; also written to ``cfg.output / "posespace.pt"``.

    Raises:
        ValueError: a setting out of range (naming the field), no training poses, a checkpoint that cannot be
            resumed, or ``cfg.output`` holding an earlier run (checkpoint.pt or posespace.pt) while neither
            ``cfg.resume`` (with a checkpoint) nor ``cfg.overwrite`` is set; nothing is written then.
        KeyError: held-out names that match no clip.
        FloatingPointError: training diverged (the last good checkpoint is kept).
    """
    cfg.check()
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        return _train(cfg, pose_set)
    finally:
        torch.set_num_threads(threads)


RESUME_FIELDS = ("data", "heldout", "fps", "model", "diffusion", "validators", "augment")
"""Settings a resumed run must share with its checkpoint (they fix the data, its scale, the calibrations and the
network; a checkpoint calibrated by an earlier scheme, with excluded part pairs, is refused too)."""


def _read_resume_state(path: Path, cfg: TrainConfig, clips: list[str], data_given: bool) -> dict:
    """The checkpoint at ``path`` if ``cfg`` may continue it; ValueError naming the file and every differing
    setting otherwise (read before anything is written)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        step = int(state["train"]["step"])
    except Exception as e:  # torch raises pickle, zip, key and type errors alike for a foreign checkpoint
        raise ValueError(f"{path}: cannot resume from it ({type(e).__name__}: {e})") from e
    if "checksum" in state and not _checksum_matches(state):
        raise ValueError(f"{path}: cannot resume: checksum mismatch (the file is damaged)")
    old = state["train"].get("config") or {}
    new = _jsonable(asdict(cfg))
    fields = [f for f in RESUME_FIELDS if f in old and (f != "data" or data_given)]
    diff = [f"{f} {json.dumps(old[f])} -> {json.dumps(new[f])}" for f in fields if old[f] != new[f]]
    old_clips = state.get("training_clips")
    if old_clips:  # checkpoints written before the names were resolved hold them as typed (relative to here)
        old_clips = [_clip_identity(str(c)) for c in old_clips]
    if old_clips and old_clips != clips:
        changed = ", ".join(sorted(set(clips) ^ set(old_clips)))
        diff.append(f"training clips {len(old_clips)} -> {len(clips)} ({changed or 'reordered'})")
    if diff:
        raise ValueError(f"{path}: cannot resume: the checkpoint was trained with other settings: {'; '.join(diff)} "
                         "(use the checkpoint's settings, or another --output for a new run)")  # fmt: skip
    cals = state.get("calibrations") or {}
    if any(isinstance(c, dict) and c.get("excluded_parts") and "part_allowances" not in c for c in cals.values()):
        # a resumed run recalibrates: its validator loss would switch from exclusions to allowances mid-run
        raise ValueError(f"{path}: cannot resume: the checkpoint's calibrations exclude routinely overlapping part "
                         "pairs (written before pair allowances); train afresh (--overwrite)")  # fmt: skip
    if step > cfg.steps:
        raise ValueError(f"{path}: cannot resume: the checkpoint is at step {step}, past TrainConfig.steps "
                         f"{cfg.steps} (give steps > {step} to go on; posespace.pt is the finished model)")  # fmt: skip
    return state


RUN_FILES = ("checkpoint.pt", "posespace.pt", "train_log.json")
"""What a run writes besides config.json; a fresh start with ``overwrite`` removes an earlier run's (an
interrupted new run must not leave the old model beside its own config)."""


def _refuse_earlier_run(out: Path, cfg: TrainConfig) -> None:
    """ValueError naming ``out`` when it holds an earlier run that ``cfg`` would silently replace."""
    if cfg.overwrite or (cfg.resume and (out / "checkpoint.pt").is_file()):
        return
    earlier = [name for name in RUN_FILES[:2] if (out / name).is_file()]
    if not earlier:  # an empty folder, or one whose run stopped before its first checkpoint
        return
    if cfg.resume:  # asked to resume, but there is only a finished model
        raise ValueError(f"{out}: holds a finished pose space (posespace.pt) but no checkpoint.pt to resume from; "
                         "start afresh with overwrite=True (--overwrite), or choose another output folder")  # fmt: skip
    raise ValueError(f"{out}: holds an earlier run ({', '.join(earlier)}); continue it with resume=True (--resume), "
                     "start afresh with overwrite=True (--overwrite), or choose another output folder")  # fmt: skip


RECENT_STEPS = 50
"""The final loss a trained model records: the mean denoising loss (MSE of the v-prediction on the scaled pose
tokens, unitless) of this many last steps, kept in checkpoints for a resume."""


def _all_finite(*modules: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for m in modules for p in m.parameters())


def _random_state(sampler: PoseBatchSampler, device: torch.device, rank: int) -> dict:
    """The random streams a resumed run must continue: torch's generator (diffusion times and noise; the CUDA one
    in use) and the batch sampler's, with the rank they belong to (the main process saves its own)."""
    state = {"rank": rank, "torch": torch.random.get_rng_state(), "sampler": sampler.rng.bit_generator.state}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _seed_rank(seed: int, rank: int, start: int, device: torch.device) -> None:
    """Seeds torch's generators (diffusion times and noise) for rank ``rank`` > 0 of a distributed run, from
    ``(seed, rank, start)``: every rank draws its own, and a resumed run does not replay the first steps' draws
    (the main process saves only its own streams; rank 0 keeps ``seed``, so one process trains as before)."""
    value = int(np.random.SeedSequence([seed, rank, start]).generate_state(1, np.uint64)[0] >> 1)
    torch.random.default_generator.manual_seed(value)
    if device.type == "cuda":
        with torch.cuda.device(device):  # an index-less "cuda" is the current device, as _train forks it
            torch.cuda.manual_seed(value)


def _restore_random_state(state: dict | None, sampler: PoseBatchSampler, device: torch.device, rank: int) -> None:
    """Continues the saved streams: a resumed run then draws what the unbroken run would have (it redrew the
    noise of steps 0, 1, ... before). Other ranks of a distributed run, whose streams the main process does not
    save, and checkpoints from before the streams were saved keep fresh seeds (the sampler's ``seed + step``)."""
    if not state or state.get("rank") != rank:
        return
    torch.random.set_rng_state(state["torch"])
    sampler.rng.bit_generator.state = state["sampler"]
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _train(cfg: TrainConfig, pose_set: PoseSet | None) -> PoseSpace:
    from accelerate import Accelerator

    acc = Accelerator(cpu=not torch.cuda.is_available())
    device = torch.device("cpu") if acc.device.type == "cpu" else acc.device
    # the run draws from torch's default generators seeded with cfg.seed; the caller's random state (CPU and the
    # CUDA device in use) is restored afterwards, so training leaves the process's random streams where they were
    cuda = [] if device.type != "cuda" else [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda, device_type="cuda"):
        torch.random.default_generator.manual_seed(cfg.seed)
        for index in cuda:
            torch.cuda.default_generators[index].manual_seed(cfg.seed)
        return _fit(cfg, pose_set, acc, device)


def _fit(cfg: TrainConfig, pose_set: PoseSet | None, acc, device: torch.device) -> PoseSpace:
    from tqdm.auto import tqdm

    from usd_io import atomic_output, make_folder

    main = acc.is_main_process
    out = Path(cfg.output)
    _refuse_earlier_run(out, cfg)  # before the data loads: a rerun must not cost the earlier run
    if pose_set is None and not cfg.data:
        raise ValueError("TrainConfig.data: no clip specs given")
    full = pose_set if pose_set is not None else PoseSet.from_specs(cfg.data, cfg.fps)
    train_set, _ = full.split_by_clip(cfg.heldout)  # KeyError naming held-out names that match no clip
    if not train_set.rigs:
        raise ValueError("no training poses left after holding out " + ", ".join(cfg.heldout))
    if cfg.rig_weights is not None and len(cfg.rig_weights) != len(train_set.rigs):
        raise ValueError(f"TrainConfig.rig_weights: {len(cfg.rig_weights)} weights for {len(train_set.rigs)} "
                         "training skeletons")  # fmt: skip
    # file sources (and gaits: targets) resolved: an evaluation from another folder still knows the clips
    # (procedural names unchanged)
    clips = [_clip_identity(n) for r in train_set.rigs for n in r.clip_names]
    ckpt_path = out / "checkpoint.pt"
    resume_state = None
    if cfg.resume and ckpt_path.is_file():
        resume_state = _read_resume_state(ckpt_path, cfg, clips, pose_set is None)
    if main:  # bad data and a refused resume fail above, before anything is written
        make_folder(out)
        if resume_state is None:  # a fresh start (refused above unless the folder held no run, or overwrite)
            for name in RUN_FILES:
                (out / name).unlink(missing_ok=True)
        with atomic_output(out / "config.json") as tmp:
            tmp.write_text(json.dumps(_jsonable(asdict(cfg)), indent=2))
    scale = data_scale(train_set)
    calibrations, validators = {}, []
    for r in train_set.rigs:
        cal = calibrate(r.pose_rig, r.poses, cfg.validators)
        calibrations[r.pose_rig.signature] = cal
        validators.append(PoseValidators(r.pose_rig, cal, cfg.validators, device=device))

    model = PoseDenoiser(cfg.model)
    ema = PoseDenoiser(cfg.model)
    ema.load_state_dict(model.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    start, log, seconds_before = 0, [], 0.0
    if resume_state is not None:
        try:
            model.load_state_dict(resume_state["train"]["model"])
            ema.load_state_dict(resume_state["model"])
            opt.load_state_dict(resume_state["train"]["optimizer"])
            for group in opt.param_groups:  # the schedule follows this run's settings (the state holds the old ones)
                group.update(lr=cfg.lr, initial_lr=cfg.lr, weight_decay=cfg.weight_decay)
        except Exception as e:  # e.g. a checkpoint from before the settings were recorded
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ValueError(f"{ckpt_path}: cannot resume from it ({type(e).__name__}: {first})") from e
        start = int(resume_state["train"]["step"])
        log = list(resume_state["train"].get("log", []))  # checkpoints before the log was kept: from here on
        seconds_before = float(resume_state["train"].get("seconds", log[-1]["seconds"] if log else 0.0))
    last_saved = start if resume_state is not None else None
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s + start, cfg))
    model, opt = acc.prepare(model, opt)
    diffusion = GaussianDiffusion(cfg.diffusion)
    sampler = PoseBatchSampler(train_set, cfg.batch_size, scale, cfg.augment, cfg.rig_weights, cfg.seed + start,
                               acc.process_index)  # fmt: skip
    if acc.process_index > 0:  # other ranks: their own times and noise (the weights above are alike on all ranks)
        _seed_rank(cfg.seed, acc.process_index, start, device)
    elif resume_state is not None:
        _restore_random_state(resume_state["train"].get("random"), sampler, device, acc.process_index)
    pose_rigs = sampler.pose_rigs
    active_index = [torch.as_tensor(pr.active_index, dtype=torch.long, device=device) for pr in pose_rigs]

    # the denoising loss of the last RECENT_STEPS steps (the provenance's final loss); a resume continues the saved
    # buffer (the main process's; checkpoints from before it was saved: empty), so its record is the unbroken run's
    recent: list[float] = []
    if resume_state is not None and main:
        recent = [float(x) for x in resume_state["train"].get("recent_losses") or []][-RECENT_STEPS:]
    resumed_loss = ((resume_state or {}).get("training") or {}).get("final_loss")

    def make_space(step: int) -> PoseSpace:
        final = sum(recent) / len(recent) if recent else resumed_loss  # a resume with no step left keeps it
        return PoseSpace(_copy(ema), scale, calibrations, cfg.validators, diffusion=cfg.diffusion,
                         training_clips=clips, training={"steps": step, "final_loss": final})  # fmt: skip

    def diverged(step: int, what: str) -> FloatingPointError:
        kept = f"{ckpt_path} (step {last_saved}) is kept" if last_saved is not None else "no checkpoint was written"
        return FloatingPointError(
            f"training diverged at step {step}: {what} (lr {cfg.lr:g}, grad_clip {cfg.grad_clip:g}); {kept}: "
            "lower --lr or set --grad-clip and train again"
        )

    def save(step: int, seconds: float) -> None:
        nonlocal last_saved
        if not _all_finite(ema, acc.unwrap_model(model)):  # never replace a good checkpoint with a broken one
            raise diverged(step, "non-finite weights")
        state = make_space(step).state()
        state["train"] = {
            "model": acc.unwrap_model(model).state_dict(),
            "optimizer": opt.state_dict(),
            "step": step,
            "config": _jsonable(asdict(cfg)),
            "log": log,
            "seconds": seconds,
            "random": _random_state(sampler, device, acc.process_index),
            "recent_losses": list(recent),
        }
        with atomic_output(ckpt_path) as tmp:
            torch.save(state, tmp)
        last_saved = step

    bar = tqdm(range(start, cfg.steps), disable=not (main and cfg.progress), desc="posespace", dynamic_ncols=True)
    t0 = time.time() - seconds_before
    for step in bar:
        batch = sampler.sample().to(device)
        cond = Conditioning(batch.features, batch.distances, batch.mask)
        mse, x0_hat, t = diffusion.training_terms(model, batch.x, cond)
        loss = mse.mean()
        vloss = torch.zeros(())
        if cfg.validator_weight > 0:
            w = diffusion.alpha_bar(t)
            terms = []
            for i, (pr, val) in enumerate(zip(pose_rigs, validators)):
                rows = torch.nonzero(batch.rig_index == i).flatten()
                if len(rows) == 0:
                    continue
                rows = rows[torch.argsort(t[rows])[: cfg.validator_poses]]
                a = active_index[i]
                pose = tokens_to_poses(x0_hat[rows, : len(a)], a, pr.joint_count, scale)
                terms.append((w[rows] * val.loss(pose)).sum())
            vloss = torch.stack(terms).sum() / len(t)
            loss = loss + cfg.validator_weight * vloss
        opt.zero_grad(set_to_none=True)
        acc.backward(loss)
        if cfg.grad_clip > 0:
            grad_norm = acc.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        # gradients are all-reduced: a non-finite loss on any process makes every process stop here
        if not bool(torch.isfinite(loss.detach())):
            raise diverged(step + 1, f"non-finite loss {float(loss.detach())}")
        if not bool(torch.isfinite(grad_norm)):
            raise diverged(step + 1, "non-finite gradient")
        opt.step()
        sched.step()
        with torch.no_grad():
            decay = min(cfg.ema, (1 + step) / (10 + step))
            for pe, pm in zip(ema.parameters(), acc.unwrap_model(model).parameters()):
                pe.mul_(decay).add_(pm.detach().cpu(), alpha=1 - decay)
        recent.append(float(mse.detach().mean()))
        del recent[:-RECENT_STEPS]
        if main:
            v = float(vloss.detach())
            bar.set_postfix(loss=f"{float(mse.detach().mean()):.4f}", val=f"{v:.4f}")
            if (step + 1) % 50 == 0:
                log.append({"step": step + 1, "loss": float(mse.detach().mean()), "validator_loss": v,
                            "lr": sched.get_last_lr()[0], "seconds": time.time() - t0})  # fmt: skip
            if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
                save(step + 1, time.time() - t0)
    acc.wait_for_everyone()
    if not _all_finite(ema):
        raise diverged(cfg.steps, "non-finite weights")
    space = make_space(cfg.steps)
    if main:
        space.save(out / "posespace.pt")
        summary = {
            "processes": acc.num_processes,
            "distributed_type": str(acc.distributed_type),
            "scale": scale,
            "train": repr(train_set),
            "log": log,
            "calibration": {k: v.pass_rates for k, v in calibrations.items()},
        }
        with atomic_output(out / "train_log.json") as tmp:
            tmp.write_text(json.dumps(summary, indent=2))
    return space


def _copy(model: PoseDenoiser) -> PoseDenoiser:
    """A copy of the weights that draws nothing from torch's generators (a fresh module's random init did: saving
    a checkpoint changed the rest of the run, so the weights depended on ``checkpoint_every``)."""
    return copy.deepcopy(model)
