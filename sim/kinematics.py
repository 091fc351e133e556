"""Differentiable forward kinematics and linear blend skinning on Warp arrays.

Both ops are batched over poses (``N`` = frames x motions, flattened) and differentiable with ``wp.Tape``:
FK through Warp's generated adjoints (one launch per tree level), skinning through a hand-written adjoint
recorded on the active tape. Torch users go through :mod:`sim.torch_ops`; NumPy users through
:func:`pose_motion` and :func:`skin_motion`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import warp as wp

from . import _kinematics_kernels as K
from ._warp_setup import init_warp
from .motion import Motion
from .rig import Rig, RigError, SkinnedMesh

__all__ = ["RigArrays", "forward_kinematics", "pose_motion", "skin", "skin_motion"]

Precision = Literal["float32", "float64"]

_TYPES = {
    "float32": (np.float32, wp.float32, wp.vec3f, wp.quatf, wp.transformf, wp.mat33f),
    "float64": (np.float64, wp.float64, wp.vec3d, wp.quatd, wp.transformd, wp.mat33d),
}


def _type_name(x) -> str:
    """``package.Class`` of ``x`` (``sim.Rig``, ``usd_io.Asset``, ``numpy.ndarray``; builtins bare)."""
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__qualname__}"


def _require_rig(rig, name: str = "rig") -> None:
    """TypeError unless ``rig`` is a :class:`sim.Rig`, with a hint for the usual mix-ups (an asset, swapped
    arguments)."""
    if isinstance(rig, Rig):
        return
    hint = ""
    if isinstance(getattr(rig, "rig", None), Rig):
        hint = " (use asset.rig)"
    elif isinstance(rig, Motion):
        hint = " (the rig comes first, then the motion)"
    raise TypeError(f"{name}: expected sim.Rig, got {_type_name(rig)}{hint}")


def _require_motion(motion, name: str = "motion") -> None:
    """TypeError unless ``motion`` is a :class:`sim.Motion`."""
    if isinstance(motion, Motion):
        return
    hint = ""
    if callable(getattr(motion, "clip", None)):
        hint = " (use asset.clip(name))"
    elif isinstance(motion, Rig):
        hint = " (the rig comes first, then the motion)"
    raise TypeError(f"{name}: expected sim.Motion, got {_type_name(motion)}{hint}")


def _require_arrays(arrays) -> None:
    if not isinstance(arrays, RigArrays):
        raise TypeError(f"arrays: expected sim.RigArrays (built with RigArrays(rig, ...)), got {_type_name(arrays)}")


class RigArrays:
    """A rig's constant data on a Warp device, laid out for the FK and skinning kernels.

    Attributes:
        rig: the source rig.
        mesh: the skinned mesh, or None (FK only).
        device: Warp device name.
        precision: ``"float32"`` or ``"float64"``.
        joint_count, vertex_count, influence_count: sizes.
    """

    def __init__(
        self,
        rig: Rig,
        device: str | None = None,
        precision: Precision = "float32",
        mesh: SkinnedMesh | Literal["merged"] | None = "merged",
    ):
        """Uploads the rig.

        Args:
            rig: the rig.
            device: Warp device (default: Warp's default device).
            precision: scalar type of poses and outputs.
            mesh: the mesh to skin: ``"merged"`` (all of the rig's meshes), a given mesh, or None for FK only.
                A given mesh need not be one of ``rig.meshes`` (extra meshes bound to the same skeleton are
                fine), but its influence joint indices must lie in ``[0, rig.joint_count)``.

        Raises:
            TypeError: ``rig`` is not a :class:`sim.Rig` or ``mesh`` not a mesh, ``"merged"`` or None.
            RigError: the mesh's influence joint indices do not fit the rig (a mesh of another rig).
        """
        init_warp()
        _require_rig(rig)
        if precision not in _TYPES:
            raise ValueError(f"precision must be 'float32' or 'float64', got {precision!r}")
        self.rig = rig
        self.precision = precision
        self.device = str(wp.get_device(device))
        np_t, self.scalar, self.vec3, self.quat, self.transform, self.mat33 = _TYPES[precision]
        self.np_dtype = np_t
        self.joint_count = rig.joint_count
        self.parents = wp.array(rig.parents, dtype=wp.int32, device=self.device)
        depths = rig.depths()
        self.levels = [
            wp.array(np.flatnonzero(depths == d).astype(np.int32), dtype=wp.int32, device=self.device)
            for d in range(int(depths.max()) + 1)
        ]
        if isinstance(mesh, str):
            if mesh != "merged":
                raise ValueError(f"mesh must be a SkinnedMesh, 'merged' or None, got {mesh!r}")
            mesh = rig.merged_mesh() if rig.meshes else None
        elif mesh is not None and not isinstance(mesh, SkinnedMesh):
            raise TypeError(f"mesh: expected sim.SkinnedMesh, 'merged' or None, got {_type_name(mesh)}")
        if mesh is not None and mesh.influence_joints.size:
            lo, hi = int(mesh.influence_joints.min()), int(mesh.influence_joints.max())
            if lo < 0 or hi >= rig.joint_count:
                raise RigError(
                    f"mesh {mesh.name!r} influence_joints: joint index {hi if hi >= rig.joint_count else lo} out of "
                    f"range [0, {rig.joint_count}) of rig {rig.name!r} (is the mesh bound to another rig?)"
                )
        self.mesh = mesh
        if mesh is None:
            self.vertex_count = self.influence_count = 0
            return
        self.vertex_count, self.influence_count = mesh.vertex_count, mesh.influence_count
        ibm = rig.inverse_bind_matrices[mesh.influence_joints]  # (V, K, 4, 4)
        bind_pts = np.einsum("vkab,vb->vka", ibm[..., :3, :3], mesh.points) + ibm[..., :3, 3]
        # normals map by the inverse transpose of the bind transform's linear part (a non-uniform scale in an
        # inverse bind matrix would tilt them off the surface otherwise); the joint transforms are rigid
        bind_nrm = np.einsum("vkba,vb->vka", np.linalg.inv(ibm[..., :3, :3]), mesh.vertex_normals())
        bind_nrm /= np.maximum(np.linalg.norm(bind_nrm, axis=-1, keepdims=True), 1e-30)
        d = self.device
        self.joints = wp.array(mesh.influence_joints, dtype=wp.int32, device=d)
        self.weights = wp.array(mesh.influence_weights.astype(np_t), dtype=self.scalar, device=d)
        self.bind_points = wp.array(bind_pts.astype(np_t), dtype=self.vec3, device=d)
        self.bind_normals = wp.array(bind_nrm.astype(np_t), dtype=self.vec3, device=d)

    def local_translations(self, root_translations: np.ndarray, translations: np.ndarray | None = None) -> np.ndarray:
        """Per-pose local translations (N, J, 3): rest (or given) translations with the root's replaced."""
        root_translations = np.asarray(root_translations).reshape(-1, 3)
        if translations is None:
            t = np.broadcast_to(self.rig.rest_translations, (len(root_translations), self.joint_count, 3)).copy()
        else:
            t = np.array(translations, dtype=np.float64).reshape(-1, self.joint_count, 3)
        t[:, 0] = root_translations
        return t.astype(self.np_dtype)


def _check(name: str, arr: wp.array, dtype, shape: tuple[int | None, ...], device: str) -> None:
    if not isinstance(arr, wp.array):
        raise TypeError(f"{name}: expected a wp.array, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {dtype.__name__}, got {getattr(arr.dtype, '__name__', arr.dtype)}")
    if len(arr.shape) != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    if str(arr.device) != device:
        raise ValueError(f"{name}: on device {arr.device}, expected {device}")


def forward_kinematics(
    arrays: RigArrays,
    local_translations: wp.array,
    local_rotations: wp.array,
    world_out: wp.array | None = None,
) -> wp.array:
    """World (skeleton-space) joint transforms from local ones.

    Args:
        arrays: the rig on the device.
        local_translations: local joint translations [m] (the root's in skeleton space), shape (N, J), vec3.
        local_rotations: local joint rotations [unit quat xyzw], shape (N, J), quat.
        world_out: optional output, shape (N, J), transform; allocated (with gradient when an input has one)
            when None. Recording on a ``wp.Tape`` with inputs that have gradients, it must have one too.

    Returns:
        World transforms ``(p, q)`` per pose and joint, shape (N, J).
    """
    _require_arrays(arrays)
    J, dev = arrays.joint_count, arrays.device
    _check("local_translations", local_translations, arrays.vec3, (None, J), dev)
    n = local_translations.shape[0]
    _check("local_rotations", local_rotations, arrays.quat, (n, J), dev)
    if world_out is None:
        grad = local_translations.requires_grad or local_rotations.requires_grad
        world_out = wp.zeros((n, J), dtype=arrays.transform, device=dev, requires_grad=grad)
    _check("world_out", world_out, arrays.transform, (n, J), dev)
    recording = wp._src.context.runtime.tape is not None
    if recording and n and (local_translations.requires_grad or local_rotations.requires_grad):
        if not world_out.requires_grad:  # the tape would carry no gradient back: every input gradient stayed 0
            raise ValueError("world_out: needs a gradient array (requires_grad=True) when recording on a tape "
                             "with inputs that have gradients")  # fmt: skip
    for level in arrays.levels:
        wp.launch(
            K.fk_level_kernel,
            dim=(n, level.shape[0]),
            inputs=[level, arrays.parents, local_translations, local_rotations],
            outputs=[world_out],
            device=dev,
        )
    return world_out


def skin(
    arrays: RigArrays,
    world: wp.array,
    points_out: wp.array | None = None,
    normals_out: wp.array | None = None,
) -> tuple[wp.array, wp.array]:
    """Linear blend skinning of the rig's mesh points and normals.

    When a ``wp.Tape`` is active and ``world`` has a gradient, a hand-written adjoint is recorded so that
    ``tape.backward`` maps point and normal gradients to ``world.grad``.

    Args:
        arrays: the rig on the device (must have a mesh).
        world: world joint transforms from :func:`forward_kinematics`, shape (N, J).
        points_out, normals_out: optional outputs, shape (N, V), vec3.

    Returns:
        Skinned points [m] and unit normals, each shape (N, V), vec3. A vertex whose blended normal cancels
        (influences rotated half a turn apart with equal weights) gets a zero normal.
    """
    _require_arrays(arrays)
    if arrays.mesh is None:
        raise ValueError(f"rig {arrays.rig.name!r} has no skinned mesh to skin")
    J, V, dev = arrays.joint_count, arrays.vertex_count, arrays.device
    _check("world", world, arrays.transform, (None, J), dev)
    n = world.shape[0]
    grad = world.requires_grad
    if points_out is None:
        points_out = wp.zeros((n, V), dtype=arrays.vec3, device=dev, requires_grad=grad)
    if normals_out is None:
        normals_out = wp.zeros((n, V), dtype=arrays.vec3, device=dev, requires_grad=grad)
    _check("points_out", points_out, arrays.vec3, (n, V), dev)
    _check("normals_out", normals_out, arrays.vec3, (n, V), dev)
    consts = [arrays.joints, arrays.weights, arrays.bind_points, arrays.bind_normals]
    wp.launch(
        K.skin_kernel,
        dim=(n, V),
        inputs=[world, *consts],
        outputs=[points_out, normals_out],
        device=dev,
        record_tape=False,
    )
    tape = wp._src.context.runtime.tape
    if tape is not None and grad and n:  # an empty batch has nothing to differentiate (and no gradient arrays)
        if points_out.grad is None or normals_out.grad is None:
            raise ValueError("skin: outputs need gradient arrays when recording on a tape (requires_grad=True)")

        def backward():
            adj_rot = wp.zeros((n, J), dtype=arrays.mat33, device=dev)
            adj_trans = wp.zeros((n, J), dtype=arrays.vec3, device=dev)
            wp.launch(
                K.skin_adjoint_kernel,
                dim=(n, V),
                inputs=[world, *consts, points_out.grad, normals_out.grad],
                outputs=[adj_rot, adj_trans],
                device=dev,
            )
            wp.launch(
                K.transform_to_rt_kernel,
                dim=(n, J),
                inputs=[world],
                outputs=[wp.empty_like(adj_rot), wp.empty_like(adj_trans)],
                adj_inputs=[world.grad],
                adj_outputs=[adj_rot, adj_trans],
                adjoint=True,
                device=dev,
            )

        tape.record_func(backward, [world, points_out, normals_out])
    return points_out, normals_out


def _motion_arrays(arrays: RigArrays, motion: Motion) -> tuple[wp.array, wp.array]:
    _require_motion(motion)
    motion.check_rig(arrays.rig)
    t = arrays.local_translations(motion.root_translations, motion.translations)
    q = motion.rotations.astype(arrays.np_dtype)
    return (
        wp.array(t, dtype=arrays.vec3, device=arrays.device),
        wp.array(q, dtype=arrays.quat, device=arrays.device),
    )


def pose_motion(
    rig: Rig, motion: Motion, device: str | None = None, precision: Precision = "float64"
) -> tuple[np.ndarray, np.ndarray]:
    """World joint positions [m] (F, J, 3) and rotations [quat xyzw] (F, J, 4) of every frame of ``motion``.

    Raises:
        TypeError: ``rig`` is not a :class:`sim.Rig` or ``motion`` not a :class:`sim.Motion`.
        RigError: the motion does not fit the rig.
    """
    _require_rig(rig)
    _require_motion(motion)
    arrays = RigArrays(rig, device, precision, mesh=None)
    world = forward_kinematics(arrays, *_motion_arrays(arrays, motion)).numpy().astype(np.float64)
    return world[..., :3].copy(), world[..., 3:].copy()


def skin_motion(
    rig: Rig,
    motion: Motion,
    device: str | None = None,
    precision: Precision = "float64",
    mesh: SkinnedMesh | Literal["merged"] = "merged",
) -> tuple[np.ndarray, np.ndarray]:
    """Skinned points [m] and normals of the rig's (merged, or the given) mesh, each shape (F, V, 3).

    Raises:
        TypeError: ``rig`` is not a :class:`sim.Rig`, ``motion`` not a :class:`sim.Motion`, ``mesh`` not a mesh.
        RigError: the motion does not fit the rig, or the mesh's influence joints do not (see :class:`RigArrays`).
    """
    _require_rig(rig)
    _require_motion(motion)
    arrays = RigArrays(rig, device, precision, mesh=mesh)
    world = forward_kinematics(arrays, *_motion_arrays(arrays, motion))
    points, normals = skin(arrays, world)
    return points.numpy().astype(np.float64), normals.numpy().astype(np.float64)
