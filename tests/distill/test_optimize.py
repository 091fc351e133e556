"""The distillation loop: a crashed run resumes from its checkpoint and ends where the unbroken run ends; outputs;
the oracle recovers a known motion of a small character."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest
import torch

from distill import CameraConfig, RasterSettings, RenderConfig
from distill.guidance import GuidanceConfig, TimestepSchedule
from distill.metrics import motion_error
from distill.optimize import DistillConfig, Distiller, LossWeights, OptimConfig
from sim import Motion

RESUME_TOL = 1e-6  # [rad-ish 6D units / m]: resumed vs unbroken parameters (same float ops, same order)


class Crash(RuntimeError):
    pass


def _config(kind: str, steps: int, **optim) -> DistillConfig:
    return DistillConfig(
        prompt="a chain waving",
        frames=5,
        fps=12.0,
        render=RenderConfig(
            width=32,
            height=32,
            albedo="position",
            camera=CameraConfig(azimuths_deg=(30.0,), distance=1.5),
            raster=RasterSettings(sigma=1.0),
        ),
        guidance=GuidanceConfig(
            kind=kind,
            device="cpu",
            schedule=TimestepSchedule(min=0.1, max_start=0.9),
            vae_gradient_checkpointing=False,  # faster on CPU; checkpointed gradients are tested in test_guidance
        ),
        optim=OptimConfig(steps=steps, checkpoint_every=2, preview_every=0, **optim),
    )


def _params(d: Distiller) -> tuple[np.ndarray, np.ndarray]:
    return d.trajectory.rotations_6d.detach().numpy().copy(), d.trajectory.translation.detach().numpy().copy()


def test_crashed_run_resumes_to_the_unbroken_result(tmp_path, make_chain):
    """SDS with the tiny CogVideoX (random timesteps and noise every step): a run that dies in its third step (its
    last checkpoint is from step 2) and is resumed ends where an unbroken run with the same seed ends."""
    rig = make_chain()
    cfg = _config("tiny", steps=4, lr_rotation=0.05)
    unbroken = Distiller(rig, cfg, tmp_path / "unbroken")
    result = unbroken.run(progress=False)
    assert result.steps_run == 4

    def crash_in_step_2(step, row):
        if step == 2:
            raise Crash

    first = Distiller(rig, cfg, tmp_path / "crashed")
    with pytest.raises(Crash):
        first.run(progress=False, callback=crash_in_step_2)
    assert torch.load(tmp_path / "crashed" / "checkpoint.pt", weights_only=False)["step"] == 2
    resumed = Distiller(rig, cfg, tmp_path / "crashed").run(resume=True, progress=False)
    assert resumed.steps_run == 2
    rot_a, _ = _params(unbroken)
    moved = np.abs(rot_a - Distiller(rig, cfg, tmp_path / "fresh").trajectory.rotations_6d.detach().numpy()).max()
    assert moved > 1e-3, "the run changes the trajectory"
    np.testing.assert_allclose(resumed.motion.rotations, result.motion.rotations, atol=RESUME_TOL)
    np.testing.assert_allclose(resumed.motion.root_translations, result.motion.root_translations, atol=RESUME_TOL)
    assert [r["step"] for r in resumed.log] == list(range(4))
    np.testing.assert_allclose([r["sds"] for r in resumed.log], [r["sds"] for r in result.log], rtol=1e-5)


def test_resume_refuses_a_different_config(tmp_path, make_chain):
    rig = make_chain()
    cfg = _config("oracle", steps=2)
    target = Motion.rest(rig, 5, 12.0)
    Distiller(rig, cfg, tmp_path, oracle_motion=target).run(progress=False)
    other = dataclasses.replace(cfg, weights=LossWeights(smoothness=1.0))
    with pytest.raises(ValueError, match=r"weights\.smoothness"):
        Distiller(rig, other, tmp_path, oracle_motion=target).run(resume=True, progress=False)


def test_oracle_run_recovers_a_known_motion_and_writes_outputs(tmp_path, make_chain, make_motion):
    """From the rest pose, SDS with the oracle teacher (through the identity pixel VAE) recovers a bending motion of
    the 3-joint tube, and the run folder holds every output."""
    rig = make_chain()
    target = make_motion(rig, 5, amplitude=0.6)
    cfg = dataclasses.replace(
        _config("oracle", steps=60, lr_rotation=0.03, lr_translation=0.01, sigma_start=6.0),
        render=dataclasses.replace(
            _config("oracle", 1).render, camera=CameraConfig(azimuths_deg=(30.0, 120.0), distance=1.5)
        ),
        weights=LossWeights(smoothness=1.0, ground=0.0),  # the target dips below the floor under the bind pose
    )
    d = Distiller(rig, cfg, tmp_path, oracle_motion=target)
    before = motion_error(rig, d.trajectory.to_motion(), target)
    result = d.run(progress=False)
    after = motion_error(rig, result.motion, target)
    assert before.mean_joint_angle_deg > 15.0
    assert after.mean_joint_angle_deg < 6.0
    assert after.root_path_error < 0.01
    for name in ("config.json", "checkpoint.pt", "loss_log.csv", "motion.usda", "oracle_metrics.json"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "previews" / "final.gif").is_file()
    assert json.loads((tmp_path / "config.json").read_text())["optim"]["steps"] == 60
    rows = list(csv.DictReader(open(tmp_path / "loss_log.csv")))
    assert len(rows) == 60 and {"sds", "smoothness", "ground", "self_collision", "total"} <= set(rows[0])
    metrics = json.loads((tmp_path / "oracle_metrics.json").read_text())
    np.testing.assert_allclose(metrics["mean_joint_angle_deg"], after.mean_joint_angle_deg, rtol=1e-6)

    from usd_io import load_asset

    back = load_asset(tmp_path / "motion.usda")
    clip = back.clip()
    np.testing.assert_allclose(clip.times, result.motion.times, atol=1e-6)
    np.testing.assert_allclose(np.abs((clip.rotations * result.motion.rotations).sum(-1)), 1.0, atol=1e-5)


def test_pose_prior_hook_is_called_and_weighted(tmp_path, make_chain, make_motion):
    rig = make_chain()
    target = make_motion(rig, 5)
    calls = []

    def prior(rotations: torch.Tensor, world: torch.Tensor) -> torch.Tensor:
        calls.append((tuple(rotations.shape), tuple(world.shape)))
        return (world[..., 2] - 1.0).square().mean()  # pulls every joint up to z = 1

    cfg = dataclasses.replace(_config("oracle", steps=3), weights=LossWeights(sds=0.0, pose_prior=5.0))
    d = Distiller(rig, cfg, tmp_path, oracle_motion=target, pose_prior=prior)
    z0 = d.trajectory.translation.detach()[:, 2].clone()
    result = d.run(progress=False)
    assert calls[0] == ((5, rig.joint_count, 4), (5, rig.joint_count, 7)) and len(calls) == 3
    assert all(r["pose_prior"] > 0 for r in result.log)
    assert (d.trajectory.translation.detach()[:, 2] > z0).all(), "the prior alone lifts the root towards z = 1"


def test_resume_refuses_another_pose_prior(tmp_path, make_chain, make_motion):
    """The prior's identity (its ``key``) is part of the run's config: resuming without it, or with another, is
    refused instead of silently continuing a different optimization."""
    from distill.optimize import ResumeError

    rig = make_chain()
    target = make_motion(rig, 5)

    def lift(rotations, world):
        return (world[..., 2] - 1.0).square().mean()

    lift.key = "lift-to-1"
    cfg = dataclasses.replace(_config("oracle", steps=4), weights=LossWeights(pose_prior=5.0))
    Distiller(rig, cfg, tmp_path, oracle_motion=target, pose_prior=lift).run(progress=False, stop_after=2)
    assert json.loads((tmp_path / "config.json").read_text())["pose_prior"] == "lift-to-1"
    for other in (None, lambda r, w: w.sum() * 0.0):
        with pytest.raises(ResumeError, match=r"differs in: pose_prior"):
            Distiller(rig, cfg, tmp_path, oracle_motion=target, pose_prior=other).run(resume=True, progress=False)
    resumed = Distiller(rig, cfg, tmp_path, oracle_motion=target, pose_prior=lift).run(resume=True, progress=False)
    assert resumed.steps_run == 2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: OptimConfig(steps=0), r"OptimConfig.steps: must be an integer >= 1, got 0"),
        (lambda: OptimConfig(checkpoint_every=0), r"OptimConfig.checkpoint_every"),  # was a ZeroDivisionError
        (lambda: OptimConfig(key_count=1), r"OptimConfig.key_count: must be an integer >= 2"),
        (lambda: OptimConfig(lr_rotation=float("nan")), r"OptimConfig.lr_rotation: must be a finite number > 0"),
        (lambda: DistillConfig(frames=-3), r"DistillConfig.frames: must be an integer >= 1, got -3"),
        (lambda: DistillConfig(fps=0.0), r"DistillConfig.fps: must be a finite number > 0"),
        # the video VAEs' temporal compression: Wan dropped frames 6-8 of 8 (zero gradient) without a word
        (
            lambda: DistillConfig(frames=8, guidance=GuidanceConfig(kind="tiny-wan")),
            r"DistillConfig.frames: tiny-wan needs 4k \+ 1 frames .* got 8; e.g. 5 or 9",
        ),
        (lambda: DistillConfig(frames=12, guidance=GuidanceConfig(kind="cogvideox-2b")), r"needs 4k \+ 1 frames"),
        (lambda: RenderConfig(width=-32), r"RenderConfig.width: must be an integer >= 1"),
        (lambda: CameraConfig(azimuths_deg=()), r"CameraConfig.azimuths_deg: need one or more finite angles"),
        (lambda: CameraConfig(azimuths_deg=(float("nan"),)), r"CameraConfig.azimuths_deg"),
        (lambda: GuidanceConfig(guidance_scale=float("nan")), r"GuidanceConfig.guidance_scale: must be a finite"),
    ],
)
def test_bad_settings_are_named_on_construction(make, message):
    with pytest.raises(ValueError, match=message):
        make()
