"""examples/convert.py as a user runs it: outputs open and validate; bad input gives one clear line and exit 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from stalled_script import run_until_stalled_then_signal

from usd_io import load_asset, validate_stage

REPO = Path(__file__).resolve().parents[2]
CONVERT = REPO / "examples" / "convert.py"


def run_convert(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CONVERT), *args], capture_output=True, text=True, cwd=REPO, timeout=300, check=False
    )


def assert_bad_input(result: subprocess.CompletedProcess, source: Path, output: Path, fragment: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and "CUDA driver" not in line]
    assert len(lines) == 1, result.stderr
    assert str(source) in lines[0] and fragment in lines[0], lines[0]
    assert not output.exists()
    if output.parent.exists():
        assert not [p for p in output.parent.iterdir() if p.name.startswith(f".{output.stem}.")], "temp file left"


def test_truncated_glb(tmp_path, assets_dir):
    data = (assets_dir / "gltf" / "Fox.glb").read_bytes()
    bad = tmp_path / "truncated.glb"
    bad.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out" / "fox.usda"
    assert_bad_input(run_convert("--input", str(bad), "--output", str(out)), bad, out, "truncated")


def test_bvh_missing_brace(tmp_path):
    bad = tmp_path / "missing_brace.bvh"
    bad.write_text(
        "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation "
        "Xrotation\n  JOINT Spine\n  {\n    OFFSET 0 1 0\n    CHANNELS 3 Zrotation Yrotation Xrotation\n"
        "    End Site\n    {\n      OFFSET 0 1 0\n    }\n}\nMOTION\nFrames: 1\nFrame Time: 0.0333333\n"
        "0 0 0 0 0 0 0 0 0\n"
    )
    out = tmp_path / "bvh.usda"
    assert_bad_input(run_convert("--input", str(bad), "--output", str(out)), bad, out, "missing '}'")


USDA_HEADER = """#usda 1.0
(
    defaultPrim = "Root"
    metersPerUnit = 1
    upAxis = "Z"
)

def SkelRoot "Root" (prepend apiSchemas = ["SkelBindingAPI"])
{
    rel skel:skeleton = </Root/Skel>
"""


def test_usd_joints_out_of_order(tmp_path):
    bad = tmp_path / "out_of_order.usda"
    bad.write_text(
        USDA_HEADER
        + """    def Skeleton "Skel"
    {
        uniform token[] joints = ["hip/knee", "hip"]
        uniform matrix4d[] bindTransforms = [
            ((1,0,0,0),(0,1,0,0),(0,0,1,0),(0,0,1,1)), ((1,0,0,0),(0,1,0,0),(0,0,1,0),(0,0,0,1))]
        uniform matrix4d[] restTransforms = [
            ((1,0,0,0),(0,1,0,0),(0,0,1,0),(0,0,1,1)), ((1,0,0,0),(0,1,0,0),(0,0,1,0),(0,0,0,1))]
    }
}
"""
    )
    out = tmp_path / "x.usda"
    assert_bad_input(run_convert("--input", str(bad), "--output", str(out)), bad, out, "before its parent")


def test_usd_nan_weights(tmp_path):
    bad = tmp_path / "nan_weights.usda"
    bad.write_text(
        USDA_HEADER
        + """    def Skeleton "Skel"
    {
        uniform token[] joints = ["hip"]
        uniform matrix4d[] bindTransforms = [((1,0,0,0),(0,1,0,0),(0,0,1,0),(0,0,0,1))]
        uniform matrix4d[] restTransforms = [((1,0,0,0),(0,1,0,0),(0,0,1,0),(0,0,0,1))]
    }
    def Mesh "Body" (prepend apiSchemas = ["SkelBindingAPI"])
    {
        point3f[] points = [(0,0,0), (1,0,0), (0,1,0)]
        int[] faceVertexCounts = [3]
        int[] faceVertexIndices = [0, 1, 2]
        int[] primvars:skel:jointIndices = [0, 0, 0] (
            interpolation = "vertex"
            elementSize = 1
        )
        float[] primvars:skel:jointWeights = [1, nan, 1] (
            interpolation = "vertex"
            elementSize = 1
        )
        rel skel:skeleton = </Root/Skel>
    }
}
"""
    )
    out = tmp_path / "x.usda"
    assert_bad_input(run_convert("--input", str(bad), "--output", str(out)), bad, out, "NaN")


def test_unknown_clip_and_missing_file(tmp_path, assets_dir):
    out = tmp_path / "x.usda"
    fox = assets_dir / "gltf" / "Fox.glb"
    r = run_convert("--input", str(fox), "--output", str(out), "--clip", "Dance")
    assert_bad_input(r, fox, out, "Survey")  # the message lists the clips that exist
    missing = tmp_path / "nope.glb"
    assert_bad_input(run_convert("--input", str(missing), "--output", str(out)), missing, out, "no such file")
    # choosing a skeleton only makes sense in a USD stage
    assert_bad_input(run_convert("--input", str(fox), "--output", str(out), "--skeleton", "/Fox"), fox, out, "skeleton")


def test_all_clips_written_and_first_bound(tmp_path, assets_dir):
    out = tmp_path / "fox_all.usdc"
    r = run_convert("--input", str(assets_dir / "gltf" / "Fox.glb"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert validate_stage(out) == []
    asset = load_asset(out)
    assert list(asset.clips) == ["Survey", "Walk", "Run"]
    source = load_asset(assets_dir / "gltf" / "Fox.glb")
    for name, clip in source.clips.items():
        np.testing.assert_allclose(asset.clips[name].times, clip.times, atol=1e-9)


@pytest.mark.parametrize("name", ["quadruped", "biped"])
def test_procedural_characters_convert(tmp_path, name):
    out = tmp_path / f"{name}.usda"
    r = run_convert("--input", f"procedural:{name}", "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert validate_stage(out) == []
    asset = load_asset(out)
    assert asset.rig.meshes and "walk" in asset.clips
    assert all(np.isfinite(m.points).all() for m in asset.rig.meshes)


def test_every_written_clip_is_audited_next_to_the_output(tmp_path):
    """A stage with a clean walk and the same walk sunk 3 cm on frames 10-30: convert writes one audit per clip,
    the sunk one fails ground penetration on those frames, the clean one passes; --no-audit writes none."""
    import json

    from audit_cases import sunk

    import usd_io

    asset = usd_io.load_asset("procedural:biped-walk")
    walk = asset.clip("walk")
    source = tmp_path / "two_clips.usda"
    usd_io.write_usdskel(source, asset.rig, [walk, sunk(walk, 10, 30, 0.03)])
    out = tmp_path / "out" / "biped.usda"
    result = run_convert("--input", str(source), "--output", str(out))
    assert result.returncode == 0, result.stderr
    audits = out.parent / "biped.usda.audit"
    reports = {p.parent.name: json.loads(p.read_text()) for p in audits.glob("*/report.json")}
    assert set(reports) == {"walk", "walk-sunk"}
    assert reports["walk"]["passed"], reports["walk"]["checks"]
    check = next(c for c in reports["walk-sunk"]["checks"] if c["name"] == "ground_penetration")
    assert check["status"] == "fail"
    assert [(r["start"], r["stop"]) for r in check["frame_ranges"]] == [(10, 30)]
    bare = tmp_path / "bare" / "biped.usda"
    assert run_convert("--input", str(source), "--output", str(bare), "--no-audit").returncode == 0
    assert sorted(p.name for p in bare.parent.iterdir()) == ["biped.usda"]


def test_unwritable_output_gives_one_line(tmp_path):
    """An output under a file, an output that is a folder, an audit folder that is a file: one line, status 2
    (each was an OSError traceback)."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    folder = tmp_path / "stage.usda"
    folder.mkdir()
    (tmp_path / "walk.usda.audit").write_text("")
    for output, fragment in (
        (blocker / "x.usda", f"cannot create the folder: {blocker} is a file"),
        (folder, f"{folder}: output: is a folder, not a file"),
        (tmp_path / "walk.usda", f"{tmp_path / 'walk.usda.audit'}: output: the audit folder is a file"),
    ):
        result = run_convert("--input", "procedural:quadruped-walk", "--output", str(output))
        assert result.returncode == 2, result.stdout + result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip() and "CUDA driver" not in line]
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "stage.usda", "walk.usda.audit"]  # no stage


def test_rerun_replaces_the_earlier_audit(tmp_path):
    """A conversion into an earlier OUTPUT leaves only its own clips' audits; --no-audit leaves none (an earlier
    run's Run/Survey/Walk audits stayed next to the new stage's)."""
    out = tmp_path / "fox.usda"
    audits = tmp_path / "fox.usda.audit"
    for clip in ("Run", "Survey", "walk"):  # an earlier run's (Fox) audits; "walk" is also this run's clip
        (audits / clip).mkdir(parents=True)
        (audits / clip / "report.json").write_text('{"earlier": true}')
    result = run_convert("--input", "procedural:quadruped-walk", "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in audits.iterdir()) == ["walk"]
    report = json.loads((audits / "walk" / "report.json").read_text())
    assert report["rig"] == "quadruped" and "earlier" not in report
    assert sorted(p.name for p in (audits / "walk").iterdir()) == ["report.json", "timeline.png", "worst_frame.png"]
    result = run_convert("--input", "procedural:quadruped-walk", "--output", str(out), "--no-audit")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fox.usda"]


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_audit_gives_one_line_and_leaves_no_half_audit(tmp_path, sig, status):
    """Ctrl-C (SIGINT) or kill (SIGTERM) while the audit writes its timeline: one line, 130 / 143, no traceback, no
    temporary file, the stage written and no half-written audit (SIGTERM left .timeline.*.tmp.png behind)."""
    out = tmp_path / "b.usda"
    stopped = run_until_stalled_then_signal(
        CONVERT, "sim.audit.plot_timeline", ["--input", "procedural:biped-walk", "--output", str(out)], sig
    )
    assert stopped.returncode == status, stopped.stderr
    assert stopped.error_lines() == [f"interrupted: wrote {out}, its audit unfinished (removed)"], stopped.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["b.usda"]  # no audit folder, no temporary file
    assert list(load_asset(out).clips) == ["walk"]


ZERO_OFFSETS_BVH = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT Spine
  {
    OFFSET 0 0 0
    CHANNELS 3 Zrotation Yrotation Xrotation
    End Site
    {
      OFFSET 0 0 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0333333
0 0 0 0 0 0 0 0 0
0 0 0 0 0 0 0 0 0
"""


def test_a_clip_the_audit_cannot_measure_is_refused_with_nothing_written(tmp_path):
    """A BVH whose OFFSETs are all 0 (no extent to scale the contact bands by) was a RigError traceback from the
    audit, exit 1, with the stage already written; --no-audit converts it."""
    source = tmp_path / "zero_offsets.bvh"
    source.write_text(ZERO_OFFSETS_BVH)
    out = tmp_path / "out" / "x.usda"
    result = run_convert("--input", str(source), "--output", str(out))
    assert_bad_input(result, source, out, "cannot be audited: rig 'zero_offsets': its bind-pose skeleton has no extent")
    assert "--no-audit" in result.stderr
    assert not (tmp_path / "out").exists()  # no stage, no audit folder, no empty folder
    result = run_convert("--input", str(source), "--output", str(out), "--no-audit")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["x.usda"]


def test_output_without_a_file_name_or_usd_extension_gives_one_line(tmp_path):
    """--output "" was a ValueError traceback (PosixPath('.') has an empty name); a wrong extension is refused
    before the input loads (the input here does not even exist)."""
    for output, fragment in (("", "--output '.': names no file"), (str(tmp_path / "x.txt"), "--output: a USD stage")):
        result = run_convert("--input", str(tmp_path / "missing.bvh"), "--output", output)
        assert result.returncode == 2, result.stdout + result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip() and "CUDA driver" not in line]
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failure_writing_the_audit_removes_the_stage(tmp_path, monkeypatch, capsys):
    """The stage is not left behind an audit that could not be written (a run with status 2 writes nothing)."""
    from example_scripts import load_example

    from usd_io import InputError

    convert = load_example(CONVERT, "convert_example")

    def write_audit(folder, *args, **kwargs):
        raise InputError(folder / "report.json", "output", "cannot create a file (No space left on device)")

    monkeypatch.setattr(convert, "write_audit", write_audit)
    out = tmp_path / "b.usda"
    assert convert.main(convert.ConvertConfig(input="procedural:quadruped-walk", output=out)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "CUDA driver" not in line]
    assert len(err) == 1 and "No space left on device" in err[0] and f"{out} removed" in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_an_earlier_audit_that_cannot_be_removed_gives_one_line_and_keeps_the_earlier_stage(
    tmp_path, monkeypatch, capsys
):
    """An earlier OUTPUT.audit owned by another user: a PermissionError traceback (exit 1), with the new stage
    written beside the earlier audit. Now one line, status 2, the earlier stage and audit as they were."""
    import shutil

    from example_scripts import load_example

    convert = load_example(CONVERT, "convert_example")
    out = tmp_path / "c.usda"
    (tmp_path / "c.usda.audit" / "walk").mkdir(parents=True)
    (tmp_path / "c.usda.audit" / "walk" / "report.json").write_text('{"earlier": true}')
    out.write_text("#usda 1.0\n")

    def rmtree(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(Path(path) / "walk" / "report.json"))

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    assert convert.main(convert.ConvertConfig(input="procedural:quadruped-walk", output=out)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert err == [f"error: {tmp_path / 'c.usda.audit' / 'walk' / 'report.json'}: output: cannot remove the earlier "
                   "audit (Permission denied)"]  # fmt: skip
    assert out.read_text() == "#usda 1.0\n"
    assert (tmp_path / "c.usda.audit" / "walk" / "report.json").read_text() == '{"earlier": true}'


@pytest.mark.parametrize("value", [0.0, -0.01, float("nan"), float("inf")])
def test_a_bad_meters_per_unit_names_the_flag(tmp_path, capsys, value):
    """--meters-per-unit 0 was reported as the reader's field (``meters_per_unit: must be ...``), not the flag the
    user typed; it is refused before the input loads (the input here does not even exist)."""
    from example_scripts import load_example

    convert = load_example(CONVERT, "convert_example")
    out = tmp_path / "x.usda"
    cfg = convert.ConvertConfig(input=str(tmp_path / "missing.bvh"), output=out, meters_per_unit=value)
    assert convert.main(cfg) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "CUDA driver" not in line]
    assert len(err) == 1 and err[0].startswith("error: --meters-per-unit: must be a finite length > 0"), err
    assert list(tmp_path.iterdir()) == []
