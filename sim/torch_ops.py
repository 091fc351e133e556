"""Torch bridge: forward kinematics and skinning as differentiable torch ops backed by the Warp kernels.

Importing this module imports torch. Typical use::

    trig = TorchRig(rig)                              # uploads the rig once per device / precision
    root = torch.zeros(F, 3, requires_grad=True)
    rest = torch.as_tensor(rig.rest_rotations, dtype=torch.float32)   # TorchRig's default precision
    rot6d = quat_to_rot6d(rest).expand(F, -1, -1).clone().requires_grad_()
    world = trig.forward_kinematics(root, rot6d_to_quat(rot6d))     # (F, J, 7): position, quat xyzw
    points, normals = trig.skin(world)                               # (F, V, 3) each
    loss(points).backward()

Shapes take any leading batch dimensions ``(...)``; they are flattened into Warp's pose dimension.
The rotation helpers here mirror :mod:`sim.rotations` (NumPy) for torch tensors.
"""

from __future__ import annotations

import torch
import warp as wp

from .kinematics import RigArrays, _require_rig, _type_name, forward_kinematics, skin
from .rig import Rig

__all__ = [
    "TorchRig",
    "axis_angle_to_quat",
    "matrix_to_rot6d",
    "quat_multiply",
    "quat_normalize",
    "quat_rotate",
    "quat_to_matrix",
    "quat_to_rot6d",
    "refuse_double_backward",
    "rot6d_to_matrix",
    "rot6d_to_quat",
]


# -- rotations (torch) ----------------------------------------------------------------------------------
def quat_normalize(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Unit quaternions, shape (..., 4)."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a * b`` [xyzw], shape (..., 4)."""
    ax, ay, az, aw = a.unbind(-1)
    bx, by, bz, bw = b.unbind(-1)
    return torch.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        dim=-1,
    )


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4)."""
    u, w = q[..., :3], q[..., 3:4]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices from quaternions (normalized first), (..., 4) -> (..., 3, 3)."""
    x, y, z, w = quat_normalize(q).unbind(-1)
    m = torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    )  # fmt: skip
    return m.reshape(*q.shape[:-1], 3, 3)


def _matrix_to_quat(m: torch.Tensor) -> torch.Tensor:
    """Quaternions [xyzw] from rotation matrices, differentiable, branch by the largest of (trace, diagonal)."""
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    # 4 q_i^2 candidates; pick the largest for stability
    cand = torch.stack([1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22, 1 + m00 + m11 + m22], -1)
    best = cand.argmax(-1, keepdim=True)
    s = 2.0 * torch.sqrt(cand.gather(-1, best).clamp_min(1e-12)).squeeze(-1)
    qs = [
        torch.stack([s / 4, (m[..., 0, 1] + m[..., 1, 0]) / s, (m[..., 0, 2] + m[..., 2, 0]) / s,
                     (m[..., 2, 1] - m[..., 1, 2]) / s], -1),
        torch.stack([(m[..., 0, 1] + m[..., 1, 0]) / s, s / 4, (m[..., 1, 2] + m[..., 2, 1]) / s,
                     (m[..., 0, 2] - m[..., 2, 0]) / s], -1),
        torch.stack([(m[..., 0, 2] + m[..., 2, 0]) / s, (m[..., 1, 2] + m[..., 2, 1]) / s, s / 4,
                     (m[..., 1, 0] - m[..., 0, 1]) / s], -1),
        torch.stack([(m[..., 2, 1] - m[..., 1, 2]) / s, (m[..., 0, 2] - m[..., 2, 0]) / s,
                     (m[..., 1, 0] - m[..., 0, 1]) / s, s / 4], -1),
    ]  # fmt: skip
    q = torch.stack(qs, -2).gather(-2, best[..., None].expand(*best.shape[:-1], 1, 4)).squeeze(-2)
    return torch.where(q[..., 3:4] < 0, -q, q)


def rot6d_to_matrix(d6: torch.Tensor) -> torch.Tensor:
    """Gram-Schmidt from the first two matrix columns, (..., 6) -> (..., 3, 3)."""
    a, b = d6[..., :3], d6[..., 3:]
    c0 = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    b = b - (c0 * b).sum(-1, keepdim=True) * c0
    c1 = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.stack([c0, c1, torch.cross(c0, c1, dim=-1)], dim=-1)


def matrix_to_rot6d(m: torch.Tensor) -> torch.Tensor:
    """First two columns, (..., 3, 3) -> (..., 6)."""
    return torch.cat([m[..., :, 0], m[..., :, 1]], dim=-1)


def rot6d_to_quat(d6: torch.Tensor) -> torch.Tensor:
    """Quaternions [xyzw] from 6D rotations, (..., 6) -> (..., 4)."""
    return _matrix_to_quat(rot6d_to_matrix(d6))


def quat_to_rot6d(q: torch.Tensor) -> torch.Tensor:
    """6D rotations from quaternions, (..., 4) -> (..., 6)."""
    return matrix_to_rot6d(quat_to_matrix(q))


def axis_angle_to_quat(aa: torch.Tensor) -> torch.Tensor:
    """Quaternions [xyzw] from rotation vectors [rad], (..., 3) -> (..., 4); smooth at zero."""
    angle_sq = (aa * aa).sum(-1, keepdim=True)
    angle = torch.sqrt(angle_sq.clamp_min(1e-24))
    small = angle_sq < 1e-12
    k = torch.where(small, 0.5 - angle_sq / 48.0, torch.sin(0.5 * angle) / angle)
    w = torch.where(small, 1.0 - angle_sq / 8.0, torch.cos(0.5 * angle))
    return torch.cat([aa * k, w], dim=-1)


# -- Warp-backed ops -----------------------------------------------------------------------------------
def _wp(t: torch.Tensor, dtype) -> wp.array:
    """A Warp view of a detached contiguous tensor, with a fresh gradient array."""
    return wp.from_torch(t.detach().contiguous(), dtype=dtype, requires_grad=True)


def _torch(a: wp.array) -> torch.Tensor:
    """A torch copy of a Warp array (on CPU ``wp.to_torch`` is a view of memory Warp may reuse)."""
    return wp.to_torch(a).clone()


def refuse_double_backward(op: str) -> None:
    """Raises inside a Warp-backed ``backward`` run with ``create_graph=True``: the Warp adjoint is not itself
    differentiable, so torch would treat the gradient as a constant and return wrong second derivatives silently."""
    if torch.is_grad_enabled():
        raise RuntimeError(
            f"second derivatives (create_graph=True, double backward) through the Warp {op} are not supported: "
            "its gradient would be treated as a constant"
        )


class _ForwardKinematics(torch.autograd.Function):
    @staticmethod
    def forward(ctx, arrays: RigArrays, local_t: torch.Tensor, local_q: torch.Tensor) -> torch.Tensor:
        lt, lq = _wp(local_t, arrays.vec3), _wp(local_q, arrays.quat)
        tape = wp.Tape()
        with tape:
            world = forward_kinematics(arrays, lt, lq)
        ctx.saved = (tape, lt, lq, world)
        ctx.save_for_backward(local_t, local_q)  # torch's in-place check: lt, lq are views of these tensors
        return _torch(world)

    @staticmethod
    def backward(ctx, grad_world: torch.Tensor):
        refuse_double_backward("forward kinematics")
        ctx.saved_tensors  # noqa: B018 -- raises if an input was modified in place since forward
        tape, lt, lq, world = ctx.saved
        if world.shape[0] == 0:  # an empty batch: Warp holds no gradient arrays of size 0
            return None, *(torch.zeros_like(t) for t in ctx.saved_tensors)
        tape.backward(grads={world: _wp(grad_world, world.dtype)})
        grads = _torch(lt.grad), _torch(lq.grad)
        tape.zero()
        return None, *grads


class _Skin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, arrays: RigArrays, world_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        world = _wp(world_t, arrays.transform)
        tape = wp.Tape()
        with tape:
            points, normals = skin(arrays, world)
        ctx.saved = (tape, world, points, normals)
        ctx.save_for_backward(world_t)  # torch's in-place check: the tape replays from a view of world_t
        return _torch(points), _torch(normals)

    @staticmethod
    def backward(ctx, grad_points: torch.Tensor | None, grad_normals: torch.Tensor | None):
        refuse_double_backward("skinning")
        ctx.saved_tensors  # noqa: B018 -- raises if world was modified in place since forward
        tape, world, points, normals = ctx.saved
        if world.shape[0] == 0:  # an empty batch: Warp holds no gradient arrays of size 0
            return None, torch.zeros_like(ctx.saved_tensors[0])
        grads = {}
        if grad_points is not None:
            grads[points] = _wp(grad_points, points.dtype)
        if grad_normals is not None:
            grads[normals] = _wp(grad_normals, normals.dtype)
        tape.backward(grads=grads)
        out = _torch(world.grad)
        tape.zero()
        return None, out


def _same_device(a: torch.device, b: torch.device) -> bool:
    """Device equality that treats ``cpu`` and ``cpu:0`` (as accelerate hands out) as the same device (CUDA devices
    compare with their index: tensors carry one, and :class:`TorchRig` resolves a bare ``cuda`` to one)."""
    if a.type == "cpu" or b.type == "cpu":
        return a.type == b.type
    return a == b


def _indexed(device: torch.device) -> torch.device:
    """``cuda`` -> ``cuda:<current>``; other devices unchanged."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


class TorchRig:
    """A rig prepared for differentiable torch FK and skinning on one device and precision.

    Attributes:
        rig: the source rig.
        arrays: the Warp-side data.
        rest_translations: [m], shape (J, 3), torch.
        rest_rotations: [quat xyzw], shape (J, 4), torch.
    """

    def __init__(self, rig: Rig, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32):
        """Uploads the rig.

        Args:
            rig: the rig (a :class:`sim.Rig`; for a loaded asset pass ``asset.rig``).
            device: torch device of the inputs and outputs.
            dtype: ``torch.float32`` or ``torch.float64``.

        Raises:
            TypeError: ``rig`` is not a :class:`sim.Rig`.
            ValueError: on another dtype.
        """
        _require_rig(rig)
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.rig = rig
        self.device = _indexed(torch.device(device))  # "cuda" -> "cuda:N": tensors report their index
        if self.device.type == "cpu":
            self.device = torch.device("cpu")
        self.dtype = dtype
        wp_device = "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index or 0}"
        self.arrays = RigArrays(rig, wp_device, "float32" if dtype == torch.float32 else "float64")
        self.rest_translations = torch.as_tensor(rig.rest_translations, dtype=dtype, device=self.device)
        self.rest_rotations = torch.as_tensor(rig.rest_rotations, dtype=dtype, device=self.device)

    @property
    def joint_count(self) -> int:
        return self.rig.joint_count

    @property
    def vertex_count(self) -> int:
        return self.arrays.vertex_count

    def _check(self, name: str, x: torch.Tensor, tail: tuple[int, ...]) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"{name}: expected a torch.Tensor of shape (..., {', '.join(map(str, tail))}) ({self.dtype} on "
                f"{self.device}), got {_type_name(x)} (convert with torch.as_tensor(x, dtype=..., device=...))"
            )
        if x.shape[x.dim() - len(tail) :] != tail:
            raise ValueError(f"{name}: expected shape (..., {', '.join(map(str, tail))}), got {tuple(x.shape)}")
        if x.dtype != self.dtype or not _same_device(x.device, self.device):
            raise ValueError(f"{name}: expected {self.dtype} on {self.device}, got {x.dtype} on {x.device}")

    def forward_kinematics(
        self,
        root_translation: torch.Tensor,
        rotations: torch.Tensor,
        translations: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """World joint transforms.

        Args:
            root_translation: root position in skeleton space [m], shape (..., 3).
            rotations: local joint rotations [quat xyzw, normalized here], shape (..., J, 4). A zero quaternion
                is not refused (that would synchronise on the values): its joint and subtree come out NaN (and so
                does a loss of them), where a zero rotation used to mirror the subtree through the joint.
            translations: optional local translations of the non-root joints [m], shape (..., J, 3)
                (the root column is ignored); rest translations when None.

        Returns:
            World transforms, shape (..., J, 7): position [m] then rotation [quat xyzw].

        Raises:
            TypeError: an input is not a torch.Tensor.
            ValueError: on a wrong shape, dtype or device.
        """
        J = self.joint_count
        self._check("rotations", rotations, (J, 4))
        batch = rotations.shape[:-2]
        self._check("root_translation", root_translation, (3,))
        if root_translation.shape[:-1] != batch:
            raise ValueError(f"root_translation: batch shape {tuple(root_translation.shape[:-1])} != {tuple(batch)}")
        if translations is None:
            rest = self.rest_translations[1:].expand(*batch, J - 1, 3)
        else:
            self._check("translations", translations, (J, 3))
            if translations.shape[:-2] != batch:
                raise ValueError(f"translations: batch shape {tuple(translations.shape[:-2])} != {tuple(batch)}")
            rest = translations[..., 1:, :]
        local_t = torch.cat([root_translation[..., None, :], rest], dim=-2).reshape(-1, J, 3)
        local_q = (rotations / rotations.norm(dim=-1, keepdim=True)).reshape(-1, J, 4)  # zero -> NaN, not garbage
        world = _ForwardKinematics.apply(self.arrays, local_t, local_q)
        return world.reshape(*batch, J, 7)

    def skin(self, world: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Skinned mesh points [m] and unit normals from world transforms (..., J, 7); each (..., V, 3).

        Raises:
            TypeError: ``world`` is not a torch.Tensor.
            ValueError: on a wrong shape, dtype or device, or a rig without a mesh.
        """
        self._check("world", world, (self.joint_count, 7))
        batch = world.shape[:-2]
        points, normals = _Skin.apply(self.arrays, world.reshape(-1, self.joint_count, 7))
        V = self.arrays.vertex_count
        return points.reshape(*batch, V, 3), normals.reshape(*batch, V, 3)

    def rest_rotations_6d(self) -> torch.Tensor:
        """Rest rotations as 6D vectors, shape (J, 6)."""
        return quat_to_rot6d(self.rest_rotations)
