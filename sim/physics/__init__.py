"""Physics: any rig as a Newton articulation, PD tracking with contact, AKD-style physics projection.

Typical use::

    ref = prepare_reference(rig, clip, ReferenceConfig(), loops=3, target_height_m=0.5)
    character = build_character(ref.rig, ref.motion, CharacterConfig())
    result = project(character, ref.motion)          # or track(character, ref.motion)
    # long runs: project(..., checkpoint=ProjectionCheckpoint("run/ckpt.npz", resume=True)) saves and resumes
    result.motion                                    # the physical motion on the (scaled) rig
    tracking_metrics(character, reference_trajectory(character, ref.motion), result, ref.kinematic_input)

Newton is imported on first simulation, not by ``import sim.physics``.
"""

from ._checkpoint import CheckpointError, ProjectionCheckpoint
from .character import GRAVITY, PhysicsCharacter, build_character, euler_xyz_to_quat, quat_to_euler_xyz
from .config import (
    CharacterConfig,
    ContactConfig,
    ProjectionConfig,
    ReferenceConfig,
    RootAssistConfig,
    SolverConfig,
    TrackingConfig,
)
from .feasibility import dynamic_feasibility
from .metrics import contact_summary, self_penetration, tracking_metrics
from .newton_model import (
    CharacterSimulation,
    ContactMaterial,
    build_newton_builder,
    build_newton_model,
    contact_material,
    substeps_for,
)
from .projection import project
from .reference import (
    PreparedReference,
    ballistic_flight,
    ground_offset,
    ground_offsets,
    loop_motion,
    prepare_reference,
    root_motion_from_contacts,
    scale_motion,
    scale_rig,
    smooth_centroid_velocity,
)
from .tracking import (
    BlowUp,
    ReferenceTrajectory,
    TargetFilter,
    TrackingResult,
    apply_target_filter,
    detect_blowup,
    detect_fall,
    reference_trajectory,
    track,
)

__all__ = [
    "GRAVITY",
    "BlowUp",
    "CharacterConfig",
    "CharacterSimulation",
    "CheckpointError",
    "ContactConfig",
    "ContactMaterial",
    "PhysicsCharacter",
    "PreparedReference",
    "ProjectionCheckpoint",
    "ProjectionConfig",
    "ReferenceConfig",
    "ReferenceTrajectory",
    "RootAssistConfig",
    "SolverConfig",
    "TargetFilter",
    "TrackingConfig",
    "TrackingResult",
    "apply_target_filter",
    "ballistic_flight",
    "build_character",
    "build_newton_builder",
    "build_newton_model",
    "contact_material",
    "contact_summary",
    "detect_blowup",
    "detect_fall",
    "dynamic_feasibility",
    "euler_xyz_to_quat",
    "ground_offset",
    "ground_offsets",
    "loop_motion",
    "prepare_reference",
    "project",
    "quat_to_euler_xyz",
    "reference_trajectory",
    "root_motion_from_contacts",
    "scale_motion",
    "scale_rig",
    "self_penetration",
    "smooth_centroid_velocity",
    "substeps_for",
    "track",
    "tracking_metrics",
]
