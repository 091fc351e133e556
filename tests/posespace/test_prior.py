"""The pose space as a differentiable pose prior: the torch encoding matches the NumPy one (values and gradcheck),
descending the prior repairs hyperextended knees until the validators pass, and the prior is deterministic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posespace import ModelConfig, PoseRig, PoseSet, TrainConfig, train
from sim import characters
from sim.rotations import axis_angle_to_quat, quat_to_rot6d

ENCODE_TOL = 1e-12
KNEE_BACKWARDS_DEG = 40.0


@pytest.fixture(scope="module")
def biped():
    return characters.build("biped")


@pytest.fixture(scope="module")
def space(biped, tmp_path_factory):
    rig, clips = biped
    ps = PoseSet()
    for name in ("walk", "idle"):
        ps.add(rig, clips[name], name, fps=None)
    cfg = TrainConfig(output=tmp_path_factory.mktemp("prior"), steps=5, batch_size=8,
                      model=ModelConfig(width=16, depth=1), progress=False, heldout=(), validator_poses=4)  # fmt: skip
    return train(cfg, ps)


def test_torch_encoding_matches_numpy(biped):
    rig, clips = biped
    pr = PoseRig(rig)
    rng = np.random.default_rng(3)
    rand = rng.normal(size=(7, rig.joint_count, 4))
    rand /= np.linalg.norm(rand, axis=-1, keepdims=True)
    # a root turned upside down (its canonical quaternion has x = w = 0: no twist about up to remove)
    d = np.tile([0.0, 0.0, 0.0, 1.0], (1, rig.joint_count, 1))
    d[0, 0] = [0.0, 1.0, 0.0, 0.0]
    flipped = pr.decode_quats(d)
    # within TWIST_EPS of upside down (x^2 + w^2 = 2e-14): NumPy reads no twist; torch read a 90-degree twist
    d[0, 0] = np.array([1e-7, 1.0, 0.0, 1e-7]) / np.linalg.norm([1e-7, 1.0, 0.0, 1e-7])
    nearly = pr.decode_quats(d)
    for rot in (clips["walk"].rotations, rand, -rand, flipped, nearly):  # quaternion signs do not matter
        expected = quat_to_rot6d(pr.encode_rotations(rot))
        got = pr.encode_torch(torch.tensor(rot, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(got, expected, atol=ENCODE_TOL)


def test_torch_encoding_gradients_match_finite_differences(biped):
    rig, _ = biped
    pr = PoseRig(rig)
    rng = np.random.default_rng(4)
    q = rng.normal(size=(2, rig.joint_count, 4))
    q = torch.tensor(q / np.linalg.norm(q, axis=-1, keepdims=True), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(pr.encode_torch, (q,), eps=1e-6, atol=1e-6)


def _knees_backwards(space, rig, motion):
    pr = space.pose_rig(rig)
    rot = motion.rotations.copy()
    d = pr.encode_rotations(rot)
    for name in ("left_shin", "right_shin"):
        d[:, rig.joint_index(name)] = axis_angle_to_quat(np.array([0.0, -np.radians(KNEE_BACKWARDS_DEG), 0.0]))
    return pr.decode_quats(d, pr.headings(rot))


def test_descending_the_prior_repairs_invalid_poses(space, biped):
    rig, clips = biped
    pr, val = space.pose_rig(rig), space.validators(rig)
    good = clips["walk"].rotations[:12]
    bad = _knees_backwards(space, rig, clips["walk"].slice(0, 12))
    assert val.check(quat_to_rot6d(pr.encode_rotations(good))).valid.all()
    assert not val.check(quat_to_rot6d(pr.encode_rotations(bad))).valid.any()
    prior = space.pose_prior(rig, manifold_weight=0.0)
    assert prior(torch.tensor(good, dtype=torch.float32), None).item() == 0.0  # valid data: no penalty
    q = torch.tensor(bad, dtype=torch.float32, requires_grad=True)
    start = prior(q, None).item()
    assert start > 0
    opt = torch.optim.Adam([q], lr=0.01)
    for _ in range(150):
        opt.zero_grad()
        loss = prior(q, None)
        loss.backward()
        opt.step()
    repaired = q.detach().numpy().astype(np.float64)
    repaired /= np.linalg.norm(repaired, axis=-1, keepdims=True)
    assert loss.item() < 0.01 * start
    assert val.check(quat_to_rot6d(pr.encode_rotations(repaired))).valid.all()


def test_manifold_term_is_deterministic_and_differentiable(space, biped):
    rig, clips = biped
    rot = torch.tensor(clips["walk"].rotations[:6], dtype=torch.float32, requires_grad=True)
    prior = space.pose_prior(rig, manifold_weight=1.0)
    a, b = prior(rot, None), prior(rot, None)
    assert a.item() == b.item() > 0  # the fixed noise makes it a function of the poses
    (g,) = torch.autograd.grad(a, rot)
    assert torch.isfinite(g).all() and g.abs().max() > 0
    assert space.pose_prior(rig, manifold_weight=1.0, seed=1)(rot, None).item() != a.item()
    with pytest.raises(ValueError, match=r"rotations must be \(F, 22, 4\)"):
        prior(rot[:, :5], None)
    with pytest.raises(ValueError, match="manifold_time"):
        space.pose_prior(rig, manifold_time=0.0)
    # the prior and the target filter name the pose space and their settings (resumed optimizations compare them)
    assert prior.key == space.pose_prior(rig, manifold_weight=1.0).key
    assert prior.key != space.pose_prior(rig, manifold_weight=0.5).key and space.fingerprint() in prior.key
    assert space.target_filter(rig, 0.3).key != space.target_filter(rig, 0.4).key
