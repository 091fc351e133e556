"""The two built-in characters: a fox-like quadruped and a human biped, as bones plus skin solids.

Both are authored at a nominal size in their rest pose (SI metres, Z-up, +X forward, feet on z = 0, every joint
frame aligned with the world axes) and scaled to the requested height. Left is +Y; the right side is the mirror
image of the left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._checks import require_int, require_real
from ._shapes import BoneSpec, CharacterSpec, Ellipsoid, RoundCone, Shape, mirror_left_to_right

__all__ = ["BipedConfig", "QuadrupedConfig", "biped_spec", "quadruped_spec"]


@dataclass(frozen=True)
class QuadrupedConfig:
    """Options of the procedural quadruped (a fox-sized dog)."""

    height: float = 0.58
    """Standing height of the skin, ground to ear tips [m], finite and > 0."""
    cells_per_height: int = 44
    """Marching-cubes grid cells along the standing height [count]; sets the mesh density (~5,000 vertices). A
    grid too coarse to resolve every bone's skin is refused."""
    max_influences: int = 4
    """Most joints influencing one vertex [count], an integer >= 1."""
    name: str = "quadruped"
    """Rig name."""

    def __post_init__(self):
        _check_character(self)


@dataclass(frozen=True)
class BipedConfig:
    """Options of the procedural biped (a human)."""

    height: float = 1.75
    """Standing height of the skin, ground to the top of the head [m], finite and > 0."""
    arm_abduction: float = 0.52
    """Rest-pose angle of the straight arms away from the body's side (an A-pose) [rad], in (0, pi/2]."""
    cells_per_height: int = 74
    """Marching-cubes grid cells along the standing height [count]; sets the mesh density (~4,500 vertices). A
    grid too coarse to resolve every bone's skin is refused."""
    max_influences: int = 4
    """Most joints influencing one vertex [count], an integer >= 1."""
    name: str = "biped"
    """Rig name."""

    def __post_init__(self):
        _check_character(self)
        require_real(self, "arm_abduction", 0.0, math.pi / 2.0, low_open=True)


def _check_character(config) -> None:
    require_real(config, "height", 0.0, low_open=True)
    require_int(config, "cells_per_height", 1)
    require_int(config, "max_influences", 1)
    if not isinstance(config.name, str) or not config.name:
        raise ValueError(f"{type(config).__name__}.name: must be a non-empty string, got {config.name!r}")


def _add(a, b, s: float = 1.0):
    return tuple(float(x + s * y) for x, y in zip(a, b))


def _cone(bone: str, a, b, ra: float, rb: float) -> RoundCone:
    return RoundCone(bone, tuple(map(float, a)), tuple(map(float, b)), float(ra), float(rb))


def _ellipsoid(bone: str, center, radii, axes=None) -> Ellipsoid:
    if axes is None:
        return Ellipsoid(bone, tuple(map(float, center)), tuple(map(float, radii)))
    return Ellipsoid(
        bone, tuple(map(float, center)), tuple(map(float, radii)), tuple(tuple(map(float, v)) for v in axes)
    )


# --------------------------------------------------------------------------------------------------------------
# Quadruped: 26 joints. Nominal top (ear tips) ~0.62 m; withers ~0.43 m before scaling.
# --------------------------------------------------------------------------------------------------------------

_Q_LEGS = {
    # name prefix: (parent, upper, lower (knee/elbow), foot (wrist/hock), toes (paw), toe tip)
    "front_left": ("spine_2", (0.16, 0.07, 0.30), (0.085, 0.075, 0.20), (0.14, 0.075, 0.085), (0.15, 0.075, 0.024),
                   (0.20, 0.075, 0.022)),
    "hind_left": ("pelvis", (-0.22, 0.07, 0.34), (-0.14, 0.08, 0.23), (-0.245, 0.075, 0.10), (-0.235, 0.075, 0.024),
                  (-0.185, 0.075, 0.022)),
}  # fmt: skip


def quadruped_spec(config: QuadrupedConfig = QuadrupedConfig()) -> CharacterSpec:
    """The quadruped's bones and skin solids, scaled to ``config.height``."""
    P = (-0.20, 0.0, 0.38)  # pelvis
    S1 = (-0.04, 0.0, 0.39)
    S2 = (0.12, 0.0, 0.40)  # chest (withers)
    N = (0.22, 0.0, 0.43)
    H = (0.30, 0.0, 0.49)
    nose = (0.445, 0.0, 0.465)
    ear, ear_tip = (0.30, 0.035, 0.54), (0.285, 0.05, 0.615)
    T1, T2, T3, tail_tip = (-0.28, 0.0, 0.39), (-0.38, 0.0, 0.37), (-0.48, 0.0, 0.33), (-0.575, 0.0, 0.28)
    bones = [
        BoneSpec("pelvis", None, P, S1),
        BoneSpec("spine_1", "pelvis", S1, S2),
        BoneSpec("spine_2", "spine_1", S2, N),
        BoneSpec("neck", "spine_2", N, H),
        BoneSpec("head", "neck", H, nose),
        BoneSpec("left_ear", "head", ear, ear_tip),
        BoneSpec("tail_1", "pelvis", T1, T2),
        BoneSpec("tail_2", "tail_1", T2, T3),
        BoneSpec("tail_3", "tail_2", T3, tail_tip),
    ]
    shapes: list[Shape] = [
        # torso: hips, belly (tucked up), deep chest
        _ellipsoid("pelvis", (-0.19, 0.0, 0.35), (0.10, 0.072, 0.072)),
        _cone("pelvis", P, S1, 0.05, 0.05),
        _ellipsoid("spine_1", (-0.035, 0.0, 0.345), (0.13, 0.075, 0.08)),
        _ellipsoid("spine_2", (0.125, 0.0, 0.33), (0.115, 0.082, 0.10)),
        _cone("spine_2", S2, N, 0.06, 0.055),
        # neck and head: skull, muzzle, ears
        _cone("neck", N, H, 0.052, 0.045),
        _ellipsoid("head", (0.315, 0.0, 0.505), (0.065, 0.052, 0.05)),
        _cone("head", (0.34, 0.0, 0.49), nose, 0.034, 0.013),
        _cone("left_ear", _add(ear, (0.0, 0.0, -0.01)), ear_tip, 0.02, 0.007),
        # bushy tail
        _cone("tail_1", _add(T1, (0.02, 0.0, 0.0)), T2, 0.026, 0.036),
        _cone("tail_2", T2, T3, 0.036, 0.042),
        _cone("tail_3", T3, tail_tip, 0.042, 0.011),
    ]
    for prefix, (parent, upper, lower, foot, toes, tip) in _Q_LEGS.items():
        bones += [
            BoneSpec(f"{prefix}_upper_leg", parent, upper, lower),
            BoneSpec(f"{prefix}_lower_leg", f"{prefix}_upper_leg", lower, foot),
            BoneSpec(f"{prefix}_foot", f"{prefix}_lower_leg", foot, toes),
            BoneSpec(f"{prefix}_toes", f"{prefix}_foot", toes, tip),
        ]
        hind = prefix.startswith("hind")
        paw = (toes[0] + 0.012, toes[1], 0.022)
        shapes += [
            _cone(f"{prefix}_upper_leg", upper, lower, 0.05 if hind else 0.042, 0.03 if hind else 0.028),
            _cone(f"{prefix}_lower_leg", lower, foot, 0.027 if hind else 0.025, 0.018),
            _cone(f"{prefix}_foot", foot, _add(toes, (0.0, 0.0, 0.012)), 0.018, 0.02),
            _ellipsoid(f"{prefix}_toes", paw, (0.038, 0.026, 0.022)),
        ]
        if hind:  # thigh muscle
            shapes.append(_ellipsoid(f"{prefix}_upper_leg", (-0.18, 0.07, 0.29), (0.06, 0.034, 0.07)))
    bones, shapes = mirror_left_to_right(bones, shapes)
    spec = CharacterSpec(config.name, bones, shapes, blend_radius=0.010, weight_falloff=0.016)
    return spec.scaled(config.height / spec.top())


# --------------------------------------------------------------------------------------------------------------
# Biped: 22 joints. Nominal top of head 1.75 m.
# --------------------------------------------------------------------------------------------------------------


def biped_spec(config: BipedConfig = BipedConfig()) -> CharacterSpec:
    """The biped's bones and skin solids, scaled to ``config.height``."""
    P, S1, S2, S3 = (0.0, 0.0, 0.97), (-0.005, 0.0, 1.08), (-0.01, 0.0, 1.20), (-0.015, 0.0, 1.33)
    N, H, top = (-0.02, 0.0, 1.49), (0.0, 0.0, 1.575), (0.0, 0.0, 1.75)
    clav, shoulder = (0.0, 0.025, 1.44), (-0.02, 0.175, 1.445)
    a = float(config.arm_abduction)
    down = (0.0, math.sin(a), -math.cos(a))  # the left arm's rest direction
    elbow = _add(_add(shoulder, down, 0.29), (-0.01, 0.0, 0.0))
    wrist = _add(_add(elbow, down, 0.255), (0.015, 0.0, 0.0))
    hand_tip = _add(wrist, down, 0.17)
    hip, knee, ankle = (0.0, 0.09, 0.93), (0.015, 0.10, 0.51), (0.0, 0.11, 0.085)
    toes, toe_tip = (0.135, 0.115, 0.012), (0.20, 0.115, 0.012)
    bones = [
        BoneSpec("pelvis", None, P, S1),
        BoneSpec("spine_1", "pelvis", S1, S2),
        BoneSpec("spine_2", "spine_1", S2, S3),
        BoneSpec("spine_3", "spine_2", S3, N),
        BoneSpec("neck", "spine_3", N, H),
        BoneSpec("head", "neck", H, top),
        BoneSpec("left_clavicle", "spine_3", clav, shoulder),
        BoneSpec("left_upper_arm", "left_clavicle", shoulder, elbow),
        BoneSpec("left_lower_arm", "left_upper_arm", elbow, wrist),
        BoneSpec("left_hand", "left_lower_arm", wrist, hand_tip),
        BoneSpec("left_thigh", "pelvis", hip, knee),
        BoneSpec("left_shin", "left_thigh", knee, ankle),
        BoneSpec("left_foot", "left_shin", ankle, toes),
        BoneSpec("left_toes", "left_foot", toes, toe_tip),
    ]
    # the hand is a mitten: flat in the plane of the arm and the X axis, palm facing the thigh
    palm_normal = (0.0, math.cos(a), math.sin(a))
    hand_axes = ((1.0, 0.0, 0.0), down, palm_normal)
    shapes: list[Shape] = [
        _ellipsoid("pelvis", (-0.01, 0.0, 0.96), (0.11, 0.165, 0.12)),
        _ellipsoid("spine_1", (-0.005, 0.0, 1.10), (0.098, 0.145, 0.13)),
        _ellipsoid("spine_2", (-0.01, 0.0, 1.23), (0.105, 0.155, 0.13)),
        _ellipsoid("spine_3", (-0.012, 0.0, 1.35), (0.11, 0.168, 0.14)),
        _cone("neck", _add(N, (0.0, 0.0, -0.03)), _add(H, (0.0, 0.0, 0.02)), 0.058, 0.052),
        _ellipsoid("head", (0.0, 0.0, 1.645), (0.10, 0.08, 0.105)),
        _ellipsoid("head", (0.04, 0.0, 1.585), (0.06, 0.055, 0.05)),  # jaw
        _cone("head", (0.08, 0.0, 1.64), (0.105, 0.0, 1.63), 0.018, 0.013),  # nose
        _cone("left_clavicle", clav, shoulder, 0.05, 0.055),
        _cone("left_upper_arm", shoulder, elbow, 0.05, 0.04),
        _cone("left_lower_arm", elbow, wrist, 0.038, 0.029),
        _ellipsoid("left_hand", _add(wrist, down, 0.085), (0.045, 0.095, 0.022), hand_axes),
        _cone("left_thigh", hip, knee, 0.085, 0.055),
        _cone("left_shin", knee, ankle, 0.052, 0.036),
        _ellipsoid("left_shin", (-0.02, 0.10, 0.36), (0.05, 0.048, 0.10)),  # calf
        _cone("left_foot", ankle, (-0.04, 0.11, 0.035), 0.04, 0.035),  # ankle to heel
        _ellipsoid("left_foot", (0.05, 0.112, 0.035), (0.095, 0.045, 0.035)),
        _ellipsoid("left_toes", (0.165, 0.115, 0.022), (0.045, 0.045, 0.022)),
    ]
    bones, shapes = mirror_left_to_right(bones, shapes)
    spec = CharacterSpec(config.name, bones, shapes, blend_radius=0.018, weight_falloff=0.024)
    return spec.scaled(config.height / spec.top())
