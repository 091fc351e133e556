"""Centroidal feasibility of a motion (``sim.physics.dynamic_feasibility``) on constructed motions."""

from __future__ import annotations

import numpy as np
from physics_rigs import hold, table_quadruped

from sim.physics import build_character, dynamic_feasibility


def test_a_frame_rate_bob_needs_a_pulling_ground():
    """The whole standing body bobs 0.016 heights (inside the contact band) every other frame: its centre of mass
    accelerates at -+2 * bob * fps^2 (3-point second difference), so at the top of every bob the ground would have
    to pull. Two nested np.gradient calls span 4 frames, (x[i+2] - 2 x[i] + x[i-2]) / 4dt^2, and saw no
    acceleration there at all."""
    rig = table_quadruped()
    ch = build_character(rig)
    frames, fps = 12, 30.0
    pos, rot = ch.body_transforms(hold(rig, frames, fps))
    assert dynamic_feasibility(ch, pos, rot, fps)["infeasible_ratio"] == 0.0
    bob = 0.016 * ch.height
    lift = bob * (np.arange(frames) % 2)
    jitter = pos + lift[:, None, None] * np.array([0.0, 0.0, 1.0])
    acc = (lift[2:] - 2.0 * lift[1:-1] + lift[:-2]) * fps**2  # independent: interior frames 1..F-2
    pulling = np.flatnonzero(acc + 9.81 < 0.0) + 1
    assert len(pulling) >= 4  # the construction needs a pulling ground on the lifted frames
    res = dynamic_feasibility(ch, jitter, rot, fps)
    assert all(res["infeasible"][f] for f in pulling), (pulling, res["infeasible"])
    assert res["friction_ratio"] >= len(pulling) / frames
