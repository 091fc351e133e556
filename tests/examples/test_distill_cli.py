"""examples/distill.py in subprocesses: tiny and oracle runs on the Fox write every output; a run killed with
SIGKILL resumes from its checkpoint and ends where an unbroken run ends; Ctrl-C exits 130 naming the checkpoint;
bad input (settings, devices, folders holding another run, unreadable checkpoints) exits with status 2 and one
line; the audit holds the motion to the asset's own clips."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from example_scripts import load_example

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "distill.py"
RESUME_TOL = 1e-6  # resumed vs unbroken trajectory parameters (same float operations in the same order)
SMALL = ["--frames", "5", "--width", "32", "--height", "32", "--azimuths", "30", "--quiet"]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def _fox(assets_dir: Path) -> str:
    return str(assets_dir / "gltf" / "Fox.glb")


def _check_outputs(out: Path) -> list[dict]:
    for name in ("config.json", "checkpoint.pt", "loss_log.csv", "motion.usda"):
        assert (out / name).is_file(), name
    assert (out / "previews" / "final.gif").is_file()
    rows = list(csv.DictReader(open(out / "loss_log.csv")))
    assert rows and all(math.isfinite(float(r[k])) for r in rows for k in ("total", "sds", "smoothness"))
    from pxr import Usd, UsdSkel

    stage = Usd.Stage.Open(str(out / "motion.usda"))
    anims = [p for p in stage.Traverse() if p.IsA(UsdSkel.Animation)]
    assert len(anims) == 1
    rotations = np.array(UsdSkel.Animation(anims[0]).GetRotationsAttr().Get(stage.GetEndTimeCode()))
    assert np.isfinite(rotations).all()
    report = json.loads((out / "audit" / "report.json").read_text())  # the audit of the distilled motion
    assert report["frame_count"] == len(UsdSkel.Animation(anims[0]).GetRotationsAttr().GetTimeSamples())
    assert (out / "audit" / "timeline.png").is_file()
    return rows


def test_tiny_guidance_smoke_run(tmp_path, assets_dir):
    out = tmp_path / "tiny"
    proc = _run("--asset", _fox(assets_dir), "--guidance", "tiny", "--steps", "2", "--output", str(out), *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert len(_check_outputs(out)) == 2
    assert json.loads((out / "config.json").read_text())["guidance"]["kind"] == "tiny"


def test_oracle_run_reports_its_error(tmp_path, assets_dir):
    out = tmp_path / "oracle"
    args = ["--asset", _fox(assets_dir), "--guidance", "oracle", "--oracle-clip", "Walk", "--steps", "3"]
    proc = _run(*args, "--output", str(out), *SMALL)
    assert proc.returncode == 0, proc.stderr
    _check_outputs(out)
    metrics = json.loads((out / "oracle_metrics.json").read_text())
    assert metrics["steps"] == 3 and "b_Hip_01" in metrics["per_joint_deg"]
    assert "oracle: mean joint-angle error" in proc.stdout


def test_killed_run_resumes_to_the_unbroken_result(tmp_path, assets_dir):
    steps = 8
    args = ["--asset", _fox(assets_dir), "--guidance", "oracle", "--oracle-clip", "Walk", "--steps", str(steps)]
    args += ["--checkpoint-every", "2", "--preview-every", "0", *SMALL]
    unbroken = tmp_path / "unbroken"
    assert _run(*args, "--output", str(unbroken)).returncode == 0
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args, "--output", str(killed)], cwd=REPO)
    ckpt = killed / "checkpoint.pt"
    deadline = time.time() + 300
    try:
        while time.time() < deadline and proc.poll() is None:
            if ckpt.is_file() and torch.load(ckpt, weights_only=False)["step"] >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    killed_at = torch.load(ckpt, weights_only=False)["step"]
    assert 2 <= killed_at < steps
    resumed = _run(*args, "--output", str(killed), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"({steps - killed_at} steps in this call)" in resumed.stdout
    a = torch.load(unbroken / "checkpoint.pt", weights_only=False)
    b = torch.load(ckpt, weights_only=False)
    assert a["step"] == b["step"] == steps
    for key in ("rotations_6d", "translation"):
        np.testing.assert_allclose(b["trajectory"][key], a["trajectory"][key], atol=RESUME_TOL, err_msg=key)
    assert [r["step"] for r in b["log"]] == list(range(steps))


def _example_module():
    return load_example(SCRIPT, "distill_example")


@pytest.mark.parametrize(
    ("asset", "extra", "message"),
    [
        ("missing.glb", {"guidance": "tiny"}, "no such file"),
        ("fox", {"guidance": "oracle"}, "--oracle-clip"),
        ("fox", {"guidance": "oracle", "oracle_clip": "Dance"}, "no clip 'Dance'"),
    ],
)
def test_bad_input_exits_with_status_2(tmp_path, assets_dir, capsys, asset, extra, message):
    example = _example_module()
    asset = _fox(assets_dir) if asset == "fox" else str(tmp_path / asset)
    cli = example.DistillCLI(asset=asset, output=tmp_path / "bad", steps=1, quiet=True, **extra)
    assert example.main(cli) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "bad" / "motion.usda").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # the flags, not the fields they set (OptimConfig.steps, RenderConfig.width, CameraConfig.azimuths_deg)
        ({"steps": 0}, "error: --steps: must be an integer >= 1, got 0"),  # ran zero steps
        ({"frames": 0}, "error: --frames: must be an integer >= 2, got 0"),  # silently took the preset's
        # one frame: motion.usda written, then a GIF traceback, exit 1 ("loss or gradient not finite"), no metrics
        ({"guidance": "oracle", "oracle_clip": "walk", "frames": 1}, "error: --frames: must be an integer >= 2, got 1"),
        ({"fps": 0.0}, "error: --fps: must be a finite number > 0"),  # silently took the preset's
        ({"checkpoint_every": 0}, "error: --checkpoint-every: must be"),  # ZeroDivisionError traceback
        ({"azimuths": ()}, "error: --azimuths: "),  # reshape error deep in the renderer
        ({"width": -5}, "error: --width: must be an integer >= 1"),
        ({"threads": 0}, "--threads: must be >= 1"),  # torch RuntimeError traceback
        ({"output_under_a_file": True}, "is a file"),  # FileExistsError traceback
        ({"device": "banana"}, "--device: 'banana' is not a device name"),  # RuntimeError traceback
        ({"device": "cuda:97"}, "--device: 'cuda:97'"),  # AssertionError traceback without CUDA
        ({"guidance_device": "cuda:97"}, "--guidance-device: 'cuda:97'"),  # was ignored: ran on the CPU
        ({"guidance_device": "meta"}, "--guidance-device: 'meta' cannot run a distillation"),
        ({"oracle_clip": "walk"}, "--oracle-clip: only the oracle uses a target clip"),  # silently ignored
        # traceback at step 0, config.json left; then named DistillConfig.render.width x height, not the flags
        ({"width": 40, "height": 40}, "error: --width: tiny needs multiples of 16 px"),
        ({"width": 36, "height": 32}, "error: --width: tiny needs multiples of 16 px"),  # 4 px silently unguided
        ({"width": 32, "height": 40}, "error: --height: tiny needs multiples of 16 px"),
        ({"resume": True, "overwrite": True}, "--resume and --overwrite: choose one"),
        # weights options given to guidance that loads no weights were silently ignored (exit 0)
        ({"guidance_model": "/nonexistent"}, "--guidance-model: only a released model's weights are loaded"),
        ({"guidance_dtype": "float16"}, "--guidance-dtype: only a released model's weights are loaded"),
        ({"guidance_allow_download": True}, "--guidance-allow-download: only a released model's weights"),
        ({"guidance": "oracle", "oracle_clip": "walk", "guidance_model": "/m"}, "not oracle's"),
        ({"guidance": "oracle", "oracle_clip": "walk", "guidance_scale": 3.0}, "--guidance-scale: the oracle ignores"),
    ],
)
def test_bad_settings_exit_with_status_2(tmp_path, capsys, extra, message):
    example = _example_module()
    output = tmp_path / "bad"
    if extra.pop("output_under_a_file", False):
        (tmp_path / "afile").write_text("")
        output = tmp_path / "afile" / "run"
    cli = example.DistillCLI(asset="procedural:quadruped", output=output, quiet=True, audit=False, **extra)
    assert example.main(cli) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "CUDA driver" not in line]
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "bad").exists()


def test_pose_space_as_pose_prior(tmp_path):
    from pose_spaces import tiny_pose_space

    checkpoint = tiny_pose_space("quadruped", tmp_path / "posespace")
    args = ["--asset", "procedural:quadruped", "--guidance", "tiny", "--steps", "2", "--no-audit", *SMALL]
    plain, with_prior = tmp_path / "plain", tmp_path / "prior"
    assert _run(*args, "--output", str(plain)).returncode == 0
    proc = _run(*args, "--output", str(with_prior), "--pose-prior", str(checkpoint), "--pose-prior-weight", "2")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(open(with_prior / "loss_log.csv")))
    assert all(float(r["pose_prior"]) > 0 for r in rows)  # the term is computed and logged
    assert json.loads((with_prior / "config.json").read_text())["weights"]["pose_prior"] == 2.0
    assert all(float(r["pose_prior"]) == 0 for r in csv.DictReader(open(plain / "loss_log.csv")))
    bad = tmp_path / "bad.pt"
    bad.write_text("no")
    proc = _run(*args, "--output", str(tmp_path / "x"), "--pose-prior", str(bad))
    assert proc.returncode == 2 and "bad.pt: not a readable torch checkpoint" in proc.stderr


def test_ctrl_c_exits_130_and_names_the_checkpoint(tmp_path):
    out = tmp_path / "interrupted"
    args = ["--asset", "procedural:quadruped", "--guidance", "tiny", "--steps", "500", "--checkpoint-every", "1"]
    args += ["--preview-every", "0", "--no-audit", *SMALL]
    # a shell's background jobs (CI runners, nohup) inherit SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the child the default disposition, as a terminal's foreground job has
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args, "--output", str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and not (out / "checkpoint.pt").is_file():
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert f"interrupted: continue with --resume (checkpoint {out / 'checkpoint.pt'})" in stderr
    assert "Traceback" not in stderr and not (out / "motion.usda").exists()


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "CUDA driver" not in line]
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_folder_holding_another_run_is_refused_or_replaced(tmp_path, capsys):
    """A rerun without --resume overwrote a resumable checkpoint silently and left the earlier run's audit and
    oracle metrics beside its own; a resume with another oracle clip continued silently; a corrupt checkpoint was a
    traceback."""
    example = _example_module()
    out = tmp_path / "run"
    base = {"asset": "procedural:quadruped", "output": out, "steps": 1, "quiet": True, "frames": 5, "width": 32,
            "height": 32, "azimuths": (30.0,)}  # fmt: skip
    oracle = {**base, "guidance": "oracle", "oracle_clip": "walk"}
    assert example.main(example.DistillCLI(**oracle)) == 0
    assert (out / "audit" / "report.json").is_file() and (out / "oracle_metrics.json").is_file()
    capsys.readouterr()
    before = (out / "checkpoint.pt").read_bytes()
    assert example.main(example.DistillCLI(**base, guidance="tiny", audit=False)) == 2
    line = _one_error_line(capsys)
    assert "earlier run's checkpoint; continue it with --resume, start afresh here with --overwrite, or" in line
    assert "=True" not in line  # the flags only, not the API's resume=True / overwrite=True
    assert (out / "checkpoint.pt").read_bytes() == before
    assert example.main(example.DistillCLI(**{**oracle, "oracle_clip": "idle"}, resume=True)) == 2
    assert "another oracle target (clip 'walk'" in _one_error_line(capsys)
    assert example.main(example.DistillCLI(**base, guidance="tiny", audit=False, overwrite=True)) == 0
    assert not (out / "audit" / "report.json").exists() and not (out / "oracle_metrics.json").exists()
    capsys.readouterr()
    (out / "checkpoint.pt").write_bytes(before[: len(before) // 3])
    assert example.main(example.DistillCLI(**base, guidance="tiny", resume=True)) == 2
    assert "checkpoint.pt: not a readable distill checkpoint" in _one_error_line(capsys)


def test_audit_holds_the_motion_to_the_assets_clips(tmp_path, capsys):
    """A distilled motion with a joint turned 90 deg in every frame: limits derived from the motion itself (as
    before) cannot fail it; the asset's own clips do."""
    import sim
    from sim.rotations import axis_angle_to_quat, quat_multiply
    from usd_io import load_asset

    example = _example_module()
    asset = load_asset("procedural:quadruped")
    walk = asset.clip("walk")
    j = asset.rig.joint_index("hind_left_upper_leg")
    rotations = walk.rotations.copy()
    rotations[:, j] = quat_multiply(rotations[:, j], axis_angle_to_quat([0.0, 0.0, np.pi / 2]))
    motion = sim.Motion(walk.fps, walk.root_translations, rotations, name="distilled")
    cli = example.DistillCLI(asset="procedural:quadruped", output=tmp_path)
    assert example._audit(cli, asset, motion) == 0
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    limits = next(c for c in report["checks"] if c["name"] == "joint_limits")
    assert limits["status"] == "fail", limits["message"]
    assert "joint limits from the asset's 2 clip(s)" in capsys.readouterr().out


def test_sigterm_before_the_first_checkpoint_exits_143_in_one_line(tmp_path):
    """SIGTERM takes the Ctrl-C path: one line, status 128 + 15, no checkpoint claimed."""
    from stalled_script import run_until_stalled_then_signal

    out = tmp_path / "run"
    stopped = run_until_stalled_then_signal(
        SCRIPT, "distill.optimize.Distiller", ["--asset", "procedural:quadruped", "--guidance", "tiny",
                                               "--output", str(out), *SMALL], signal.SIGTERM,
    )  # fmt: skip
    assert stopped.returncode == 143, stopped.stderr
    assert len(stopped.error_lines()) == 1 and "nothing to resume" in stopped.error_lines()[0], stopped.stderr
    assert not (out / "checkpoint.pt").exists()


def test_interrupted_audit_leaves_no_report(tmp_path):
    """A resumed run interrupted while it writes its audit leaves neither the earlier run's report nor a half one."""
    from stalled_script import run_until_stalled_then_signal

    out = tmp_path / "run"
    args = ["--asset", "procedural:quadruped", "--guidance", "tiny", "--steps", "2", "--preview-every", "0", *SMALL]
    first = subprocess.run([sys.executable, str(SCRIPT), *args, "--output", str(out)], cwd=REPO,
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert (out / "audit" / "report.json").is_file() and (out / "audit" / "timeline.png").is_file()
    stopped = run_until_stalled_then_signal(
        SCRIPT, "sim.audit.plot_timeline", [*args, "--output", str(out), "--resume"], signal.SIGTERM
    )
    assert stopped.returncode == 143, stopped.stderr
    assert len(stopped.error_lines()) == 1 and stopped.error_lines()[0].startswith("interrupted"), stopped.stderr
    assert not [p.name for p in (out / "audit").iterdir()], "an earlier or half-written report was left"


def test_skeleton_choice_needs_a_usd_asset(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--asset", "procedural:quadruped", "--skeleton", "/q/Skeleton",
                           "--output", str(tmp_path / "run"), *SMALL], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    lines = [line for line in proc.stderr.splitlines() if line.strip() and "CUDA driver" not in line]
    assert proc.returncode == 2 and len(lines) == 1 and "skeleton" in lines[0], proc.stderr
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_an_unwritable_audit_folder_is_refused_before_the_optimization(tmp_path, capsys):
    """OUTPUT/audit a file: status 2, but only after the whole optimization, leaving motion.usda, checkpoint.pt and
    previews/ behind; now nothing is written (and --no-audit runs)."""
    example = _example_module()
    out = tmp_path / "run"
    out.mkdir()
    (out / "audit").write_text("")
    base = {"asset": "procedural:quadruped", "output": out, "steps": 1, "quiet": True, "frames": 5, "width": 16,
            "height": 16, "azimuths": (30.0,), "preview_every": 0}  # fmt: skip
    assert example.main(example.DistillCLI(**base)) == 2
    assert sorted(p.name for p in out.iterdir()) == ["audit"]
    assert _one_error_line(capsys) == f"error: {out / 'audit'}: output: the audit folder is a file (or pass --no-audit)"
    (out / "audit").unlink()
    (out / "audit" / "report.json").mkdir(parents=True)
    assert example.main(example.DistillCLI(**base)) == 2
    assert "report.json: output: is a folder, not a file (or pass --no-audit)" in _one_error_line(capsys)
    assert sorted(p.name for p in out.rglob("*")) == ["audit", "report.json"]
    assert example.main(example.DistillCLI(**base, audit=False)) == 0
    assert (out / "motion.usda").is_file()


def test_a_renamed_copy_of_the_asset_resumes(tmp_path, assets_dir, capsys):
    """A glTF rig is named after its file: a byte-identical copy under another name was refused as "another
    character" (exit 2), although the asset's path is recorded, not compared."""
    import shutil

    example = _example_module()
    for folder, name in (("a", "Fox.glb"), ("b", "fox_v2.glb")):
        (tmp_path / folder).mkdir()
        shutil.copy(_fox(assets_dir), tmp_path / folder / name)
    run = {"output": tmp_path / "run", "guidance": "oracle", "oracle_clip": "Walk", "steps": 2, "checkpoint_every": 1,
           "frames": 5, "width": 32, "height": 32, "azimuths": (30.0,), "quiet": True, "audit": False}  # fmt: skip
    assert example.main(example.DistillCLI(asset=str(tmp_path / "a" / "Fox.glb"), **run)) == 0
    capsys.readouterr()
    assert example.main(example.DistillCLI(asset=str(tmp_path / "b" / "fox_v2.glb"), resume=True, **run)) == 0, (
        capsys.readouterr().err
    )
    assert "(0 steps in this call)" in capsys.readouterr().out
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["source"] == str(tmp_path / "b" / "fox_v2.glb")  # recorded as this call's
