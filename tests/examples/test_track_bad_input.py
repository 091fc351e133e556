"""examples/track.py on bad input: one ``error:`` line naming the option or file and the field, exit status 2, no
traceback, and no output folder (or files in an existing one) left by the failed run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "track.py"
FAST = ("--method", "pd", "--no-preview", "--no-audit")


def _stick_bvh(path: Path, frames: int = 5, offsets: bool = True) -> Path:
    """A hips / leg / spine stick figure (cm, Y-up), standing still; ``offsets=False`` puts every joint at the
    origin (a skeleton without extent)."""
    leg, spine = ("0 -45 0", "0 40 0") if offsets else ("0 0 0", "0 0 0")
    rows = "\n".join("0 90 0 0 0 0 0 0 0 0 0 0" for _ in range(frames))
    path.write_text(
        "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n"
        "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n"
        f"  JOINT Leg\n  {{\n    OFFSET {leg}\n    CHANNELS 3 Zrotation Xrotation Yrotation\n"
        f"    End Site\n    {{\n      OFFSET {leg}\n    }}\n  }}\n"
        f"  JOINT Spine\n  {{\n    OFFSET {spine}\n    CHANNELS 3 Zrotation Xrotation Yrotation\n"
        f"    End Site\n    {{\n      OFFSET {spine}\n    }}\n  }}\n}}\n"
        f"MOTION\nFrames: {frames}\nFrame Time: 0.0333333\n{rows}\n"
    )
    return path


@pytest.fixture
def stick(tmp_path) -> Path:
    return _stick_bvh(tmp_path / "stick.bvh")


def run(*args: str, timeout: float = 170) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def _one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Asserts exit status 2 and a single ``error:`` line on stderr holding every fragment; returns it."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("Warp CUDA warning")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _cuda_devices() -> int:
    import warp as wp

    from sim._warp_setup import init_warp

    init_warp()
    return wp.get_cuda_device_count() if wp.is_cuda_available() else 0


@pytest.mark.parametrize("device", ["cuda", "cuda:7"])
def test_unavailable_device_is_refused_before_the_output_folder(tmp_path, stick, device):
    """--tracking.solver.device cuda on a machine without CUDA was a RuntimeError traceback (cuda:7: Warp's 'Invalid
    device identifier'), exit 1, with an empty OUTPUT left behind."""
    count = _cuda_devices()
    if (device == "cuda" and count > 0) or (device == "cuda:7" and count > 7):
        pytest.skip(f"{device} exists on this machine")
    out = tmp_path / "o" / "r"
    proc = run(*FAST, "--motion", str(stick), "--output", str(out), "--tracking.solver.device", device)
    line = _one_line_error(proc, "--tracking.solver.device", repr(device))
    assert ("no CUDA device is available" if count == 0 else f"has {count} CUDA device(s)") in line
    assert not (tmp_path / "o").exists()


def test_audit_file_in_output_is_refused_before_simulating(tmp_path, stick):
    """OUTPUT/audit a file: a traceback after the simulation, with tracked.usda, physics.usda and config.json
    written; now refused up front, the folder as it was."""
    out = tmp_path / "R8"
    out.mkdir()
    (out / "audit").write_text("")
    proc = run("--method", "pd", "--no-preview", "--motion", str(stick), "--output", str(out))
    _one_line_error(proc, str(out / "audit"), "is a file")
    assert sorted(p.name for p in out.iterdir()) == ["audit"]


@pytest.mark.parametrize("name", ["tracked.usda", "metrics.json", "preview.gif"])
def test_folder_where_an_output_file_goes_is_refused_before_simulating(tmp_path, stick, name):
    """OUTPUT/tracked.usda a folder: IsADirectoryError in _remove_earlier_outputs after the simulation."""
    out = tmp_path / "T"
    (out / name).mkdir(parents=True)
    proc = run(*FAST, "--motion", str(stick), "--output", str(out))
    _one_line_error(proc, str(out / name), "is a folder")
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_folder_where_the_checkpoint_goes_is_refused_before_projecting(tmp_path, stick):
    out = tmp_path / "C"
    (out / "projection_checkpoint.npz").mkdir(parents=True)
    proc = run("--method", "projection", "--no-preview", "--no-audit", "--motion", str(stick), "--output", str(out))
    _one_line_error(proc, str(out / "projection_checkpoint.npz"), "is a folder")
    assert sorted(p.name for p in out.iterdir()) == ["projection_checkpoint.npz"]


def test_earlier_run_folder_with_an_audit_folder_still_runs(tmp_path, stick):
    """The up-front output checks refuse nothing a run can replace: an earlier run's files and audit/ folder."""
    out = tmp_path / "again"
    (out / "audit").mkdir(parents=True)
    for name in ("tracked.usda", "metrics.json", "audit/report.json"):
        (out / name).write_text("earlier")
    proc = run("--method", "pd", "--no-preview", "--motion", str(stick), "--output", str(out), "--loops", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "audit" / "report.json").read_text() != "earlier"
    assert '"complete": true' in (out / "metrics.json").read_text()


def test_a_folder_of_somebody_elses_files_is_not_cleared(tmp_path, stick):
    """An OUTPUT holding the user's config.json and audit/notes.txt, with nothing of an earlier track run: the run
    overwrote config.json and removed audit/ (even with --no-audit)."""
    out = tmp_path / "mine"
    (out / "audit").mkdir(parents=True)
    (out / "audit" / "notes.txt").write_text("my notes")
    (out / "config.json").write_text('{"mine": true}')
    proc = run(*FAST, "--motion", str(stick), "--output", str(out))
    _one_line_error(proc, str(out), "holds config.json, audit/ but no metrics.json", "of an earlier track run")
    assert (out / "audit" / "notes.txt").read_text() == "my notes"
    assert (out / "config.json").read_text() == '{"mine": true}'


def test_tracking_an_output_of_the_folder_it_writes_is_refused(tmp_path, stick):
    """--motion OUT/tracked.usda with --output OUT replaced the input it was reading."""
    out = tmp_path / "o"
    out.mkdir()
    convert = REPO / "examples" / "convert.py"
    done = subprocess.run([sys.executable, str(convert), "--input", str(stick), "--output", str(out / "tracked.usda"),
                           "--no-audit"], cwd=REPO, capture_output=True, text=True, timeout=170)  # fmt: skip
    assert done.returncode == 0, done.stderr
    before = (out / "tracked.usda").read_bytes()
    proc = run(*FAST, "--motion", str(out / "tracked.usda"), "--output", str(out))
    _one_line_error(proc, str(out / "tracked.usda"), "is the tracked.usda this run writes into --output")
    assert (out / "tracked.usda").read_bytes() == before


@pytest.mark.parametrize("extra", [(), ("--target-height-m", "1.0")])
def test_skeleton_without_extent_names_the_file(tmp_path, extra):
    """A BVH whose offsets are all 0 gave 'error: array of sample points is empty' (numpy, deep in grounding)."""
    src = _stick_bvh(tmp_path / "zero_offsets.bvh", offsets=False)
    proc = run(*FAST, "--motion", str(src), "--output", str(tmp_path / "o"), *extra)
    _one_line_error(proc, str(src), "skeleton", "no extent")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        # RigError traceback after the simulation: non-finite root translations
        (("--tracking.contact.ground-height-m", "1e300"), ("error: --tracking.contact.ground-height-m:", "1000 m")),
        # OverflowError in character._set_gains
        (("--character.stiffness-hz", "1e300"), ("--character.stiffness-hz 1e+300", "overflow")),
        # NaN kg, then a Newton ValueError
        (("--target-height-m", "1e300"), ("--target-height-m 1e+300", "float32")),
        # Newton ValueError: an infinite contact damping
        (("--character.density-kg-m3", "1e300"), ("--character.density-kg-m3 1e+300", "body masses")),
        (("--character.density-kg-m3", "1e-300"), ("--character.density-kg-m3 1e-300", "body masses")),
        (("--character.total-mass-kg", "1e300"), ("--character.total-mass-kg 1e+300", "body masses")),
        (("--tracking.contact.penalty-stiffness-per-kg", "1e300"), ("--tracking.contact.penalty-stiffness-per-kg",)),
        # SIGFPE: the process died with status 136
        (("--tracking.solver.max-dt-s", "1e-300"), ("error: --tracking.solver.max-dt-s:", "1e-06")),
        # ran forever
        (("--loops", "1000000000000"), ("--loops 1000000000000", "at most 100000")),
        (("--reference.fps", "1e300"), ("--reference.fps 1e+300", "at most 100000")),
        # within the frame limit, but more physics steps than the simulation's int32 step counter holds
        (("--loops", "16000", "--tracking.solver.max-dt-s", "1e-6"), ("--tracking.solver.max-dt-s 1e-06", "steps")),
        (("--reference.fps", "1e-300"), ("--reference.fps 1e-300", "steps")),
    ],
)
def test_extreme_finite_numbers_are_refused_naming_the_option(tmp_path, stick, args, fragments):
    out = tmp_path / "o" / "r"
    proc = run(*FAST, "--motion", str(stick), "--output", str(out), *args, timeout=120)
    _one_line_error(proc, *fragments)
    assert not (tmp_path / "o").exists()


def test_output_that_cannot_be_written_after_simulating_gives_one_line(tmp_path, stick, monkeypatch, capsys):
    """A disk that fills up while the outputs are written (after the simulation): a traceback and exit 1; now one
    ``error:`` line naming the file, saying the folder holds an incomplete run, and exit 2."""
    import errno

    import tyro
    from example_scripts import load_example

    ex = load_example(SCRIPT, "track_cli")
    out = tmp_path / "out"
    cfg = tyro.cli(ex.TrackConfig, args=["--motion", str(stick), "--output", str(out), *FAST])

    def full(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(ex, "write_usdskel", full)
    assert ex.main(cfg) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not ln.startswith("Warp CUDA")]
    assert len(err) == 1 and err[0].startswith("error: "), err
    for fragment in ("tracked.usda", "No space left on device", "incomplete run", "run it again"):
        assert fragment in err[0], err[0]
    assert not (out / "metrics.json").exists()


def test_warnings_go_to_stderr_and_notes_name_flags(tmp_path, stick):
    """track.py printed its warnings on stdout (the other tools on stderr), and a builder note (part of the run's
    report on stdout) named the library's field (CharacterConfig.density_scale['nope']) instead of the flag."""
    out = str(tmp_path / "o")
    proc = run(*FAST, "--motion", str(stick), "--output", out, "--character.density-scale", "nope", "2", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "note: --character.density-scale['nope']: matches no body" in proc.stdout
    assert "warning: --resume applies to --method projection only" in proc.stderr
    assert "warning:" not in proc.stdout
