"""Usability of the example CLIs: error lines name the flag the user typed (not the config field), a missing
default path says it is a default seen from the current folder, replaced outputs are announced, track's last lines
name every output and the audit verdict, --help shows what it refers to."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from example_scripts import load_example

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TRACK_FAST = ("--method", "pd", "--no-preview", "--no-audit")


def run(script: str, *args: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and "CUDA driver" not in ln]


def one_error(proc: subprocess.CompletedProcess) -> str:
    """Asserts exit status 2, no traceback and one ``error:`` line on stderr; returns it."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = _lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def _stick_bvh(path: Path, frames: int = 5) -> Path:
    """A hips / leg / spine stick figure (cm, Y-up), standing still."""
    rows = "\n".join("0 90 0 0 0 0 0 0 0 0 0 0" for _ in range(frames))
    path.write_text(
        "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n"
        "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"
        "  JOINT Leg\n  {\n    OFFSET 0 -45 0\n    CHANNELS 3 Zrotation Xrotation Yrotation\n"
        "    End Site\n    {\n      OFFSET 0 -45 0\n    }\n  }\n"
        "  JOINT Spine\n  {\n    OFFSET 0 40 0\n    CHANNELS 3 Zrotation Xrotation Yrotation\n"
        "    End Site\n    {\n      OFFSET 0 40 0\n    }\n  }\n}\n"
        f"MOTION\nFrames: {frames}\nFrame Time: 0.0333333\n{rows}\n"
    )
    return path


# -- 1. --target-height-m nan / inf: the positivity message, not a float32 overflow --------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5"])
def test_non_finite_target_height_is_refused_as_not_positive_finite(tmp_path, value):
    """nan said 'scales ... by nan, to nan m, beyond the simulation's float32 numbers'."""
    out = tmp_path / "o"
    line = one_error(run("track.py", *TRACK_FAST, "--target-height-m", value, "--output", str(out)))
    assert line == f"error: --target-height-m: must be a positive finite number, got {float(value)!r}"
    assert not out.exists()


# -- 2. error lines name the flag ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("--checkpoint-interval-s", "nan"), "error: --checkpoint-interval-s: must be a finite number >= 0"),
        (("--reference.max-fps", "0"), "error: --reference.max-fps: must be > 0"),
        (("--loops", "0"), "error: --loops: must be a positive integer, got 0"),
    ],
)
def test_track_settings_errors_name_the_flag(tmp_path, args, start):
    """These said ProjectionCheckpoint.interval_s, ReferenceConfig.max_fps and a bare loops."""
    out = tmp_path / "o"
    assert one_error(run("track.py", *TRACK_FAST, *args, "--output", str(out))).startswith(start)
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("--audit.penetration-rel", "nan"), "error: --audit.penetration-rel: must be a positive finite number"),
        (("--audit.contact.hover-time-s", "-1"), "error: --audit.contact.hover-time-s: must be > 0"),
    ],
)
def test_audit_settings_errors_name_the_flag(tmp_path, args, start):
    out = tmp_path / "o"
    assert one_error(run("audit.py", "--input", "procedural:biped-walk", *args, "--output", str(out))).startswith(start)
    assert not out.exists()


def _cli_helper():
    return load_example(EXAMPLES / "_example_cli.py", "example_cli_helper")


@dataclasses.dataclass
class _Inner:
    rate: float = 1.0
    limits: tuple[float, ...] = (0.0, 1.0)


@dataclasses.dataclass
class _Middle:
    inner: _Inner = dataclasses.field(default_factory=_Inner)
    gap_m: float = 0.1


@dataclasses.dataclass
class _Root:
    source: str
    loops: int = 1
    middle: _Middle = dataclasses.field(default_factory=_Middle)
    first: _Inner = dataclasses.field(default_factory=_Inner)
    second: _Inner = dataclasses.field(default_factory=_Inner)


def test_field_names_are_rewritten_into_flags_as_tyro_spells_them():
    cli = _cli_helper()
    cfg = _Root("x")
    flags = cli.flag_map(cfg)
    assert flags["_Middle.gap_m"] == ["--middle.gap-m"] and flags["loops"] == ["--loops"]
    assert flags["_Inner.rate"] == ["--middle.inner.rate", "--first.rate", "--second.rate"]
    msg = cli.flag_message
    assert msg("_Middle.gap_m: must be > 0, got -1", cfg) == "--middle.gap-m: must be > 0, got -1"
    assert msg("_Middle.inner.rate: bad", cfg) == "--middle.inner.rate: bad"  # a nested path in the message
    assert msg("loops: must be a positive integer", cfg) == "--loops: must be a positive integer"
    assert (
        msg("_Inner.limits[1]: too low", _Root("x", first=_Inner(limits=(0.0, -1.0)))) == "--first.limits[1]: too low"
    )
    # a class at several paths: the one the user set, or every candidate when that does not tell
    assert msg("_Inner.rate: nan", _Root("x", second=_Inner(rate=float("nan")))) == "--second.rate: nan"
    assert msg("_Inner.rate: bad", cfg) == "--middle.inner.rate / --first.rate / --second.rate: bad"
    # aliases: settings a CLI hands to classes outside its config
    assert msg("OptimConfig.steps: must be >= 1", cfg, {"OptimConfig.steps": "--steps"}) == "--steps: must be >= 1"
    # names that are no option of this CLI, files, other text: unchanged
    for text in ("Other.field: x", "fox.glb: accessors[3]: bad", "procedural:walk: no clip", "middle: x"):
        assert msg(text, cfg) == text


def test_posespace_subcommand_errors_name_the_subcommand_flags(tmp_path, capsys):
    """posespace's settings errors said SamplingConfig.steps / TrainConfig.steps."""
    from posespace import SamplingConfig, TrainConfig

    ex = load_example(EXAMPLES / "posespace.py", "posespace_example_usability")
    import torch

    threads = torch.get_num_threads()
    try:
        sample = ex.Sample(tmp_path / "missing.pt", "procedural:quadruped", tmp_path / "x.usda",
                           sampling=SamplingConfig(steps=0))  # fmt: skip
        assert ex.main(sample) == 2
        assert _lines(capsys.readouterr().err)[0].startswith("error: --sampling.steps: must be an integer >= 1")
        assert ex.main(TrainConfig(output=tmp_path / "run", steps=0)) == 2
        assert _lines(capsys.readouterr().err) == ["error: --steps: must be an integer >= 1, got 0"]
    finally:
        torch.set_num_threads(threads)


# -- 3. posespace --help shows what it refers to ---------------------------------------------------------------------


def test_posespace_help_holds_the_usage_and_exit_codes():
    """--help said '(see the banner above)' about a source comment it never shows."""
    proc = run("posespace.py", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "banner" not in proc.stdout
    assert "examples/posespace.py sample --checkpoint" in proc.stdout and "Exit status: 0 on success" in proc.stdout


# -- 4. convert holds a clip to the file's joint limits, as audit does -----------------------------------------------


def test_convert_derives_joint_limits_from_every_clip_of_the_file(tmp_path, assets_dir):
    """convert --clip Walk said 'derived from 1 clip(s)' where examples/audit.py said 3 for the same clip."""
    out = tmp_path / "fox.usda"
    fox = str(assets_dir / "gltf" / "Fox.glb")
    proc = run("convert.py", "--input", fox, "--clip", "Walk", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    converted = json.loads((tmp_path / "fox.usda.audit" / "Walk" / "report.json").read_text())
    proc = run("audit.py", "--input", fox, "--clip", "Walk", "--output", str(tmp_path / "audit"))
    assert proc.returncode in (0, 1), proc.stderr
    audited = json.loads((tmp_path / "audit" / "report.json").read_text())
    limits = [next(c for c in r["checks"] if c["name"] == "joint_limits") for r in (converted, audited)]
    assert "limits derived from 3 clip(s)" in limits[0]["message"], limits[0]["message"]
    assert limits[0]["message"] == limits[1]["message"] and limits[0]["status"] == limits[1]["status"]


# -- 5. a replaced output is announced -------------------------------------------------------------------------------


def test_convert_announces_a_replaced_output(tmp_path):
    out = tmp_path / "q.usda"
    first = run("convert.py", "--input", "procedural:quadruped-walk", "--output", str(out), "--no-audit")
    assert first.returncode == 0 and "note: replacing" not in first.stderr, first.stderr
    again = run("convert.py", "--input", "procedural:quadruped-walk", "--output", str(out), "--no-audit")
    assert again.returncode == 0, again.stderr
    assert _lines(again.stderr) == [f"note: replacing {out}"]


# -- 6. track's last lines: every output, the audit verdict -----------------------------------------------------------


def test_track_names_every_output_and_the_audit_verdict(tmp_path):
    """The 'wrote' line left out audit/ and config.json, and no 'audit:' line said the verdict; the earlier run's
    audit/ was removed silently."""
    stick = _stick_bvh(tmp_path / "stick.bvh")
    out = tmp_path / "run"
    (out / "audit").mkdir(parents=True)
    (out / "audit" / "report.json").write_text("earlier")
    (out / "tracked.usda").write_text("earlier")
    proc = run("track.py", "--method", "pd", "--no-preview", "--motion", str(stick), "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _lines(proc.stderr) == [f"note: replacing {out}/ (the earlier run's tracked.usda, audit/)"]
    lines = _lines(proc.stdout)
    assert f"wrote {out}/ (tracked.usda, physics.usda, metrics.json, config.json, audit/)" in lines
    report = json.loads((out / "audit" / "report.json").read_text())
    verdict = "passed" if report["passed"] else "failed "
    audit = [ln for ln in lines if ln.startswith("audit: ")]
    assert len(audit) == 1 and audit[0].startswith(f"audit: {verdict}"), lines
    assert audit[0].endswith(f"(joint limits from the tracked target; {out / 'audit' / 'report.json'})")


def _track_module():
    return load_example(EXAMPLES / "track.py", "track_example_usability")


def test_track_wrote_line_names_the_checkpoint_of_a_projection(tmp_path):
    track = _track_module()
    cfg = track.TrackConfig(output=tmp_path, method="projection")
    text = track._written_text(cfg, checkpoint=True)
    assert text == (f"wrote {tmp_path}/ (tracked.usda, physics.usda, metrics.json, config.json, preview.gif, audit/, "
                    "projection_checkpoint.npz (kept: --resume rewrites the outputs from it))")  # fmt: skip
    cfg = track.TrackConfig(output=tmp_path, method="pd", preview=False, audit=False)
    assert track._written_text(cfg, checkpoint=False) == f"wrote {tmp_path}/ (tracked.usda, physics.usda, " \
        "metrics.json, config.json)"  # fmt: skip


class _Result:
    info: dict = {}  # noqa: RUF012


def _fake_projection(monkeypatch, track, reports: list[tuple[int, int]]):
    def project(character, ref, tracking, projection, *, target_filter, progress, checkpoint):
        for done, total in reports:
            progress(done, total, 0.5)
        return _Result()

    monkeypatch.setattr(track, "project", project)


@pytest.mark.parametrize(("reports", "bar"), [([], None), ([(0, 40), (20, 40), (40, 40)], "40/40")])
def test_track_projection_bar_shows_its_real_total(tmp_path, monkeypatch, capsys, reports, bar):
    """The bar started as tqdm(total=1): '0/1' through a resume of a finished run or before a settings error."""
    track = _track_module()
    _fake_projection(monkeypatch, track, reports)
    cfg = track.TrackConfig(output=tmp_path)
    checkpoint = track.ProjectionCheckpoint(tmp_path / track.CHECKPOINT_NAME, 30.0, False)
    track._project(None, None, cfg, checkpoint)
    err = capsys.readouterr().err
    assert "/1 " not in err and "0/1" not in err, err
    assert (bar in err) if bar else ("projection" not in err), err


# -- 7. --resume without a checkpoint says so -------------------------------------------------------------------------


def test_track_resume_without_a_checkpoint_says_it_starts_afresh(tmp_path, monkeypatch, capsys):
    track = _track_module()
    _fake_projection(monkeypatch, track, [])
    cfg = track.TrackConfig(output=tmp_path, resume=True)
    checkpoint = track.ProjectionCheckpoint(tmp_path / track.CHECKPOINT_NAME, 30.0, True)
    track._project(None, None, cfg, checkpoint)
    out = capsys.readouterr().out
    assert f"note: no checkpoint in {tmp_path}; starting afresh" in out.splitlines(), out
    (tmp_path / track.CHECKPOINT_NAME).write_bytes(b"")
    track._project(None, None, cfg, checkpoint)
    assert "no checkpoint" not in capsys.readouterr().out


# -- 8. distill warns about an under-trained pose prior ---------------------------------------------------------------


def test_distill_warns_about_an_under_trained_pose_prior(tmp_path, monkeypatch, capsys):
    """track --pose-space and posespace warned about a model trained for 3 steps; distill --pose-prior did not."""
    from pose_spaces import tiny_pose_space

    checkpoint = tiny_pose_space("quadruped", tmp_path / "posespace")
    distill = load_example(EXAMPLES / "distill.py", "distill_example_usability")

    class Stub:  # the run itself is not this test's business
        def __init__(self, *args, **kwargs):
            pass

        def run(self, **kwargs):
            raise KeyboardInterrupt

    monkeypatch.setattr(distill, "Distiller", Stub)
    threads = __import__("torch").get_num_threads()
    try:
        cli = distill.DistillCLI(asset="procedural:quadruped", output=tmp_path / "run", pose_prior=checkpoint,
                                 quiet=True, audit=False)  # fmt: skip
        assert distill.main(cli) == 130
    finally:
        __import__("torch").set_num_threads(threads)
    err = _lines(capsys.readouterr().err)
    assert f"warning: {checkpoint} was trained for only 3 steps (< 500)" in err[0], err


# -- 9. a missing default path says it is a default, seen from the current folder ------------------------------------


def test_missing_default_data_names_the_default_and_the_current_folder(tmp_path):
    """posespace train run from another folder said '../shared/assets/bvh/131_01.bvh: path: no such file'."""
    line = one_error(run("posespace.py", "train", "--steps", "1", "--output", "o", cwd=tmp_path))
    assert line.startswith("error: ../shared/assets/bvh/131_01.bvh: path: no such file")
    assert line.endswith(f"(the default of --data, relative to the current folder {tmp_path})")
    assert not (tmp_path / "o").exists()


def test_a_missing_path_given_on_the_command_line_gets_no_default_note(tmp_path):
    line = one_error(run("posespace.py", "train", "--steps", "1", "--data", "nope.bvh", "--output", "o", cwd=tmp_path))
    assert line == "error: nope.bvh: path: no such file"


# -- 10. wording -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "args"),
    [("convert.py", ("--input", "", "--output", "x.usda")), ("audit.py", ("--input", "", "--output", "a")),
     ("track.py", (*TRACK_FAST, "--motion", "", "--output", "t"))],
)  # fmt: skip
def test_an_empty_input_option_is_called_empty(tmp_path, script, args):
    """convert --input "" said 'error: .: path: is a folder, not a file'."""
    flag = "--motion" if script == "track.py" else "--input"
    assert one_error(run(script, *args, cwd=tmp_path)).startswith(f"error: {flag}: is empty; give ")
    assert list(tmp_path.iterdir()) == []


def test_resume_refusal_names_the_flags_only():
    cli = _cli_helper()
    text = ("run/checkpoint.pt: the folder holds an earlier run's checkpoint; continue it with --resume (resume=True), "
            "start afresh here with --overwrite (overwrite=True), or choose another output folder")  # fmt: skip
    assert cli.error_text(ValueError(text)) == (
        "run/checkpoint.pt: the folder holds an earlier run's checkpoint; continue it with --resume, start afresh "
        "here with --overwrite, or choose another output folder"
    )


def test_metrics_json_is_strict_json_without_nan():
    """metrics.json took json.dumps' default: a projection whose every first-window rollout blew up wrote
    ``"mean_window_cost": NaN``, a token strict JSON parsers refuse."""
    import numpy as np

    helper = _cli_helper()
    data = {"nan": float("nan"), "inf": np.float32("inf"), "arr": np.array([1.5, np.nan]), "n": np.int64(3)}
    data.update(path=Path("/a/b"), nested=[{"x": -float("inf")}, (True, None)], ok=0.25)
    text = helper.strict_json(data)

    def refuse(token):
        raise ValueError(f"non-JSON token {token}")

    back = json.loads(text, parse_constant=refuse)
    want = {"nan": None, "inf": None, "arr": [1.5, None], "n": 3, "path": "/a/b", "nested": [{"x": None}, [True, None]]}
    assert back == {**want, "ok": 0.25}


def test_a_reader_option_in_an_input_error_is_named_by_its_flag(tmp_path):
    """`audit.py --meters-per-unit nan` said `meters_per_unit:`, `--skeleton` on glTF input `skeleton:`."""
    import dataclasses

    from usd_io import InputError

    cli = _cli_helper()

    @dataclasses.dataclass
    class Cfg:
        input: str = "a.bvh"
        meters_per_unit: float | None = None
        skeleton: str | None = None

    cfg = Cfg()
    nan = InputError("a.bvh", "meters_per_unit", "must be a positive finite number, got nan")
    assert cli.error_text(nan, cfg) == "a.bvh: --meters-per-unit: must be a positive finite number, got nan"
    skel = InputError("a.glb", "skeleton", "only USD files hold Skeleton prims to choose from")
    assert cli.error_text(skel, cfg) == "a.glb: --skeleton: only USD files hold Skeleton prims to choose from"
    other = InputError("a.bvh", "HIERARCHY line 3", "bad")
    assert cli.error_text(other, cfg) == "a.bvh: HIERARCHY line 3: bad"
