"""Audit benchmark: a ~2,000-vertex character over 100 frames, and the self-intersection stage vs brute force.

Run:  .venv/bin/python benchmarks/bench_audit.py [--cells 49] [--frames 100] [--repeats 2]

The character is the procedural biped at a coarser surface resolution (``cells_per_height``; 49 gives ~2,000
vertices) walking for ``--frames`` frames. Two clips are audited: the clean walk, and the same walk with the
left arm swung through the torso on the middle half of the frames (so the penetration-depth search runs too).
Printed: the whole ``audit_motion`` time (best of ``--repeats``, after one warm-up that compiles kernels), and
for the self-intersection stage alone the BVH path against the brute-force baseline run in the same process
(the same exact Warp pair test on all face pairs, and the NumPy all-pairs reference on a few frames,
extrapolated). Ratios are baseline time / BVH time (> 1 means the BVH path is faster).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import sim
from sim import characters
from sim.audit import audit_motion
from sim.mesh_intersection import MeshSelfIntersection

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "references"))
from audit_cases import limb_through_body
from mesh_intersection_reference import self_intersections_reference


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=49, help="biped surface resolution (cells per height)")
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--reference-frames", type=int, default=3, help="frames timed with the NumPy reference")
    args = ap.parse_args()

    cycles = int(np.ceil(args.frames / 34))
    rig, clips = characters.build(
        "biped-walk",  # the walk only: the idle clip is not timed (and its reach check fails below ~30 cells)
        config=characters.BipedConfig(cells_per_height=args.cells),
        walk=characters.BipedWalkConfig(cycles=cycles),
    )
    walk = clips["walk"].slice(0, args.frames)
    mesh = rig.merged_mesh()
    F = walk.frame_count
    a, b = F // 4, 3 * F // 4
    limb = limb_through_body(rig, walk, "left_upper_arm", a, b, -45.0)
    print(f"character: {mesh.vertex_count} vertices, {len(mesh.triangles)} faces, {rig.joint_count} joints; {F} frames")

    t0 = time.perf_counter()
    audit_motion(rig, walk)  # warm-up: kernel compiles / cache loads
    print(f"first audit (includes Warp kernel loading): {time.perf_counter() - t0:.2f} s")
    for label, motion in (("clean walk", walk), ("arm through torso", limb)):
        t, report = best_time(lambda m=motion: audit_motion(rig, m), args.repeats)
        failed = ", ".join(c.name for c in report.failed_checks) or "none"
        print(f"audit_motion, {label}: {t:.2f} s for {F} frames ({1e3 * t / F:.1f} ms/frame); failing: {failed}")

    points, _ = sim.skin_motion(rig, limb)
    checker = MeshSelfIntersection(mesh.triangles, mesh.points)
    t_bvh, res_bvh = best_time(lambda: checker.motion(points, "bvh", penetration=False), args.repeats)
    t_bf, res_bf = best_time(lambda: checker.motion(points, "brute_force", penetration=False), args.repeats)
    same = all(np.array_equal(x.pairs, y.pairs) for x, y in zip(res_bvh.frames, res_bf.frames))
    print(
        f"self-intersection pair search, {F} frames: BVH {t_bvh:.3f} s, brute-force Warp {t_bf:.3f} s "
        f"(ratio {t_bf / t_bvh:.1f}x), identical pairs on every frame: {same}"
    )
    k = min(args.reference_frames, F)
    frames = np.linspace(a, b - 1, k).astype(int)
    t = time.perf_counter()
    for f in frames:
        self_intersections_reference(mesh.triangles, points[f], checker.excluded)
    t_np = (time.perf_counter() - t) / k * F
    print(f"NumPy all-pairs reference: {t_np / F:.2f} s/frame, {t_np:.1f} s extrapolated ({t_np / t_bvh:.0f}x the BVH)")


if __name__ == "__main__":
    main()
