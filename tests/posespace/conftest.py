"""Small synthetic characters for the pose-space tests (meshless: the body is the generated tube proxy)."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim.rotations import axis_angle_to_quat, quat_identity

# name, parent, world rest position [m]; faces +x, left is +y
STICK = [
    ("pelvis", -1, (0.0, 0.0, 1.0)),
    ("spine", 0, (0.0, 0.0, 1.25)),
    ("head", 1, (0.0, 0.0, 1.55)),
    ("left_shoulder", 1, (0.0, 0.2, 1.45)),
    ("left_elbow", 3, (0.0, 0.2, 1.17)),
    ("left_hand", 4, (0.0, 0.2, 0.92)),
    ("right_shoulder", 1, (0.0, -0.2, 1.45)),
    ("right_elbow", 6, (0.0, -0.2, 1.17)),
    ("right_hand", 7, (0.0, -0.2, 0.92)),
    ("left_hip", 0, (0.0, 0.1, 0.95)),
    ("left_knee", 9, (0.0, 0.1, 0.5)),
    ("left_foot", 10, (0.0, 0.1, 0.06)),
    ("left_toe", 11, (0.14, 0.1, 0.02)),
    ("right_hip", 0, (0.0, -0.1, 0.95)),
    ("right_knee", 13, (0.0, -0.1, 0.5)),
    ("right_foot", 14, (0.0, -0.1, 0.06)),
    ("right_toe", 15, (0.14, -0.1, 0.02)),
]


def stick_rig(name: str = "stick", scale: float = 1.0) -> sim.Rig:
    """A 17-joint meshless humanoid, identity rest rotations, standing on z = 0."""
    names = [n for n, _, _ in STICK]
    parents = [p for _, p, _ in STICK]
    pos = np.array([q for _, _, q in STICK]) * scale
    trans = np.array([pos[j] - (pos[p] if p >= 0 else 0.0) for j, p in enumerate(parents)])
    return sim.Rig(names, parents, trans, quat_identity((len(names),)), name=name)


def stick_walk(rig: sim.Rig, frames: int = 60, phase: float = 0.0, amplitude: float = 1.0) -> sim.Motion:
    """A walk-like cycle: hips swing about the lateral (+y) axis, knees flex one way, arms swing, spine sways."""
    t = np.arange(frames) / frames * 2 * np.pi + phase
    rot = np.broadcast_to(quat_identity(), (frames, rig.joint_count, 4)).copy()
    y, x, z = np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    a = amplitude

    def set_(name, axis, angle):
        rot[:, rig.joint_index(name)] = axis_angle_to_quat(angle[:, None] * axis)

    set_("left_hip", y, -0.45 * a * np.sin(t))
    set_("right_hip", y, 0.45 * a * np.sin(t))
    set_("left_knee", y, 0.6 * a * (1 + np.cos(t)) / 2 + 0.05)  # flexion only (foot goes back)
    set_("right_knee", y, 0.6 * a * (1 - np.cos(t)) / 2 + 0.05)
    set_("left_shoulder", y, 0.35 * a * np.sin(t))
    set_("right_shoulder", y, -0.35 * a * np.sin(t))
    set_("left_elbow", y, -0.3 * a * (1 + np.sin(t)) / 2 - 0.05)
    set_("right_elbow", y, -0.3 * a * (1 - np.sin(t)) / 2 - 0.05)
    set_("spine", z, 0.1 * a * np.sin(t))
    set_("head", x, 0.05 * a * np.cos(t))
    root = np.broadcast_to(rig.rest_translations[0], (frames, 3)).copy()
    root[:, 0] = np.linspace(0.0, 1.0, frames)
    return sim.Motion(30.0, root, rot, name="walk")


def numpy_fk(rig: sim.Rig, motion: sim.Motion) -> np.ndarray:
    """World joint positions [m] (F, J, 3) by the NumPy FK reference (independent of the Warp kinematics)."""
    from sim._reference import fk_reference

    return fk_reference(rig.parents, motion.local_translations(rig), motion.rotations)[..., :3, 3]


def hips_at_origin(rig: sim.Rig) -> sim.Rig:
    """``rig`` with its root moved to the origin, as BVH files have it (the feet then sit ~1 m below z = 0)."""
    t = rig.rest_translations.copy()
    t[0] = 0.0
    return sim.Rig(rig.joint_names, rig.parents, t, rig.rest_rotations, name=rig.name + "_bvh_like")


@pytest.fixture(scope="session")
def fk():
    """``fk(rig, motion) -> (F, J, 3)`` world joint positions, NumPy reference."""
    return numpy_fk


@pytest.fixture(scope="session")
def make_bvh_like():
    """``make_bvh_like(rig) -> Rig`` with the root at the origin (BVH convention)."""
    return hips_at_origin


@pytest.fixture
def stick() -> sim.Rig:
    return stick_rig()


@pytest.fixture(scope="session")
def make_stick():
    """``make_stick(name="stick", scale=1.0) -> Rig`` (tests import nothing from conftest: importlib mode)."""
    return stick_rig


@pytest.fixture(scope="session")
def make_walk():
    """``make_walk(rig, frames=60, phase=0.0, amplitude=1.0) -> Motion``."""
    return stick_walk


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The pose-space models are tiny: one torch thread is fastest (and several spin against each other on a
    busy CI machine). Restored after each test."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
