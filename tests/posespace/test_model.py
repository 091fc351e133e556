"""Denoiser masking and equivariance, diffusion schedule and DDIM sampler/inversion, batching of skeletons."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from posespace import (
    Conditioning,
    GaussianDiffusion,
    ModelConfig,
    PoseBatchSampler,
    PoseDenoiser,
    PoseRig,
    PoseSet,
    collate_poses,
    parse_clip_spec,
)

OUT_TOL = 1e-10  # float64
TINY = ModelConfig(width=32, depth=2, heads=4, max_distance=4)


def _randomized(model: nn.Module, seed: int = 0) -> nn.Module:
    """Zero-initialized output layers make a fresh model output 0: give every parameter random values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model.double().eval()


def _two_rig_batch(make_stick, rng):
    small, big = PoseRig(make_stick("small", 0.5)), PoseRig(make_stick("big"))
    # a third skeleton with fewer joints: the stick without its right arm
    rig = make_stick("big")
    keep = [j for j, n in enumerate(rig.joint_names) if not n.startswith("right_") or "hip" in n or "knee" in n
            or "foot" in n or "toe" in n]  # fmt: skip
    import sim

    remap = {j: i for i, j in enumerate(keep)}
    parents = [remap[rig.parents[j]] if rig.parents[j] >= 0 else -1 for j in keep]
    armless = PoseRig(sim.Rig([rig.joint_names[j] for j in keep], parents, rig.rest_translations[keep],
                              rig.rest_rotations[keep], name="armless"))  # fmt: skip
    return [small, big, armless]


def test_padding_does_not_change_outputs(make_stick, rng):
    rigs = _two_rig_batch(make_stick, rng)
    model = _randomized(PoseDenoiser(TINY))
    poses = [rigs[i].rest_pose(1)[0] + rng.normal(scale=0.1, size=(rigs[i].joint_count, 6)) for i in (0, 1, 2)]
    batch = collate_poses(rigs, np.array([0, 1, 2]), poses, 0.3)
    tokens = [len(r.active_index) for r in rigs]
    assert batch.x.shape[1] == max(tokens) and tokens[2] < tokens[1]  # one token per active joint
    assert batch.mask[2, tokens[2] :].sum() == 0
    t = torch.tensor([0.3, 0.6, 0.9], dtype=torch.float64)
    with torch.no_grad():
        together = model(batch.x.double(), t, batch.features.double(), batch.distances, batch.mask)
        for i in range(3):
            alone = collate_poses(rigs, np.array([i]), [poses[i]], 0.3)
            out = model(alone.x.double(), t[i : i + 1], alone.features.double(), alone.distances, alone.mask)
            n = tokens[i]
            torch.testing.assert_close(together[i, :n], out[0, :n], atol=OUT_TOL, rtol=0)
            assert together[i, n:].abs().sum() == 0  # padding outputs are zero


def test_non_finite_padding_does_not_reach_real_joints(make_stick, rng):
    """Padded slots holding NaN / inf (a batch built by hand, not by collate_poses) leave the real joints' outputs,
    the DDIM result and the training loss as with zero padding (attention weights of 0 times NaN were NaN)."""
    rigs = _two_rig_batch(make_stick, rng)
    model = _randomized(PoseDenoiser(TINY))
    poses = [rigs[i].rest_pose(1)[0] + rng.normal(scale=0.1, size=(rigs[i].joint_count, 6)) for i in (1, 2)]
    batch = collate_poses(rigs, np.array([1, 2]), poses, 0.3)
    pad = ~batch.mask
    assert pad.any()
    x, f = batch.x.double(), batch.features.double()
    junk_x, junk_f = x.clone(), f.clone()
    junk_x[pad] = float("nan")
    junk_f[pad] = float("inf")
    t = torch.tensor([0.4, 0.7], dtype=torch.float64)
    d = GaussianDiffusion()
    cond = Conditioning(f, batch.distances, batch.mask)
    junk_cond = Conditioning(junk_f, batch.distances, batch.mask)
    with torch.no_grad():
        torch.testing.assert_close(model(junk_x, t, junk_f, batch.distances, batch.mask),
                                   model(x, t, f, batch.distances, batch.mask), atol=OUT_TOL, rtol=0)  # fmt: skip
        torch.testing.assert_close(d.ddim(model, junk_x, junk_cond, d.schedule(4)),
                                   d.ddim(model, x, cond, d.schedule(4)), atol=OUT_TOL, rtol=0)  # fmt: skip
        t_train = torch.tensor([0.5, 0.5], dtype=torch.float64)
        torch.manual_seed(0)
        loss_junk = d.training_terms(model, junk_x, junk_cond, t_train)[0]
        torch.manual_seed(0)
        loss = d.training_terms(model, x, cond, t_train)[0]
    assert torch.isfinite(loss_junk).all()
    torch.testing.assert_close(loss_junk, loss, atol=OUT_TOL, rtol=0)


def test_model_is_equivariant_to_joint_order(make_stick, rng):
    """No positional encoding: permuting the joints permutes the output (topology enters only through the bias)."""
    pr = PoseRig(make_stick())
    model = _randomized(PoseDenoiser(TINY), seed=3)
    batch = collate_poses([pr], np.array([0]), [pr.rest_pose(1)[0] + rng.normal(scale=0.1, size=(pr.joint_count, 6))],
                          0.3)  # fmt: skip
    perm = torch.as_tensor(rng.permutation(len(pr.active_index)))
    t = torch.tensor([0.5], dtype=torch.float64)
    x, f = batch.x.double(), batch.features.double()
    with torch.no_grad():
        out = model(x, t, f, batch.distances, batch.mask)
        out_p = model(x[:, perm], t, f[:, perm], batch.distances[:, perm][:, :, perm], batch.mask[:, perm])
    torch.testing.assert_close(out_p, out[:, perm], atol=OUT_TOL, rtol=0)


def test_distance_bias_changes_attention(make_stick, rng):
    pr = PoseRig(make_stick())
    model = _randomized(PoseDenoiser(TINY), seed=5)
    batch = collate_poses([pr], np.array([0]), [pr.rest_pose(1)[0]], 0.3)
    t = torch.tensor([0.5], dtype=torch.float64)
    x, f = batch.x.double(), batch.features.double()
    with torch.no_grad():
        a = model(x, t, f, batch.distances, batch.mask)
        b = model(x, t, f, torch.zeros_like(batch.distances), batch.mask)
    assert (a - b).abs().max() > 1e-3


class _GaussianOracle(nn.Module):
    """The exact v-prediction for data x_0 ~ N(0, sigma^2 I): E[v | x_t] is linear in x_t."""

    def __init__(self, diffusion: GaussianDiffusion, sigma: float):
        super().__init__()
        self.diffusion, self.sigma = diffusion, sigma

    def forward(self, x_t, t, features, distances, mask):
        ab = self.diffusion.alpha_bar(t)[:, None, None]
        s2 = self.sigma**2
        var = ab * s2 + (1 - ab)
        # v = sqrt(ab) eps - sqrt(1-ab) x0; E[eps|x_t] = sqrt(1-ab) x_t / var, E[x0|x_t] = sqrt(ab) s2 x_t / var
        return (ab.sqrt() * (1 - ab).sqrt() * x_t - (1 - ab).sqrt() * ab.sqrt() * s2 * x_t) / var * mask[..., None]


def _cond(n: int, joints: int) -> Conditioning:
    return Conditioning(torch.zeros(n, joints, 26), torch.zeros(n, joints, joints, dtype=torch.long),
                        torch.ones(n, joints, dtype=torch.bool))  # fmt: skip


def test_schedule_bounds():
    d = GaussianDiffusion()
    t = torch.linspace(0, 1, 101)
    ab = d.alpha_bar(t)
    np.testing.assert_allclose(float(ab[0]), 1.0, atol=1e-6)
    np.testing.assert_allclose(float(ab[-1]), d.config.min_alpha_bar, rtol=1e-6)
    assert (ab[1:] <= ab[:-1]).all()


def test_ddim_samples_the_data_distribution_with_an_exact_denoiser():
    """With the exact denoiser of Gaussian data N(0, s^2 I), each DDIM step scales x by a known factor
    ``(sqrt(ab_s ab_t) s^2 + sqrt((1-ab_s)(1-ab_t))) / (ab_t s^2 + 1 - ab_t)``; many steps reach std s."""
    d = GaussianDiffusion()
    sigma = 0.5
    oracle = _GaussianOracle(d, sigma)
    cond = _cond(4000, 3)
    for steps, expected in ((20, None), (400, sigma)):
        x = d.sample(oracle, cond, steps=steps, generator=torch.Generator().manual_seed(0))
        if expected is None:
            expected = 1.0
            times = d.schedule(steps)
            for t, s in itertools.pairwise(times):
                at, as_ = (float(d.alpha_bar(torch.tensor(v))) for v in (t, s))
                expected *= (np.sqrt(as_ * at) * sigma**2 + np.sqrt((1 - as_) * (1 - at))) / (at * sigma**2 + 1 - at)
        np.testing.assert_allclose(float(x.std()), expected, rtol=0.01)
        np.testing.assert_allclose(float(x.mean()), 0.0, atol=0.01)


def test_ddim_inversion_round_trip(rng):
    """Inverting then denoising with the exact Gaussian denoiser scales x0 by the product over steps of
    ``n^2 / (var_t var_s)`` (``n`` as in the sampling test): below 1 by Cauchy-Schwarz, -> 1 with many steps."""
    d = GaussianDiffusion()
    sigma = 0.5
    oracle = _GaussianOracle(d, sigma)
    cond = _cond(64, 3)
    x0 = torch.as_tensor(rng.normal(scale=0.5, size=(64, 3, 6)), dtype=torch.float32)
    for t_end, steps in ((0.4, 10), (0.95, 40), (0.95, 400)):
        z = d.invert(oracle, x0, cond, t_end, steps)
        back = d.ddim(oracle, z, cond, d.schedule(steps, t_end))
        times = d.schedule(steps, 0.0, t_end)
        scale = 1.0
        for t, s in itertools.pairwise(times):
            at, as_ = (float(d.alpha_bar(torch.tensor(v))) for v in (t, s))
            n = np.sqrt(as_ * at) * sigma**2 + np.sqrt((1 - as_) * (1 - at))
            scale *= n**2 / ((at * sigma**2 + 1 - at) * (as_ * sigma**2 + 1 - as_))
        torch.testing.assert_close(back, x0 * scale, atol=1e-4, rtol=1e-4)
    assert scale > 0.99
    # a guidance hook moves the result
    shifted = d.ddim(oracle, d.invert(oracle, x0, cond, 0.4, 10), cond, d.schedule(10, 0.4), lambda x, t: x + 0.1)
    assert float((shifted - x0).mean()) > 0.05


def test_training_terms_shapes_and_masking(make_stick, rng):
    pr = PoseRig(make_stick())
    model = PoseDenoiser(TINY)
    batch = collate_poses([pr], np.zeros(8, dtype=int), [pr.rest_pose(1)[0]] * 8, 0.3)
    cond = Conditioning(batch.features, batch.distances, batch.mask)
    loss, x0_hat, _ = GaussianDiffusion().training_terms(model, batch.x, cond)
    assert loss.shape == (8,) and x0_hat.shape == batch.x.shape and torch.isfinite(loss).all()
    loss.mean().backward()
    assert model.out.weight.grad.abs().sum() > 0


def test_pose_set_groups_skeletons_and_splits_by_clip(make_stick, make_walk):
    import sim

    rig_a = make_stick("a")
    t = rig_a.rest_translations.copy()
    t[[10, 11, 14, 15]] *= 1.3  # longer shins and feet: another skeleton (a uniformly scaled one is the same)
    rig_b = sim.Rig(rig_a.joint_names, rig_a.parents, t, rig_a.rest_rotations, name="b")
    ps = PoseSet()
    ps.add(rig_a, make_walk(rig_a, 30), "a#walk", fps=None)
    ps.add(rig_a, make_walk(rig_a, 20, phase=1.0), "a#jog", fps=None)
    ps.add(rig_b, make_walk(rig_b, 25), "b#walk", fps=None)
    assert len(ps.rigs) == 2 and len(ps) == 75
    train, held = ps.split_by_clip(["jog"])
    assert len(train) == 55 and len(held) == 20
    assert held.rigs[0].clip_names == ["a#jog"]
    np.testing.assert_array_equal(held.rigs[0].clip("jog"), ps.rigs[0].poses[30:])
    sampler = PoseBatchSampler(train, 32, 0.3, seed=1)
    batch = sampler.sample()
    assert set(batch.rig_index.tolist()) == {0, 1}  # two skeletons in one batch
    assert batch.x.shape == (32, 12, 6)  # the stick's 12 active joints (leaves are inactive without a mesh)
    assert batch.mask.all()


def test_batch_sampler_refuses_weights_that_do_not_fit_the_set(make_stick, make_walk):
    # two weights for three skeletons drew only the first two, never saying so; four drew one that is not there
    import sim

    base = make_stick()
    ps = PoseSet()
    for k, shin in enumerate((1.0, 1.3, 1.6)):  # longer shins and feet: three skeletons
        t = base.rest_translations.copy()
        t[[10, 11, 14, 15]] *= shin
        rig = sim.Rig(base.joint_names, base.parents, t, base.rest_rotations, name=f"s{k}")
        ps.add(rig, make_walk(rig, 10), f"s{k}#walk", fps=None)
    assert len(ps.rigs) == 3
    drawn = PoseBatchSampler(ps, 300, 0.3, rig_weights=[1.0, 1.0, 2.0], seed=0).sample().rig_index.tolist()
    assert set(drawn) == {0, 1, 2} and drawn.count(2) > drawn.count(0)
    for weights in ([1.0, 1.0], [1.0] * 4, [1.0, float("nan"), 1.0], [1.0, -1.0, 1.0], [0.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match=r"rig_weights: one finite weight >= 0 per skeleton of the set \(3\)"):
            PoseBatchSampler(ps, 8, 0.3, rig_weights=weights)
    for kwargs, match in (({"batch_size": 0}, "batch_size"), ({"scale": float("nan")}, "scale")):
        with pytest.raises(ValueError, match=match):
            PoseBatchSampler(ps, **{"batch_size": 8, "scale": 0.3, **kwargs})
    with pytest.raises(ValueError, match="pose_set: holds a skeleton without poses"):
        PoseBatchSampler(PoseSet(), 8, 0.3)


def test_rotation_noise_keeps_the_root_heading_free(make_stick, make_walk):
    """Poses carry the root's tilt, not its heading (twist about its canonical x = up). Rotation-noise
    augmentation tilts the root but turned it too (1.5 deg rms at the default noise); sampled batches now hold
    no root heading, while the noise still moves the root's tilt."""
    from posespace import AugmentConfig
    from posespace._rotations import twist_quat_x
    from posespace.pose_rig import IDENTITY_6D
    from sim.rotations import quat_to_axis_angle, rot6d_to_quat

    rig = make_stick()
    ps = PoseSet()
    ps.add(rig, make_walk(rig, 30), "walk", fps=None)
    scale = 0.3
    sampler = PoseBatchSampler(ps, 64, scale, AugmentConfig(mirror=0.0, rotation_noise_deg=5.0), seed=2)
    batch = sampler.sample()
    root = batch.x[:, 0].numpy().astype(np.float64) * scale + IDENTITY_6D
    q = rot6d_to_quat(root)
    heading = np.linalg.norm(quat_to_axis_angle(twist_quat_x(q)), axis=-1)
    assert np.degrees(heading).max() < 1e-3
    clean = rot6d_to_quat(ps.rigs[0].poses[:, 0].astype(np.float64))
    tilt_change = min(np.linalg.norm(quat_to_axis_angle(q[0:1]) - quat_to_axis_angle(c[None])) for c in clean)
    assert np.degrees(tilt_change) > 0.5  # the noise is still there


def test_clip_spec_parsing():
    s = parse_clip_spec("../a/Fox.glb#Survey,Walk")
    assert s.source == "../a/Fox.glb" and s.clips == ("Survey", "Walk")
    g = parse_clip_spec("gaits:quadruped*5")
    assert g.source == "gaits:quadruped" and g.count == 5 and g.clips is None
    assert str(g) == "gaits:quadruped*5"


def test_pose_set_reads_usd_stages(tmp_path, make_stick, make_walk):
    """Trajectories written as UsdSkel (e.g. by distillation) are a clip source like any other."""
    pytest.importorskip("pxr")
    from usd_io import write_usdskel

    rig = make_stick()
    walk = make_walk(rig, 30)
    path = tmp_path / "distilled.usda"
    write_usdskel(path, rig, [walk])
    ps = PoseSet.from_specs([f"{path}#walk"], fps=30.0)
    assert len(ps.rigs) == 1 and ps.rigs[0].clip_names == [f"{path}#walk"]
    np.testing.assert_allclose(ps.rigs[0].poses, PoseRig(rig).encode(walk), atol=1e-5)


def test_procedural_gait_variations():
    from posespace import load_clips

    rig, clips = load_clips("gaits:quadruped*2")
    assert list(clips) == ["gait_0", "gait_1"]
    a, b = clips.values()
    for m in (a, b):
        m.check_rig(rig)
    assert a.frame_count != b.frame_count or np.abs(a.rotations - b.rotations).max() > 1e-3  # different walks


def test_split_by_clip_refuses_names_that_match_no_clip(make_stick, make_walk):
    rig = make_stick()
    ps = PoseSet()
    ps.add(rig, make_walk(rig, 10), "a#walk", fps=None)
    ps.add(rig, make_walk(rig, 10, phase=1.0), "a#jog", fps=None)
    with pytest.raises(KeyError, match=r"held-out 'jgo': no such clip; clips: a#walk, a#jog"):
        ps.split_by_clip(["jog", "jgo"])
    train, held = ps.split_by_clip(["jgo"], strict=False)  # the old lenient split on request
    assert len(train) == 20 and not held.rigs


def test_file_names_with_hash_and_specs_given_twice(tmp_path, assets_dir):
    import shutil

    from posespace import load_clips

    path = tmp_path / "take#1.bvh"
    shutil.copy(assets_dir / "bvh" / "131_02.bvh", path)
    spec = parse_clip_spec(str(path))
    assert spec.source == str(path) and spec.clips is None  # the file name used to be cut at its '#'
    _, clips = load_clips(str(path))
    (name,) = clips
    assert parse_clip_spec(f"{path}#{name}").source == str(path)
    assert parse_clip_spec("procedural:quadruped#walk").clips == ("walk",)
    once = PoseSet.from_specs([str(path)], fps=30.0)
    with pytest.warns(UserWarning, match=rf"clip '{name}' was already loaded; using it once"):
        twice = PoseSet.from_specs([str(path), f"{path}#{name}"], fps=30.0)
    assert len(twice) == len(once) > 0  # not doubled
    train, held = twice.split_by_clip([name])  # a clip name with '#' in it is still a held-out name
    assert not train.rigs and len(held) == len(once)
