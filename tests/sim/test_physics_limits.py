"""Joint limits reach the solver when a joint axis has only one finite bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from physics_rigs import table_quadruped

from sim.physics import CharacterSimulation, SolverConfig, build_character


@pytest.mark.parametrize("side", ["upper", "lower"])
def test_a_one_sided_limit_is_enforced(side):
    """A coordinate driven 1 rad past a one-sided limit of 0.1 rad stops near it (an upper bound alone once left
    the joint free: the coordinate reached 0.999 rad)."""
    table = build_character(table_quadruped())  # no motion: every limit is +-inf
    assert not np.isfinite(table.limit_lower).any() and not np.isfinite(table.limit_upper).any()
    ch = dataclasses.replace(table, limit_lower=table.limit_lower.copy(), limit_upper=table.limit_upper.copy())
    sign = 1.0 if side == "upper" else -1.0
    (ch.limit_upper if side == "upper" else ch.limit_lower)[1, 0] = 0.1 * sign  # body 1, axis X
    frames, coords = 16, ch.dof_count
    sim = CharacterSimulation(ch, 30.0, frames, 1, SolverConfig(capture=False))
    sim.set_state(np.array([0, 0, 1.0]), np.array([0, 0, 0, 1.0]), np.zeros(coords), np.zeros(3), np.zeros(3),
                  np.zeros(coords), 0)  # fmt: skip
    target = np.zeros((frames, coords))
    target[:, 0] = sign  # drive that coordinate to 1 rad past the bound's side
    sim.set_targets(target, np.zeros_like(target))
    for _ in range(frames - 1):
        sim.step_frame()
    q, _ = sim.joint_state()
    assert abs(float(q[0, 7]) - 0.1 * sign) < 0.02, float(q[0, 7])
