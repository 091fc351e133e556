"""Procedural, exactly looping clips for the built-in characters: walks (with foot-locking leg IK) and idles.

Every clip is an analytic function of time sampled at ``fps``: all periodic terms have the gait period ``T``
(or an integer fraction of it) and the root advances at constant speed, so frame ``f + cycle_frames`` equals
frame ``f`` with the root moved forward by one stride. Clips hold ``cycles * cycle_frames + 1`` frames, the last
closing the loop.

Feet: each leg's *toes* joint follows a footfall schedule. In stance it rests where it landed (the foot flat,
its sole on z = 0); in swing it lifts vertically, travels forward with zero velocity at both ends, and sets down
vertically. Analytic two-bone IK (:func:`._ik.two_bone_ik`) bends hip/knee (shoulder/elbow) so that the ankle
(wrist) meets the foot, whose world orientation is set directly; stance feet therefore do not slide. The biped's
sole is skinned partly to the shin, so bending the knee would lift it: its stance height is measured on the
skinned mesh and the foot lowered onto z = 0 in every frame (:func:`_ground_leg`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..motion import Motion
from ..rig import Rig, RigError
from ._checks import require_config, require_int, require_real
from ._ik import PoseBuilder, rot_x, rot_y, rot_z, two_bone_ik

__all__ = [
    "BipedWalkConfig",
    "IdleConfig",
    "QuadrupedWalkConfig",
    "biped_idle",
    "biped_walk",
    "quadruped_idle",
    "quadruped_walk",
]

MAX_REACH = 0.995
"""Largest allowed hip-to-ankle distance as a fraction of the leg's length; beyond it a gait config is refused."""

_VERTICAL_MARGIN = 0.1
"""Fraction of the swing, at each end, during which a foot only moves vertically (lift-off and set-down)."""

_HIND_LIFT_LEAD = 0.5
"""How far ahead of the swing a hind paw's lift runs (see :func:`_lead`): it is highest at 38% of the swing, while
still behind the hip, and low when it reaches forward. A lift peaking half-way had the paw high and forward at
once, which folds the stifle up into the belly (13 mm deep in the default walk)."""

_HIND_FLEX_LEAD = 1.0
"""How far ahead of the swing a hind pastern's flex runs: it peaks at 29% of the swing and is gone by 68%, so the
hock is extended (low) in late swing, as a dog's is when the hind leg reaches forward."""

_QUADRUPED_LEGS = ("hind_left", "front_left", "hind_right", "front_right")
"""The quadruped's legs, in the order of :attr:`QuadrupedWalkConfig.footfalls`."""


@dataclass(frozen=True)
class QuadrupedWalkConfig:
    """A four-beat lateral-sequence walk (left hind, left fore, right hind, right fore).

    The hind paws lift and flex early in their swing and reach forward low, which keeps the thighs off the belly.
    """

    fps: float = 30.0
    """Frame rate [1/s], finite and > 0."""
    cycle_frames: int = 24
    """Frames per gait cycle [count], an integer >= 2 (period = cycle_frames / fps)."""
    cycles: int = 2
    """Gait cycles in the clip [count], an integer >= 1."""
    speed: float = 0.42
    """Forward speed of the root [m/s]; the stride is speed x period."""
    duty_factor: float = 0.62
    """Fraction of the cycle each foot is on the ground [unitless], in (0.5, 1): > 0.5 for a walk, < 1 to swing."""
    footfalls: tuple[float, float, float, float] = (0.0, 0.25, 0.5, 0.75)
    """Touchdown times of hind_left, front_left, hind_right, front_right [fraction of the cycle]; exactly 4."""
    step_height: float = 0.05
    """Peak lift of a paw during swing [m]."""
    paw_flex: float = 0.6
    """Peak backward flex of the pastern (wrist/hock) during swing [rad]."""
    bob: float = 0.005
    """Vertical bob of the body, half peak-to-peak [m]."""
    spine_sway: float = 0.05
    """Lateral bending of each spine joint [rad]."""
    tail_wag: float = 0.25
    """Side-to-side swing of each tail joint [rad]."""
    head_nod: float = 0.04
    """Head pitch oscillation [rad]."""

    def __post_init__(self):
        _check_timing(self)
        require_real(self, "speed")
        require_real(self, "duty_factor", 0.5, 1.0, low_open=True, high_open=True)
        try:
            count = len(self.footfalls)
        except TypeError:
            count = None
        if count != len(_QUADRUPED_LEGS):
            raise ValueError(
                f"QuadrupedWalkConfig.footfalls: must be {len(_QUADRUPED_LEGS)} touchdown times (of "
                f"{', '.join(_QUADRUPED_LEGS)}), got {self.footfalls!r}"
            )
        for value in self.footfalls:
            require_real(self, "footfalls", value=value)
        for name in ("step_height", "bob"):
            require_real(self, name, 0.0)
        for name in ("paw_flex", "spine_sway", "tail_wag", "head_nod"):
            require_real(self, name)


@dataclass(frozen=True)
class BipedWalkConfig:
    """A human walk: alternating steps with heel-off, pelvis bob, sway and rotation, and arm swing."""

    fps: float = 30.0
    """Frame rate [1/s], finite and > 0."""
    cycle_frames: int = 34
    """Frames per gait cycle, i.e. two steps [count], an integer >= 2 (period = cycle_frames / fps)."""
    cycles: int = 2
    """Gait cycles in the clip [count], an integer >= 1."""
    speed: float = 0.9
    """Forward speed of the root [m/s]; the stride (two steps) is speed x period."""
    duty_factor: float = 0.6
    """Fraction of the cycle each foot is on the ground [unitless], in [0.5, 1) (double support = duty - 0.5)."""
    heel_off: float = 0.22
    """Duration of the heel rise at the end of stance, the toes staying planted [fraction of the cycle], in
    (0, duty_factor]."""
    heel_lift: float = 0.55
    """Foot pitch at toe-off (heel up) [rad]."""
    stance_shift: float = -0.08
    """Forward shift of the stance interval relative to the hip [m] (< 0: feet land closer and push off farther
    behind, where the heel rise lengthens the leg)."""
    step_height: float = 0.07
    """Peak lift of the toes during swing [m]."""
    pelvis_drop: float = 0.055
    """Mean lowering of the pelvis below its rest height (bent knees) [m]."""
    bob: float = 0.012
    """Vertical bob of the pelvis, half peak-to-peak [m]; lowest in double support."""
    sway: float = 0.02
    """Lateral shift of the pelvis over the stance foot [m]."""
    pelvis_yaw: float = 0.08
    """Pelvis rotation about the vertical, forward hip leading [rad]."""
    pelvis_roll: float = 0.04
    """Pelvis list towards the swing side [rad]."""
    arm_swing: float = 0.3
    """Shoulder swing, opposite to the same-side leg [rad]."""
    arm_drop: float = 0.12
    """Angle of the arms from the vertical while walking (they leave the A-pose) [rad]."""
    elbow_bend: float = 0.25
    """Mean elbow flexion [rad]."""

    def __post_init__(self):
        _check_timing(self)
        require_real(self, "speed")
        require_real(self, "duty_factor", 0.5, 1.0, high_open=True)
        require_real(self, "heel_off", 0.0, float(self.duty_factor), low_open=True)
        for name in ("step_height", "bob"):
            require_real(self, name, 0.0)
        for name in ("heel_lift", "stance_shift", "pelvis_drop", "sway", "pelvis_yaw", "pelvis_roll", "arm_swing",
                     "arm_drop", "elbow_bend"):  # fmt: skip
            require_real(self, name)


@dataclass(frozen=True)
class IdleConfig:
    """Standing idle: breathing, weight shift and looking around, feet planted."""

    fps: float = 30.0
    """Frame rate [1/s], finite and > 0."""
    cycle_frames: int = 120
    """Frames per idle cycle [count], an integer >= 2."""
    cycles: int = 1
    """Cycles in the clip [count], an integer >= 1."""
    sway: float = 0.012
    """Lateral weight shift of the pelvis for a 1.75 m tall character [m]; scaled with the rig's height."""
    breath: float = 0.03
    """Chest pitch of a breath [rad]."""
    look: float = 0.25
    """Head turn left and right [rad]."""
    tail_wag: float = 0.3
    """Tail swing [rad] (quadrupeds)."""
    arm_drop: float = 0.1
    """Angle of the arms from the vertical [rad] (bipeds)."""

    def __post_init__(self):
        _check_timing(self)
        for name in ("sway", "breath", "look", "tail_wag", "arm_drop"):
            require_real(self, name)


def _check_timing(config) -> None:
    """The frame rate, cycle length and cycle count every clip config has."""
    require_real(config, "fps", 0.0, low_open=True)
    require_int(config, "cycle_frames", 2)
    require_int(config, "cycles", 1)


# -- shared machinery ------------------------------------------------------------------------------------------


def _smooth(x: np.ndarray) -> np.ndarray:
    """Quintic smoothstep on [0, 1] (zero velocity and acceleration at both ends), clamped outside."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * x * (x * (6.0 * x - 15.0) + 10.0)


def _bump(x: np.ndarray) -> np.ndarray:
    """sin^2(pi x) on [0, 1]: 0 at both ends with zero slope, 1 in the middle; 0 outside."""
    return np.sin(np.pi * np.clip(x, 0.0, 1.0)) ** 2


def _times(fps: float, cycle_frames: int, cycles: int) -> tuple[np.ndarray, float]:
    if fps <= 0 or cycle_frames < 2 or cycles < 1:
        raise ValueError(f"need fps > 0, cycle_frames >= 2, cycles >= 1; got {fps}, {cycle_frames}, {cycles}")
    return np.arange(cycles * cycle_frames + 1) / fps, cycle_frames / fps


@dataclass
class _Track:
    """A foot's schedule: leg phase, stance flag, swing progress and the toes' world offset from rest."""

    phase: np.ndarray  # [0, 1), 0 = touchdown
    stance: np.ndarray  # bool
    swing: np.ndarray  # swing progress u in [0, 1] (0 in stance)
    dx: np.ndarray  # forward offset of the toes from their rest position [m]
    lift: np.ndarray  # height of the toes above their stance height [m]


def _lead(u: np.ndarray, lead: float) -> np.ndarray:
    """Swing progress run ahead: ``u + lead u (1 - u)`` (0 and 1 stay put; ``lead`` in [0, 1] keeps it monotonic)."""
    return u + lead * u * (1.0 - u) if lead else u


def _track(
    t: np.ndarray, period: float, touchdown: float, duty: float, stride: float, height: float, lift_lead: float = 0.0
) -> _Track:
    cyc = t / period - touchdown
    k = np.floor(cyc)
    p = cyc - k
    stance = p < duty
    u = np.where(stance, 0.0, (p - duty) / (1.0 - duty))
    planted = stride * (k + touchdown + 0.5 * duty)  # centred under the hip at mid-stance
    m = _VERTICAL_MARGIN
    dx = planted + np.where(stance, 0.0, stride * _smooth((u - m) / (1.0 - 2.0 * m)))
    lift = np.where(stance, 0.0, height * _bump(_lead(u, lift_lead)))
    return _Track(p, stance, u, dx, lift)


@dataclass
class _Leg:
    upper: str
    lower: str
    foot: str
    toes: str
    sole: float  # height of the foot's lowest rest vertex above z = 0 [m]
    centre: float  # forward offset of the toes at mid-stance, placing the ankle under the hip [m]
    skin: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the foot's rest vertices, joints, weights

    @property
    def label(self) -> str:
        """The leg's name in messages: ``front_left``, ``left``, ..."""
        return self.upper.removesuffix("_upper_leg").removesuffix("_thigh")


def _leg(rig: Rig, names: tuple[str, str, str, str]) -> _Leg:
    try:
        idx = [rig.joint_index(n) for n in names]
    except KeyError as e:
        raise RigError(f"rig {rig.name!r} lacks the joints of a procedural character's leg: {e.args[0]}") from None
    mesh = rig.merged_mesh()
    dominant = mesh.influence_joints[np.arange(mesh.vertex_count), np.argmax(mesh.influence_weights, axis=1)]
    on_foot = np.isin(dominant, idx[2:])
    sole = float(mesh.points[on_foot, 2].min()) if on_foot.any() else 0.0
    skin = (mesh.points[on_foot], mesh.influence_joints[on_foot], mesh.influence_weights[on_foot])
    rest = rig.rest_world_transforms()[0]
    return _Leg(
        *names, sole=sole, centre=float(rest[idx[0], 0] - rest[idx[2], 0]), skin=skin if on_foot.any() else None
    )


def _sole_height(pose: PoseBuilder, leg: _Leg) -> np.ndarray:
    """Height [m] of the leg's lowest foot vertex in each frame under the current pose (linear blend skinning)."""
    points, joints, weights = leg.skin
    z = np.zeros((pose.frame_count, len(points)))
    for j in np.unique(joints[weights > 0.0]):
        pos, rot = pose.world(pose.rig.joint_names[j])
        w = np.where(joints == j, weights, 0.0).sum(axis=1)  # (V,)
        local = points - pose.rest_positions[j]
        z += w * (np.einsum("fb,vb->fv", rot[:, 2], local) + pos[:, 2:3])
    return z.min(axis=1)


_GROUNDING_PASSES = 2
"""Corrections of the stance feet's height (each re-solves the leg; the second leaves < 0.1 mm)."""


def _ground_leg(pose, leg, toes_pos, stance, cycle_frames, foot_pitch, toes_pitch) -> np.ndarray:
    """Poses a leg as :func:`_solve_leg` does, then lowers its toes target until the sole touches z = 0 in stance.

    The sole's height is measured on the skinned mesh, so skin weighted partly to the shin (a heel lifted by the
    bending knee) is accounted for. The correction is a vertical shift of the whole foot, the same in every cycle
    (measured on the first) and interpolated across the swing between the values at lift-off and touchdown, so
    planted feet stay planted and the clip still loops exactly. Returns the reach ratio per frame.
    """
    reach = _solve_leg(pose, leg, toes_pos, foot_pitch, toes_pitch)
    if leg.skin is None:
        return reach
    toes_pos = toes_pos.copy()
    frames = np.arange(len(toes_pos))
    one = frames[:cycle_frames]
    on = one[stance[:cycle_frames]]
    if on.size == 0:
        return reach
    for _ in range(_GROUNDING_PASSES):
        low = _sole_height(pose, leg)
        correction = np.interp(one, on, low[on], period=cycle_frames)
        toes_pos[:, 2] -= correction[frames % cycle_frames]
        reach = _solve_leg(pose, leg, toes_pos, foot_pitch, toes_pitch)
    return reach


def _solve_leg(pose: PoseBuilder, leg: _Leg, toes_pos: np.ndarray, foot_pitch, toes_pitch) -> np.ndarray:
    """Poses one leg so its toes joint sits at ``toes_pos`` (F, 3) with the given world pitches; returns reach."""
    rest = pose.rest_positions
    r_hip, r_knee, r_ankle, r_toes = (rest[pose.index(n)] for n in (leg.upper, leg.lower, leg.foot, leg.toes))
    r_foot_world = rot_y(foot_pitch)
    ankle = toes_pos - r_foot_world @ (r_toes - r_ankle)
    hip, _ = pose.world(leg.upper)
    parent = pose.rig.joint_names[int(pose.rig.parents[pose.index(leg.upper)])]
    _, follow = pose.world(parent)
    upper, lower, reach = two_bone_ik(hip, ankle, r_hip, r_knee, r_ankle, follow)
    pose.set_world(leg.upper, upper)
    pose.set_world(leg.lower, lower)
    pose.set_world(leg.foot, r_foot_world)
    pose.set_world(leg.toes, rot_y(toes_pitch))
    return reach


_WALK_ADVICE = "lower speed, cycle_frames or duty_factor (each shortens the stance foot's travel under the hip)"
_IDLE_ADVICE = "the rig's legs cannot stand on the ground from its rest pose"


def _check_reach(reaches: dict[str, np.ndarray], clip: str, advice: str) -> None:
    """Refuses a clip in which some leg's hip-ankle distance exceeds MAX_REACH; the message names the worst leg."""
    worst_leg = max(reaches, key=lambda leg: float(reaches[leg].max()))
    worst = float(reaches[worst_leg].max())
    if worst > MAX_REACH:
        raise ValueError(
            f"{clip}: the {worst_leg} leg cannot reach its foot (hip-ankle distance {worst:.3f} x leg length > "
            f"{MAX_REACH}); {advice}"
        )


def _motion(pose: PoseBuilder, times: np.ndarray, fps: float, name: str) -> Motion:
    return Motion(fps, pose.root, pose.quaternions(), times=times, name=name)


# -- quadruped -------------------------------------------------------------------------------------------------


def _quadruped_legs(rig: Rig) -> list[_Leg]:
    return [_leg(rig, tuple(f"{p}_{s}" for s in ("upper_leg", "lower_leg", "foot", "toes"))) for p in _QUADRUPED_LEGS]


def _quadruped_body(pose: PoseBuilder, w: np.ndarray, sway, nod, wag, breath=0.0) -> None:
    """Spine, neck, head, ears and tail of the quadruped, as oscillations of phase ``w`` [rad]."""
    pose.set_local("spine_1", rot_z(sway * np.sin(w)) @ rot_y(-0.5 * breath))
    pose.set_local("spine_2", rot_z(sway * np.sin(w - 0.5)) @ rot_y(breath))
    pose.set_local("neck", rot_z(-sway * np.sin(w - 0.5)))
    pose.set_local("head", rot_y(nod * np.sin(2.0 * w)))
    for side, sign in (("left", 1.0), ("right", -1.0)):
        pose.set_local(f"{side}_ear", rot_x(sign * 0.5 * nod * np.sin(2.0 * w - 1.0)))
    for i in range(3):
        pose.set_local(f"tail_{i + 1}", rot_z(wag * np.sin(w - 0.7 * i)) @ rot_y(-0.05 * (i == 0)))


def quadruped_walk(rig: Rig, config: QuadrupedWalkConfig = QuadrupedWalkConfig()) -> Motion:
    """A looping four-beat walk of the procedural quadruped (see :func:`sim.characters.quadruped`).

    Raises:
        RigError: ``rig`` lacks the quadruped's joints or has non-identity rest rotations.
        TypeError: ``config`` is not a :class:`QuadrupedWalkConfig`.
        ValueError: a config the legs cannot follow (stride too long for the legs; the message names the worst
            leg). Out-of-range fields are refused when the config is made (the message names the field).
    """
    require_config(config, QuadrupedWalkConfig, "quadruped_walk: config")
    c = config
    t, period = _times(c.fps, c.cycle_frames, c.cycles)
    legs = _quadruped_legs(rig)
    pose = PoseBuilder(rig, len(t))
    w = 2.0 * np.pi * t / period
    stride = c.speed * period
    pose.root[:, 0] += c.speed * t
    pose.root[:, 2] += c.bob * np.cos(2.0 * w)
    pose.set_local("pelvis", rot_z(-0.5 * c.spine_sway * np.sin(w)) @ rot_x(0.02 * np.sin(w)))
    _quadruped_body(pose, w, c.spine_sway, c.head_nod, c.tail_wag)
    m = _VERTICAL_MARGIN
    reaches = {}
    for leg, touchdown in zip(legs, c.footfalls, strict=True):
        hind = leg.label.startswith("hind")
        lift_lead, flex_lead = (_HIND_LIFT_LEAD, _HIND_FLEX_LEAD) if hind else (0.0, 0.0)
        tr = _track(t, period, touchdown, c.duty_factor, stride, c.step_height, lift_lead)
        flex = c.paw_flex * _bump((_lead(tr.swing, flex_lead) - m) / (1.0 - 2.0 * m))
        toes = pose.rest_positions[pose.index(leg.toes)] + np.stack(
            [tr.dx + leg.centre, np.zeros_like(t), tr.lift - leg.sole], axis=-1
        )
        reaches[leg.label] = _solve_leg(pose, leg, toes, flex, 1.3 * flex)
    _check_reach(reaches, "quadruped walk", _WALK_ADVICE)
    return _motion(pose, t, c.fps, "walk")


def quadruped_idle(rig: Rig, config: IdleConfig = IdleConfig()) -> Motion:
    """A looping standing idle of the procedural quadruped: breathing, weight shift, looking around, tail wag.

    Raises:
        RigError: ``rig`` lacks the quadruped's joints or has non-identity rest rotations.
        TypeError: ``config`` is not an :class:`IdleConfig`.
        ValueError: the legs cannot reach the ground (the message names the worst leg).
    """
    require_config(config, IdleConfig, "quadruped_idle: config")
    c = config
    t, period = _times(c.fps, c.cycle_frames, c.cycles)
    legs = _quadruped_legs(rig)
    pose = PoseBuilder(rig, len(t))
    w = 2.0 * np.pi * t / period
    scale = rig.height() / 1.75
    pose.root[:, 1] += c.sway * scale * np.sin(w)
    pose.root[:, 2] += 0.1 * c.sway * scale * np.cos(2.0 * w)
    pose.set_local("pelvis", rot_x(-0.5 * c.sway * np.sin(w)))
    _quadruped_body(pose, w, 0.0, 0.0, 0.0, breath=c.breath * np.sin(4.0 * w))
    pose.set_local("tail_1", rot_z(c.tail_wag * np.sin(8.0 * w)) @ rot_y(-0.05))
    pose.set_local("tail_2", rot_z(c.tail_wag * np.sin(8.0 * w - 0.7)))
    pose.set_local("tail_3", rot_z(c.tail_wag * np.sin(8.0 * w - 1.4)))
    pose.set_local("neck", rot_y(0.05 * np.sin(2.0 * w)))
    pose.set_local("head", rot_z(c.look * np.sin(w)) @ rot_y(0.05 * np.sin(3.0 * w)))
    zero = np.zeros_like(t)
    reaches = {}
    for leg in legs:
        toes = pose.rest_positions[pose.index(leg.toes)] + np.stack([zero, zero, zero - leg.sole], axis=-1)
        reaches[leg.label] = _solve_leg(pose, leg, toes, zero, zero)
    _check_reach(reaches, "quadruped idle", _IDLE_ADVICE)
    return _motion(pose, t, c.fps, "idle")


# -- biped -----------------------------------------------------------------------------------------------------


def _biped_legs(rig: Rig) -> list[_Leg]:
    return [_leg(rig, tuple(f"{s}_{p}" for p in ("thigh", "shin", "foot", "toes"))) for s in ("left", "right")]


def _rodrigues(axis: np.ndarray, angle) -> np.ndarray:
    """Rotations by ``angle`` [rad] (F,) about the fixed unit ``axis`` (3,), shape (F, 3, 3)."""
    angle = np.asarray(angle, dtype=np.float64)
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    s, c = np.sin(angle)[..., None, None], np.cos(angle)[..., None, None]
    return np.eye(3) + s * k + (1.0 - c) * (k @ k)


def _biped_arms(pose: PoseBuilder, swing_left, swing_right, arm_drop: float, elbow_left, elbow_right) -> None:
    """Arms leave the A-pose to hang ``arm_drop`` from the vertical, swing about the shoulder, bend the elbow."""
    rest = pose.rest_positions
    for side, swing, elbow in (("left", swing_left, elbow_left), ("right", swing_right, elbow_right)):
        d = rest[pose.index(f"{side}_lower_arm")] - rest[pose.index(f"{side}_upper_arm")]
        d = d / np.linalg.norm(d)
        abduction = np.arctan2(abs(d[1]), -d[2])
        sign = 1.0 if d[1] > 0 else -1.0
        adduct = rot_x(-sign * (abduction - arm_drop))
        pose.set_local(f"{side}_upper_arm", rot_y(swing) @ adduct)
        hinge = np.cross(d, [1.0, 0.0, 0.0])
        pose.set_local(f"{side}_lower_arm", _rodrigues(hinge / np.linalg.norm(hinge), elbow))


def biped_walk(rig: Rig, config: BipedWalkConfig = BipedWalkConfig()) -> Motion:
    """A looping walk of the procedural biped (see :func:`sim.characters.biped`).

    Raises:
        RigError: ``rig`` lacks the biped's joints or has non-identity rest rotations.
        TypeError: ``config`` is not a :class:`BipedWalkConfig`.
        ValueError: a config the legs cannot follow (stride too long for the legs; the message names the worst
            leg). Out-of-range fields are refused when the config is made (the message names the field).
    """
    require_config(config, BipedWalkConfig, "biped_walk: config")
    c = config
    t, period = _times(c.fps, c.cycle_frames, c.cycles)
    legs = _biped_legs(rig)
    pose = PoseBuilder(rig, len(t))
    s = t / period  # cycles
    w = 2.0 * np.pi * s
    beta = c.duty_factor
    stride = c.speed * period
    # pelvis: lowest in the middle of double support, over the stance foot in single support
    pose.root[:, 0] += c.speed * t
    pose.root[:, 1] += c.sway * np.cos(w - np.pi * beta)
    pose.root[:, 2] += -c.pelvis_drop - c.bob * np.cos(2.0 * (w - np.pi * (beta - 0.5)))
    yaw = -c.pelvis_yaw * np.cos(w)
    roll = c.pelvis_roll * np.cos(w - np.pi * beta)
    pose.set_local("pelvis", rot_z(yaw) @ rot_x(roll))
    # spine counter-rotates so the shoulders turn against the hips; chest upright; head steady
    chest_yaw = 0.6 * c.pelvis_yaw * np.cos(w)
    for name in ("spine_1", "spine_2", "spine_3"):
        pose.set_local(name, rot_z((chest_yaw - yaw) / 3.0) @ rot_x(-roll / 3.0) @ rot_y(np.full_like(t, 0.02)))
    pose.set_world("neck", rot_z(0.5 * chest_yaw) @ rot_y(np.full_like(t, 0.03)))
    pose.set_world("head", rot_y(0.02 * np.sin(2.0 * w)))
    _biped_arms(
        pose,
        c.arm_swing * np.cos(w),
        -c.arm_swing * np.cos(w),
        c.arm_drop,
        c.elbow_bend + 0.5 * c.arm_swing * (1.0 - np.cos(w)) / 2.0,  # bends most when swung forward
        c.elbow_bend + 0.5 * c.arm_swing * (1.0 + np.cos(w)) / 2.0,
    )
    m = _VERTICAL_MARGIN
    reaches = {}
    for leg, touchdown in zip(legs, (0.0, 0.5), strict=True):
        tr = _track(t, period, touchdown, beta, stride, c.step_height)
        heel = c.heel_lift * _smooth((tr.phase - (beta - c.heel_off)) / c.heel_off)
        u = tr.swing
        # the heel stays up while the knee folds, the foot levels out under the body and dorsiflexes a little
        swing_pitch = c.heel_lift * (1.0 - _smooth((u - 0.15) / 0.45)) - 0.15 * _bump(u / (1.0 - m))
        foot_pitch = np.where(tr.stance, heel, swing_pitch)
        toes_pitch = np.where(tr.stance, 0.0, swing_pitch * _smooth((u - m) / (0.5 - m)))
        toes = pose.rest_positions[pose.index(leg.toes)] + np.stack(
            [tr.dx + leg.centre + c.stance_shift, np.zeros_like(t), tr.lift - leg.sole], axis=-1
        )
        reaches[leg.label] = _ground_leg(pose, leg, toes, tr.stance, c.cycle_frames, foot_pitch, toes_pitch)
    _check_reach(reaches, "biped walk", _WALK_ADVICE)
    return _motion(pose, t, c.fps, "walk")


def biped_idle(rig: Rig, config: IdleConfig = IdleConfig()) -> Motion:
    """A looping standing idle of the procedural biped: breathing, weight shift, looking around.

    Raises:
        RigError: ``rig`` lacks the biped's joints or has non-identity rest rotations.
        TypeError: ``config`` is not an :class:`IdleConfig`.
        ValueError: the legs cannot reach the ground (the message names the worst leg).
    """
    require_config(config, IdleConfig, "biped_idle: config")
    c = config
    t, period = _times(c.fps, c.cycle_frames, c.cycles)
    legs = _biped_legs(rig)
    pose = PoseBuilder(rig, len(t))
    w = 2.0 * np.pi * t / period
    scale = rig.height() / 1.75
    pose.root[:, 1] += c.sway * scale * np.sin(w)
    pose.root[:, 2] -= 0.015 * scale * (1.0 + 0.3 * np.cos(2.0 * w))  # knees soft, never locked straight
    roll = -0.5 * c.sway * np.sin(w)
    pose.set_local("pelvis", rot_x(roll))
    breath = c.breath * np.sin(3.0 * w)
    pose.set_local("spine_1", rot_x(-roll / 2.0))
    pose.set_local("spine_2", rot_x(-roll / 2.0) @ rot_y(-0.5 * breath))
    pose.set_local("spine_3", rot_y(breath))
    pose.set_world("neck", rot_z(0.3 * c.look * np.sin(w + 0.5)))
    pose.set_world("head", rot_z(c.look * np.sin(w + 0.5)) @ rot_y(0.03 * np.sin(2.0 * w)))
    sway = 0.03 * np.sin(w)
    _biped_arms(pose, sway, -sway, c.arm_drop, 0.15 + 0.05 * np.sin(3.0 * w), 0.15 + 0.05 * np.sin(3.0 * w))
    zero = np.zeros_like(t)
    reaches = {}
    for leg in legs:
        toes = pose.rest_positions[pose.index(leg.toes)] + np.stack([zero, zero, zero - leg.sole], axis=-1)
        planted = np.ones(len(t), dtype=bool)
        reaches[leg.label] = _ground_leg(pose, leg, toes, planted, c.cycle_frames, zero, zero)
    _check_reach(reaches, "biped idle", _IDLE_ADVICE)
    return _motion(pose, t, c.fps, "idle")
