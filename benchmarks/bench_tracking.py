"""Tracking benchmark: realtime factor of Newton PD tracking on one CPU core (warm kernel cache).

Run:  taskset -c 0 .venv/bin/python benchmarks/bench_tracking.py [--frames 120] [--repeats 3] [--projection]
          [--device cuda] [--worlds 1,24,256]

Characters: the Fox glTF (Walk, scaled to 0.5 m; needs ../shared/assets) and the procedural biped and quadruped
walks. For each: bodies, DOFs, substeps, then the realtime factor (simulated seconds per wall second) of

* ``captured``: one motion frame recorded as a Warp CPU graph and replayed (the default path);
* ``eager``: the same substeps launched from Python every frame;

measured after a warm-up frame (kernel load and capture are excluded; a cold cache adds ~30-60 s once per
solver). Each figure is printed twice: by wall-clock time, and by the process's CPU time (what one unshared core
would take; on a machine loaded by other jobs the wall-clock figure is lower). ``--projection`` also times the
default physics projection on the clip (its realtime factor counts the whole optimization; its rollout batches
use every core the process may run on, so pin it with taskset for a one-core figure). Warp launches CPU kernels on
the calling thread, so the other figures are single-core. ``--worlds`` also times W parallel worlds in one
model (the projection's rollouts) in world-frames per second, each against the first W; ``--device cuda`` runs
everything on the GPU and times the captured CPU path in the same process as its baseline (printed as a ratio).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

import numpy as np
import warp as wp

from sim.physics import (
    CharacterSimulation,
    ProjectionConfig,
    SolverConfig,
    TrackingConfig,
    build_character,
    prepare_reference,
    project,
    reference_trajectory,
)
from sim.physics.tracking import initial_state

ASSETS = Path(os.environ.get("KINEDISTILL_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def cases():
    from usd_io import load_asset

    out = []
    fox = ASSETS / "gltf" / "Fox.glb"
    if fox.is_file():
        a = load_asset(fox)
        out.append(("fox-walk", a.rig, a.clip("Walk"), 0.5))
    else:
        print(f"(skipping the Fox: {fox} not found)")
    for name in ("biped-walk", "quadruped-walk"):
        a = load_asset(f"procedural:{name}")
        out.append((name, a.rig, a.clip(), None))
    return out


def time_frames(sim: CharacterSimulation, frames: int) -> tuple[float, float]:
    """Wall-clock and process CPU time [s] of ``frames`` frames, finished: a captured frame's replay returns before
    a CUDA device has run it, so the clocks are read after the device is synchronised."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(frames):
        sim.step_frame()
    wp.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0


def rtf(ch, ref, n: int, repeats: int, device: str, capture: bool) -> tuple[float, float, int]:
    """Realtime factor (wall, process CPU) of ``n`` frames of one world, best of ``repeats`` after a warm-up, and
    the substeps per frame."""
    F = ref.frame_count
    sim = CharacterSimulation(ch, ref.fps, F, 1, SolverConfig(capture=bool(capture), device=device))
    sim.set_targets(ref.coords.reshape(F, -1), ref.coord_rates.reshape(F, -1))
    best_wall = best_cpu = np.inf
    for _ in range(repeats):
        sim.set_state(**initial_state(ref))
        sim.step_frame()  # warm-up: kernel load (and capture)
        sim.set_state(**initial_state(ref))
        wall, cpu = time_frames(sim, n)
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return (n / ref.fps) / best_wall, (n / ref.fps) / best_cpu, sim.substeps


def bench_worlds(ch, ref, n: int, repeats: int, device: str, worlds: list[int]) -> str:
    """World-frames per second of ``W`` parallel worlds (the projection's rollouts) on ``device``, captured."""
    F = ref.frame_count
    parts, rates = [], []
    for W in worlds:
        sim = CharacterSimulation(ch, ref.fps, F, W, SolverConfig(device=device))
        sim.set_targets(ref.coords.reshape(F, -1), ref.coord_rates.reshape(F, -1))
        best = np.inf
        for _ in range(repeats):
            sim.set_state(**initial_state(ref))
            sim.step_frame()  # warm-up: kernel load and capture
            sim.set_state(**initial_state(ref))
            wall, _ = time_frames(sim, n)
            best = min(best, wall)
        rates.append(W * n / best)
        parts.append(f"W={W}: {rates[-1]:,.0f} world-frames/s ({W * (n / ref.fps) / best:,.1f}x realtime in total, "
                     f"{rates[-1] / rates[0]:.1f}x W={worlds[0]}'s)")  # fmt: skip
    return f"{'':<16} {device}, captured: " + "; ".join(parts)


def bench_case(
    name, rig, clip, height, frames: int, repeats: int, projection: bool, device: str = "cpu", worlds=()
) -> None:
    loops = max(1, int(np.ceil(frames / max(clip.frame_count - 1, 1))))
    ref_prep = prepare_reference(rig, clip, loops=loops, target_height_m=height)
    ch = build_character(ref_prep.rig, ref_prep.motion)
    ref = reference_trajectory(ch, ref_prep.motion)
    n = min(frames, ref.frame_count - 1)
    results = {mode: rtf(ch, ref, n, repeats, device, capture) for mode, capture in (("captured", 1), ("eager", 0))}
    substeps = results["captured"][2]
    print(
        f"{name:<16} joints {rig.joint_count:>3}  bodies {ch.body_count:>3}  dofs {ch.dof_count:>3}  "
        f"{ref.fps:g} fps x {substeps} substeps (dt {1e3 / (ref.fps * substeps):.2f} ms)  "
        f"RTF captured {results['captured'][0]:5.1f}x wall / {results['captured'][1]:5.1f}x cpu, "
        f"eager {results['eager'][0]:4.1f}x / {results['eager'][1]:4.1f}x, captured/eager "
        f"{results['captured'][0] / results['eager'][0]:.2f}x wall  ({n} frames, {device})"
    )
    if device != "cpu":  # the baseline: the same frames captured on the CPU, in this process
        cpu = rtf(ch, ref, n, repeats, "cpu", True)
        print(f"{'':<16} cpu captured {cpu[0]:5.1f}x wall: {device} / cpu {results['captured'][0] / cpu[0]:.2f}x")
    if worlds:
        print(bench_worlds(ch, ref, n, repeats, device, list(worlds)))
    if projection:
        cfg = ProjectionConfig()
        t0 = time.perf_counter()
        res = project(ch, ref, TrackingConfig(solver=SolverConfig(device=device)), cfg)
        wall = time.perf_counter() - t0
        err = np.linalg.norm(res.body_pos - ref.body_pos[: len(res.body_pos)], axis=-1).mean() / ch.height
        print(
            f"{'':<16} projection ({dataclasses.asdict(cfg)['samples']} samples x {cfg.iterations} iterations): "
            f"RTF {res.sim_time_s / wall:.3f}x, {res.info['rollout_world_frames']} world-frames in {wall:.1f} s "
            f"({1e3 * wall / res.info['rollout_world_frames']:.2f} ms each), body error {err:.4f} of height"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=120, help="motion frames timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--projection", action="store_true", help="also time the physics projection")
    parser.add_argument("--device", default="cpu", help="Warp device of the simulation: cpu, cuda, cuda:N")
    parser.add_argument("--worlds", default="", help="comma-separated world counts: also time W parallel worlds")
    args = parser.parse_args()
    worlds = [int(w) for w in args.worlds.split(",") if w.strip()]
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"CPU cores available to this process: {affinity} (Warp CPU launches run on the calling thread)")
    for name, rig, clip, height in cases():
        bench_case(name, rig, clip, height, args.frames, args.repeats, args.projection, args.device, worlds)


if __name__ == "__main__":
    main()
