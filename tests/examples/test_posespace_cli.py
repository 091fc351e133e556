"""examples/posespace.py as a user runs it, with tiny settings: train, sample, ik, interpolate, evaluate."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from example_scripts import load_example

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "posespace.py"
USD_FLOAT_TOL = 1e-5
"""[m] joint heights read back from a stage (float32 transforms)."""
FAST_SAMPLING = ["--sampling.steps", "2", "--sampling.polish-iters", "2", "--sampling.guidance-iters", "1"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, timeout=600, check=False
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def read_animation(path: Path) -> np.ndarray:
    """Rotations of the stage's only SkelAnimation at every authored time sample, shape (frames, joints, 4)."""
    from pxr import Usd, UsdSkel

    stage = Usd.Stage.Open(str(path))
    anims = [UsdSkel.Animation(p) for p in stage.Traverse() if p.IsA(UsdSkel.Animation)]
    assert len(anims) == 1
    attr = anims[0].GetRotationsAttr()
    return np.array([np.array(attr.Get(t)) for t in attr.GetTimeSamples()])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("posespace_cli")
    ok(run("train", "--output", str(out), "--data", "procedural:quadruped", "--heldout", "idle", "--steps", "3",
           "--batch-size", "8", "--model.width", "16", "--model.depth", "1", "--checkpoint-every", "3",
           "--no-progress"))  # fmt: skip
    assert (out / "config.json").is_file() and (out / "checkpoint.pt").is_file()
    return out / "posespace.pt"


def test_sample_writes_one_pose_per_frame(checkpoint, tmp_path):
    out = tmp_path / "samples.usda"
    text = ok(run("sample", "--checkpoint", str(checkpoint), "--rig", "procedural:quadruped", "--count", "3",
                  "--output", str(out), *FAST_SAMPLING))  # fmt: skip
    assert "validity" in text
    rot = read_animation(out)
    assert rot.shape[0] == 3 and np.isfinite(rot).all()
    assert out.with_name(out.name + ".config.json").is_file()  # beside OUTPUT, as OUTPUT.audit/
    from usd_io import validate_stage

    assert validate_stage(out) == []


def test_summaries_name_the_training_and_warn_about_a_short_one(checkpoint, tmp_path):
    """`train --steps 5` made a useless model whose samples reported validity 1.000 without a word."""
    result = run("sample", "--checkpoint", str(checkpoint), "--rig", "procedural:quadruped", "--count", "1",
                 "--output", str(tmp_path / "s.usda"), *FAST_SAMPLING)  # fmt: skip
    assert "; model trained 3 steps, final loss " in ok(result)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {checkpoint} was trained for only 3 steps (< 500): its poses come from the "
                        "validators' guidance more than from learned data; train longer for real use"]  # fmt: skip


def test_ik_and_interpolate(checkpoint, tmp_path):
    ik = tmp_path / "ik.usda"
    text = ok(run("ik", "--checkpoint", str(checkpoint), "--rig", "procedural:quadruped", "--handles-from-frames",
                  "0", "5", "--output", str(ik), "--sampling.ik-steps", "2",
                  "--sampling.ik-dls-iters", "2"))  # fmt: skip
    assert "ms/pose" in text
    assert read_animation(ik).shape[0] == 2
    path = tmp_path / "path.usda"
    ok(run("interpolate", "--checkpoint", str(checkpoint), "--rig", "procedural:quadruped", "--a", "walk:0",
           "--b", "idle:10", "--steps", "4", "--output", str(path), "--sampling.interpolation-steps", "2",
           *FAST_SAMPLING))  # fmt: skip
    rot = read_animation(path)
    assert rot.shape[0] == 4 and np.isfinite(rot).all()
    report = json.loads((tmp_path / "path.usda.audit" / "report.json").read_text())  # the path's audit beside it
    assert report["frame_count"] == 4 and report["rig"] == "quadruped"


def test_evaluate_writes_metrics(checkpoint, tmp_path):
    out = tmp_path / "eval"
    proc = run("evaluate", "--checkpoint", str(checkpoint), "--output", str(out), "--data", "procedural:quadruped",
               "--heldout", "idle", "--eval.samples", "8", "--eval.max-real", "30", "--eval.ik-poses", "2",
               "--eval.projection-poses", "2", "--eval.interpolation-pairs", "1", "--eval.interpolation-steps", "3",
               "--eval.zero-shot", "procedural:biped", "--sampling.project-steps", "1", "--sampling.ik-steps", "1",
               "--sampling.ik-dls-iters", "1", "--sampling.interpolation-steps", "1", *FAST_SAMPLING)  # fmt: skip
    ok(proc)
    # a progress bar over the skeletons (held-out quadruped, zero-shot biped)
    assert "evaluate" in proc.stderr and "2/2" in proc.stderr and "zero-shot procedural:biped" in proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    quad = metrics["heldout"]["quadruped"]
    for key in (
        "sample_validity",
        "apd",
        "prdc",
        "ik",
        "projection",
        "interpolation",
        "heldout_validity",
        "exact_self_intersection",
    ):
        assert key in quad
    assert 0.0 <= quad["prdc"]["precision"] <= 1.0 and np.isfinite(quad["ik"]["ms_per_pose"])
    assert "procedural:biped" in metrics["zero_shot"]
    assert metrics["zero_shot"]["procedural:biped"]["known"] is False


def test_bad_input_exits_2(checkpoint, tmp_path):
    missing = tmp_path / "missing.glb"
    result = run("sample", "--checkpoint", str(checkpoint), "--rig", str(missing), "--output",
                 str(tmp_path / "x.usda"))  # fmt: skip
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip() and "CUDA" not in line]
    assert len(lines) == 1 and str(missing) in lines[0]


def _example_module():
    return load_example(SCRIPT, "posespace_example")


def test_bad_settings_give_one_line_and_status_2(checkpoint, tmp_path, capsys):
    """Each of these printed a traceback (or ran on with a wrong value) before."""
    from posespace import EvalConfig, ModelConfig, SamplingConfig, TrainConfig

    ex = _example_module()
    missing = tmp_path / "missing.pt"
    blocker = tmp_path / "afile"
    blocker.write_text("")
    rig, out = "procedural:quadruped", tmp_path / "x.usda"
    cases = [
        (ex.Ik(checkpoint, rig, out, handles_from_frames=(0, 9999)), "walk[9999]: frame out of range (49 frames)"),
        (ex.Ik(checkpoint, rig, out, handles=("front_left_toes=1,2",)), "expected JOINT=X,Y,Z with three finite"),
        (ex.Ik(checkpoint, rig, out, handles=("front_left_toes=nan,0,0",)), "expected JOINT=X,Y,Z with three"),
        (ex.Interpolate(checkpoint, rig, out, a="walk:x"), "--a: expected CLIP:FRAME or FRAME (an integer)"),
        (ex.Interpolate(checkpoint, rig, out, steps=1), "steps: must be an integer >= 2, got 1"),
        (ex.Sample(checkpoint, rig, out, count=0), "--count: must be an integer >= 1, got 0"),
        # the output is checked before the model runs (the checkpoint here does not even exist)
        (ex.Sample(missing, rig, tmp_path / "x.txt"), "--output: a USD stage must end in .usda, .usdc, .usd"),
        (ex.Ik(missing, rig, tmp_path, handles=("head=0,0,1",)), "--output: a USD stage must end in"),
        (ex.Interpolate(missing, rig, blocker / "x.usda"), f"{blocker} is a file"),
        (ex.Evaluate(missing, tmp_path / "ev", eval=EvalConfig(samples=5)), "--eval.samples: PRDC needs more"),
        (ex.Ik(checkpoint, rig, out, handles=("head=0,0,1", "head=0,0,2")), "joint 'head' has two handles"),
        (ex.Ik(checkpoint, rig, out, handles=("head=0,0,1",), handles_from_frames=(0,)), "give one or the other"),
        (ex.Evaluate(checkpoint, tmp_path / "ev", data=("procedural:quadruped",), heldout=("idle", "idel")),
         "held-out 'idel': no such clip; clips: procedural:quadruped#walk, procedural:quadruped#idle"),
        (ex.Sample(checkpoint, rig, out, sampling=SamplingConfig(steps=0)), "--sampling.steps: must be an"),
        (ex.Sample(checkpoint, rig, out, threads=0), "--threads: must be >= 1, got 0"),
        (ex.Sample(checkpoint, rig, blocker / "x.usda", count=1, sampling=SamplingConfig(steps=1, polish_iters=1)),
         f"{blocker} is a file"),
        (ex.Evaluate(checkpoint, blocker), f"{blocker} is a file"),
        (TrainConfig(output=tmp_path / "run", data=("gaits:biped*x",)), "gaits:biped*x: count: expected an integer"),
        (TrainConfig(output=tmp_path / "run", steps=0), "error: --steps: must be an integer >= 1, got 0"),
        (TrainConfig(output=tmp_path / "run", model=ModelConfig(width=10, heads=3)), "--model.width: must be a"),
        (TrainConfig(output=tmp_path / "run", data=("procedural:quadruped",), heldout=("Rnu",), progress=False),
         "held-out 'Rnu': no such clip"),
        (TrainConfig(output=tmp_path / "run", data=("procedural:quadruped",), heldout=(), steps=1, batch_size=4,
                     rig_weights=(1.0, 2.0), progress=False), "2 weights for 1 training skeletons"),
    ]  # fmt: skip
    import torch

    threads = torch.get_num_threads()  # main() sets the process's torch threads: restore them for other tests
    try:
        for cfg, message in cases:
            assert ex.main(cfg) == 2, cfg
            err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "CUDA driver" not in line]
            assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], (cfg, err)
    finally:
        torch.set_num_threads(threads)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written by a rejected run


def test_evaluate_summary_names_the_heldout_clip_not_the_skeleton_source():
    # the held-out CMU skeleton is keyed by the file that brought it (131_01, a training clip): the summary line
    # must say which clip was held out, and show the training data's own PRDC next to the model's
    m = {
        "clips": ["../shared/assets/bvh/131_02.bvh#131_02"],
        "sample_validity": {"valid": 1.0},
        "prdc": {"precision": 0.298, "coverage": 0.286},
        "prdc_training_data": {"precision": 0.386, "coverage": 0.274},
    }
    line = _example_module()._heldout_summary("131_01", m)
    assert line.startswith("131_02 (131_01 skeleton): validity 1.000, precision 0.298, coverage 0.286")
    assert line.endswith("(training poses alone: 0.386 / 0.274)")


def _quiet(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip() and "CUDA driver" not in line]


def _tiny_train(output: Path, **changes):
    from posespace import ModelConfig, TrainConfig

    settings = dict(output=output, data=("procedural:quadruped",), heldout=("idle",), steps=6, batch_size=8,
                    warmup=1, model=ModelConfig(width=16, depth=1, heads=2), validator_poses=4, checkpoint_every=2,
                    progress=False)  # fmt: skip
    return TrainConfig(**{**settings, **changes})


def test_diverging_training_exits_1_naming_the_step(tmp_path, capsys):
    ex = _example_module()
    assert ex.main(_tiny_train(tmp_path / "run", steps=60, lr=1e6, grad_clip=0.0, ema=0.0, checkpoint_every=60)) == 1
    err = _quiet(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("error: training diverged at step "), err
    assert "no checkpoint was written" in err[0] and not (tmp_path / "run" / "posespace.pt").exists()


def test_ctrl_c_names_the_checkpoint_to_resume_from(tmp_path, capsys, monkeypatch):
    from posespace import PoseBatchSampler

    ex = _example_module()
    real, calls = PoseBatchSampler.sample, []

    def sample(self):  # Ctrl-C arrives while the 5th batch is drawn (checkpoints at steps 2 and 4)
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(PoseBatchSampler, "sample", sample)
    assert ex.main(_tiny_train(tmp_path / "run")) == 130
    err = _quiet(capsys.readouterr().err)
    ckpt = tmp_path / "run" / "checkpoint.pt"
    assert err == [f"interrupted: the last checkpoint is {ckpt} (step 4); continue with the same command and --resume"]


def test_ik_prints_validity_and_warns_about_unreachable_handles(checkpoint, tmp_path, capsys):
    from posespace import SamplingConfig

    ex = _example_module()
    fast = SamplingConfig(ik_steps=1, ik_dls_iters=2, polish_iters=1)
    cfg = ex.Ik(checkpoint, "procedural:quadruped", tmp_path / "ik.usda", handles=("front_left_toes=5,5,5",),
                sampling=fast)  # fmt: skip
    import torch

    threads = torch.get_num_threads()
    try:
        assert ex.main(cfg) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr()
    assert "1 IK poses of 'quadruped', validity " in out.out and "ms/pose; the batch time barely grows" in out.out
    warning = [line for line in _quiet(out.err) if line.startswith("warning: handle")]
    assert len(warning) == 1 and "handle 'front_left_toes' of pose 0 not reached" in warning[0]


def test_sample_on_a_bvh_rig_stands_on_the_ground(checkpoint, tmp_path, capsys, assets_dir):
    """Read back with Pixar's UsdSkel: every written pose has its lowest joint on z = 0 (a BVH rig's rest root is
    the hips at the origin, where the samples used to be written, feet ~0.9 m underground)."""
    ex = _example_module()
    out = tmp_path / "cmu.usda"
    cfg = ex.Sample(checkpoint, str(assets_dir / "bvh" / "131_01.bvh"), out, count=2,
                    sampling=ex.SamplingConfig(steps=2, polish_iters=1, guidance_iters=1))  # fmt: skip
    import torch

    threads = torch.get_num_threads()
    try:
        assert ex.main(cfg) == 0, capsys.readouterr().err
    finally:
        torch.set_num_threads(threads)
    lowest = _lowest_joint_heights(out)
    assert len(lowest) == 2
    np.testing.assert_allclose(lowest, 0.0, atol=USD_FLOAT_TOL)


def _lowest_joint_heights(path: Path) -> list[float]:
    """Height [m] of the lowest joint at every time sample of the stage's skeleton, by Pixar's UsdSkel."""
    from pxr import Usd, UsdSkel

    stage = Usd.Stage.Open(str(path))
    cache = UsdSkel.Cache()
    root = next(p for p in stage.Traverse() if p.IsA(UsdSkel.Root))
    cache.Populate(UsdSkel.Root(root), Usd.TraverseInstanceProxies())
    skel = next(p for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton))
    query = cache.GetSkelQuery(UsdSkel.Skeleton(skel))
    times = query.GetAnimQuery().GetJointTransformTimeSamples()
    return [min(m[3][2] for m in query.ComputeJointSkelTransforms(Usd.TimeCode(t))) for t in times]


def test_ik_on_a_bvh_rig_stands_on_the_ground(checkpoint, tmp_path, capsys, assets_dir):
    """The written IK stage stands on z = 0 (it kept the BVH rest root, the hips at the origin: feet ~1 m under);
    the handles are still met relative to the root."""
    ex = _example_module()
    out = tmp_path / "cmu_ik.usda"
    cfg = ex.Ik(checkpoint, str(assets_dir / "bvh" / "131_01.bvh"), out, handles_from_frames=(0, 50),
                sampling=ex.SamplingConfig(ik_steps=1, ik_dls_iters=4, polish_iters=1))  # fmt: skip
    import torch

    threads = torch.get_num_threads()
    try:
        assert ex.main(cfg) == 0, capsys.readouterr().err
    finally:
        torch.set_num_threads(threads)
    assert "standing on z = 0" in capsys.readouterr().out
    np.testing.assert_allclose(_lowest_joint_heights(out), 0.0, atol=USD_FLOAT_TOL)


def test_output_equal_to_the_rig_is_refused(checkpoint, tmp_path, capsys):
    from usd_io import load_asset, write_usdskel

    ex = _example_module()
    rig_file = tmp_path / "quadruped.usda"
    asset = load_asset("procedural:quadruped")
    write_usdskel(rig_file, asset.rig, [asset.clips["walk"]])
    before = rig_file.read_bytes()
    for cfg in (ex.Sample(checkpoint, str(rig_file), rig_file), ex.Interpolate(checkpoint, str(rig_file), rig_file)):
        assert ex.main(cfg) == 2
        err = _quiet(capsys.readouterr().err)
        assert err == [f"error: {rig_file}: --output: is the input --rig: choose another file"]
    assert rig_file.read_bytes() == before


def test_train_into_a_finished_run_exits_2_unless_overwrite(tmp_path, capsys):
    """A second `train` into the same --output silently replaced the first run's checkpoint and model."""
    import tyro

    ex = _example_module()
    out = tmp_path / "run"
    assert ex.main(_tiny_train(out, steps=2)) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert ex.main(_tiny_train(out, steps=2, seed=1)) == 2
    err = _quiet(capsys.readouterr().err)
    assert err == [
        f"error: {out}: holds an earlier run (checkpoint.pt, posespace.pt); continue it with --resume, "
        "start afresh with --overwrite, or choose another output folder"  # the flags, not the API's resume=True
    ]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # the flag the message names exists on the command line
    parsed = tyro.cli(ex.Command, args=["train", "--output", str(out), "--overwrite"])
    assert parsed.overwrite is True and parsed.resume is False
    assert ex.main(_tiny_train(out, steps=2, seed=1, overwrite=True)) == 0
    assert (out / "checkpoint.pt").read_bytes() != before["checkpoint.pt"]
    assert json.loads((out / "config.json").read_text())["seed"] == 1


def test_sigterm_before_the_first_checkpoint_exits_143_in_one_line(tmp_path):
    """``kill`` / ``docker stop`` / Slurm send SIGTERM: the same clean stop as Ctrl-C, with status 128 + 15."""
    from stalled_script import run_until_stalled_then_signal

    stopped = run_until_stalled_then_signal(
        SCRIPT, "posespace.train", ["train", "--output", str(tmp_path / "ps")], signal.SIGTERM
    )
    assert stopped.returncode == 143, stopped.stderr
    assert stopped.error_lines() == ["interrupted before the first checkpoint: nothing to resume"], stopped.stderr
    assert not (tmp_path / "ps" / "checkpoint.pt").exists()


def _main(ex, cfg) -> int:
    """``ex.main(cfg)``, restoring the torch threads it sets."""
    import torch

    threads = torch.get_num_threads()
    try:
        return ex.main(cfg)
    finally:
        torch.set_num_threads(threads)


def _tiny_interpolate(ex, checkpoint, out: Path, **changes):
    fast = ex.SamplingConfig(steps=2, interpolation_steps=2, polish_iters=1, guidance_iters=1)
    return ex.Interpolate(checkpoint, "procedural:quadruped", out, a="walk:0", b="idle:10", steps=3, sampling=fast,
                          **changes)  # fmt: skip


def test_interpolate_checks_its_audit_folder_before_writing(checkpoint, tmp_path, capsys):
    """OUTPUT.audit a file: a clean error, but only after the path was computed and OUTPUT written (and left)."""
    ex = _example_module()
    out = tmp_path / "x.usda"
    (tmp_path / "x.usda.audit").write_text("")
    assert _main(ex, _tiny_interpolate(ex, checkpoint, out)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.usda.audit"]  # no stage, no config
    err = _quiet(capsys.readouterr().err)
    assert err == [f"error: {tmp_path / 'x.usda.audit'}: output: the audit folder is a file (or pass --no-audit)"]


def test_a_failure_writing_the_interpolation_audit_removes_the_stage(checkpoint, tmp_path, capsys, monkeypatch):
    ex = _example_module()
    from usd_io import InputError

    def write_audit(folder, *args, **kwargs):
        (Path(folder) / "report.json").parent.mkdir(parents=True, exist_ok=True)
        (Path(folder) / "report.json").write_text("{}")  # one file written, then the disk fills up
        raise InputError(Path(folder) / "timeline.png", "output", "cannot create a file (No space left on device)")

    monkeypatch.setattr(ex, "write_audit", write_audit)
    assert _main(ex, _tiny_interpolate(ex, checkpoint, tmp_path / "x.usda")) == 2
    err = _quiet(capsys.readouterr().err)
    assert len(err) == 1 and "No space left on device" in err[0], err
    assert list(tmp_path.iterdir()) == []  # neither the stage nor half an audit


def test_the_interpolation_audit_takes_its_joint_limits_from_the_files_clips(checkpoint, tmp_path, capsys):
    """The audit derived the limits from the path itself, so its joint-limit check could not fail."""
    from usd_io import load_asset

    ex = _example_module()
    assert _main(ex, _tiny_interpolate(ex, checkpoint, tmp_path / "x.usda")) == 0
    clips = len(load_asset("procedural:quadruped").clips)
    assert clips > 1
    text = (tmp_path / "x.usda.audit" / "report.json").read_text()
    assert f"derived from {clips} clip(s)" in text and "derived from 1 clip(s)" not in text


def test_an_earlier_interpolation_audit_that_cannot_be_removed_gives_one_line(checkpoint, tmp_path, capsys,
                                                                             monkeypatch):  # fmt: skip
    """An earlier audit owned by another user: a PermissionError traceback (exit 1) whose cleanup raised again and
    left the new stage; now one line, status 2, and no new stage."""
    ex = _example_module()
    audit = tmp_path / "x.usda.audit"
    audit.mkdir()
    (audit / "report.json").write_text("{}")
    real_unlink = Path.unlink

    def unlink(self, *args, **kwargs):
        if self.name == "report.json":
            raise PermissionError(13, "Permission denied", str(self))
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", unlink)
    assert _main(ex, _tiny_interpolate(ex, checkpoint, tmp_path / "x.usda")) == 2
    err = _quiet(capsys.readouterr().err)
    assert err[-1:] == [f"error: {audit / 'report.json'}: output: cannot remove the earlier audit (Permission denied)"]
    assert len(err) == 2 and err[0] == f"note: replacing {audit}"
    assert not (tmp_path / "x.usda").exists()


def test_the_settings_file_beside_the_output_is_checked_before_writing(checkpoint, tmp_path, capsys):
    """OUTPUT.config.json a folder: the stage was written, then the settings failed (status 2, the stage left);
    an evaluation's metrics.json a folder failed after the whole evaluation."""
    ex = _example_module()
    out = tmp_path / "s.usda"
    (tmp_path / "s.usda.config.json").mkdir()
    fast = ex.SamplingConfig(steps=1, polish_iters=1, guidance_iters=1)
    assert _main(ex, ex.Sample(checkpoint, "procedural:quadruped", out, count=1, sampling=fast)) == 2
    err = _quiet(capsys.readouterr().err)
    assert len(err) == 1 and f"{tmp_path / 's.usda.config.json'}: output: is a folder, not a file" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.usda.config.json"]
    (tmp_path / "ev" / "metrics.json").mkdir(parents=True)
    cfg = ex.Evaluate(checkpoint, tmp_path / "ev", data=("procedural:quadruped",), heldout=("idle",),
                      eval=ex.EvalConfig(samples=8, max_real=30, ik_poses=1, projection_poses=1,
                                         interpolation_pairs=1, interpolation_steps=3, zero_shot=()),
                      sampling=fast)  # fmt: skip
    assert _main(ex, cfg) == 2
    err = _quiet(capsys.readouterr().err)
    assert len(err) == 1 and f"{tmp_path / 'ev' / 'metrics.json'}: output: is a folder, not a file" in err[0], err
    assert sorted(p.name for p in (tmp_path / "ev").iterdir()) == ["metrics.json"]


def test_ik_refuses_a_handle_far_out_of_reach(checkpoint, tmp_path, capsys):
    """lhand=1e30,0,0 said only `error: quaternion with zero or non-finite norm`."""
    ex = _example_module()
    out = tmp_path / "ik.usda"
    for value in ("1e30", "1e4"):
        handle = f"front_left_toes={value},0,0"
        assert _main(ex, ex.Ik(checkpoint, "procedural:quadruped", out, handles=(handle,))) == 2
        err = _quiet(capsys.readouterr().err)
        assert len(err) == 1 and err[0].startswith(f"error: procedural:quadruped: --handles {handle!r}: "), err
        assert f"from the root, farther than {ex.IK_MAX_HANDLE_HEIGHTS:g} x the rig's height" in err[0], err
    assert list(tmp_path.iterdir()) == []


ZERO_FRAMES_BVH = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT Spine
  {
    OFFSET 0 10 0
    CHANNELS 3 Zrotation Yrotation Xrotation
    End Site
    {
      OFFSET 0 10 0
    }
  }
}
MOTION
Frames: 0
Frame Time: 0.0333333
"""


def test_train_on_data_without_frames_names_the_file(tmp_path, capsys):
    """`train --data frames_zero.bvh --heldout` said `no training poses left after holding out ` (no name), and
    with the default held-out names `held-out 'Run', '131_02': no such clip; clips: ` (none)."""
    ex = _example_module()
    data = tmp_path / "frames_zero.bvh"
    data.write_text(ZERO_FRAMES_BVH)
    message = f"error: {data}: clips: holds no clip (no frames of motion) to take poses from"
    for heldout in ((), ("Run", "131_02")):
        assert _main(ex, _tiny_train(tmp_path / "run", data=(str(data),), heldout=heldout)) == 2
        err = _quiet(capsys.readouterr().err)
        assert err == [message], err
    # beside data with clips it is named too (it was skipped silently), before a held-out typo's message
    for heldout in ((), ("idel",)):
        data_specs = (str(data), "procedural:quadruped")
        assert _main(ex, _tiny_train(tmp_path / "run", data=data_specs, heldout=heldout)) == 2
        assert _quiet(capsys.readouterr().err) == [message]
    # a held-out typo with good data keeps its own message
    assert _main(ex, _tiny_train(tmp_path / "run", data=("procedural:quadruped",), heldout=("idel",))) == 2
    assert "held-out 'idel': no such clip" in _quiet(capsys.readouterr().err)[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames_zero.bvh"]


def test_evaluate_checks_the_zero_shot_sources_before_the_evaluation(checkpoint, tmp_path, capsys, monkeypatch):
    """A bad --eval.zero-shot source was reported only after the whole held-out evaluation."""
    import posespace.evaluation

    def evaluate_rig(*args, **kwargs):
        raise AssertionError("the held-out evaluation ran before the zero-shot sources were checked")

    monkeypatch.setattr(posespace.evaluation, "evaluate_rig", evaluate_rig)
    ex = _example_module()
    fast = ex.SamplingConfig(steps=1, polish_iters=1, guidance_iters=1)
    for source, problem in (("procedural:bipd", "unknown procedural asset 'bipd'"),
                            (str(tmp_path / "missing.bvh"), "no such file")):  # fmt: skip
        cfg = ex.Evaluate(checkpoint, tmp_path / "ev", data=("procedural:quadruped",), heldout=("idle",),
                          eval=ex.EvalConfig(samples=8, max_real=30, ik_poses=1, projection_poses=1,
                                             interpolation_pairs=1, interpolation_steps=3,
                                             zero_shot=("procedural:biped", source)),
                          sampling=fast)  # fmt: skip
        assert _main(ex, cfg) == 2
        err = _quiet(capsys.readouterr().err)
        assert len(err) == 1 and err[0].startswith(f"error: {source}: ") and problem in err[0], err
    assert list(tmp_path.iterdir()) == []  # no output folder left behind


def test_heldout_clips_seen_in_training_are_flagged_from_another_folder(tmp_path, monkeypatch):
    """Training stored the clip names as typed (``data/quad.usda#walk``): evaluating from another folder
    (``quad.usda#walk``) did not flag the held-out clip the model had been trained on."""
    from posespace import PoseSet, PoseSpace, heldout_clips_in_training
    from usd_io import load_asset, write_usdskel

    asset = load_asset("procedural:quadruped")
    (tmp_path / "data").mkdir()
    write_usdskel(tmp_path / "data" / "quad.usda", asset.rig, list(asset.clips.values()))
    monkeypatch.chdir(tmp_path)
    ex = _example_module()
    assert _main(ex, _tiny_train(Path("run"), data=("data/quad.usda",), heldout=("idle",), steps=2)) == 0
    space = PoseSpace.load(tmp_path / "run" / "posespace.pt")
    assert space.training_clips == (f"{(tmp_path / 'data' / 'quad.usda').resolve()}#walk",)
    monkeypatch.chdir(tmp_path / "data")
    names = PoseSet.from_specs(("quad.usda",)).clip_names()
    assert sorted(names) == ["quad.usda#idle", "quad.usda#walk"]
    assert heldout_clips_in_training(space, names) == ["quad.usda#walk"]
    # resuming with the same command: the same clips (the stored names are resolved, the new ones too)
    monkeypatch.chdir(tmp_path)
    cfg = _tiny_train(Path("run"), data=("data/quad.usda",), heldout=("idle",), steps=4, resume=True)
    assert _main(ex, cfg) == 0
    assert PoseSpace.load(tmp_path / "run" / "posespace.pt").training["steps"] == 4


def test_ik_heading_reaches_the_handles_of_a_turned_character(checkpoint, tmp_path, capsys):
    """--heading-deg 90 with the rest pose's toes turned 90 deg about the root: the written character is turned a
    quarter (its toes where the handles are, in x and y; the stage stands on the ground), and the printed error is
    measured on the turned poses. Without the flag the toes are reached by twisting the body instead."""
    import re

    import sim
    from posespace import SamplingConfig
    from sim.rotations import axis_angle_to_quat, quat_rotate
    from usd_io import load_asset, read_usdskel

    ex = _example_module()
    rig = load_asset("procedural:quadruped").rig
    rest = sim.Motion(30.0, rig.rest_translations[:1].copy(), rig.rest_rotations[None].copy())
    pos = sim.pose_motion(rig, rest)[0][0]
    turn = axis_angle_to_quat(np.array([0.0, 0.0, np.pi / 2]))
    toes = [rig.joint_index(n) for n in rig.joint_names if n.endswith("_toes")]
    targets = rig.rest_translations[0] + quat_rotate(np.broadcast_to(turn, (len(toes), 4)),
                                                     pos[toes] - rig.rest_translations[0])  # fmt: skip
    handles = tuple(f"{rig.joint_names[j]}={p[0]:.6f},{p[1]:.6f},{p[2]:.6f}" for j, p in zip(toes, targets))
    fast = SamplingConfig(ik_steps=2, ik_dls_iters=8, polish_iters=1)
    cfg = ex.Ik(checkpoint, "procedural:quadruped", tmp_path / "ik.usda", handles=handles, heading_deg=90.0,
                sampling=fast)  # fmt: skip
    assert _main(ex, cfg) == 0
    text = capsys.readouterr().out
    assert float(re.search(r"worst handle error ([0-9.e-]+) x height", text).group(1)) < 0.01, text
    written = read_usdskel(tmp_path / "ik.usda")
    solved = sim.pose_motion(written.rig, written.clip())[0][0]
    np.testing.assert_allclose(solved[toes, :2], targets[:, :2], atol=0.01 * rig.height())


def test_each_command_declares_the_sampler_settings_it_reads(checkpoint, tmp_path, capsys):
    """Every subcommand listed all 19 --sampling options and most did nothing there (`interpolate --sampling.steps 1`
    wrote the same stage as 40). The fields a run reads are recorded and must be the ones the CLI declares, and a
    setting its command never reads is named in a warning."""
    import dataclasses

    ex = _example_module()
    names = {f.name for f in dataclasses.fields(ex.SamplingConfig)}
    reads: set[str] = set()

    class Tracing(ex.SamplingConfig):
        def __getattribute__(self, name):
            # reads by the library's sampling code (not the config's own checks, the CLI's warning, asdict)
            frame = sys._getframe(1)
            library = frame.f_globals.get("__name__", "").startswith("posespace.")
            if name in names and library and not frame.f_code.co_qualname.startswith("SamplingConfig."):
                reads.add(name)
            return object.__getattribute__(self, name)

    fast = dict(steps=2, interpolation_steps=2, polish_iters=1, guidance_iters=1, ik_steps=2, ik_dls_iters=2)
    rig = "procedural:quadruped"
    runs = [
        ex.Sample(checkpoint, rig, tmp_path / "s.usda", count=2, sampling=Tracing(**fast)),
        ex.Sample(checkpoint, rig, tmp_path / "u.usda", count=2, guidance=False, sampling=Tracing(**fast)),
        ex.Ik(checkpoint, rig, tmp_path / "i.usda", handles_from_frames=(0,), sampling=Tracing(**fast)),
        ex.Interpolate(
            checkpoint,
            rig,
            tmp_path / "p.usda",
            a="walk:0",
            b="idle:10",
            steps=3,
            audit=False,
            sampling=Tracing(**fast),
        ),
    ]
    for cfg in runs:
        reads.clear()
        assert _main(ex, cfg) == 0, capsys.readouterr().err
        declared = set(ex.sampling_fields_used(cfg))
        assert reads - {"check"} == declared, (type(cfg).__name__, sorted(reads ^ declared))
    capsys.readouterr()
    cfg = _tiny_interpolate(ex, checkpoint, tmp_path / "w.usda", audit=False)
    cfg = dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling, steps=7, ik_steps=3))
    assert _main(ex, cfg) == 0
    warned = [line for line in _quiet(capsys.readouterr().err) if line.startswith("warning: --sampling")]
    expected = "warning: --sampling.steps, --sampling.ik-steps: not used by interpolate (it reads --sampling.inter"
    assert len(warned) == 1 and warned[0].startswith(expected), warned


def test_ik_refuses_a_clip_it_would_ignore(checkpoint, tmp_path, capsys):
    """--clip with --handles was ignored, even a clip the rig does not have."""
    ex = _example_module()
    cfg = ex.Ik(checkpoint, "procedural:quadruped", tmp_path / "i.usda", handles=("root=0,0,0.3",), clip="NoSuchClip")
    assert _main(ex, cfg) == 2
    assert _quiet(capsys.readouterr().err) == [
        "error: --clip: picks the clip of --handles-from-frames; --handles takes none (got 'NoSuchClip')"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_skeleton_of_a_multi_skeleton_stage_is_chosen_with_its_flag(checkpoint, tmp_path, capsys):
    """sample / ik / interpolate had no --skeleton: of a stage holding two characters only the first could be used,
    and the warning named the Python argument (skeleton='...') instead of a flag."""
    from pxr import Usd

    from usd_io import load_asset, write_usdskel

    ex = _example_module()
    parts = {}
    for name in ("quadruped", "biped"):
        asset = load_asset(f"procedural:{name}")
        write_usdskel(tmp_path / f"{name}.usda", asset.rig, list(asset.clips.values())[:1])
        parts[name] = asset.rig.joint_count
    assert parts["quadruped"] != parts["biped"]
    stage = Usd.Stage.CreateNew(str(tmp_path / "two.usda"))
    for name in parts:
        stage.DefinePrim(f"/{name}").GetReferences().AddReference(f"./{name}.usda")
    stage.GetRootLayer().Save()
    composed = Usd.Stage.Open(str(tmp_path / "two.usda"))
    skeletons = [str(p.GetPath()) for p in composed.Traverse() if p.GetTypeName() == "Skeleton"]
    second = next(p for p in skeletons if p.startswith("/biped"))
    fast = ex.SamplingConfig(steps=2, polish_iters=1, guidance_iters=1)
    out = tmp_path / "s.usda"
    cfg = ex.Sample(checkpoint, str(tmp_path / "two.usda"), out, skeleton=second, count=2, sampling=fast)
    assert _main(ex, cfg) == 0, capsys.readouterr().err
    assert load_asset(out).rig.joint_count == parts["biped"]
    cli = load_example(REPO / "examples" / "_example_cli.py", "example_cli_helper")
    text = cli.format_warning("x.usda: /a/Skeleton: 2 Skeletons in the stage; read this one, not /b/Skeleton; choose "
                              "with skeleton='<Skeleton prim path>' (--skeleton)")  # fmt: skip
    assert text == ("warning: x.usda: /a/Skeleton: 2 Skeletons in the stage; read this one, not /b/Skeleton; "
                    "choose with --skeleton '<Skeleton prim path>'\n")  # fmt: skip
