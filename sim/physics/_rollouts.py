"""The projection's rollout worlds, split into batches that step in parallel CPU threads.

Warp replays a recorded CPU graph in one native call that releases the GIL, so separate simulations step on
separate cores from plain Python threads. A world's result can differ in its last bits between batches of
different sizes (Newton's contact solve is not bitwise independent of the batch it runs in), so the *partition*
is a setting that decides the floats, while the thread count only decides the speed: a run is reproducible on any
machine, with any number of cores.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .newton_model import CharacterSimulation

__all__ = ["RolloutWorlds", "available_cores"]


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class RolloutWorlds:
    """``world_count`` worlds of one character in ``batches`` simulations, stepped by up to ``threads`` threads.

    Attributes:
        sims: the batch simulations (worlds in order: batch 0 holds the first worlds).
        world_count, B, substeps, dt, root_assist: as :class:`CharacterSimulation`.
        threads: threads used (1: the batches step one after the other).
    """

    def __init__(self, character, fps: float, frame_count: int, world_count: int, batches: int, threads: int,
                 **sim_kwargs) -> None:  # fmt: skip
        """Builds the batch simulations.

        Args:
            character, fps, frame_count, sim_kwargs: as :class:`CharacterSimulation`.
            world_count: rollout worlds in all.
            batches: simulations to split them into (at most one per world; 1 on CUDA, where one batch already runs
                its worlds side by side).
            threads: CPU threads (0: one per available core); at most one per batch.
        """
        solver = sim_kwargs.get("solver")
        if solver is not None and not str(solver.device).startswith("cpu"):
            batches = 1
        batches = max(1, min(int(batches), int(world_count)))
        sizes = [len(a) for a in np.array_split(np.arange(world_count), batches)]
        self.sims = [CharacterSimulation(character, fps, frame_count, n, **sim_kwargs) for n in sizes]
        self._bounds = np.concatenate([[0], np.cumsum(sizes)])
        self.world_count = int(world_count)
        first = self.sims[0]
        self.B, self.substeps, self.dt, self.root_assist = first.B, first.substeps, first.dt, first.root_assist
        self.threads = max(1, min(int(threads) or available_cores(), batches))
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="rollout") if self.threads > 1 else None

    def close(self) -> None:
        """Stops the worker threads."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)  # after an error or Ctrl-C, queued batches do not start
            self._pool = None

    def _split(self, a: np.ndarray, axis: int) -> list[np.ndarray]:
        return np.split(a, self._bounds[1:-1], axis=axis)

    def set_state(self, **state) -> None:
        """Sets every world to one state (:meth:`CharacterSimulation.set_state` arguments, unbatched)."""
        for s in self.sims:
            s.set_state(**state)

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Generalized state of every world, (W, coords), (W, dofs)."""
        parts = [s.joint_state() for s in self.sims]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def body_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Body origins (W, B, 3), rotations (W, B, 4) and twists (W, B, 6) of every world."""
        parts = [s.body_state() for s in self.sims]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

    def rollout(self, table_q, table_qd, joint_q, joint_qd, frame: int, frames: int, record: int) -> dict:
        """:meth:`CharacterSimulation.rollout` over all worlds (tables (F, W, C), states (W, ...)); the batches
        run in parallel once each has recorded its frame graph (recording is done one batch at a time)."""
        jobs = list(
            zip(self.sims, self._split(table_q, 1), self._split(table_qd, 1), self._split(joint_q, 0),
                self._split(joint_qd, 0))
        )  # fmt: skip

        def run(job):
            sim, tq, tqd, q, qd = job
            return sim.rollout(tq, tqd, q, qd, frame, frames, record)

        if self._pool is None or not all(s.captured for s in self.sims):
            outs = [run(j) for j in jobs]
        else:
            outs = list(self._pool.map(run, jobs))
        return {
            "states": np.concatenate([o["states"] for o in outs], axis=1),
            **{k: np.concatenate([o[k] for o in outs]) for k in ("q", "qd", "cost", "assist_sum", "assist_max")},
        }
