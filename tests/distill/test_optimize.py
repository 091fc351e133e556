"""The distillation loop: a crashed run resumes from its checkpoint and ends where the unbroken run ends; outputs;
the oracle recovers a known motion of a small character; a resume is refused for another character, another oracle
target or an unreadable checkpoint, and a fresh run for a folder holding a checkpoint; a non-finite gradient stops
the run before anything of the step is saved; a view that sees no character is reported; settings are checked."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest
import torch

import sim
from distill import CameraConfig, RasterSettings, RenderConfig, ResumeError
from distill.guidance import GuidanceConfig, TimestepSchedule
from distill.metrics import motion_error
from distill.optimize import DistillConfig, Distiller, LossWeights, OptimConfig
from sim import Motion
from usd_io import load_asset

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
            camera=CameraConfig(azimuths_deg=(30.0,), distance=1.0),
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


def test_resume_accepts_bookkeeping_and_dtype_changes_with_a_warning(tmp_path, make_chain):
    """A resume was refused for settings that change nothing of the optimization (checkpoint_every: a preempted
    user wanting more checkpoints) and for the dtype the float16-overflow message itself recommends switching to."""
    rig = make_chain()
    cfg = _config("tiny", steps=4)
    target = Motion.rest(rig, 5, 12.0)
    unbroken = Distiller(rig, cfg, tmp_path / "unbroken").run(progress=False)

    def stop_at_2(step, row):
        if step == 2:
            raise Crash

    with pytest.raises(Crash):
        Distiller(rig, cfg, tmp_path / "run").run(progress=False, callback=stop_at_2)
    more = dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, checkpoint_every=1, oracle_eval_every=3))
    with pytest.warns(UserWarning, match=r"resuming with changed settings: optim\.checkpoint_every 2 -> 1, "
                                         r"optim\.oracle_eval_every 25 -> 3"):  # fmt: skip
        resumed = Distiller(rig, more, tmp_path / "run").run(resume=True, progress=False)
    assert resumed.steps_run == 2  # and it ends where the unbroken run ends
    np.testing.assert_allclose(resumed.motion.rotations, unbroken.motion.rotations, atol=RESUME_TOL)
    # the dtype the model runs in may change too; a setting of the optimization may not
    Distiller(rig, cfg, tmp_path / "oracle", oracle_motion=target).run(progress=False)
    as_f32 = dataclasses.replace(cfg, guidance=dataclasses.replace(cfg.guidance, dtype="float32"))
    with pytest.warns(UserWarning, match=r"guidance\.dtype 'auto' -> 'float32'"):
        Distiller(rig, as_f32, tmp_path / "oracle", oracle_motion=target).run(resume=True, progress=False)
    faster = dataclasses.replace(as_f32, optim=dataclasses.replace(cfg.optim, lr_rotation=0.5))
    with pytest.raises(ResumeError, match=r"differs in: optim\.lr_rotation\); resume with the same settings"):
        Distiller(rig, faster, tmp_path / "oracle", oracle_motion=target).run(resume=True, progress=False)


def test_resume_without_a_checkpoint_says_it_starts_afresh(tmp_path, make_chain):
    rig = make_chain()
    d = Distiller(rig, _config("oracle", steps=1), tmp_path / "typo", oracle_motion=Motion.rest(rig, 5, 12.0))
    with pytest.warns(UserWarning, match=r"typo/checkpoint\.pt: no checkpoint to resume: starting from step 0"):
        assert d.run(resume=True, progress=False).steps_run == 1


def test_checkpoints_load_without_running_code_from_the_file(tmp_path, make_chain):
    """The checkpoint was unpickled in full: a file that came with a run folder ran its code on --resume."""
    rig = make_chain()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save(
        {"step": 1, "trajectory": {}, "optimizer": {}, "log": [], "config": Payload()}, tmp_path / "checkpoint.pt"
    )
    d = Distiller(rig, _config("oracle", steps=2), tmp_path, oracle_motion=Motion.rest(rig, 5, 12.0))
    with pytest.raises(ResumeError, match="not a readable distill checkpoint"):
        d.run(resume=True, progress=False)
    assert not marker.exists()


def test_oracle_run_recovers_a_known_motion_and_writes_outputs(tmp_path, make_chain, make_motion):
    """From the rest pose, SDS with the oracle teacher (through the identity pixel VAE) recovers a bending motion of
    the 3-joint tube, and the run folder holds every output."""
    rig = make_chain()
    target = make_motion(rig, 5, amplitude=0.6)
    # the cameras frame the whole chain (its root is at one end): 80 steps (60 sufficed when they looked at the
    # root and showed its near half only)
    cfg = dataclasses.replace(
        _config("oracle", steps=80, lr_rotation=0.05, lr_translation=0.015, sigma_start=6.0),
        render=dataclasses.replace(
            _config("oracle", 1).render, camera=CameraConfig(azimuths_deg=(30.0, 120.0), distance=1.0)
        ),
        # the target dips below the floor under the bind pose; smoothness 1 per frame^2 at 12 fps, in per-second units
        weights=LossWeights(smoothness=1.0 / 12.0**4, ground=0.0),
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
    assert json.loads((tmp_path / "config.json").read_text())["optim"]["steps"] == 80
    rows = list(csv.DictReader(open(tmp_path / "loss_log.csv")))
    assert len(rows) == 80 and {"sds", "smoothness", "ground", "self_collision", "total"} <= set(rows[0])
    metrics = json.loads((tmp_path / "oracle_metrics.json").read_text())
    np.testing.assert_allclose(metrics["mean_joint_angle_deg"], after.mean_joint_angle_deg, rtol=1e-6)

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
        (lambda: DistillConfig(frames=-3), r"DistillConfig.frames: must be an integer >= 2, got -3"),
        # one frame is no motion: the run wrote motion.usda, then the one-frame GIF preview crashed
        (lambda: DistillConfig(frames=1), r"DistillConfig.frames: must be an integer >= 2, got 1"),
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
        # settings that were accepted and failed later (or never)
        (lambda: LossWeights(smoothness=-1.0), r"LossWeights.smoothness: must be a finite number >= 0"),
        (lambda: LossWeights(sds=float("nan")), r"LossWeights.sds: must be a finite number >= 0"),
        (lambda: TimestepSchedule(min=0.9, max_start=0.1), r"TimestepSchedule: need 0 <= min <= max_start <= 1"),
        (lambda: CameraConfig(follow_smoothing_s=float("nan")), r"CameraConfig.follow_smoothing_s"),
        (lambda: CameraConfig(elevation_deg=90.0), r"CameraConfig.elevation_deg: must be in \(-90, 90\)"),
        (lambda: RasterSettings(gamma=0.0), r"RasterSettings.gamma: must be > 0"),  # was a ZeroDivisionError
        (lambda: RasterSettings(tile_size=0), r"RasterSettings.tile_size"),
        (lambda: RenderConfig(ambient=-0.5), r"RenderConfig.ambient: must be a finite number >= 0"),
        (lambda: GuidanceConfig(device="meta"), r"GuidanceConfig.device: 'meta' cannot run a distillation"),
        (lambda: GuidanceConfig(device="banana"), r"GuidanceConfig.device: 'banana' is not a device name"),
        (lambda: GuidanceConfig(model_height=32), r"GuidanceConfig.model_height, model_width: give both"),
        # the video VAEs (8x) and patches (2x2): 36 px floored to 4x4 latents, 40 px failed at step 0
        # the field to change, not "render.width x height" (a CLI maps a field to its flag, not that phrase)
        (
            lambda: DistillConfig(frames=5, render=RenderConfig(width=36, height=32)),
            r"^DistillConfig\.render\.width: tiny needs multiples of 16 px.* 36x32; e\.g\. width 32 or 48$",
        ),
        (
            lambda: DistillConfig(frames=5, render=RenderConfig(width=32, height=40)),
            r"^DistillConfig\.render\.height: tiny needs .* 32x40; e\.g\. height 32 or 48$",
        ),
        (
            lambda: DistillConfig(frames=5, render=RenderConfig(width=40, height=40)),
            r"^DistillConfig\.render\.width: .* 40x40; e\.g\. width 32 or 48, height 32 or 48$",
        ),
        (
            lambda: DistillConfig(
                frames=5, render=RenderConfig(width=32, height=32), optim=OptimConfig(coarse_scale=0.75)
            ),
            r"^DistillConfig\.optim\.coarse_scale: tiny needs multiples of 16 px .* x 0.75\), got 24x24",
        ),
        # a txt preview failed after the whole run, png wrote a still; seed None failed at step 0, 1.5 was truncated
        (lambda: OptimConfig(preview_format="txt"), r"^OptimConfig\.preview_format: must be 'gif' or 'mp4', got 'txt'"),
        (lambda: OptimConfig(preview_format="png"), r"^OptimConfig\.preview_format: must be 'gif' or 'mp4'"),
        (lambda: OptimConfig(seed=None), r"^OptimConfig\.seed: must be an integer, got None"),
        (lambda: OptimConfig(seed=1.5), r"^OptimConfig\.seed: must be an integer, got 1\.5"),
        (lambda: OptimConfig(seed=True), r"^OptimConfig\.seed: must be an integer, got True"),
        (
            lambda: DistillConfig(frames=5, guidance=GuidanceConfig(kind="tiny-wan", model_height=40, model_width=32)),
            r"^DistillConfig\.guidance\.model_height: tiny-wan needs multiples of 16 px",
        ),
        # from a review: a dict schedule (as config.json holds it) or a None negative prompt failed at step 0, a
        # truthy "no" switched tiling on, True weighed 1 (guidance_scale True: CFG off), the oracle ignored a model
        # size; NumPy floats were refused by some settings and taken by others
        (lambda: GuidanceConfig(schedule={"min": 0.1}), r"^GuidanceConfig\.schedule: must be a TimestepSchedule"),
        (lambda: GuidanceConfig(negative_prompt=None), r"^GuidanceConfig\.negative_prompt: must be a string"),
        (lambda: GuidanceConfig(vae_tiling="no"), r"^GuidanceConfig\.vae_tiling: must be True or False, got 'no'"),
        (lambda: GuidanceConfig(guidance_scale=True), r"^GuidanceConfig\.guidance_scale: must be a finite number"),
        (lambda: GuidanceConfig(model=3), r"^GuidanceConfig\.model: must be a folder or hub id"),
        (
            lambda: GuidanceConfig(kind="oracle", model_height=16, model_width=16),
            r"^GuidanceConfig\.model_height, model_width: the oracle compares renders at their own size",
        ),
        (lambda: LossWeights(sds=True), r"^LossWeights\.sds: must be a finite number >= 0, got True"),
        (lambda: DistillConfig(fps=True), r"^DistillConfig\.fps: must be a finite number > 0, got True"),
        (lambda: TimestepSchedule(min=True), r"^TimestepSchedule: min, max_start, max_end must be finite numbers"),
    ],
)
def test_bad_settings_are_named_on_construction(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_numpy_scalars_are_numbers_in_every_setting():
    # OptimConfig and TimestepSchedule refused np.float32 ("must be a finite number"), the render settings took it
    OptimConfig(lr_rotation=np.float32(0.01))
    TimestepSchedule(min=np.float32(0.1))
    LossWeights(smoothness=np.float64(2.0))
    GuidanceConfig(guidance_scale=np.float32(7.5))
    RenderConfig(ambient=np.float32(0.4))


def test_oracle_runs_at_any_render_size(make_chain):
    """The 16 px rule is the video models'; the oracle (a pixel-space teacher) takes any size."""
    DistillConfig(frames=5, render=RenderConfig(width=36, height=30), guidance=GuidanceConfig(kind="oracle"))


def _other_chain(make_chain):
    """The same joints as make_chain() with a thicker tube: a state dict that fits, another character."""
    return make_chain(radius=0.1)


@pytest.mark.parametrize("change", ["rig_same_joints", "rig_more_joints", "oracle_target"])
def test_resume_refuses_another_character_or_oracle_target(tmp_path, make_chain, make_motion, change):
    """A resume continued another character silently (same joints) or failed with a state-dict traceback (other
    joints), and continued another oracle target silently (--oracle-clip Run on a Walk run)."""
    rig = make_chain()
    cfg = _config("oracle", steps=3)
    target = make_motion(rig, 5)
    Distiller(rig, cfg, tmp_path, oracle_motion=target).run(progress=False, stop_after=2)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["rig"]["fingerprint"] and saved["oracle"]["clip"] == "bend"
    if change == "oracle_target":
        other, other_target, message = rig, make_motion(rig, 5, phase=1.0), "another oracle target"
    else:
        other = _other_chain(make_chain) if change == "rig_same_joints" else make_chain(joint_count=4)
        other_target, message = make_motion(other, 5), "another character"
    with pytest.raises(ResumeError, match=message):
        Distiller(other, cfg, tmp_path, oracle_motion=other_target).run(resume=True, progress=False)
    resumed = Distiller(rig, cfg, tmp_path, oracle_motion=target).run(resume=True, progress=False)
    assert resumed.steps_run == 1


def test_resume_accepts_the_same_character_under_another_name(tmp_path, make_chain, make_motion):
    """A glTF rig is named after its file: a byte-identical copy under another file name was refused as "another
    character" although the design note says the asset's path is recorded but not compared."""
    rig = make_chain()
    renamed = sim.Rig(
        rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, rig.inverse_bind_matrices,
        rig.meshes, name="chain_v2",
    )  # fmt: skip
    cfg = _config("oracle", steps=3)
    target = make_motion(rig, 5)
    Distiller(rig, cfg, tmp_path, oracle_motion=target, source="a/chain.glb").run(progress=False, stop_after=2)
    resumed = Distiller(renamed, cfg, tmp_path, oracle_motion=target, source="b/chain_v2.glb")
    assert resumed.run(resume=True, progress=False).steps_run == 1
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["rig"]["name"] == "chain_v2" and saved["source"] == "b/chain_v2.glb"  # recorded, not compared
    with pytest.raises(ResumeError, match=r"another character \(rig 'chain_v2'"):  # the name stays in the message
        Distiller(_other_chain(make_chain), cfg, tmp_path, oracle_motion=target).run(resume=True, progress=False)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04truncated", "dict"])
def test_unreadable_checkpoint_is_a_resume_error(tmp_path, make_chain, content):
    rig = make_chain()
    if content == "dict":
        torch.save({"step": 1}, tmp_path / "checkpoint.pt")
        message = "not a distill checkpoint"
    else:
        (tmp_path / "checkpoint.pt").write_bytes(content)
        message = "not a readable distill checkpoint"
    d = Distiller(rig, _config("oracle", steps=2), tmp_path, oracle_motion=Motion.rest(rig, 5, 12.0))
    with pytest.raises(ResumeError, match=message):
        d.run(resume=True, progress=False)


def test_fresh_run_refuses_an_earlier_checkpoint_and_overwrite_clears_its_outputs(tmp_path, make_chain, make_motion):
    """Without resume a run overwrote a resumable checkpoint silently, and an earlier run's oracle metrics and
    previews stayed beside the new run's outputs."""
    rig = make_chain()
    target = make_motion(rig, 5)
    cfg = dataclasses.replace(_config("oracle", steps=2), optim=OptimConfig(steps=2, preview_every=1))
    Distiller(rig, cfg, tmp_path, oracle_motion=target).run(progress=False)
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "report.json").write_text("{}")
    before = (tmp_path / "checkpoint.pt").read_bytes()
    assert (tmp_path / "oracle_metrics.json").is_file() and (tmp_path / "previews" / "step_00001.gif").is_file()
    plain = dataclasses.replace(cfg, guidance=GuidanceConfig(kind="tiny", device="cpu"), optim=OptimConfig(steps=1))
    with pytest.raises(ResumeError) as e:
        Distiller(rig, plain, tmp_path).run(progress=False)
    # one line for both audiences: the CLI's flags and the library's arguments
    assert str(e.value) == (f"{tmp_path / 'checkpoint.pt'}: the folder holds an earlier run's checkpoint; continue it "
                            "with --resume (resume=True), start afresh here with --overwrite (overwrite=True), or "
                            "choose another output folder")  # fmt: skip
    assert (tmp_path / "checkpoint.pt").read_bytes() == before, "the refused run left the folder alone"
    Distiller(rig, plain, tmp_path).run(progress=False, overwrite=True, stale=["audit/report.json"])
    assert not (tmp_path / "oracle_metrics.json").exists() and not (tmp_path / "audit" / "report.json").exists()
    assert sorted(p.name for p in (tmp_path / "previews").iterdir()) == ["final.gif", "step_00000.gif"]
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["config"]["guidance"]["kind"] == "tiny"


def test_non_finite_gradient_stops_before_the_step_is_saved(tmp_path, make_chain, make_motion):
    """A step whose gradient is NaN (here a prior with an infinite slope at 0: sqrt(0)) raises before the optimizer
    moves: the last checkpoint keeps its finite trajectory (the NaN step was saved, and the CLI blamed bad input)."""
    rig = make_chain()
    calls = []

    def prior(rotations, world):
        calls.append(1)
        return (world[..., 2] * 0.0).sqrt().sum() if len(calls) > 1 else world.sum() * 0.0

    cfg = dataclasses.replace(_config("oracle", steps=3), optim=OptimConfig(steps=3, checkpoint_every=1))
    d = Distiller(rig, cfg, tmp_path, oracle_motion=make_motion(rig, 5), pose_prior=prior)
    blamed = r"step 1: non-finite gradient of rotations_6d, translation from pose_prior \("
    with pytest.raises(FloatingPointError, match=blamed):
        d.run(progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["step"] == 1
    assert all(torch.isfinite(v).all() for v in state["trajectory"].values() if v.is_floating_point())
    assert torch.isfinite(d.trajectory.rotations_6d).all(), "the optimizer did not take the NaN step"


def test_final_preview_shows_the_written_motion(tmp_path, make_chain, make_motion):
    """previews/final.gif is the render of motion.usda's trajectory: it showed the render of the last step's input,
    one optimizer step before (111/255 apart at a step size of 0.2), and a resumed finished run rendered afresh."""
    rig = make_chain()
    cfg = dataclasses.replace(_config("oracle", steps=2), optim=OptimConfig(steps=2, lr_rotation=0.2))
    shown = {}
    for resume in (False, True):  # the run, then a resume of the finished run
        d = Distiller(rig, cfg, tmp_path, oracle_motion=make_motion(rig, 5))
        d._preview = lambda video, name, d=d, resume=resume: shown.setdefault((resume, name), video.clone())
        result = d.run(progress=False, resume=resume)
        written = load_asset(tmp_path / "motion.usda").clip()
        torch.testing.assert_close(shown[resume, "final"], d.render_motion(written), atol=1e-5, rtol=0)
        np.testing.assert_allclose(np.abs((written.rotations * result.motion.rotations).sum(-1)), 1.0, atol=1e-6)
    torch.testing.assert_close(shown[True, "final"], shown[False, "final"], atol=1e-5, rtol=0)
    start = d.render_motion(Motion.rest(rig, 5, 12.0))
    assert (shown[False, "final"] - start).abs().max() > 0.1, "the run moved the chain visibly"


def test_clips_at_another_rate_or_length_are_refused(make_chain, make_motion, tmp_path):
    """An init or oracle clip at 30 fps in a 12 fps run played at its own rate in motion.usda while config.json said
    12 (the oracle's wrong rate was silent: the distilled motion came out 2.5x slower than the target)."""
    rig = make_chain()
    cfg = _config("oracle", steps=1)
    good = make_motion(rig, 5)
    at_30 = Motion(30.0, good.root_translations, good.rotations)
    with pytest.raises(ValueError, match=r"init: 30 fps, config.fps is 12"):
        Distiller(rig, cfg, tmp_path, init=at_30, oracle_motion=good)
    with pytest.raises(ValueError, match=r"oracle_motion: 30 fps, config.fps is 12"):
        Distiller(rig, cfg, tmp_path, oracle_motion=at_30)
    with pytest.raises(ValueError, match=r"oracle_motion: 7 frames, config.frames is 5"):
        Distiller(rig, cfg, tmp_path, oracle_motion=make_motion(rig, 7))
    with pytest.raises(ValueError, match=r"OptimConfig.coarse_fraction: must be a fraction in \[0, 1\]"):
        OptimConfig(coarse_fraction=1.5)
    # irregular key times rendered at their own times while the smoothness and the video model assume 1 / fps
    uneven = Motion(12.0, good.root_translations, good.rotations, times=np.array([0.0, 0.05, 0.3, 0.31, 1.0]))
    for name, kwargs in (
        ("init", {"init": uneven, "oracle_motion": good}),
        ("oracle_motion", {"oracle_motion": uneven}),
    ):
        with pytest.raises(ValueError, match=rf"^{name}: key times are not on the 1/fps grid"):
            Distiller(rig, cfg, tmp_path, **kwargs)
    # another rig's clip, with guidance other than the oracle's, failed after a whole step without naming it
    other = make_motion(make_chain(joint_count=4), 5)
    with pytest.raises(sim.RigError, match=r"^oracle_motion: motion .* has 4 joints but rig .* has 3"):
        Distiller(rig, _config("tiny", steps=1), tmp_path, oracle_motion=other)


def test_no_coarse_phase_needs_no_coarse_size(make_chain):
    """coarse_fraction 0 never renders at coarse_scale: its size was still refused."""
    DistillConfig(frames=5, render=RenderConfig(width=32, height=32),
                  optim=OptimConfig(coarse_scale=0.75, coarse_fraction=0.0))  # fmt: skip


def test_overwrite_on_the_same_distiller_is_a_fresh_run(tmp_path, make_chain):
    """A second run() with overwrite on the same object continued the first run's trajectory and Adam moments
    while logging from step 0 (0.05 rad off a fresh run)."""
    rig = make_chain()
    cfg = _config("tiny", steps=3, lr_rotation=0.05)
    fresh = Distiller(rig, cfg, tmp_path / "fresh")
    fresh_result = fresh.run(progress=False)
    d = Distiller(rig, cfg, tmp_path / "reused")
    d.run(progress=False, stop_after=2)
    again = d.run(progress=False, overwrite=True)
    assert [r["step"] for r in again.log] == [0, 1, 2]
    np.testing.assert_allclose(again.motion.rotations, fresh_result.motion.rotations, atol=RESUME_TOL)
    assert [r["sds"] for r in again.log] == pytest.approx([r["sds"] for r in fresh_result.log], rel=1e-6)


def test_stop_after_at_or_below_the_resumed_step_runs_nothing(tmp_path, make_chain):
    """Resumed at step 2 with stop_after=1: it ran step 2 and wrote a checkpoint at step 3."""
    rig = make_chain()
    cfg = _config("tiny", steps=4)
    Distiller(rig, cfg, tmp_path).run(progress=False, stop_after=2)
    ckpt = (tmp_path / "checkpoint.pt").read_bytes()
    result = Distiller(rig, cfg, tmp_path).run(resume=True, progress=False, stop_after=1)
    assert result.steps_run == 0 and len(result.log) == 2
    assert (tmp_path / "checkpoint.pt").read_bytes() == ckpt


def test_non_finite_loss_names_its_term(tmp_path, make_chain, make_motion):
    """An infinite prior value stops the run naming the prior (the message named no term: the reader had to find the
    inf among the printed values)."""
    rig = make_chain()
    cfg = dataclasses.replace(_config("oracle", steps=2), optim=OptimConfig(steps=2, checkpoint_every=1))
    prior = lambda rotations, world: world.sum() * 0.0 + float("inf")  # noqa: E731
    d = Distiller(rig, cfg, tmp_path, oracle_motion=make_motion(rig, 5), pose_prior=prior)
    blamed = r"step 0: non-finite loss from pose_prior \(loss terms: .*pose_prior inf"
    with pytest.raises(FloatingPointError, match=blamed):
        d.run(progress=False)


def _sheet_rig() -> sim.Rig:
    """One joint skinning a single-sided square sheet in the x = 0 plane, its front facing +x."""
    pts = np.array([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0], [0.0, 0.5, 1.0], [0.0, -0.5, 1.0]])
    tris = np.array([[0, 1, 2], [0, 2, 3]])  # counter-clockwise seen from +x
    joints, weights = np.zeros((4, 1), dtype=np.int64), np.ones((4, 1))
    mesh = sim.SkinnedMesh("sheet", pts, tris, joints, weights, joint_count=1)
    return sim.Rig(["root"], [-1], np.array([[0.0, 0.0, 0.5]]), np.array([[0.0, 0.0, 0.0, 1.0]]), None, [mesh])


def test_a_view_without_the_character_is_reported(tmp_path):
    """Seen from behind, a single-sided sheet is culled: SDS scores an empty ground without a word before."""
    rig = _sheet_rig()
    render = dataclasses.replace(_config("oracle", 1).render, camera=CameraConfig(azimuths_deg=(0.0, 180.0)))
    cfg = dataclasses.replace(_config("oracle", steps=1), render=render, weights=LossWeights(self_collision=0.0))
    d = Distiller(rig, cfg, tmp_path, oracle_motion=Motion.rest(rig, 5, 12.0))
    with pytest.warns(UserWarning, match=r"azimuth 180 deg: the character covers less than 1 px in 5 of 5") as rec:
        d.run(progress=False)
    assert not any("azimuth 0 deg" in str(w.message) for w in rec), "the front view sees the sheet"


def test_guidance_device_is_used_not_the_distillers(tmp_path, make_chain):
    """GuidanceConfig.device was ignored (the model always ran on the distiller's device): an unavailable one is
    now refused by name, and the model sits where it says."""
    rig = make_chain()
    d = Distiller(rig, dataclasses.replace(_config("tiny", 1)), tmp_path / "a")
    assert d.guidance.device == torch.device("cpu")
    if not torch.cuda.is_available():
        cfg = dataclasses.replace(_config("tiny", 1), guidance=GuidanceConfig(kind="tiny", device="cuda"))
        with pytest.raises(ValueError, match=r"GuidanceConfig.device: 'cuda': no CUDA device is available"):
            Distiller(rig, cfg, tmp_path / "b")
        with pytest.raises(ValueError, match=r"device: 'cuda': no CUDA device is available"):
            Distiller(rig, _config("tiny", 1), tmp_path / "c", device="cuda")


@pytest.mark.parametrize("fps", [30.0, 24.0, 12.0])
def test_gif_preview_plays_at_the_render_rate(tmp_path, fps):
    """write_preview's GIF lasts frames / fps: one delay of 1000 / fps ms was cut to GIF's 10 ms steps (30 fps played
    at 30 ms a frame, 10% fast; 12 fps at 80 ms, 4% fast)."""
    from PIL import Image

    from distill import write_preview

    frames = 12
    video = torch.rand(2, frames, 3, 8, 8, generator=torch.Generator().manual_seed(0))  # no two frames alike
    path = write_preview(tmp_path / "p.gif", video, fps)
    with Image.open(path) as im:
        durations = []
        for k in range(im.n_frames):
            im.seek(k)
            durations.append(im.info["duration"])
    assert len(durations) == frames and all(d % 10 == 0 for d in durations)
    assert abs(sum(durations) - 1000.0 * frames / fps) <= 10


def test_single_frame_gif_preview(tmp_path):
    """Pillow writes one frame through its single-image path, which took no list of delays (a TypeError after
    motion.usda was written, and no oracle_metrics.json)."""
    from PIL import Image

    from distill import write_preview

    path = write_preview(
        tmp_path / "one.gif", torch.rand(2, 1, 3, 8, 8, generator=torch.Generator().manual_seed(0)), 12.0
    )
    with Image.open(path) as im:
        assert im.n_frames == 1 and im.size == (16, 8)
        assert im.info["duration"] == 80  # 1 / 12 s in GIF's 10 ms steps


def test_two_frames_are_the_shortest_run(tmp_path, make_chain, make_motion):
    rig = make_chain()
    cfg = dataclasses.replace(_config("oracle", steps=2), frames=2)
    result = Distiller(rig, cfg, tmp_path, oracle_motion=make_motion(rig, 2)).run(progress=False)
    assert result.motion.frame_count == 2 and result.oracle_metrics is not None
    assert (tmp_path / "oracle_metrics.json").is_file() and (tmp_path / "previews" / "final.gif").is_file()


def _slow_wave(rig: sim.Rig, fps: float, seconds: float = 2.0) -> Motion:
    """One period of a slow bend (0.5 Hz) and a root arc, sampled at ``fps``: the same physical motion at any rate."""
    t = np.arange(round(seconds * fps) + 1) / fps
    ang = 0.5 * np.sin(np.pi * t)
    rot = np.tile(rig.rest_rotations, (len(t), 1, 1))
    half = np.stack([np.zeros_like(ang), np.sin(ang / 2), np.zeros_like(ang), np.cos(ang / 2)], -1)  # about y
    rot[:, 1:] = half[:, None]
    root = rig.rest_translations[0] + np.stack([0.1 * np.cos(np.pi * t), 0.1 * np.sin(np.pi * t), 0 * t], -1)
    return Motion(fps, root, rot, name="wave")


def test_smoothness_is_measured_per_second(tmp_path, make_chain):
    """The same motion scored 16x less at 16 fps than at 8 fps (squared second differences per frame): Wan (16 fps)
    was regularized 16x less than CogVideoX (8 fps) by the same weight."""
    rig = make_chain()
    values = {}
    for fps in (8.0, 16.0):
        motion = _slow_wave(rig, fps)
        cfg = dataclasses.replace(_config("oracle", steps=1), frames=motion.frame_count, fps=fps)
        d = Distiller(rig, cfg, tmp_path / f"{fps:g}", init=motion, oracle_motion=motion)
        values[fps] = d.loss_terms(0)[0]["smoothness"].item()
    assert values[8.0] > 0 and abs(values[8.0] / values[16.0] - 1.0) < 0.05, values


def test_smoothness_is_the_mean_squared_acceleration():
    """A point on a circle of radius R at angular rate w accelerates R w^2 at every instant: the finite differences
    at 8 and 16 fps agree with it within the discretization error (sinc^4 of w dt / 2: 2.6% and 0.6%)."""
    from distill.losses import smoothness

    radius, w, body_length = 0.3, np.pi, 1.5
    for fps, tol in ((8.0, 0.03), (16.0, 0.007)):
        t = torch.arange(int(2 * fps) + 1, dtype=torch.float64) / fps
        world = torch.zeros(len(t), 2, 7, dtype=torch.float64)
        world[:, :, 0], world[:, :, 1] = radius * torch.cos(w * t)[:, None], radius * torch.sin(w * t)[:, None]
        world[..., 6] = 1.0
        exact = (radius * w**2 / body_length) ** 2
        assert abs(smoothness(world, body_length, fps).item() / exact - 1.0) < tol


def test_default_smoothness_weight_keeps_the_12_fps_loss(tmp_path, make_chain, make_motion):
    """At DistillConfig's rate (12 fps, the oracle preset's too) the default weight times the per-second term is the
    earlier weight (100) times the per-frame term (computed here from the joint positions): the same optimization."""
    rig = make_chain()
    cfg = dataclasses.replace(_config("oracle", steps=1), weights=LossWeights())
    assert cfg.fps == DistillConfig().fps == 12.0
    motion = make_motion(rig, 5, amplitude=0.6)
    d = Distiller(rig, cfg, tmp_path, init=motion, oracle_motion=motion)
    new = cfg.weights.smoothness * d.loss_terms(0)[0]["smoothness"].item()
    p = d.trajectory.world(d.trig, d.trajectory())[..., :3].detach().double() / d.body_length
    old = 100.0 * (p[2:] - 2 * p[1:-1] + p[:-2]).square().sum(-1).mean().item()
    assert old > 0 and abs(new / old - 1.0) < 1e-5, (new, old)


def test_oracle_preset_keeps_its_smoothness_loss():
    """The oracle acceptance run (Fox Walk, 12 fps) was accepted with weight 100 on the per-frame term: its preset
    must weigh the per-second term by 100 / 12^4."""
    from distill.presets import preset

    cfg = preset("oracle")
    assert cfg.fps == 12.0
    np.testing.assert_allclose(cfg.weights.smoothness * cfg.fps**4, 100.0, rtol=1e-12)


def test_resume_refuses_a_checkpoint_of_the_per_frame_smoothness(tmp_path, make_chain, make_motion):
    """A checkpoint written before smoothness was measured per second (no "losses" version in its config) would
    resume with the same numbers weighing a loss 12^4 larger at 12 fps."""
    rig = make_chain()
    cfg = _config("oracle", steps=3)
    target = make_motion(rig, 5)
    Distiller(rig, cfg, tmp_path, oracle_motion=target).run(progress=False, stop_after=2)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["config"].pop("losses") == 2
    torch.save(state, tmp_path / "checkpoint.pt")
    with pytest.raises(ResumeError, match=r"loss terms of version 1 \(this is 2: smoothness is now measured per"):
        Distiller(rig, cfg, tmp_path, oracle_motion=target).run(resume=True, progress=False)


def test_ground_penalty_sums_over_the_vertices():
    """The documented behaviour (not a mean: a finer mesh of the same sink scores more, and the weight must follow
    the vertex count)."""
    from distill.losses import ground_penalty

    points = torch.zeros(3, 4, 3, dtype=torch.float64)
    points[..., 2] = -0.05  # every vertex 5 cm under z = 0
    one = ground_penalty(points, 0.0, 2.0).item()
    np.testing.assert_allclose(one, 4 * 0.05**2 / 2.0**2, rtol=1e-12)
    np.testing.assert_allclose(ground_penalty(points.repeat(1, 2, 1), 0.0, 2.0).item(), 2 * one, rtol=1e-12)


def test_frame_count_suggestions_are_counts_the_config_takes():
    """3 frames suggested 'e.g. 1 or 5', and 1 frame is refused two lines earlier (a pose, not a motion)."""
    with pytest.raises(ValueError, match=r"needs 4k \+ 1 frames .*got 3; e\.g\. 5 or 9"):
        DistillConfig(frames=3, guidance=GuidanceConfig(kind="tiny"))
    with pytest.raises(ValueError, match=r"got 7; e\.g\. 5 or 9"):
        DistillConfig(frames=7, guidance=GuidanceConfig(kind="tiny"))


def test_mp4_preview_in_upper_case_keeps_its_size(tmp_path):
    """``preview.MP4`` failed in imageio's TIFF writer; an MP4 of views 31 x 34 came back 32 x 80 (rescaled)."""
    import imageio.v3 as iio

    from distill import write_preview

    video = torch.rand(2, 3, 3, 31, 34, generator=torch.Generator().manual_seed(0))
    path = write_preview(tmp_path / "preview.MP4", video, 10.0)
    assert iio.imread(path, plugin="FFMPEG").shape == (3, 32, 68, 3)
