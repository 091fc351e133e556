"""kinedistill.posespace: ViPS-style pose spaces for any rig.

A diffusion model over per-joint rotations (6D, in canonical bone frames) for any skeleton: a transformer over
joint tokens with attention biased by skeletal graph distance, conditioned on per-joint features including the
skinned region each bone drives. Differentiable validators on the skinned body (hyperextension, bone twist,
self-intersection; Warp kernels) serve as training loss and sampling guidance. Uses: sample, project, IK,
interpolate, a target filter for the physics controller, and a pose prior for trajectory optimization. See
``design/posespace.md``.

Importing ``posespace`` imports torch and Warp (not pxr).
"""

from .body import BodyConfig, BodyModel
from .data import (
    AugmentConfig,
    ClipSpec,
    PoseBatch,
    PoseBatchSampler,
    PoseSet,
    RigPoses,
    collate_poses,
    data_scale,
    load_clips,
    parse_clip_spec,
)
from .diffusion import Conditioning, DiffusionConfig, GaussianDiffusion
from .evaluation import (
    EvalConfig,
    end_effectors,
    evaluate,
    evaluate_rig,
    evaluate_zero_shot,
    exact_self_intersection,
    heldout_clips_in_training,
)
from .metrics import apd, joint_positions, pose_features, prdc, slerp_path
from .model import ModelConfig, PoseDenoiser
from .pose_rig import FEATURE_COUNT, IDENTITY_6D, PoseRig
from .retarget import HumanoidMap, humanoid_map, retarget_motion
from .skeleton import CharacterFrame, canonical_frames, graph_distances, joint_active_mask, rig_signature
from .space import CHECKPOINT_FORMAT, PoseSpace, SamplingConfig
from .training import DEFAULT_HELDOUT, DEFAULT_TRAIN_DATA, TrainConfig, train
from .validators import (
    VALIDATOR_NAMES,
    JointLimits,
    PoseValidators,
    RigCalibration,
    ValidatorConfig,
    ValidityReport,
    calibrate,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "DEFAULT_HELDOUT",
    "DEFAULT_TRAIN_DATA",
    "FEATURE_COUNT",
    "IDENTITY_6D",
    "VALIDATOR_NAMES",
    "AugmentConfig",
    "BodyConfig",
    "BodyModel",
    "CharacterFrame",
    "ClipSpec",
    "Conditioning",
    "DiffusionConfig",
    "EvalConfig",
    "GaussianDiffusion",
    "HumanoidMap",
    "JointLimits",
    "ModelConfig",
    "PoseBatch",
    "PoseBatchSampler",
    "PoseDenoiser",
    "PoseRig",
    "PoseSet",
    "PoseSpace",
    "PoseValidators",
    "RigCalibration",
    "RigPoses",
    "SamplingConfig",
    "TrainConfig",
    "ValidatorConfig",
    "ValidityReport",
    "apd",
    "calibrate",
    "canonical_frames",
    "collate_poses",
    "data_scale",
    "end_effectors",
    "evaluate",
    "evaluate_rig",
    "evaluate_zero_shot",
    "exact_self_intersection",
    "graph_distances",
    "heldout_clips_in_training",
    "humanoid_map",
    "joint_active_mask",
    "joint_positions",
    "load_clips",
    "parse_clip_spec",
    "pose_features",
    "prdc",
    "retarget_motion",
    "rig_signature",
    "slerp_path",
    "train",
]
