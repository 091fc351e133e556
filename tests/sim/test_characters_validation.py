"""Procedural characters and gaits refuse settings they cannot honour, naming the field (and say what to change)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sim import Rig, characters
from sim.characters._ik import two_bone_ik

Q, B, I = characters.QuadrupedWalkConfig, characters.BipedWalkConfig, characters.IdleConfig


@pytest.fixture(scope="module")
def quadruped():
    return characters.quadruped()


@pytest.fixture(scope="module")
def biped():
    return characters.biped()


def _dominant(mesh) -> np.ndarray:
    return mesh.influence_joints[np.arange(mesh.vertex_count), np.argmax(mesh.influence_weights, axis=1)]


# -- gait configs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "footfalls", [(0.0, 0.25, 0.5), (0.0, 0.25, 0.5, 0.75, 0.9), (0.0, 0.25, 0.5, float("nan")), 0.5]
)
def test_quadruped_needs_four_finite_footfalls(quadruped, footfalls):
    # zip() used to drop the legs past the third: front_right was never posed and dragged along the ground
    with pytest.raises(ValueError, match=r"QuadrupedWalkConfig\.footfalls"):
        characters.quadruped_walk(quadruped, Q(footfalls=footfalls))


BAD_GAITS = [
    (Q, {"duty_factor": 0.0}, "duty_factor"),  # documented > 0.5: half the frames had every foot in the air
    (Q, {"duty_factor": 0.5}, "duty_factor"),
    (Q, {"duty_factor": 1.0}, "duty_factor"),  # no swing left
    (Q, {"cycle_frames": 24.5}, "cycle_frames"),
    (Q, {"cycles": 0}, "cycles"),
    (Q, {"speed": float("inf")}, "speed"),
    (Q, {"step_height": -0.01}, "step_height"),
    (Q, {"paw_flex": float("nan")}, "paw_flex"),
    (B, {"duty_factor": 0.4}, "duty_factor"),  # documented 0.5 - 1
    (B, {"duty_factor": 1.0}, "duty_factor"),
    (B, {"cycles": 1.5}, "cycles"),  # the clip would not close its loop
    (B, {"cycle_frames": 2.5}, "cycle_frames"),
    (B, {"cycle_frames": True}, "cycle_frames"),
    (B, {"fps": float("nan")}, "fps"),
    (B, {"fps": float("inf")}, "fps"),
    (B, {"fps": 0.0}, "fps"),
    (B, {"speed": float("nan")}, "speed"),
    (B, {"heel_off": 0.0}, "heel_off"),  # divides by the heel-rise duration
    (B, {"heel_off": 0.7}, "heel_off"),  # the heel rise would start before touchdown
    (B, {"arm_swing": "0.3"}, "arm_swing"),
    (I, {"fps": -30.0}, "fps"),
    (I, {"cycle_frames": 1}, "cycle_frames"),
    (I, {"cycles": 2.0}, "cycles"),
    (I, {"look": float("nan")}, "look"),
]


@pytest.mark.parametrize("cls, changes, field", BAD_GAITS, ids=lambda v: str(v) if isinstance(v, dict) else None)
def test_gait_settings_out_of_range_are_refused(quadruped, biped, cls, changes, field):
    make = {Q: characters.quadruped_walk, B: characters.biped_walk, I: characters.biped_idle}[cls]
    rig = quadruped if cls is Q else biped
    with pytest.raises((ValueError, TypeError), match=rf"{cls.__name__}\.{field}: must be .*, got "):
        make(rig, cls(**changes))


def test_gait_settings_at_the_documented_bounds_are_accepted():
    B(duty_factor=0.5, heel_off=0.5)
    B(cycle_frames=np.int64(34), cycles=np.int64(1), fps=np.float64(24.0))
    Q(duty_factor=0.51, footfalls=[0.0, 0.5, 0.25, 0.75], step_height=0.0, speed=0.0)
    I(cycle_frames=2)


def test_clip_makers_check_the_config_type(quadruped, biped):
    for make, rig in ((characters.quadruped_walk, quadruped), (characters.biped_idle, biped)):
        with pytest.raises(TypeError, match=make.__name__):
            make(rig, {"fps": 30.0})
    with pytest.raises(TypeError, match="BipedWalkConfig"):
        characters.biped_walk(biped, Q())


# -- reach -----------------------------------------------------------------------------------------------------


def _straighter_leg(rig: Rig, leg: str, share: float) -> Rig:
    """``rig`` with ``leg``'s knee moved ``share`` of the way onto its hip-ankle line (hip and ankle stay put).

    The leg gets shorter for the same hip-ankle distance, so any gait needs a larger fraction of its length.
    """
    pos, _ = rig.rest_world_transforms()
    hip, knee, ankle = (rig.joint_index(f"{leg}_{p}") for p in ("upper_leg", "lower_leg", "foot"))
    line = pos[ankle] - pos[hip]
    on_line = pos[hip] + line * ((pos[knee] - pos[hip]) @ line) / (line @ line)
    new_knee = pos[knee] + share * (on_line - pos[knee])
    local = rig.rest_translations.copy()
    local[knee] = new_knee - pos[hip]
    local[ankle] = pos[ankle] - new_knee
    return Rig(rig.joint_names, rig.parents, local, rig.rest_rotations, None, rig.meshes, name=rig.name)


def test_reach_error_names_the_worst_leg_and_gives_working_advice(quadruped):
    # the hind_right knee is straighter than the others: at any stride it is the leg closest to its limit
    rig = _straighter_leg(quadruped, "hind_right", 0.5)
    with pytest.raises(ValueError, match="cannot reach") as e:
        characters.quadruped_walk(rig, Q(speed=0.8))  # every leg over its limit
    message = str(e.value)
    assert "the hind_right leg" in message, message
    assert "lower speed, cycle_frames or duty_factor" in message and "raise" not in message, message
    # the advice works: at the same speed, fewer frames per cycle (a shorter stride) make the walk reachable
    too_far = Q(speed=0.55)
    with pytest.raises(ValueError, match="cannot reach"):
        characters.quadruped_walk(quadruped, too_far)
    characters.quadruped_walk(quadruped, Q(speed=0.55, cycle_frames=16))


# -- character configs and the catalog -------------------------------------------------------------------------

BAD_CHARACTERS = [
    (characters.BipedConfig, {"height": 0.0}, "height"),
    (characters.BipedConfig, {"height": -1.0}, "height"),
    (characters.BipedConfig, {"height": float("nan")}, "height"),
    (characters.BipedConfig, {"cells_per_height": 0}, "cells_per_height"),
    (characters.BipedConfig, {"cells_per_height": 74.5}, "cells_per_height"),
    (characters.BipedConfig, {"max_influences": 0}, "max_influences"),
    (characters.BipedConfig, {"arm_abduction": 0.0}, "arm_abduction"),
    (characters.BipedConfig, {"name": ""}, "name"),
    (characters.QuadrupedConfig, {"height": 0.0}, "height"),
    (characters.QuadrupedConfig, {"cells_per_height": -3}, "cells_per_height"),
]


@pytest.mark.parametrize("cls, changes, field", BAD_CHARACTERS, ids=lambda v: str(v) if isinstance(v, dict) else None)
def test_character_settings_out_of_range_are_refused(cls, changes, field):
    species = "biped" if cls is characters.BipedConfig else "quadruped"
    with pytest.raises((ValueError, TypeError), match=rf"{cls.__name__}\.{field}: must be .*, got "):
        characters.build(f"{species}-walk", config=cls(**changes))


def test_build_checks_every_config_type_and_the_clip_name():
    for kwargs, what in (
        ({"config": {"height": 1.2}}, "config must be a BipedConfig"),
        ({"walk": I()}, "walk must be a BipedWalkConfig"),
        ({"idle": B()}, "idle must be an IdleConfig"),
    ):
        with pytest.raises(TypeError, match=what):
            characters.build("biped", **kwargs)
    for bad in ("biped-", "quadruped-", "-walk"):
        with pytest.raises(KeyError, match="known: quadruped"):
            characters.build(bad)


def test_load_asset_reports_bad_procedural_options_as_input_errors():
    usd_io = pytest.importorskip("usd_io")
    cases = [
        ("procedural:biped-", {}, "name", "unknown procedural asset"),
        ("procedural:biped", {"config": {"height": 1.2}}, "options", "config must be a BipedConfig"),
        ("procedural:biped-idle", {"idle": B()}, "options", "idle must be an IdleConfig"),
        ("procedural:quadruped-walk", {"walk": Q(speed=3.0)}, "options", "cannot reach"),
        (
            "procedural:quadruped-idle",
            {"config": characters.QuadrupedConfig(cells_per_height=12)},
            "options",
            "QuadrupedConfig.cells_per_height",
        ),
    ]
    for source, options, field, problem in cases:
        with pytest.raises(usd_io.InputError) as e:
            usd_io.load_asset(source, **options)
        assert (e.value.path, e.value.field) == (source, field)
        assert problem in e.value.problem, e.value.problem


# -- coarse grids ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "species, cls, cells", [("biped", characters.BipedConfig, 30), ("quadruped", characters.QuadrupedConfig, 12)]
)
def test_a_grid_too_coarse_for_hands_or_paws_is_refused(species, cls, cells):
    # biped 30 cells lost both hands, quadruped 12 cells an ear and paws, silently (only the largest piece was kept)
    make = getattr(characters, species)
    with pytest.raises(ValueError, match=rf"{cls.__name__}\.cells_per_height: {cells} cells are too coarse") as e:
        make(cls(cells_per_height=cells))
    suggested = int(re.search(r"use at least (\d+)", str(e.value)).group(1))
    assert suggested > cells
    # the suggestion is good: every bone keeps skin, and the hands/paws reach as far out as their solids
    rig = make(cls(cells_per_height=suggested))
    mesh = rig.meshes[0]
    assert np.all(np.bincount(_dominant(mesh), minlength=rig.joint_count) > 0)


def test_a_grid_with_no_node_inside_the_skin_is_refused():
    with pytest.raises(ValueError, match=r"BipedConfig\.cells_per_height: 5 cells are too coarse"):
        characters.biped(characters.BipedConfig(cells_per_height=5))


# -- two-bone IK -----------------------------------------------------------------------------------------------

ROOT, MID, END = np.array([0.0, 0.0, 1.0]), np.array([0.02, 0.0, 0.55]), np.array([0.0, 0.0, 0.1])
L1, L2 = np.linalg.norm(MID - ROOT), np.linalg.norm(END - MID)


def _chain_end(upper: np.ndarray, lower: np.ndarray, root: np.ndarray) -> np.ndarray:
    """Forward kinematics of the chain: the end joint under world rotations ``upper``/``lower`` (F, 3, 3)."""
    return root + upper @ (MID - ROOT) + lower @ (END - MID)


def _assert_rotations(r: np.ndarray) -> None:
    assert np.all(np.isfinite(r))
    np.testing.assert_allclose(r @ np.swapaxes(r, -1, -2), np.broadcast_to(np.eye(3), r.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-12)


def test_two_bone_ik_target_on_the_root_is_clamped_to_the_nearest_reach():
    root = ROOT[None]
    upper, lower, reach = two_bone_ik(root, root, ROOT, MID, END, np.eye(3)[None])
    _assert_rotations(upper)
    _assert_rotations(lower)
    np.testing.assert_allclose(reach, 0.0)
    # the end folds back as close to the root as the bones allow: |upper - lower| away
    np.testing.assert_allclose(np.linalg.norm(_chain_end(upper, lower, root) - root, axis=1), abs(L1 - L2), atol=1e-6)


def test_two_bone_ik_target_along_the_bend_normal_is_reached():
    normal = np.cross(MID - ROOT, END - MID)
    normal /= np.linalg.norm(normal)
    root = np.stack([ROOT, ROOT])
    target = np.stack([ROOT + 0.5 * normal, ROOT - 0.6 * normal])  # the leg straight out to either side
    upper, lower, reach = two_bone_ik(root, target, ROOT, MID, END, np.broadcast_to(np.eye(3), (2, 3, 3)))
    _assert_rotations(upper)
    _assert_rotations(lower)
    np.testing.assert_allclose(reach, [0.5, 0.6] / (L1 + L2))
    np.testing.assert_allclose(_chain_end(upper, lower, root), target, atol=1e-9)
    # the bones keep their lengths: the middle joint is L1 from the root
    np.testing.assert_allclose(np.linalg.norm(upper @ (MID - ROOT), axis=1), L1, atol=1e-12)


def test_two_bone_ik_refuses_non_finite_input():
    with pytest.raises(ValueError, match="target"):
        two_bone_ik(ROOT[None], np.full((1, 3), np.nan), ROOT, MID, END, np.eye(3)[None])
