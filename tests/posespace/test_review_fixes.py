"""Inputs the pose space refused silently or wrongly before: TrainConfig numbers by the one number rule (NumPy
scalars are numbers, bools and NaN are not), the pose prior on no frames or a zero quaternion, and DDIM on times
outside [0, 1], times that go both ways, or a non-finite start (tiny models, a few seconds each)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from posespace import (
    FEATURE_COUNT,
    Conditioning,
    GaussianDiffusion,
    ModelConfig,
    PoseDenoiser,
    PoseSet,
    TrainConfig,
    train,
)
from posespace.training import _lr_factor

TINY = ModelConfig(width=16, depth=1, heads=2)


def _cfg(out, **changes) -> TrainConfig:
    base = dict(steps=2, batch_size=8, warmup=1, model=TINY, progress=False, heldout=(), validator_poses=4,
                checkpoint_every=2)  # fmt: skip
    return TrainConfig(output=out, **{**base, **changes})


@pytest.fixture(scope="module")
def stick_set(make_stick, make_walk) -> PoseSet:
    rig = make_stick()
    ps = PoseSet()
    for name, phase, amp in (("walk", 0.0, 1.0), ("stroll", 0.5, 0.6)):
        ps.add(rig, make_walk(rig, 40, phase, amp), name, fps=None)
    return ps


# -- TrainConfig -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value",
    [("lr", True), ("fps", True), ("grad_clip", True), ("weight_decay", False), ("validator_weight", True),
     ("ema", False), ("threads", True), ("steps", True), ("lr", math.nan), ("fps", math.inf),
     ("grad_clip", np.float64("nan")), ("ema", math.nan), ("rig_weights", (True, False)),
     ("rig_weights", (1.0, math.nan)), ("lr", "0.001")],
)  # fmt: skip
def test_train_config_refuses_bools_and_non_finite_numbers_naming_the_field(tmp_path, field, value):
    with pytest.raises(ValueError, match=rf"^TrainConfig\.{field}: "):
        TrainConfig(output=tmp_path, **{field: value}).check()


def test_train_config_takes_numpy_numbers_as_the_python_numbers_they_hold(tmp_path, stick_set):
    cfg = _cfg(tmp_path / "run", lr=np.float32(1e-3), fps=np.float64(30.0), steps=np.int64(2), seed=np.int32(3),
               ema=np.float32(0.99), threads=np.int64(1), rig_weights=(np.float32(1.0),))  # fmt: skip
    assert cfg.check() is cfg
    for name in ("lr", "fps", "ema"):
        assert type(getattr(cfg, name)) is float, name
    assert type(cfg.steps) is int and type(cfg.seed) is int and type(cfg.threads) is int
    assert cfg.lr == float(np.float32(1e-3)) and cfg.seed == 3 and cfg.rig_weights == (1.0,)
    plain = _cfg(tmp_path / "plain", fps=60, lr=1)  # Python values are left exactly as given
    assert plain.check().fps == 60 and type(plain.fps) is int and type(plain.lr) is int
    space = train(cfg, stick_set)  # config.json is JSON (a NumPy scalar is not JSON serializable)
    assert space.training["steps"] == 2
    written = json.loads((tmp_path / "run" / "config.json").read_text())
    assert written["seed"] == 3 and written["lr"] == pytest.approx(1e-3, rel=1e-6)


def test_the_learning_rate_schedule_is_what_the_steps_doc_says():
    """TrainConfig.steps: warmup at (i + 1) / warmup, then a cosine that reaches 5% at index steps (one past the
    last step, which runs slightly above: 6% at steps 20, warmup 5; 5.00001% at the defaults)."""
    c = TrainConfig(steps=20, warmup=5)
    assert [_lr_factor(i, c) for i in range(5)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert _lr_factor(19, c) == pytest.approx(0.0604, abs=5e-4) and _lr_factor(20, c) == pytest.approx(0.05)
    assert _lr_factor(4999, TrainConfig()) == pytest.approx(0.0500001, abs=1e-7)


# -- the pose prior ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prior_and_rig(stick_set, tmp_path_factory, make_stick):
    space = train(_cfg(tmp_path_factory.mktemp("prior")), stick_set)
    rig = make_stick()
    return space.pose_prior(rig, manifold_weight=1.0), rig


def _identity(frames: int, joints: int) -> torch.Tensor:
    q = torch.zeros(frames, joints, 4)
    q[..., 3] = 1.0
    return q


def test_the_pose_prior_refuses_no_frames(prior_and_rig):
    prior, rig = prior_and_rig
    assert math.isfinite(prior(_identity(1, rig.joint_count), None).item())
    with pytest.raises(ValueError, match=r"no frames"):
        prior(torch.zeros(0, rig.joint_count, 4), None)


def test_the_pose_prior_refuses_a_zero_quaternion_naming_frame_and_joint(prior_and_rig):
    prior, rig = prior_and_rig
    q = _identity(2, rig.joint_count)
    q[1, 4] = 0.0  # left_elbow: no rotation at all (was read as the identity)
    with pytest.raises(ValueError, match=r"zero quaternion .* frame 1, joint 4 \(left_elbow\)"):
        prior(q, None)
    q[1, 4] = torch.tensor([0.0, 0.0, 0.0, 0.5])  # unnormalized quaternions are still rotations
    assert prior(q, None).item() == pytest.approx(prior(_identity(2, rig.joint_count), None).item())


# -- DDIM --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def denoiser():
    torch.manual_seed(0)
    model = PoseDenoiser(TINY).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    B, J = 2, 5
    mask = torch.ones(B, J, dtype=torch.bool)
    mask[1, 3:] = False
    cond = Conditioning(torch.randn(B, J, FEATURE_COUNT), torch.zeros(B, J, J, dtype=torch.long), mask)
    return model, cond, torch.randn(B, J, 6)


@pytest.mark.parametrize("times", [[2.0, 1.5, 0.0], [1.0, 0.5, -0.1], [1.0, math.nan, 0.0], [1.0, True, 0.0]])
def test_ddim_refuses_times_outside_zero_one(denoiser, times):
    model, cond, x = denoiser
    with pytest.raises(ValueError, match=r"times\[\d\]: must be a number in \[0, 1\]"):
        GaussianDiffusion().ddim(model, x, cond, times)


@pytest.mark.parametrize("times", [[1.0, 0.5, 0.7, 0.0], [0.0, 0.4, 0.2]])
def test_ddim_refuses_times_that_go_both_ways(denoiser, times):
    model, cond, x = denoiser
    with pytest.raises(ValueError, match=r"times: must be monotonic"):
        GaussianDiffusion().ddim(model, x, cond, times)


def test_ddim_refuses_a_non_finite_start_at_posed_joints_only(denoiser):
    model, cond, x = denoiser
    d = GaussianDiffusion()
    nan = torch.full_like(x, math.nan)
    with pytest.raises(ValueError, match=r"^noise: non-finite value at pose 0, joint 0"):
        d.sample(model, cond, steps=4, noise=nan)
    with pytest.raises(ValueError, match=r"^x: non-finite value at pose 0, joint 0"):
        d.invert(model, torch.full_like(x, math.inf), cond, 0.5, 4)
    junk = x.clone()
    junk[~cond.mask] = math.nan  # padded slots may hold anything, as before
    out = d.ddim(model, junk, cond, d.schedule(4))
    assert torch.equal(out, d.ddim(model, x, cond, d.schedule(4))) and bool(torch.isfinite(out).all())
    paused = d.ddim(model, x, cond, [0.5, 0.5, 0.0])  # a repeated time is a pause, not a change of direction
    torch.testing.assert_close(paused, d.ddim(model, x, cond, [0.5, 0.0]), atol=1e-5, rtol=0)
