"""The README's pipeline end to end, as a user chains it: distill (tiny random CogVideoX) -> track (Newton) -> audit.

Proves the stages hand each other their files: the distilled UsdSkel stage is a motion source for track.py, and
track.py's physical stage is an input of audit.py; frame counts survive every hop.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FRAMES = 9


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "examples" / script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600, check=False)


def _animation_frames(path: Path) -> int:
    from pxr import Usd, UsdSkel

    stage = Usd.Stage.Open(str(path))
    skel = next(UsdSkel.Skeleton(p) for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton))
    anim = UsdSkel.BindingAPI(skel.GetPrim()).GetAnimationSourceRel().GetTargets()[0]
    return len(UsdSkel.Animation(stage.GetPrimAtPath(anim)).GetRotationsAttr().GetTimeSamples())


def test_distill_then_track_then_audit(tmp_path):
    distilled = tmp_path / "distilled"
    small = ["--frames", str(FRAMES), "--width", "32", "--height", "32", "--azimuths", "30", "--steps", "2"]
    # the oracle distils towards the quadruped's walk: two steps of the random tiny model gave an arbitrary motion
    # (56% of its frames centroidally infeasible) whose fall or not under PD hung on the random gradient
    proc = _run("distill.py", "--asset", "procedural:quadruped", "--guidance", "oracle", "--oracle-clip", "walk",
                *small, "--quiet", "--no-audit", "--output", str(distilled))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _animation_frames(distilled / "motion.usda") == FRAMES

    tracked = tmp_path / "tracked"
    proc = _run("track.py", "--motion", str(distilled / "motion.usda"), "--method", "pd", "--no-preview",
                "--no-audit", "--output", str(tracked))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tracked / "metrics.json").read_text())
    assert metrics["frames"] == FRAMES and not metrics["fell"] and math.isfinite(metrics["body_pos_error_rel"])
    assert _animation_frames(tracked / "tracked.usda") == FRAMES

    audited = tmp_path / "audit"
    proc = _run("audit.py", "--input", str(tracked / "tracked.usda"), "--output", str(audited))
    assert proc.returncode in (0, 1), proc.stderr  # 1 = a check failed; either way the report is complete
    report = json.loads((audited / "report.json").read_text())
    assert report["frame_count"] == FRAMES and report["passed"] == (proc.returncode == 0)
