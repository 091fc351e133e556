"""kinedistill.sim: rig and motion data model, differentiable kinematics and skinning in Warp, physics.

Importing ``sim`` loads NumPy and Warp only; torch is loaded by :mod:`sim.torch_ops` on first use.
"""

from .kinematics import RigArrays, forward_kinematics, pose_motion, skin, skin_motion
from .motion import Motion
from .rig import Rig, RigError, RigWarning, SkinnedMesh

__all__ = [
    "Motion",
    "Rig",
    "RigArrays",
    "RigError",
    "RigWarning",
    "SkinnedMesh",
    "forward_kinematics",
    "pose_motion",
    "skin",
    "skin_motion",
]
