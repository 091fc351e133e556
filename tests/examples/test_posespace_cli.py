"""examples/posespace.py as a user runs it, with tiny settings: train, sample, ik, interpolate, evaluate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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
    ok(run("evaluate", "--checkpoint", str(checkpoint), "--output", str(out), "--data", "procedural:quadruped",
           "--heldout", "idle", "--eval.samples", "8", "--eval.max-real", "30", "--eval.ik-poses", "2",
           "--eval.projection-poses", "2", "--eval.interpolation-pairs", "1", "--eval.interpolation-steps", "3",
           "--eval.zero-shot", "procedural:biped", "--sampling.project-steps", "1", "--sampling.ik-steps", "1",
           "--sampling.ik-dls-iters", "1", "--sampling.interpolation-steps", "1", *FAST_SAMPLING))  # fmt: skip
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
