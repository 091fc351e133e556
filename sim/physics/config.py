"""Configuration of the physics character, the tracking controller and the physics projection.

Every number that shapes a result lives in one of these dataclasses; tyro turns the field docstrings into
``--help``. Units are SI (m, kg, s) unless a field name says otherwise (``_deg``, ``_hz``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .._numbers import is_integer, is_real

__all__ = [
    "CharacterConfig",
    "ContactConfig",
    "ProjectionConfig",
    "ReferenceConfig",
    "RootAssistConfig",
    "SolverConfig",
    "TrackingConfig",
]

SolverName = Literal["steel", "featherstone", "xpbd"]
RootMotionMode = Literal["auto", "keep", "from_contacts"]


_DEVICE = re.compile(r"cpu|cuda(:\d+)?")
"""Warp device names a simulation accepts."""

MIN_DT_S = 1e-6
"""Smallest physics step [s] ``SolverConfig.max_dt_s`` accepts: a motion frame at 30 fps then takes 33334 substeps
(a smaller step only slows the run down; 1e-300 made the substep count overflow the simulation's integer step
counter, and the process died of a floating-point exception)."""

MAX_COORDINATE_M = 1000.0
"""Largest distance [m] of ``ContactConfig.ground_height_m`` from the origin. Newton simulates positions in float32,
whose resolution is 6e-5 m at 1 km but 0.06 m at 1000 km (where contacts and the foot metrics are noise) and which
overflows past 3.4e38 m."""

MAX_REFERENCE_FRAMES = 100_000
"""Most frames a reference made longer by its settings (``loops``, ``ReferenceConfig.fps``) may have: 55 minutes at
30 fps. The reference, the simulated states and the written clips grow with the frame count (a 31-joint BVH rig
looped to 25000 frames took 0.6 GB before simulating); beyond this a run spends hours and several GB, and
``--loops 1000000000000`` never got to its simulation. A clip longer than this on its own is tracked as it is."""

MAX_LOOPED_SAMPLES = 4 * MAX_REFERENCE_FRAMES
"""Most samples ``loops`` repeats of a clip may have before the reference is resampled to its frame rate: the
frame limit for 120 fps mocap tracked at 30 fps."""


@functools.cache
def _field_types(cls: type) -> dict[str, object]:
    """The resolved type annotations of a config dataclass's fields (the module uses postponed annotations)."""
    return typing.get_type_hints(cls)


def _choices(values: tuple) -> str:
    """``'a', 'b' or 'c'``."""
    text = [repr(v) for v in values]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " or " + text[-1]


def _type_problem(value, hint) -> str | None:
    """Why ``value`` does not fit the annotation ``hint`` ("must be ..."), or None when it does (or when the
    annotation is one the configs do not use)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        problems = [_type_problem(value, a) for a in args if a is not type(None)]
        return None if any(p is None for p in problems) else problems[0]
    if origin is Literal:
        allowed = typing.get_args(hint)
        ok = any(isinstance(value, type(a)) and value == a for a in allowed)
        return None if ok else f"must be {_choices(allowed)}"
    if origin is dict:
        return None if isinstance(value, Mapping) else "must be a dict"
    if hint is bool:
        return None if isinstance(value, (bool, np.bool_)) else "must be True or False"
    if hint is int:
        return None if is_integer(value) else "must be an integer"
    if hint is float:
        return None if is_real(value) else "must be a number"
    if hint is str:
        return None if isinstance(value, str) else "must be a string"
    if dataclasses.is_dataclass(hint):
        return None if isinstance(value, hint) else f"must be a {hint.__name__}"
    return None


def _check_fields(
    obj, positive=(), nonnegative=(), fractions=(), at_least_one=(), at_least_two=()
) -> None:  # fmt: skip
    """Raises ValueError naming ``Class.field`` for a value that does not fit the field's annotation (a Literal
    outside its choices, a float where an integer belongs, a string where a number belongs), a non-finite number or
    one outside its range (None is allowed for optional fields). ``fractions`` lie in [0, 1]."""
    cls = type(obj).__name__
    hints = _field_types(type(obj))
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        problem = _type_problem(v, hints[f.name])
        if problem is not None:
            raise ValueError(f"{cls}.{f.name}: {problem}, got {v!r}")
        if isinstance(v, (float, np.floating)) and not math.isfinite(v):
            raise ValueError(f"{cls}.{f.name}: must be a finite number, got {v}")
    rules = (
        (positive, lambda v: v > 0, "> 0"),
        (nonnegative, lambda v: v >= 0, ">= 0"),
        (fractions, lambda v: 0 <= v <= 1, "in [0, 1]"),
        (at_least_one, lambda v: v >= 1, ">= 1"),
        (at_least_two, lambda v: v >= 2, ">= 2"),
    )
    for names, ok, text in rules:
        for name in names:
            v = getattr(obj, name)
            if v is not None and not ok(v):
                raise ValueError(f"{cls}.{name}: must be {text}, got {v}")


_INT32_MAX = 2**31 - 1
"""Largest solver count Newton takes (its kernels read int32)."""


@dataclass
class CharacterConfig:
    """How a rig becomes an articulated rigid-body character (bodies, colliders, masses, joints, gains)."""

    density_kg_m3: float = 1000.0
    """Density of the body [kg/m^3]: it fills the volume ``mass_from`` names (the skin's enclosed volume by default,
    the capsules' own with ``colliders``); unused when ``total_mass_kg`` is set."""
    total_mass_kg: float | None = None
    """Total mass of the character [kg]; when set, the density is scaled to reach it."""
    mass_from: Literal["mesh", "colliders"] = "mesh"
    """What volume the density fills (when ``total_mass_kg`` is None). ``mesh``: the skinned mesh's enclosed
    volume (measured on the skin in the reference pose, where the capsules are fitted), shared by the bodies in
    proportion to their capsules' volumes. Fitted capsules overlap at the joints
    and bulge past the skin, so their volume overstates the body's: the procedural biped's capsules hold 112.7 L
    against its mesh's 67.6 L (a 113 kg human instead of 68 kg), the Fox's 25.0 L against 16.8 L. Used when the
    merged mesh is closed (watertight after merging coincident vertices, e.g. across UV seams); an open mesh or a
    meshless rig falls back to ``colliders`` with a builder note. ``colliders``: the capsules' own volume."""
    tail_density_scale: float = 0.2
    """Density multiplier of bodies whose joint name contains ``tail`` (case-insensitive): a tail's skinned volume
    is mostly fur. At uniform density the Fox's tail capsules weighed 27% of its mass (a real fox's brush is ~5%)
    and pitched the running fox nose-up (3-loop Fox Run projection error 0.335 -> 0.221, Walk 0.044 -> 0.041).
    1.0 gives tails the density of the rest of the body."""
    density_scale: dict[str, float] = field(default_factory=dict)
    """Further density multipliers by body-name substring (case-insensitive), e.g. ``{"ear": 0.5}``; a body
    matching several substrings (or ``tail``) takes the product."""
    min_body_vertex_fraction: float = 0.01
    """A bone gets its own rigid body when its skinning weights sum to at least this fraction of the mesh's
    vertex count; smaller and leaf bones are merged into their parent's body."""
    min_body_size_fraction: float = 0.04
    """...and when the vertices it weights by at least ``collider_weight_threshold`` span at least this fraction
    of the character height."""
    collider_weight_threshold: float = 0.3
    """A vertex belongs to a body's collider point set when the body's joints weight it at least this much."""
    collider_radius_quantile: float = 0.8
    """Capsule radius = this quantile of the dominated vertices' distances from the capsule axis (the capsule
    ends are then placed so that every vertex within that radius is inside)."""
    contact_colliders: Literal["sole", "bounding"] = "sole"
    """Colliders of bodies that touch the ground in the reference (feet): ``sole`` lays a capsule across the
    foot's lowest vertices, touching the lowest one, so the physical foot stands where the skinned foot does;
    ``bounding`` encloses the foot's vertices (``contact_collider_radius_quantile``)."""
    contact_collider_radius_quantile: float = 1.0
    """Radius quantile of ``bounding`` contact colliders (1.0 bounds every vertex)."""
    min_radius_fraction: float = 0.01
    """Lower bound of a capsule radius as a fraction of the character height."""
    meshless_radius_fraction: float = 0.12
    """For rigs without a skinned mesh (e.g. BVH): capsule radius of a bone as a fraction of its length."""
    meshless_trunk_radius_fraction: float = 0.07
    """For rigs without a skinned mesh: capsule radius of trunk bones (those whose subtree holds at least a third
    of the joints: pelvis to chest) as a fraction of the character height, at least. A CMU skeleton's spine is
    split into bones of a few centimetres, whose length-scaled capsules made a 12 kg human with 0.3 kg of trunk."""
    joint_limits: Literal["motion", "none"] = "motion"
    """``motion``: joint limits from the reference motion's range plus a margin; ``none``: unlimited."""
    joint_limit_margin_deg: float = 25.0
    """Margin added on both sides of the motion's range of each joint coordinate [deg]."""
    min_joint_half_range_deg: float = 20.0
    """Every limited coordinate gets at least this half-range around its mean [deg]."""
    joint_limits_deg: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Explicit limits per rig joint name: (lower, upper) [deg] applied to each of the joint's three rotation
    coordinates, relative to the reference pose; overrides the motion-derived limits of that joint."""
    stiffness_hz: float = 25.0
    """Natural frequency of each PD drive [Hz]: stiffness = (2 pi f)^2 x effective inertia of the DOF."""
    damping_ratio: float = 1.0
    """Damping ratio of each PD drive: damping = 2 zeta (2 pi f) x effective inertia."""
    support_load: bool = True
    """Joints on a chain from the root to a ground-contact body also carry their share of the body weight:
    their effective inertia adds ``total_mass x lever^2 / support_chain_count``, the lever being the distance
    from the joint to where its chain's support body meets the ground."""
    contact_height_fraction: float = 0.03
    """A body is a ground-contact (support) body when its collider comes within this fraction of the height of
    the ground in at least ``contact_frame_fraction`` of the reference frames."""
    contact_frame_fraction: float = 0.05
    """See ``contact_height_fraction``."""
    armature_fraction: float = 0.05
    """Rotor inertia added to each joint's DOFs as a fraction of its mean effective inertia (steadies light DOFs)."""
    self_collision: bool = True
    """Collide non-adjacent bodies with each other (parent/child pairs never collide)."""
    filter_reference_overlaps: bool = True
    """Do not collide body pairs whose capsules already overlap in the reference pose (they would push apart
    from the first step)."""

    def check(self) -> CharacterConfig:
        """Returns the config; raises ValueError naming the first field out of range."""
        _check_fields(
            self,
            positive=("total_mass_kg", "density_kg_m3", "tail_density_scale",
                      "collider_radius_quantile", "contact_collider_radius_quantile", "min_radius_fraction",
                      "meshless_radius_fraction", "meshless_trunk_radius_fraction", "stiffness_hz",
                      "contact_frame_fraction"),
            nonnegative=("joint_limit_margin_deg", "min_joint_half_range_deg", "damping_ratio", "armature_fraction"),
            fractions=("min_body_vertex_fraction", "min_body_size_fraction", "collider_weight_threshold",
                       "collider_radius_quantile", "contact_collider_radius_quantile", "contact_height_fraction",
                       "contact_frame_fraction"),
        )  # fmt: skip
        for field_name in ("density_scale", "joint_limits_deg"):  # int keys failed later in key.lower()
            bad = [k for k in getattr(self, field_name) if not isinstance(k, str)]
            if bad:
                raise ValueError(f"CharacterConfig.{field_name}: keys are body / joint name parts (strings), "
                                 f"got {bad[0]!r}")  # fmt: skip
        for name, scale in self.density_scale.items():
            if not (is_real(scale) and math.isfinite(scale) and scale > 0):
                raise ValueError(f"CharacterConfig.density_scale[{name!r}]: must be a positive number, got {scale!r}")
        for name, limits in self.joint_limits_deg.items():
            pair = tuple(limits) if isinstance(limits, (tuple, list)) else ()
            if not (len(pair) == 2 and all(is_real(x) and math.isfinite(x) for x in pair) and pair[0] <= pair[1]):
                raise ValueError(
                    f"CharacterConfig.joint_limits_deg[{name!r}]: need finite lower <= upper, got {limits!r}"
                )
        return self


@dataclass
class ContactConfig:
    """Ground and self contact material."""

    friction: float = 1.0
    """Coulomb friction coefficient of every collider and the ground."""
    restitution: float = 0.0
    """Coefficient of restitution."""
    ground_height_m: float = 0.0
    """Height of the ground plane (Z) [m]; within 1000 m of the origin (the simulation's positions are float32)."""
    contact_gap_fraction: float = 0.01
    """Contact detection gap as a fraction of the character height."""
    speculative_gap_fraction: float = 0.2
    """Cap of the velocity-derived (speculative) contact gap as a fraction of the character height: bodies that
    close faster than the detection gap per step are still caught before they pass through each other."""
    penalty_stiffness_per_kg: float = 4.0e3
    """Penalty solvers only (Featherstone, XPBD ignores it): contact stiffness per kg of character mass [N/m/kg]."""

    def check(self) -> ContactConfig:
        """Returns the config; raises ValueError naming the first field out of range."""
        _check_fields(self, positive=("penalty_stiffness_per_kg",),
                      nonnegative=("friction", "contact_gap_fraction", "speculative_gap_fraction"),
                      fractions=("restitution",))  # fmt: skip
        if not abs(self.ground_height_m) <= MAX_COORDINATE_M:
            raise ValueError(
                f"ContactConfig.ground_height_m: must lie within {MAX_COORDINATE_M:g} m of the origin (the"
                f" simulation's positions are float32), got {self.ground_height_m}"
            )
        return self


DEFAULT_MAX_DT_S: dict[str, float] = {"steel": 1.0 / 120.0, "featherstone": 1e-4, "xpbd": 1.0 / 600.0}
"""Each solver's default largest physics step [s] (``SolverConfig.max_dt_s`` None). Steel integrates the drives
implicitly and runs at 1/120 s; XPBD at the field notes' 1/600 s; Featherstone's explicit PD, with damping sized
for the support load a leg carries, went NaN in the first frame of free fall at 1/120 s and at the field notes'
5e-4 s (the quadruped and a 0.5 m fox), and is stable at 1e-4 s."""


@dataclass
class SolverConfig:
    """The Newton solver and its time step."""

    solver: SolverName = "steel"
    """``steel`` (default: reduced coordinates, implicit PD drives, hard contacts with static-friction patches:
    stable at large steps with any gains; see design/physics_tracking.md), ``featherstone`` (explicit, penalty
    contact, needs small steps), ``xpbd`` (fast but compliant PD, tracks worst)."""
    max_dt_s: float | None = None
    """Largest physics step [s]; the number of substeps per motion frame is the smallest even count within it. At
    least 1e-6 s. None: the solver's own (:data:`DEFAULT_MAX_DT_S`; :meth:`step_limit_s`)."""
    iterations: int = 16
    """Constraint iterations per step (Steel PGS, XPBD)."""
    constraint_capacity: int = 384
    """Steel: constraint rows per world (contacts and joint limits)."""
    capture: bool = True
    """Record one frame's substeps as a Warp graph (CPU graph, or CUDA graph on a GPU) and replay it (10-30x fewer
    Python launches)."""
    device: str = "cpu"
    """Warp device of the simulation: ``cpu`` (default; one core, no GPU needed) or ``cuda`` / ``cuda:N``, where the
    projection's parallel rollout worlds run side by side on the GPU. Targets in, states out stay NumPy either way."""

    def step_limit_s(self) -> float:
        """The largest physics step [s]: ``max_dt_s``, or the solver's default (:data:`DEFAULT_MAX_DT_S`)."""
        return float(self.max_dt_s) if self.max_dt_s is not None else DEFAULT_MAX_DT_S[self.solver]

    def check(self) -> SolverConfig:
        """Returns the config; raises ValueError naming the first field out of range."""
        _check_fields(self, positive=("max_dt_s",), at_least_one=("iterations", "constraint_capacity"))
        for name in ("iterations", "constraint_capacity"):  # Newton takes int32: 2**32 + 16 ran as 16
            if getattr(self, name) > _INT32_MAX:
                raise ValueError(f"SolverConfig.{name}: must be at most {_INT32_MAX}, got {getattr(self, name)}")
        if self.max_dt_s is not None and self.max_dt_s < MIN_DT_S:
            raise ValueError(f"SolverConfig.max_dt_s: must be at least {MIN_DT_S:g} s, got {self.max_dt_s}")
        if not _DEVICE.fullmatch(self.device):
            raise ValueError(f"SolverConfig.device: must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        return self


@dataclass
class RootAssistConfig:
    """OPTIONAL residual root force ("invisible hand"): a PD force/torque on the root body towards the reference.

    Off by default. When on, every output reports the force it applied (``root_assist_*`` metrics), so a result
    that needed it is never mistaken for a purely joint-driven one.
    """

    enabled: bool = False
    """Apply the residual root wrench."""
    position_hz: float = 2.0
    """Natural frequency of the root position servo [Hz] (stiffness = total mass x (2 pi f)^2)."""
    rotation_hz: float = 2.0
    """Natural frequency of the root orientation servo [Hz] (scaled by the character's inertia)."""
    damping_ratio: float = 1.0
    """Damping ratio of both servos."""
    max_force_body_weights: float = 0.5
    """Clamp of the force magnitude in units of the character's weight (total mass x g)."""

    def check(self) -> RootAssistConfig:
        """Returns the config; raises ValueError naming the first field out of range."""
        _check_fields(self, positive=("position_hz", "rotation_hz"),
                      nonnegative=("damping_ratio", "max_force_body_weights"))  # fmt: skip
        return self


@dataclass
class TrackingConfig:
    """PD tracking of a reference motion in Newton."""

    solver: SolverConfig = field(default_factory=SolverConfig)
    contact: ContactConfig = field(default_factory=ContactConfig)
    root_assist: RootAssistConfig = field(default_factory=RootAssistConfig)
    velocity_targets: bool = True
    """Also drive joint velocities towards the reference's (joint_target_qd); otherwise towards zero."""
    fall_height_fraction: float = 0.5
    """Fallen: the root body drops below this fraction of its reference height (in [0, 1]; 0: never by
    height)..."""
    fall_tilt_deg: float = 60.0
    """...or its up axis tilts more than this from the reference's [deg], in (0, 180)."""
    blowup_speed_heights_per_s: float = 40.0
    """Blow-up: a point of a body's collider moves faster than this many character heights per second (runaway
    energy; linear and spin: |v_com| + |omega| * reach)."""
    blowup_distance_heights: float = 10.0
    """Blow-up: a body is farther than this many character heights from its reference position."""

    def check(self) -> TrackingConfig:
        """Returns the config (and its solver, contact and root-assist parts); raises ValueError naming the first
        field out of range."""
        _check_fields(self, positive=("fall_tilt_deg", "blowup_speed_heights_per_s", "blowup_distance_heights"),
                      fractions=("fall_height_fraction",))  # fmt: skip
        if self.fall_tilt_deg >= 180.0:  # a tilt is at most 180 deg: a fall was never detected
            raise ValueError(f"TrackingConfig.fall_tilt_deg: must be < 180 deg, got {self.fall_tilt_deg}")
        self.solver.check()
        self.contact.check()
        self.root_assist.check()
        return self


@dataclass
class ProjectionConfig:
    """Physics projection: optimize the PD target sequence so the simulated bodies follow the reference.

    Receding-horizon MPPI: in each window, ``samples`` perturbed target-offset sequences are rolled out in parallel
    Newton worlds (contacts included), weighted by ``exp(-(cost - min) / (temperature x spread))`` (spread: max - min of
    the iteration's finite costs inside Tukey's far fence, so that one sample that fell does not flatten the
    weights), averaged; the first ``commit_frames`` of the cheapest plan that does not blow up are kept, and
    the window slides on.
    """

    window_frames: int = 12
    """Planning horizon [motion frames]."""
    commit_frames: int = 4
    """Frames committed per window."""
    knot_interval_frames: int = 4
    """Target offsets are piecewise linear between knots this many frames apart."""
    samples: int = 24
    """Rollouts per iteration (parallel Newton worlds); sample 0 is always the current mean."""
    iterations: int = 6
    """MPPI updates per window."""
    sigma_deg: float = 4.0
    """Standard deviation of the target offset perturbations [deg]."""
    sigma_decay: float = 0.7
    """Sigma multiplier per iteration within a window."""
    temperature: float = 0.03
    """MPPI temperature relative to the cost spread of the iteration (smaller = greedier)."""
    max_offset_deg: float = 45.0
    """Clamp of the target offsets [deg]."""
    passes: int = 3
    """Sweeps over the clip; each starts from the previous sweep's plan (its windows' first rollout), and the
    sweep that tracked best among those that neither blew up nor fell is returned (the best fallen one when all
    fell, the best blown-up one when all blew up)."""
    pass_sigma_decay: float = 1.0
    """Sigma multiplier per sweep (later sweeps refine the previous plan more locally when < 1)."""
    ilc_passes: int = 2
    """Iterative-learning passes before MPPI: whole-clip PD runs whose joint-angle errors are added back to the
    targets (cheap first correction of gravity sag)."""
    ilc_gain: float = 0.7
    """Fraction of the joint-angle error fed back per ILC pass, in [0, 1] (a negative gain pushed the error the
    wrong way: 3x the error of no ILC on a biped walk)."""
    position_weight: float = 1.0
    """Cost weight of body position error (relative to the character height, squared)."""
    root_weight: float = 4.0
    """Extra cost weight of the root body's position error."""
    rotation_weight: float = 0.1
    """Cost weight of body orientation error [rad^2]."""
    velocity_weight: float = 0.01
    """Cost weight of body velocity error (in heights per second, squared)."""
    skate_weight: float = 0.0
    """Cost weight of the horizontal speed of ground-contact bodies' lowest points while they touch the ground
    (within 1% of the height), in heights per second, squared: planted feet stay planted."""
    self_penetration_weight: float = 10000.0
    """Cost weight of the capsule overlap of body pairs the simulation does not collide (they overlap in the
    reference pose: a thigh reaching into the pelvis) beyond their overlap in the reference at the same frame, in
    heights, squared: the planner keeps the limbs from sinking further into the body than the animation does. The
    default makes such overlap all but a hard limit: at 100 the Fox Run's thighs went 1.8-3.6 cm into its spine
    (four seeds), at 10000 0.5-0.7 cm, with the body error within the seeds' spread (design/physics_tracking.md)."""
    offset_weight: float = 0.002
    """Cost weight of the target offsets [rad^2] (keeps the plan close to the reference targets)."""
    seed: int = 0
    """Random seed (the projection is deterministic for a given seed)."""
    rollout_batches: int = 4
    """The rollout worlds are split into this many simulations that step in parallel CPU threads (at most one per
    world; one on CUDA). The split decides the last bits of every result (a world's contact solve is not bitwise
    independent of its batch), so it is a setting: results are the same on any machine. A whole projection on one
    core (24 worlds) takes 4-7% longer with 4 batches and 7-13% with 8 than with one; on two cores 4 batches run
    1.7x faster than one (benchmarks/bench_projection.py). More batches can use more cores."""
    threads: int = 0
    """CPU threads stepping the batches (0: one per available core; at most ``rollout_batches``). Speed only: the
    results do not depend on it."""

    def check(self) -> ProjectionConfig:
        """Returns the config; raises ValueError naming the first field out of range."""
        _check_fields(
            self,
            positive=("sigma_decay", "temperature", "pass_sigma_decay"),
            nonnegative=("sigma_deg", "max_offset_deg", "ilc_passes", "position_weight", "root_weight",
                         "rotation_weight", "velocity_weight", "skate_weight", "self_penetration_weight",
                         "offset_weight", "threads", "seed"),
            at_least_one=("window_frames", "commit_frames", "knot_interval_frames", "iterations", "passes",
                          "rollout_batches"),
            at_least_two=("samples",),
            fractions=("ilc_gain",),
        )  # fmt: skip
        return self


@dataclass
class ReferenceConfig:
    """How the kinematic input becomes the reference the character tracks."""

    root_motion: RootMotionMode = "auto"
    """``keep``: track the clip as it is; ``from_contacts``: give an in-place (treadmill) clip the root motion
    that keeps its stance feet planted; ``auto``: do so when the root travels less than a quarter of the feet's
    sliding distance."""
    root_velocity_smoothing_s: float = 0.05
    """Gaussian smoothing (standard deviation) of the root velocity extracted from contacts [s]."""
    centroid_velocity_smoothing_s: float = 0.0
    """When root motion was extracted from contacts: Gaussian smoothing (standard deviation) of the horizontal
    velocity of the points' centroid (centre of mass proxy) [s]; 0 keeps the contact-derived root."""
    ballistic_flight: bool = True
    """Make the vertical motion of flight phases (no point near the ground) a parabola under gravity."""
    ground: Literal["none", "clip", "per_frame"] = "per_frame"
    """Vertical grounding: ``clip`` shifts the whole clip so its lowest skinned vertex touches the ground;
    ``per_frame`` puts the lowest vertex of every stance frame on the ground (flight frames interpolated), so
    a clip that hovers or sinks between keys becomes one whose support really touches the ground."""
    fps: float | None = None
    """Resample to this frame rate [1/s]; None uses the clip's nominal rate (keyframed clips are resampled),
    capped at ``max_fps``."""
    max_fps: float = 30.0
    """With ``fps`` None, clips faster than this are resampled down to it [1/s]. The tracker's targets and the
    projection's windows and knots count frames, so 120 fps mocap made its planning horizon 4x shorter in time
    (CMU 131_01 at 120 fps fell after 1.4 s of projection, 23 min of CPU; at 30 fps it stays up)."""

    def check(self) -> ReferenceConfig:
        """Returns the config; raises ValueError naming the first field out of range."""
        _check_fields(self, positive=("fps", "max_fps"),
                      nonnegative=("root_velocity_smoothing_s", "centroid_velocity_smoothing_s"))  # fmt: skip
        return self
