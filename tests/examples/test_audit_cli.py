"""examples/audit.py as a user runs it: exit 0 on a clean clip, 1 on a sinking one, 2 on bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from stalled_script import run_until_stalled_then_signal

REPO = Path(__file__).resolve().parents[2]
AUDIT = REPO / "examples" / "audit.py"
FILES = ("report.json", "timeline.png", "worst_frame.png")


def run_audit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(AUDIT), *args], capture_output=True, text=True, cwd=REPO, timeout=300, check=False
    )


def _stick_bvh(path: Path, sink_frames: range, sink_cm: float, frames: int = 40) -> None:
    """A 1.7 m stick figure (cm units) standing still with its foot tip on the ground; sinks on some frames."""
    rows = []
    for f in range(frames):
        y = 90.0 - (sink_cm if f in sink_frames else 0.0)
        rows.append(f"0 {y} 0 0 0 0 0 0 0 0 0 0")
    path.write_text(
        "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n"
        "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"
        "  JOINT Leg\n  {\n    OFFSET 0 -45 0\n    CHANNELS 3 Zrotation Xrotation Yrotation\n"
        "    End Site\n    {\n      OFFSET 0 -45 0\n    }\n  }\n"
        "  JOINT Spine\n  {\n    OFFSET 0 40 0\n    CHANNELS 3 Zrotation Xrotation Yrotation\n"
        "    End Site\n    {\n      OFFSET 0 40 0\n    }\n  }\n}\n"
        f"MOTION\nFrames: {frames}\nFrame Time: 0.0333333\n" + "\n".join(rows) + "\n"
    )


def test_clean_clip_exits_0_and_writes_report(tmp_path):
    out = tmp_path / "audit"
    result = run_audit("--input", "procedural:biped-walk", "--output", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] is True and report["rig"] == "biped"
    assert "PASS" in result.stdout


def test_sinking_bvh_exits_1_naming_frames(tmp_path):
    src = tmp_path / "sinking.bvh"
    _stick_bvh(src, range(10, 30), sink_cm=10.0)
    out = tmp_path / "audit"
    result = run_audit("--input", str(src), "--output", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    pen = next(c for c in report["checks"] if c["name"] == "ground_penetration")
    assert pen["status"] == "fail"
    assert [(r["start"], r["stop"]) for r in pen["frame_ranges"]] == [(10, 30)]
    assert pen["body_parts"][0] == "Leg_end"
    assert next(c for c in report["checks"] if c["name"] == "self_intersection")["status"] == "skipped"
    assert "frames 10-29" in result.stdout


def _one_line_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "CUDA driver" not in ln]
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "broken.bvh"
    bad.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n")
    out = tmp_path / "audit"
    _one_line_error(run_audit("--input", str(bad), "--output", str(out)), str(bad))
    assert not out.exists()
    _one_line_error(run_audit("--input", str(tmp_path / "nothing.glb")), "no such file")
    src = tmp_path / "stick.bvh"
    _stick_bvh(src, range(0), 0.0, frames=5)
    _one_line_error(run_audit("--input", str(src), "--clip", "nope", "--output", str(out)), "nope")


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_write_leaves_no_half_report(tmp_path, sig, status):
    """Ctrl-C (SIGINT) or kill (SIGTERM) while the timeline is written over an earlier report: one line, 130 / 143,
    no traceback; neither the new report.json beside the earlier pictures nor a temporary file is left (other files
    in the folder are kept)."""
    out = tmp_path / "audit"
    out.mkdir()
    for name in (*FILES, "notes.txt"):  # an earlier report, and a file of the user's
        (out / name).write_text("earlier")
    stopped = run_until_stalled_then_signal(
        AUDIT, "sim.audit.plot_timeline", ["--input", "procedural:biped-walk", "--output", str(out)], sig
    )
    assert stopped.returncode == status, stopped.stderr
    assert stopped.error_lines() == [
        f"note: replacing {out / 'report.json'}",
        f"interrupted: no report written to {out}",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_stage_with_two_characters_names_its_choice_and_skeleton_chooses(tmp_path):
    """A scene referencing a clean and a sinking character: the default reads one and says which (one warning
    line naming both Skeletons); ``--skeleton`` audits the other."""
    from pxr import Usd, UsdGeom, UsdSkel

    import usd_io

    for name, sink in (("clean", range(0)), ("sunk", range(10, 30))):
        _stick_bvh(tmp_path / f"{name}.bvh", sink, sink_cm=10.0)
        asset = usd_io.load_asset(tmp_path / f"{name}.bvh")
        usd_io.write_usdskel(tmp_path / f"{name}.usda", asset.rig, list(asset.clips.values()))
    scene = Usd.Stage.CreateNew(str(tmp_path / "scene.usda"))
    UsdGeom.SetStageMetersPerUnit(scene, 1.0)  # the referenced characters' units and axis
    UsdGeom.SetStageUpAxis(scene, UsdGeom.Tokens.z)
    scene.SetDefaultPrim(scene.DefinePrim("/World", "Xform"))
    scene.DefinePrim("/World/A").GetReferences().AddReference(str(tmp_path / "clean.usda"))
    scene.DefinePrim("/World/B").GetReferences().AddReference(str(tmp_path / "sunk.usda"))
    scene.GetRootLayer().Save()
    reopened = Usd.Stage.Open(str(tmp_path / "scene.usda"))
    skeletons = [str(p.GetPath()) for p in reopened.Traverse() if p.IsA(UsdSkel.Skeleton)]
    assert len(skeletons) == 2 and skeletons[0].startswith("/World/A/"), skeletons

    default = run_audit("--input", str(tmp_path / "scene.usda"), "--output", str(tmp_path / "a"))
    assert default.returncode == 0, default.stderr
    warning = [line for line in (default.stdout + default.stderr).splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and skeletons[0] in warning[0] and skeletons[1] in warning[0], default.stderr
    assert "skeleton" in warning[0]

    chosen = run_audit(
        "--input", str(tmp_path / "scene.usda"), "--skeleton", skeletons[1], "--output", str(tmp_path / "b")
    )
    assert chosen.returncode == 1, chosen.stdout + chosen.stderr  # the sinking one
    assert not any(line.startswith("warning:") for line in (chosen.stdout + chosen.stderr).splitlines())
    report = json.loads((tmp_path / "b" / "report.json").read_text())
    assert not report["passed"]

    wrong = run_audit(
        "--input", str(tmp_path / "scene.usda"), "--skeleton", "/World/C", "--output", str(tmp_path / "c")
    )
    assert wrong.returncode == 2 and "/World/C" in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
