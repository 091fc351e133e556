"""examples/posespace.py as a user runs it, with tiny settings: train, sample, ik, interpolate, evaluate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from example_scripts import load_example

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "posespace.py"
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
    assert out.with_suffix(".config.json").is_file()
    from usd_io import validate_stage

    assert validate_stage(out) == []


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
    from posespace import SamplingConfig, TrainConfig

    ex = _example_module()
    blocker = tmp_path / "afile"
    blocker.write_text("")
    rig, out = "procedural:quadruped", tmp_path / "x.usda"
    cases = [
        (ex.Ik(checkpoint, rig, out, handles_from_frames=(0, 9999)), "walk[9999]: frame out of range (49 frames)"),
        (ex.Ik(checkpoint, rig, out, handles=("front_left_toes=1,2",)), "expected JOINT=X,Y,Z with three finite"),
        (ex.Ik(checkpoint, rig, out, handles=("front_left_toes=nan,0,0",)), "expected JOINT=X,Y,Z with three"),
        (ex.Interpolate(checkpoint, rig, out, a="walk:x"), "--a: expected CLIP:FRAME or FRAME (an integer)"),
        (ex.Interpolate(checkpoint, rig, out, steps=1), "steps: must be an integer >= 2, got 1"),
        (ex.Sample(checkpoint, rig, out, count=0), "n: must be an integer >= 1, got 0"),
        (ex.Sample(checkpoint, rig, out, sampling=SamplingConfig(steps=0)), "SamplingConfig.steps: must be an"),
        (ex.Sample(checkpoint, rig, out, threads=0), "--threads: must be >= 1, got 0"),
        (ex.Sample(checkpoint, rig, blocker / "x.usda", count=1, sampling=SamplingConfig(steps=1, polish_iters=1)),
         f"{blocker} is a file"),
        (ex.Evaluate(checkpoint, blocker), f"{blocker} is a file"),
        (TrainConfig(output=tmp_path / "run", data=("gaits:biped*x",)), "gaits:biped*x: count: expected an integer"),
        (TrainConfig(output=tmp_path / "run", steps=0), "TrainConfig.steps: must be an integer >= 1, got 0"),
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
