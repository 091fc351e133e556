"""Projection benchmark: the rollout batches stepping in parallel CPU threads against one batch on one thread.

Run:  .venv/bin/python benchmarks/bench_projection.py [--frames 48] [--threads 0]

For the Fox (Walk at 0.5 m; needs ../shared/assets) and the procedural quadruped walk, the same shortened projection
(one sweep, no ILC, the default 24 samples x 6 iterations) is timed three ways in this process:

* ``baseline``: ``rollout_batches=1, threads=1``: every world in one simulation, stepped by one thread;
* ``batched``: the default batches (``ProjectionConfig.rollout_batches``), one thread: the cost of the split alone;
* ``threaded``: the default batches on ``--threads`` threads (0: one per available core).

Each row prints the wall time, its ratio to the baseline (> 1 is faster) and the body error, which must stay the
same between ``batched`` and ``threaded`` (identical floats) and close to the baseline's (another batch split
changes the last bits, and the optimization follows them).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from bench_tracking import cases  # this folder: the same characters as the tracking benchmark

from sim.physics import (
    ProjectionConfig,
    TrackingConfig,
    build_character,
    prepare_reference,
    project,
    reference_trajectory,
)
from sim.physics._rollouts import available_cores

PROJECTED = ("fox-walk", "quadruped-walk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=48, help="reference frames projected")
    parser.add_argument("--threads", type=int, default=0, help="threads of the threaded row (0: available cores)")
    args = parser.parse_args()
    print(f"CPU cores available to this process: {available_cores()}")
    for name, rig, clip, height in cases():
        if name not in PROJECTED:
            continue
        loops = max(1, int(np.ceil(args.frames / max(clip.frame_count - 1, 1))))
        prep = prepare_reference(rig, clip, loops=loops, target_height_m=height)
        ch = build_character(prep.rig, prep.motion)
        ref = reference_trajectory(ch, prep.motion.slice(0, min(args.frames, prep.motion.frame_count)))
        base = ProjectionConfig(passes=1, ilc_passes=0)
        rows = (
            ("baseline", dataclasses.replace(base, rollout_batches=1, threads=1)),
            ("batched", dataclasses.replace(base, threads=1)),
            ("threaded", dataclasses.replace(base, threads=args.threads)),
        )
        project(ch, ref.motion.slice(0, 6), TrackingConfig(), dataclasses.replace(base, window_frames=4))  # warm-up
        walls = {}
        for label, cfg in rows:
            t0 = time.perf_counter()
            res = project(ch, ref, TrackingConfig(), cfg)
            walls[label] = time.perf_counter() - t0
            print(
                f"{name:<15} {label:<9} batches {res.info['rollout_batches']} threads {res.info['threads']}: "
                f"{walls[label]:6.1f} s, x{walls['baseline'] / walls[label]:.2f} vs baseline, "
                f"body error {res.info['pass_errors'][0]:.4f} of height ({ref.frame_count} frames)"
            )


if __name__ == "__main__":
    main()
