"""examples/track.py end to end in a subprocess with tiny settings: outputs exist, open in pxr, hold no NaN."""

from __future__ import annotations

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
from stalled_script import run_until_stalled_then_signal

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "track.py"
METRIC_KEYS = (
    "body_pos_error_rel",
    "joint_angle_error_deg",
    "fell",
    "max_ground_penetration_m",
    "foot_skate_ratio",
    "max_self_penetration_m",
    "realtime_factor",
    "reference_max_ground_penetration_m",
    "reference_foot_skate_ratio",
    "reference_max_self_penetration_m",
)


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


STAGE_TOLERANCE_M = 1e-6
"""Float32 round-off of USD transforms and capsule sizes [m]."""


def _lowest_capsule_point(stage_path: Path) -> float:
    """The lowest point [m] of the colliders of a physics stage, from its UsdGeom.Capsule prims (axis, height,
    radius, world transform), independently of the code that placed them."""
    from pxr import Gf, Usd, UsdGeom

    stage = Usd.Stage.Open(str(stage_path))
    metres = UsdGeom.GetStageMetersPerUnit(stage)
    cache = UsdGeom.XformCache()
    lowest = math.inf
    for prim in stage.Traverse():
        if not prim.IsA(UsdGeom.Capsule):
            continue
        capsule = UsdGeom.Capsule(prim)
        axis = Gf.Vec3d(*[float(a == capsule.GetAxisAttr().Get()) for a in "XYZ"])
        half = 0.5 * capsule.GetHeightAttr().Get() * axis
        world = cache.GetLocalToWorldTransform(prim)
        scale = abs(world.ExtractRotationMatrix().GetDeterminant()) ** (1 / 3)  # uniform scale of the radius
        ends = [world.Transform(half), world.Transform(-half)]
        lowest = min(lowest, min(e[2] for e in ends) - scale * capsule.GetRadiusAttr().Get())
    return lowest * metres


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return True


def test_pd_run_writes_every_output(tmp_path):
    pxr = pytest.importorskip("pxr")
    out = tmp_path / "pd"
    proc = run("--method", "pd", "--output", str(out), "--preview-frames", "3")
    assert proc.returncode == 0, proc.stderr
    for name in ("tracked.usda", "physics.usda", "metrics.json", "config.json", "preview.gif", "audit/report.json"):
        assert (out / name).is_file(), name
    metrics = json.loads((out / "metrics.json").read_text())
    for key in METRIC_KEYS:
        assert key in metrics, key
    assert _finite({k: metrics[k] for k in METRIC_KEYS if isinstance(metrics[k], float)})
    assert metrics["method"] == "pd" and metrics["blowup"] is None
    assert metrics["root_assist"] is None  # no invisible hands by default
    # the procedural walk is close to centroidally feasible: no warning
    assert metrics["target_mean_zmp_excess_m"] < 0.2 * metrics["character_height_m"]
    assert "centroidally infeasible" not in proc.stdout
    from pxr import Usd, UsdPhysics, UsdSkel

    stage = Usd.Stage.Open(str(out / "tracked.usda"))
    anims = [p for p in stage.Traverse() if p.IsA(UsdSkel.Animation)]
    assert {p.GetName() for p in anims} >= {"physical", "target"}
    rot = UsdSkel.Animation(anims[0]).GetRotationsAttr()
    assert len(rot.GetTimeSamples()) == metrics["frames"]
    phys = Usd.Stage.Open(str(out / "physics.usda"))
    bodies = [p for p in phys.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    assert len(bodies) == metrics["body_count"]
    gaps = [p.GetAttribute("newton:contactGap").Get() for p in phys.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert len(gaps) == metrics["body_count"] + 1  # colliders and ground, at ContactConfig.contact_gap_fraction
    np.testing.assert_allclose(gaps, 0.01 * metrics["character_height_m"], rtol=1e-6)
    # the stage starts on the ground, not in it: its pose (mean joint angles at the first frame's root) reached
    # 7 mm into the ground with the quadruped's toes (the Fox's paws 1.25 cm); it is raised, at most to the gap
    lowest = _lowest_capsule_point(out / "physics.usda")
    assert -STAGE_TOLERANCE_M <= lowest <= gaps[0] + STAGE_TOLERANCE_M, lowest
    assert metrics["complete"] is True  # written last: a folder without it holds an interrupted run
    import imageio.v2 as imageio

    assert len(imageio.mimread(out / "preview.gif")) == 3
    del pxr


def test_raised_ground_is_used_by_the_audit_and_the_input_metrics(tmp_path):
    """--tracking.contact.ground-height-m 0.3: the audit checked against z = 0 (the character 'floated' 0.3 m and
    the audit failed) and the kinematic input stayed on z = 0, under the ground (reference penetration 0.3 m,
    reference skate 0.81 instead of 0)."""
    from sim.physics import contact_summary, prepare_reference
    from usd_io import load_asset

    out = tmp_path / "raised"
    proc = run("--method", "pd", "--output", str(out), "--no-preview", "--tracking.contact.ground-height-m", "0.3")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    report = json.loads((out / "audit" / "report.json").read_text())
    assert report["ground_height_m"] == pytest.approx(0.3)
    floating = next(c for c in report["checks"] if c["name"] == "floating")
    assert floating["status"] == "pass", floating
    asset = load_asset("procedural:quadruped-walk")
    prepared = prepare_reference(asset.rig, asset.clip())
    on_its_own_ground = contact_summary(prepared.rig, prepared.kinematic_input, 0.0)
    for key in ("max_ground_penetration_m", "foot_skate_ratio"):
        assert metrics[f"reference_{key}"] == pytest.approx(on_its_own_ground[key], abs=1e-6), key
    assert metrics["reference_max_ground_penetration_m"] < 0.01


def test_audit_of_the_physical_motion_checks_joint_limits_against_the_target(tmp_path):
    """The audit took the joint limits from the audited motion itself, so a knee bent 120 deg the wrong way for a
    second passed "all joints within their limits"; they come from the tracked target now."""
    from example_scripts import load_example

    from sim.rotations import axis_angle_to_quat, quat_multiply
    from usd_io import load_asset

    track = load_example(SCRIPT, "track_example")
    asset = load_asset("procedural:quadruped-walk")
    rig, target = asset.rig, asset.clip()
    same = track.audit_physical(tmp_path / "same", rig, target, target, 0.0, "target")
    assert next(c for c in same.checks if c.name == "joint_limits").status == "pass"
    bent = target.rotations.copy()
    j = rig.joint_index("front_left_lower_leg")
    bent[10:40, j] = quat_multiply(bent[10:40, j], axis_angle_to_quat(np.array([0.0, np.radians(-120.0), 0.0])))
    physical = type(target)(target.fps, target.root_translations, bent, name="bent")
    report = track.audit_physical(tmp_path / "bent", rig, physical, target, 0.0, "bent")
    limits = next(c for c in report.checks if c.name == "joint_limits")
    assert limits.status == "fail", limits
    assert (tmp_path / "bent" / "report.json").is_file()


def test_projection_run(tmp_path):
    out = tmp_path / "proj"
    proc = run("--method", "projection", "--output", str(out), "--no-preview", "--no-audit",
               "--projection.samples", "4", "--projection.iterations", "1", "--projection.ilc-passes", "0",
               "--projection.passes", "2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "projection"
    assert metrics["info"]["samples"] == 4 and metrics["info"]["windows"] > 1
    assert metrics["info"]["passes"] == 2 and len(metrics["info"]["pass_errors"]) == 2
    assert _finite(metrics["body_pos_error_rel"])
    # the per-frame series averages to the run's error and starts at the reference's own initial state
    per_frame = np.array(metrics["body_pos_error_rel_per_frame"])
    assert len(per_frame) == metrics["frames"] and per_frame[0] < 1e-3
    np.testing.assert_allclose(per_frame.mean(), metrics["body_pos_error_rel"], rtol=1e-4, atol=1e-6)
    assert 0 <= metrics["max_body_pos_error_frame"] < metrics["frames"]
    assert len(metrics["info"]["pass_fell_frames"]) == 2
    assert metrics["fell_frame"] == metrics["info"]["pass_fell_frames"][metrics["info"]["best_pass"]]


def test_infeasible_reference_is_announced(tmp_path, assets_dir):
    # the Fox Run's stance paws sweep at speeds no ground force can produce (design/physics_tracking.md)
    out = tmp_path / "run"
    proc = run("--motion", str(assets_dir / "gltf" / "Fox.glb"), "--clip", "Run", "--target-height-m", "0.5",
               "--method", "pd", "--output", str(out), "--no-preview", "--no-audit")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["target_mean_zmp_excess_m"] > 0.2 * metrics["character_height_m"]
    assert "note: the reference is centroidally infeasible" in proc.stdout


def test_bad_input_exits_2(tmp_path):
    proc = run("--motion", str(tmp_path / "missing.glb"), "--output", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert "missing.glb" in proc.stderr and not (tmp_path / "x").exists()
    proc = run("--motion", "procedural:quadruped-walk", "--clip", "nope", "--output", str(tmp_path / "y"))
    assert proc.returncode == 2 and "nope" in proc.stderr
    proc = run("--projection.temperature", "nan", "--output", str(tmp_path / "z"))
    assert proc.returncode == 2 and "error: --projection.temperature:" in proc.stderr and not (tmp_path / "z").exists()
    proc = run("--character.joint-limits-deg", "nope", "-10", "10", "--output", str(tmp_path / "w"))
    assert proc.returncode == 2 and "--character.joint-limits-deg['nope']" in proc.stderr and "no joint" in proc.stderr
    assert not (tmp_path / "w").exists()
    proc = run("--skeleton", "/quadruped/Skeleton", "--output", str(tmp_path / "u"))  # a procedural source has none
    assert proc.returncode == 2 and "skeleton" in proc.stderr and not (tmp_path / "u").exists()
    proc = run("--preview-frames", "0", "--output", str(tmp_path / "v"))
    assert proc.returncode == 2 and "--preview-frames" in proc.stderr and not (tmp_path / "v").exists()
    (tmp_path / "afile").write_text("")
    proc = run("--output", str(tmp_path / "afile" / "out"))
    assert proc.returncode == 2 and "afile is a file" in proc.stderr and "Traceback" not in proc.stderr


def test_blowup_exits_1_and_claims_no_success(tmp_path):
    """An explicit solver at a far too large step explodes: reported with its frame, no animation written."""
    out = tmp_path / "blow"
    (out / "audit").mkdir(parents=True)
    for stale in ("tracked.usda", "preview.gif", "audit/report.json"):  # an earlier run's outputs
        (out / stale).write_text("stale")
    proc = run("--method", "pd", "--output", str(out), "--no-audit", "--tracking.solver.solver", "featherstone",
               "--tracking.solver.max-dt-s", "0.02")  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "blew up at frame" in proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["success"] is False and metrics["blowup"]["frame"] >= 1
    assert not (out / "tracked.usda").exists() and not (out / "preview.gif").exists()
    assert not (out / "audit").exists()  # no earlier report passes for this run's


SMALL_PROJECTION = ["--method", "projection", "--no-preview", "--no-audit", "--projection.samples", "4",
                    "--projection.iterations", "2", "--projection.ilc-passes", "1", "--projection.passes", "2",
                    "--checkpoint-interval-s", "0"]  # fmt: skip


def _checkpoint_frames(path: Path) -> int:
    """Frames committed over all sweeps in a projection checkpoint (-1 while there is none)."""
    try:
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError):
        return -1
    return sum(s["f0"] for s in meta["sweeps"])


def _wait_for_checkpoint(proc: subprocess.Popen, ckpt: Path, frames: int) -> None:
    """Waits (at most 5 min) until the running projection's checkpoint holds ``frames`` committed frames."""
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and _checkpoint_frames(ckpt) < frames:
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be interrupted"


def test_killed_projection_resumes_to_the_unbroken_result(tmp_path):
    unbroken = tmp_path / "unbroken"
    assert run(*SMALL_PROJECTION, "--output", str(unbroken)).returncode == 0
    killed = tmp_path / "killed"
    ckpt = killed / "projection_checkpoint.npz"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *SMALL_PROJECTION, "--output", str(killed)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_for_checkpoint(proc, ckpt, 8)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    killed_at = _checkpoint_frames(ckpt)
    assert 8 <= killed_at < 96 and not (killed / "metrics.json").exists()
    resumed = run(*SMALL_PROJECTION, "--output", str(killed), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from pass" in resumed.stdout
    a = json.loads((unbroken / "metrics.json").read_text())
    b = json.loads((killed / "metrics.json").read_text())
    for key in ("body_pos_error_rel", "joint_angle_error_deg", "foot_skate_ratio", "max_self_penetration_m"):
        assert b[key] == a[key], key
    assert b["info"]["pass_errors"] == a["info"]["pass_errors"]
    assert a["info"]["resumed"] is None and b["info"]["resumed"]["frame"] > 0
    # another job's checkpoint is refused by name, nothing is overwritten
    before = (killed / "metrics.json").read_bytes()
    other = run(*SMALL_PROJECTION, "--projection.samples", "5", "--output", str(killed), "--resume")
    assert other.returncode == 2
    assert "projection_checkpoint.npz: checkpoint was written with different settings" in other.stderr
    assert "projection.samples" in other.stderr and (killed / "metrics.json").read_bytes() == before


def test_ctrl_c_between_passes_resumes_after_the_finished_pass(tmp_path):
    """Ctrl-C as the second pass starts: 130 and one line naming the checkpoint; --resume says it continues after
    pass 1 of 2 (it said "resumed from its finished state"), and once more on the finished checkpoint, that."""
    out = tmp_path / "interrupted"
    stopped = run_until_stalled_then_signal(
        SCRIPT, "sim.physics.projection._start_sweep", [*SMALL_PROJECTION, "--output", str(out)], signal.SIGINT,
        calls_before=1,
    )  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr
    lines = [line for line in stopped.error_lines() if not line.startswith("projection:")]  # tqdm's bar
    assert lines == [f"interrupted: continue with --resume (checkpoint {out / 'projection_checkpoint.npz'})"]
    assert not (out / "metrics.json").exists()
    resumed = run(*SMALL_PROJECTION, "--output", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed after pass 1 of 2\n" in resumed.stdout and "finished state" not in resumed.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["info"]["passes"] == 2 and metrics["info"]["resumed"] == {"pass": 0, "frame": 48, "finished": True}
    again = run(*SMALL_PROJECTION, "--output", str(out), "--resume")
    assert again.returncode == 0, again.stderr
    assert "resumed from its finished state (2 of 2 passes done)" in again.stdout


EARLIER_RUN = ("metrics.json", "config.json", "tracked.usda", "physics.usda", "preview.gif", "audit/report.json",
               "audit/timeline.png", "audit/worst_frame.png", "projection_checkpoint.npz")  # fmt: skip


def _earlier_run(out: Path) -> None:
    """Files of an earlier run in ``out``, each holding the word ``earlier``."""
    (out / "audit").mkdir(parents=True)
    for name in EARLIER_RUN:
        (out / name).write_text("earlier")


def test_interrupted_rerun_leaves_no_mix_of_two_runs(tmp_path):
    """SIGTERM while a PD run writes its audit into an earlier run's folder: 143, one line; no file of the earlier
    run is left beside the new ones (the earlier preview.gif and audit/ were) except the checkpoint --resume needs,
    no temporary file, and no metrics.json: the folder is recognisably incomplete."""
    out = tmp_path / "rerun"
    _earlier_run(out)
    args = ["--method", "pd", "--reference.fps", "10", "--preview-frames", "2", "--output", str(out)]
    stopped = run_until_stalled_then_signal(SCRIPT, "sim.audit.plot_timeline", args, signal.SIGTERM)
    assert stopped.returncode == 143, stopped.stderr
    assert stopped.error_lines() == [
        f"note: replacing {out}/ (the earlier run's metrics.json, tracked.usda, physics.usda, config.json, "
        "preview.gif, audit/)",
        f"interrupted while writing the outputs: {out} holds an incomplete run (no metrics.json); run it again",
    ]
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert left == ["audit", "audit/report.json", "config.json", "physics.usda", "preview.gif",
                    "projection_checkpoint.npz", "tracked.usda"]  # fmt: skip
    assert (out / "projection_checkpoint.npz").read_text() == "earlier"
    for name in left:
        if (out / name).is_file() and name != "projection_checkpoint.npz":
            assert (out / name).read_bytes() != b"earlier", name
    assert json.loads((out / "config.json").read_text())["method"] == "pd"


def test_ctrl_c_during_pd_simulation_gives_one_line(tmp_path):
    """Ctrl-C while PD tracking simulates: 130 and one line (was a traceback); the earlier run's outputs stay."""
    out = tmp_path / "pd"
    _earlier_run(out)
    args = ["--method", "pd", "--output", str(out)]
    stopped = run_until_stalled_then_signal(SCRIPT, "sim.physics.track", args, signal.SIGINT)
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.error_lines() == [
        "interrupted during the simulation: nothing written (PD tracking keeps no checkpoint: run it again)"
        f" ({out} still holds the earlier run's outputs)"
    ]
    assert all((out / name).read_text() == "earlier" for name in EARLIER_RUN)


def test_ctrl_c_before_writing_in_a_fresh_folder_says_nothing_was_written(tmp_path):
    """Stopped after the simulation but before any output: the message must not claim an incomplete run."""
    out = tmp_path / "fresh"
    args = ["--method", "pd", "--output", str(out)]
    stopped = run_until_stalled_then_signal(SCRIPT, "sim.physics.tracking_metrics", args, signal.SIGINT)
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.error_lines() == ["interrupted after the simulation: nothing written; run it again"]
    assert not out.exists() or not any(out.iterdir())


@pytest.fixture(scope="module")
def quadruped_pose_space(tmp_path_factory) -> Path:
    from pose_spaces import tiny_pose_space

    return tiny_pose_space("quadruped", tmp_path_factory.mktemp("posespace"))


def test_pose_space_filter_constrains_the_targets(tmp_path, quadruped_pose_space):
    args = ["--method", "pd", "--no-preview", "--no-audit"]
    plain = tmp_path / "plain"
    assert run(*args, "--output", str(plain)).returncode == 0
    filtered = tmp_path / "filtered"
    proc = run(*args, "--output", str(filtered), "--pose-space", str(quadruped_pose_space), "--pose-space-all-frames",
               "--pose-space-strength", "0.5")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    a = json.loads((plain / "metrics.json").read_text())
    b = json.loads((filtered / "metrics.json").read_text())
    assert a["target_filter"] is None
    info = b["target_filter"]
    assert info["pose_space"] == str(quadruped_pose_space) and info["strength"] == 0.5
    # every reference frame went through the pose space, so the simulated motion changed
    assert info["reference_frames_projected"] == b["frames"]
    assert b["joint_angle_error_deg"] != a["joint_angle_error_deg"]
    assert "the filter changes" in proc.stdout
    # tracked.usda also holds what the controller was asked to track after the filter
    from usd_io import load_asset

    clips = load_asset(filtered / "tracked.usda").clips
    assert list(clips) == ["physical", "target", "pose_space_targets"]
    assert list(load_asset(plain / "tracked.usda").clips) == ["physical", "target"]
    targets = clips["pose_space_targets"]
    assert targets.frame_count == clips["target"].frame_count
    np.testing.assert_allclose(targets.times, clips["target"].times, atol=1e-9)
    assert np.isfinite(targets.rotations).all()
    turned = np.degrees(2 * np.arccos(np.clip(np.abs(np.sum(targets.rotations * clips["target"].rotations, -1)), 0, 1)))
    assert turned.max() > 1.0  # the pose space moved some joint of some frame
    # the projection with the default filter (only frames failing the validators are projected)
    proj = tmp_path / "proj"
    proc = run(*SMALL_PROJECTION, "--output", str(proj), "--pose-space", str(quadruped_pose_space))
    assert proc.returncode == 0, proc.stderr
    info = json.loads((proj / "metrics.json").read_text())["target_filter"]
    assert info["known_skeleton"] and not info["all_frames"]
    assert info["reference_frames_projected"] == info["reference_frames_failing_validators"]
    # a file that is not a pose-space checkpoint is refused by name before any simulation
    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    proc = run(*args, "--output", str(tmp_path / "x"), "--pose-space", str(bad))
    assert proc.returncode == 2 and "bad.pt: not a readable torch checkpoint" in proc.stderr
    assert not (tmp_path / "x").exists()
