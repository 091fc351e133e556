"""Differentiable pose validators on the skinned body, in Warp: hyperextension, bone twist, self-intersection.

* ``hyperextension``: each joint's swing (direction-dependent limit, so a knee may bend forward but not
  backward) and twist about its bone, against per-joint limits estimated from data (:meth:`JointLimits.fit`)
  or given (:meth:`JointLimits.default` for skeletons never seen).
* ``bone_twist``: linear-blend-skinning collapse of blended regions (see :mod:`posespace.body`): a pose fails
  when a blend region keeps less than ``collapse_ratio`` of its thickness.
* ``self_intersection``: penetration of the collision spheres of non-adjacent parts (not parent/child, not
  sharing a skin triangle, apart in the rest pose) beyond each part pair's allowance (zero unless the pair's
  proxies overlap routinely in the calibration data, then the depth that ``exclusion_rate`` of those poses
  exceed); the overlaps come from
  :func:`sim.collision.capsule_penetration_penalty` (spheres are degenerate capsules).

Every measure is a differentiable function of the 6D pose (Warp kernels behind torch autograd, FK and
skinning through :class:`sim.torch_ops.TorchRig`), so :meth:`PoseValidators.loss` serves as a training loss and
as sampling guidance. :func:`calibrate` fits limits and pair allowances so that real motion passes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import warp as wp

from ._checks import check_fraction, check_int, check_number
from ._rotations import swing_twist_x
from ._validator_kernels import joint_limit_kernel, twist_collapse_kernel
from ._warp_ops import sphere_penetration, warp_device, warp_op
from .pose_rig import PoseRig

__all__ = [
    "VALIDATOR_NAMES",
    "JointLimits",
    "PoseValidators",
    "RigCalibration",
    "ValidatorConfig",
    "ValidityReport",
    "calibrate",
]

VALIDATOR_NAMES = ("hyperextension", "bone_twist", "self_intersection")


@dataclass(frozen=True)
class ValidatorConfig:
    """Thresholds of the validators and how limits are estimated."""

    swing_planes: int = 32
    """Half-planes bounding a joint's swing region (a polygon with evenly spaced edge normals)."""
    limit_scale: float = 1.5
    """Data-estimated limits are scaled by this ..."""
    limit_margin_deg: float = 15.0
    """... and widened by this [deg]."""
    min_swing_deg: float = 12.0
    """Smallest swing limit in any direction [deg] (also the half-width of the twist range)."""
    prior_swing_deg: float = 90.0
    """Swing every data-fitted joint may reach in any direction except behind a one-sided joint [deg]."""
    prior_twist_deg: float = 25.0
    """Twist every data-fitted joint may reach either way [deg]."""
    hinge_min_mean_deg: float = 10.0
    """A joint is one-sided (hinge-like) when its mean swing is at least this [deg] ..."""
    hinge_back_ratio: float = 0.25
    """... and it bends against its mean direction less than this share of its seen range along it (the range, not
    the forward reach: a joint bent at rest, like the Fox's hind knee, straightens by part of its range and would
    never count as one-sided against its reach from rest)."""
    hinge_half_angle_deg: float = 60.0
    """Limit half-planes facing within this angle of the backward direction get no prior [deg]."""
    static_deg: float = 1.0
    """A joint whose swing and twist vary by less than this over the data is static (a CMU hip, collar or hand joint
    the capture never moves) [deg] ..."""
    static_limit_deg: float = 30.0
    """... it gets no prior: its twist stays within this of its seen twist, and its swing within this beyond the
    seen swing's support along each swing plane, a support that always includes the rest pose (a joint held bent
    at 50 deg may swing back through rest to 30 deg the other way) [deg]. An unmeasured joint may still flex: IK
    bends a capture's fixed hand joint ~19 deg to meet finger and thumb handles."""
    default_swing_deg: float = 120.0
    """Swing limit of joints without data [deg]."""
    default_twist_deg: float = 75.0
    """Twist half-range of joints without data [deg]."""
    limit_tolerance_deg: float = 0.5
    """Excess over a limit that still passes [deg]."""
    collapse_ratio: float = 0.5
    """Bone twist fails when a blend region keeps less than this share of its thickness."""
    penetration_tolerance: float = 0.015
    """Self-intersection fails above this sphere penetration [fraction of rig height]."""
    rest_gap: float = 0.005
    """Sphere pairs closer than this in the rest pose are never tested [fraction of rig height]."""
    exclusion_rate: float = 0.01
    """Part pairs that collide in more than this share of calibration poses overlap routinely (proxy artefacts,
    e.g. a crouching quadruped's thigh and belly): they are tested beyond an allowance, the penetration depth
    that this share of the calibration poses exceeds (the name is historical: such pairs used to be excluded)."""
    pool_mirror: bool = True
    """Calibrate symmetric rigs on the poses and their left/right mirror images (a left knee's range is a right
    knee's)."""
    loss_margin_deg: float = 4.0
    """The loss (training and guidance) keeps joints this far inside their limits [deg]."""
    loss_weights: tuple[float, float, float] = (1.0, 1.0, 4.0)
    """Weights of the hyperextension [rad^2], bone-twist [ratio^2] and penetration [(m/h)^2] loss terms."""

    def check(self) -> ValidatorConfig:
        """Returns self when every setting is in range (training and checkpoint loading call this); ValueError
        naming the field otherwise."""
        check_int("ValidatorConfig.swing_planes", self.swing_planes, 3)  # fewer half-planes bound no polygon
        check_number("ValidatorConfig.limit_scale", self.limit_scale, 0.0, strict=True)
        for name in ("limit_margin_deg", "min_swing_deg", "prior_swing_deg", "prior_twist_deg", "hinge_min_mean_deg",
                     "hinge_back_ratio", "static_deg", "static_limit_deg", "default_swing_deg", "default_twist_deg",
                     "limit_tolerance_deg", "penetration_tolerance", "rest_gap", "loss_margin_deg"):  # fmt: skip
            check_number(f"ValidatorConfig.{name}", getattr(self, name), 0.0)
        if check_number("ValidatorConfig.hinge_half_angle_deg", self.hinge_half_angle_deg, 0.0) > 180.0:
            raise ValueError(f"ValidatorConfig.hinge_half_angle_deg: must be an angle in [0, 180] deg, got "
                             f"{self.hinge_half_angle_deg!r}")  # fmt: skip
        check_fraction("ValidatorConfig.collapse_ratio", self.collapse_ratio)
        check_fraction("ValidatorConfig.exclusion_rate", self.exclusion_rate)
        if not isinstance(self.pool_mirror, bool):
            raise ValueError(f"ValidatorConfig.pool_mirror: must be True or False, got {self.pool_mirror!r}")
        w = self.loss_weights
        if not isinstance(w, (tuple, list)) or len(w) != 3:
            raise ValueError(f"ValidatorConfig.loss_weights: must be three numbers, got {w!r}")
        for i, x in enumerate(w):
            check_number(f"ValidatorConfig.loss_weights[{i}]", x, 0.0)
        return self


@dataclass
class JointLimits:
    """Per-joint swing and twist limits in canonical bone frames.

    Attributes:
        swing: support of the swing polygon per joint and half-plane [rad], shape (J, K): the swing vector ``s``
            must satisfy ``n_k . s <= swing[j, k]`` with ``n_k`` from :func:`plane_normals`.
        twist_lo, twist_hi: twist range [rad], shape (J,) each.
        weight: 1 for limited joints, 0 for free ones (inactive), shape (J,).
        source: ``"data"``, ``"default"`` or ``"given"``.
    """

    swing: np.ndarray
    twist_lo: np.ndarray
    twist_hi: np.ndarray
    weight: np.ndarray
    source: str = "given"

    @classmethod
    def default(cls, pose_rig: PoseRig, config: ValidatorConfig | None = None) -> JointLimits:
        """Generic limits for a skeleton without data (swing ``default_swing_deg``, twist +-``default_twist_deg``)."""
        cfg = config or ValidatorConfig()
        J = pose_rig.joint_count
        swing = np.full((J, cfg.swing_planes), np.radians(cfg.default_swing_deg))
        tw = np.full(J, np.radians(cfg.default_twist_deg))
        return cls(swing, -tw, tw, pose_rig.active.astype(np.float64), "default")

    @classmethod
    def fit(cls, pose_rig: PoseRig, d: np.ndarray, config: ValidatorConfig | None = None) -> JointLimits:
        """Limits from canonical pose quaternions ``d`` (N, J, 4) of real motion, with scale and margin.

        Swing: the polygon with ``swing_planes`` evenly spaced edge normals that tightly contains the seen swing
        vectors and the rest pose (their support function), scaled by ``limit_scale`` and moved out by
        ``limit_margin_deg``, at least ``min_swing_deg``, and at least ``prior_swing_deg`` except behind
        one-sided joints: a knee that (nearly) only bends one way from rest in the data may bend that way freely
        but backwards only by its scaled seen reach plus the margin (one-sided: bending back by less than
        ``hinge_back_ratio`` of its seen range along its mean direction). Twist: the seen range scaled and widened
        the same way, at least ``prior_twist_deg`` either way. Static joints (varying less than ``static_deg`` in
        the data) get neither prior nor scale: the seen swing's support plus ``static_limit_deg``, the seen twist
        range widened by ``static_limit_deg``. With ``limit_scale >= 1`` every pose of ``d`` lies inside; a smaller
        scale may cut into the seen range (then part of the calibration poses fail).

        Raises:
            ValueError: ``d`` holds no poses (there is no range to fit).
        """
        cfg = config or ValidatorConfig()
        J = pose_rig.joint_count
        d = np.asarray(d)
        if d.shape[-2:] != (J, 4) or d.size == 0:
            raise ValueError(f"d: joint limits are fitted to canonical pose quaternions of shape (N, {J}, 4) with "
                             f"N >= 1, got {d.shape}")  # fmt: skip
        swing_v, twist = swing_twist_x(d.reshape(-1, J, 4))
        margin, floor = np.radians(cfg.limit_margin_deg), np.radians(cfg.min_swing_deg)
        normals = plane_normals(cfg.swing_planes)
        support = np.maximum(np.einsum("njc,kc->njk", swing_v, normals).max(axis=0), 0.0)  # (J, K)
        # one-sided joints (bending one way from rest, like a knee or an elbow) get no prior behind them: bending
        # them backwards is hyperextension
        mean = swing_v.mean(axis=0)  # (J, 2)
        mean_len = np.linalg.norm(mean, axis=-1)
        direction = mean / np.maximum(mean_len, 1e-12)[:, None]
        along = np.einsum("njc,jc->nj", swing_v, direction)
        reach_fwd, reach_back = along.max(axis=0), np.maximum(-along.min(axis=0), 0.0)
        seen_range = reach_fwd + reach_back
        hinge = (mean_len > np.radians(cfg.hinge_min_mean_deg)) & (reach_back < cfg.hinge_back_ratio * seen_range)
        behind = normals @ direction.T < -np.cos(np.radians(cfg.hinge_half_angle_deg))  # (K, J)
        prior = np.where(hinge[:, None] & behind.T, 0.0, np.radians(cfg.prior_swing_deg))
        swing = np.maximum(np.maximum(support * cfg.limit_scale + margin, prior), floor)
        tw_hi, tw_lo = twist.max(axis=0), twist.min(axis=0)
        hi = np.maximum(np.maximum(tw_hi * cfg.limit_scale + margin, floor), np.radians(cfg.prior_twist_deg))
        lo = np.minimum(np.minimum(tw_lo * cfg.limit_scale - margin, -floor), -np.radians(cfg.prior_twist_deg))
        # static joints: the data never moves them (only the polygon of a point: its swing's spread is 0)
        spread = np.linalg.norm(swing_v.max(axis=0) - swing_v.min(axis=0), axis=-1)  # (J,)
        static = (spread < np.radians(cfg.static_deg)) & (tw_hi - tw_lo < np.radians(cfg.static_deg))
        hold = np.radians(cfg.static_limit_deg)
        swing[static] = support[static] + hold
        hi[static], lo[static] = tw_hi[static] + hold, tw_lo[static] - hold
        out = cls(swing, lo, hi, pose_rig.active.astype(np.float64), "data")
        out.hinge = hinge & ~static
        out.static = static
        return out

    def check(self, joint_count: int | None = None) -> JointLimits:
        """Returns self when the arrays have consistent shapes (``swing`` (J, K) with K >= 3, the others (J,)),
        ``J = joint_count`` when given, and finite values; ValueError naming the field and the expected shape
        otherwise (a limit table of another skeleton would be read out of bounds by the kernel)."""
        swing = np.asarray(self.swing)
        J = swing.shape[0] if swing.ndim == 2 else None
        if joint_count is not None:
            J = int(joint_count)
        expect = "J" if J is None else str(J)
        if swing.ndim != 2 or swing.shape[0] != J or swing.shape[1] < 3:
            raise ValueError(f"JointLimits.swing: must have shape ({expect}, K) with K >= 3 half-planes, got "
                             f"{swing.shape}")  # fmt: skip
        for name in ("swing", "twist_lo", "twist_hi", "weight"):
            v = getattr(self, name)
            if name != "swing" and np.shape(v) != (J,):
                raise ValueError(f"JointLimits.{name}: must have shape ({J},), got {np.shape(v)}")
            if not np.issubdtype(np.asarray(v).dtype, np.number) or not np.isfinite(v).all():
                raise ValueError(f"JointLimits.{name}: must hold finite numbers")
        return self

    def to_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> JointLimits:
        """The limits of :meth:`to_dict`'s form, checked (:meth:`check`)."""
        return cls(**{k: (np.asarray(v, dtype=np.float64) if k != "source" else v) for k, v in data.items()}).check()


def plane_normals(count: int) -> np.ndarray:
    """Unit normals of the swing-limit half-planes, evenly spaced, shape (count, 2)."""
    angles = 2 * np.pi * np.arange(count) / count
    return np.stack([np.cos(angles), np.sin(angles)], axis=-1)


@dataclass
class RigCalibration:
    """What :func:`calibrate` learned about one skeleton (stored in checkpoints by skeleton signature).

    Attributes:
        limits: joint limits.
        excluded_parts: part (joint) pairs not tested for self-intersection, as sorted ``(a, b)`` tuples. Only
            calibrations written before pair allowances existed hold any (:func:`calibrate` now gives such pairs
            an allowance instead); they load and act as they did.
        part_allowances: extra penetration allowed to a part pair before the tolerance applies [fraction of rig
            height], by sorted ``(a, b)`` joint pair: pairs whose proxies overlap routinely in the calibration
            poses (:func:`calibrate`). A pair's self-intersection measure is its depth minus its allowance.
        pass_rates: share of the calibration poses passing each validator and all of them.
    """

    limits: JointLimits
    excluded_parts: list[tuple[int, int]] = field(default_factory=list)
    part_allowances: dict[tuple[int, int], float] = field(default_factory=dict)
    pass_rates: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        # pair keys are sorted (a < b): a reversed pair would match no tested sphere pair and exclude nothing
        self.excluded_parts = [tuple(sorted((int(a), int(b)))) for a, b in self.excluded_parts]
        allowances: dict[tuple[int, int], float] = {}
        for (a, b), v in self.part_allowances.items():
            k = tuple(sorted((int(a), int(b))))
            allowances[k] = max(float(v), allowances.get(k, float(v)))
        self.part_allowances = allowances

    def to_dict(self) -> dict:
        return {
            "limits": self.limits.to_dict(),
            "excluded_parts": [list(map(int, p)) for p in self.excluded_parts],
            "part_allowances": [[int(a), int(b), float(v)] for (a, b), v in sorted(self.part_allowances.items())],
            "pass_rates": dict(self.pass_rates),
        }

    def excluded_part_names(self, joint_names: list[str]) -> list[tuple[str, str]]:
        """The excluded part pairs by joint name, sorted: pairs the self-intersection validator does not test (only
        in calibrations written before pair allowances; a known limit: a real intersection of such a pair is not
        seen). Each pair's names are in alphabetical order."""
        return sorted(tuple(sorted((joint_names[a], joint_names[b]))) for a, b in self.excluded_parts)

    def allowance_names(self, joint_names: list[str]) -> list[tuple[str, str, float]]:
        """The part pairs tested beyond an allowance, by joint name with the allowance [fraction of rig height],
        sorted by name."""
        return sorted((joint_names[a], joint_names[b], float(v)) for (a, b), v in self.part_allowances.items())

    @classmethod
    def from_dict(cls, data: dict) -> RigCalibration:
        return cls(
            JointLimits.from_dict(data["limits"]),
            [(a, b) for a, b in data.get("excluded_parts", [])],  # keys sorted by __post_init__
            {(a, b): v for a, b, v in data.get("part_allowances", [])},
            dict(data.get("pass_rates", {})),
        )


@dataclass
class ValidityReport:
    """Validator measures of a batch of poses (NumPy arrays of shape (N,)).

    Attributes:
        hyperextension: worst swing or twist excess over a limit [rad].
        bone_twist: smallest blend-region thickness ratio [unitless, 1 = intact].
        self_intersection: deepest sphere penetration beyond its pair's allowance [fraction of rig height].
        passed: per validator, bool arrays.
        valid: all validators pass.
    """

    hyperextension: np.ndarray
    bone_twist: np.ndarray
    self_intersection: np.ndarray
    passed: dict[str, np.ndarray]
    valid: np.ndarray

    def rates(self) -> dict[str, float]:
        """Pass rate of each validator and of all together."""
        out = {k: float(v.mean()) if v.size else 1.0 for k, v in self.passed.items()}
        out["valid"] = float(self.valid.mean()) if self.valid.size else 1.0
        return out


class PoseValidators:
    """The three validators of one rig, as differentiable torch functions of 6D poses (module docstring).

    Args:
        pose_rig: the rig.
        calibration: limits and pair allowances (``None``: default limits, rest-pose exclusions only).
        config: thresholds.
        device, dtype: where the poses live.
    """

    def __init__(
        self,
        pose_rig: PoseRig,
        calibration: RigCalibration | None = None,
        config: ValidatorConfig | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ):
        from sim.torch_ops import TorchRig

        self.config = cfg = config or ValidatorConfig()
        self.pose_rig = pose_rig
        self.calibration = calibration or RigCalibration(JointLimits.default(pose_rig, cfg))
        self.calibration.limits.check(pose_rig.joint_count)
        device = torch.device(device)
        # torch tensors report plain "cpu"; accelerate may hand out "cpu:0", which TorchRig would reject
        self.device, self.dtype = (torch.device("cpu") if device.type == "cpu" else device), dtype
        body = pose_rig.body
        self.torch_rig = TorchRig(body.sphere_rig(pose_rig.rig), self.device, dtype)
        self.candidate_pairs = self._candidate_pairs()
        excluded = set(self.calibration.excluded_parts)  # sorted pairs (RigCalibration.__post_init__)
        sj = body.sphere_joint
        keep = [k for k, (a, b) in enumerate(self.candidate_pairs) if (sj[a], sj[b]) not in excluded]
        self.pairs = self.candidate_pairs[keep]
        allow = self.calibration.part_allowances
        self.pair_allowance = np.array([allow.get((int(sj[a]), int(sj[b])), 0.0) for a, b in self.pairs],
                                       dtype=np.float64)  # fmt: skip
        """Allowance of each tested sphere pair [fraction of rig height], shape (P,)."""
        self._upload()

    def _candidate_pairs(self) -> np.ndarray:
        """Sphere pairs of non-adjacent parts that are apart in the bind pose (the mesh's pose), shape (P, 2).

        Parts are adjacent when their joints are parent and child or their skin regions share a triangle.
        """
        body, cfg = self.pose_rig.body, self.config
        sj, c, r = body.sphere_joint, body.sphere_center, body.sphere_radius
        a, b = np.triu_indices(len(sj), k=1)
        far = self.pose_rig.distances[sj[a], sj[b]] >= 2
        lo, hi = np.minimum(sj[a], sj[b]), np.maximum(sj[a], sj[b])
        far &= np.array([(int(x), int(y)) not in body.touching for x, y in zip(lo, hi)], dtype=bool)
        gap = np.linalg.norm(c[a] - c[b], axis=-1) - r[a] - r[b]
        apart = gap > cfg.rest_gap * self.pose_rig.height
        keep = far & apart
        pairs = np.stack([a[keep], b[keep]], axis=-1).astype(np.int32)
        # part pair keys sorted (a < b) for the exclusion lists
        swap = sj[pairs[:, 0]] > sj[pairs[:, 1]]
        pairs[swap] = pairs[swap][:, ::-1]
        return pairs.reshape(-1, 2)

    def _upload(self) -> None:
        cal, body, pr = self.calibration, self.pose_rig.body, self.pose_rig
        dev = warp_device(self.device)
        np_t = np.float32 if self.dtype == torch.float32 else np.float64
        scalar = wp.float32 if self.dtype == torch.float32 else wp.float64
        vec3 = wp.vec3f if self.dtype == torch.float32 else wp.vec3d
        quat = wp.quatf if self.dtype == torch.float32 else wp.quatd
        self._scalar, self._vec3, self._quat = scalar, vec3, quat
        self._transform = wp.transformf if self.dtype == torch.float32 else wp.transformd
        arr = lambda a, dt: wp.array(np.ascontiguousarray(a, dtype=np_t), dtype=dt, device=dev)  # noqa: E731
        vec2 = wp.vec2f if self.dtype == torch.float32 else wp.vec2d
        lim = cal.limits
        self._limits = [
            arr(plane_normals(lim.swing.shape[1]), vec2), arr(lim.swing, scalar), arr(lim.twist_lo, scalar),
            arr(lim.twist_hi, scalar), arr(lim.weight, scalar),
        ]  # fmt: skip
        self._radii = wp.array(np.ascontiguousarray(body.sphere_radius, dtype=np.float64), dtype=wp.float64, device=dev)
        self._pairs = wp.array(np.ascontiguousarray(self.pairs, dtype=np.int32).reshape(-1, 2), dtype=wp.int32,
                               device=dev)  # fmt: skip
        inv = body.bind_rotations.copy()
        inv[:, :3] *= -1.0
        self._blend = [
            arr(inv, quat),
            wp.array(np.ascontiguousarray(body.blend_joints, dtype=np.int32).reshape(-1, 2), dtype=wp.int32,
                     device=dev),
            arr(body.blend_weights.reshape(-1, 2), scalar),
            arr(body.blend_axis.reshape(-1, 3), vec3),
        ]  # fmt: skip
        self._root = torch.zeros(3, dtype=self.dtype, device=self.device)
        self._allowance = torch.as_tensor(self.pair_allowance, dtype=self.dtype, device=self.device)
        # the loss's screen of sphere pairs (_loss_measures): pair ends and summed radii, float64
        a, b = (torch.as_tensor(self.pairs[:, i], dtype=torch.long, device=self.device) for i in (0, 1))
        self._pair_flat = a * len(body.sphere_radius) + b
        radii = torch.as_tensor(body.sphere_radius, dtype=torch.float64, device=self.device)
        self._radii_t = radii[a] + radii[b]
        self._limited = torch.as_tensor(cal.limits.weight > 0, device=self.device)
        del pr

    # -- differentiable measures ----------------------------------------------------------------------------
    def joint_excess(self, d: torch.Tensor, signed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Swing and twist excess over the limits [rad] of canonical quaternions (N, J, 4); each (N, J).

        The swing excess is the largest half-plane violation of the swing polygon. With ``signed`` both are
        negative inside the limits (minus the distance to the nearest limit); otherwise they are clamped at 0.
        A non-finite quaternion gives NaN.
        """
        J = self.pose_rig.joint_count
        if d.ndim != 3 or tuple(d.shape[1:]) != (J, 4):
            raise ValueError(f"d: canonical pose quaternions must have shape (N, {J}, 4), got {tuple(d.shape)}")
        n, K = d.shape[0], self.calibration.limits.swing.shape[1]
        planes, twist = warp_op(joint_limit_kernel, (n, J), d, self._quat, self._limits, [(n, J, K), (n, J)])
        swing = planes.amax(-1)
        return (swing, twist) if signed else (torch.relu(swing), torch.relu(twist))

    def world(self, local: torch.Tensor) -> torch.Tensor:
        """World transforms (N, J, 7) of local rotations (N, J, 4), root at the origin."""
        root = self._root.expand(local.shape[0], 3)
        return self.torch_rig.forward_kinematics(root, local)

    def penetrations(self, world: torch.Tensor, pairs: np.ndarray | None = None) -> torch.Tensor:
        """Sphere-pair penetration depths [m], shape (N, P) (the tested pairs unless ``pairs`` is given)."""
        centers, _ = self.torch_rig.skin(world)
        return self._sphere_penetrations(centers, pairs)

    def _sphere_penetrations(self, centers: torch.Tensor, pairs: np.ndarray | None = None) -> torch.Tensor:
        """:meth:`penetrations` of skinned sphere centres (N, S, 3) [m]."""
        n = centers.shape[0]
        parr = self._pairs
        if pairs is not None:
            pairs = np.asarray(pairs).reshape(-1, 2)
            count = self._radii.shape[0]
            if len(pairs) and (not np.issubdtype(pairs.dtype, np.integer) or pairs.min() < 0 or pairs.max() >= count):
                raise ValueError(f"pairs: sphere indices must be integers in [0, {count})")
            parr = wp.array(np.ascontiguousarray(pairs, dtype=np.int32), dtype=wp.int32,
                            device=warp_device(self.device))  # fmt: skip
        if parr.shape[0] == 0:
            return centers.new_zeros((n, 0))
        return sphere_penetration(centers, self._radii, parr)

    def collapse_ratios(self, world: torch.Tensor) -> torch.Tensor:
        """Blend-region thickness ratios under twist, shape (N, B)."""
        n, B = world.shape[0], self._blend[1].shape[0]
        if B == 0:
            return world.new_ones((n, 0))
        (ratio,) = warp_op(twist_collapse_kernel, (n, B), world, self._transform, self._blend, [(n, B)])
        return ratio

    def measures(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Differentiable per-pose measures of 6D poses (N, J, 6).

        Returns:
            ``swing`` and ``twist`` (N, J) excess [rad] (signed: negative inside the limits); ``collapse``
            (N, B) ratios; ``penetration`` (N, P) depths beyond the pairs' allowances / rig height.
        """
        return self._measures(x, screen=False)

    def _loss_measures(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """:meth:`measures` for the loss: the penetration of only those sphere pairs that the loss sees in some pose
        of the batch (beyond a quarter of the tolerance, less a slack), shape (N, P') with P' <= P. The loss and its
        gradient are those of all pairs (the others add exactly 0); a batch's poses rarely bring more than a few
        percent of a rig's pairs near contact, and the differentiable kernel is the loss's main cost."""
        return self._measures(x, screen=True)

    def _measures(self, x: torch.Tensor, screen: bool) -> dict[str, torch.Tensor]:
        if not torch.is_tensor(x):
            raise TypeError(f"x: poses must be a torch tensor (N, J, 6), got {type(x).__name__}")
        x = x.to(dtype=self.dtype, device=self.device)  # the kernels' precision (float64 failed inside Warp)
        if x.shape[0] == 0:  # (Warp cannot wrap the empty arrays of skinning; still attached to x's graph)
            z = 0.0 * x.sum()
            J, B, P = self.pose_rig.joint_count, self._blend[1].shape[0], len(self.pairs)
            return {k: x.new_zeros((0, c)) + z for k, c in (("swing", J), ("twist", J), ("collapse", B),
                                                             ("penetration", P))}  # fmt: skip
        d, local = self.pose_rig.decode_torch(x)
        swing, twist = self.joint_excess(d, signed=True)
        world = self.world(local)
        centers, _ = self.torch_rig.skin(world)
        h = self.pose_rig.height
        keep = slice(None)
        if screen:
            with torch.no_grad():  # a cheap screen of every pair (the kernel below decides the values)
                c = centers.double()
                gap = torch.cdist(c, c).flatten(1)[:, self._pair_flat] - self._radii_t  # (faster than a gather)
                limit = 0.25 * self.config.penetration_tolerance - 1e-4
                keep = (-gap / h - self._allowance.double() > limit).any(0).cpu().numpy()
        pen = self._sphere_penetrations(centers, None if not screen else self.pairs[keep])
        return {"swing": swing, "twist": twist, "collapse": self.collapse_ratios(world),
                "penetration": pen / h - self._allowance[keep]}  # fmt: skip

    def loss(self, x: torch.Tensor, measures: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """Smooth validator loss per pose, shape (N,): weighted sums of squared violations of slightly tightened
        thresholds (``loss_margin_deg`` inside the joint limits, a quarter of the penetration tolerance, collapse
        ratio + 0.05), so poses it settles are valid with a little slack; 0 well inside."""
        m = measures if measures is not None else self._loss_measures(x)
        cfg = self.config
        w_ext, w_twist, w_pen = cfg.loss_weights
        margin = np.radians(cfg.loss_margin_deg)
        limited = self._limited.to(m["swing"].dtype)
        ext = ((torch.relu(m["swing"] + margin) ** 2 + torch.relu(m["twist"] + margin) ** 2) * limited).sum(-1)
        col = (torch.relu(cfg.collapse_ratio + 0.05 - m["collapse"]) ** 2).sum(-1)
        pen = (torch.relu(m["penetration"] - 0.25 * cfg.penetration_tolerance) ** 2).sum(-1)
        return w_ext * ext + w_twist * col + w_pen * pen * 100.0

    # -- checks ---------------------------------------------------------------------------------------------
    @torch.no_grad()
    def check(self, x: torch.Tensor | np.ndarray, batch: int = 1024) -> ValidityReport:
        """Measures and pass/fail of 6D poses (N, J, 6). No poses (N = 0) give an empty report (its
        :meth:`ValidityReport.rates` are 1.0); a pose with a non-finite entry at an active joint is not valid (it
        fails hyperextension, and every other validator its NaN reaches)."""
        x = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=self.dtype, device=self.device)
        self.pose_rig.check_poses(x, flat=True)
        parts = [tuple(x.new_zeros(0) for _ in range(3))]  # (N = 0: nothing to concatenate)
        for s in range(0, len(x), batch):
            m = self.measures(x[s : s + batch])
            n = m["swing"].shape[0]
            ext = torch.relu(torch.maximum(m["swing"].amax(-1), m["twist"].amax(-1)))
            col = m["collapse"].amin(-1) if m["collapse"].shape[-1] else m["swing"].new_ones(n)
            # allowance pairs measure below zero when they overlap less than their allowance
            pen = torch.relu(m["penetration"].amax(-1)) if m["penetration"].shape[-1] else m["swing"].new_zeros(n)
            parts.append((ext, col, pen))
        ext, col, pen = (torch.cat([p[i] for p in parts]).double().cpu().numpy() for i in range(3))
        cfg = self.config
        passed = {
            "hyperextension": ext <= np.radians(cfg.limit_tolerance_deg),
            "bone_twist": col >= cfg.collapse_ratio,
            "self_intersection": pen <= cfg.penetration_tolerance,
        }
        valid = passed["hyperextension"] & passed["bone_twist"] & passed["self_intersection"]
        return ValidityReport(ext, col, pen, passed, valid)


def calibrate(
    pose_rig: PoseRig,
    poses: np.ndarray,
    config: ValidatorConfig | None = None,
    limits: JointLimits | None = None,
) -> RigCalibration:
    """Fits a skeleton's validators to real motion so that it passes.

    Joint limits come from the poses (unless ``limits`` is given). Part pairs whose spheres penetrate beyond the
    tolerance in more than ``exclusion_rate`` of the poses overlap routinely (their proxies overlap in ordinary
    motion, e.g. a thigh against the belly of a crouching quadruped): each gets an allowance, the penetration
    depth that ``exclusion_rate`` of the poses exceed, so it is still tested for overlaps deeper than the data
    shows (a fixed exclusion made such pairs blind spots: a leg driven through the Fox's spine passed). On a
    symmetric rig with ``pool_mirror``, limits and allowances are fitted to the poses and their mirror images.

    Args:
        pose_rig: the rig.
        poses: real poses in 6D form, shape (N, J, 6) (N >= 1 unless ``limits`` is given).
        config: thresholds.
        limits: given limits (skip estimation).

    Returns:
        The calibration, with the pass rates it achieves on ``poses`` themselves (not their mirror images; all
        1.0 for no poses). With fitted limits and ``limit_scale >= 1`` every pose passes ``hyperextension``.

    Raises:
        ValueError: ``poses`` of the wrong shape, or no poses to fit limits to.
    """
    from sim.rotations import rot6d_to_quat

    cfg = config or ValidatorConfig()
    given = poses = np.asarray(poses, dtype=np.float64)
    pose_rig.check_poses(poses, flat=True)
    if limits is None and len(poses) == 0:
        raise ValueError("poses: no poses to fit joint limits to (give limits to calibrate without poses)")
    mirrored = cfg.pool_mirror and pose_rig.frame.symmetric
    if mirrored:
        poses = np.concatenate([poses, pose_rig.mirror(poses)])
    d = rot6d_to_quat(poses)
    if limits is None:
        limits = JointLimits.fit(pose_rig, d, cfg)
    probe = PoseValidators(pose_rig, RigCalibration(limits), cfg)
    sj = pose_rig.body.sphere_joint
    pairs = probe.candidate_pairs
    keys = sorted({(int(sj[a]), int(sj[b])) for a, b in pairs})
    column = torch.as_tensor([keys.index((int(sj[a]), int(sj[b]))) for a, b in pairs], dtype=torch.long)
    depth = torch.zeros(len(poses), len(keys), dtype=torch.float64)  # deepest sphere overlap per part pair / height
    with torch.no_grad():
        for s in range(0, len(poses), 512):
            x = torch.as_tensor(poses[s : s + 512], dtype=probe.dtype)
            _, local = pose_rig.decode_torch(x)
            pen = probe.penetrations(probe.world(local), pairs).double() / pose_rig.height
            depth[s : s + len(x)].scatter_reduce_(1, column.expand(len(x), -1), pen, reduce="amax")
    routine = (depth > cfg.penetration_tolerance).double().mean(0) > cfg.exclusion_rate
    # (no poses or no candidate pairs: nothing routine, and torch.quantile refuses empty input)
    allowance = torch.quantile(depth, 1.0 - cfg.exclusion_rate, dim=0) if depth.numel() else depth.sum(0)
    allowances = {k: float(a) for k, r, a in zip(keys, routine.tolist(), allowance.tolist()) if r}
    if mirrored:  # a pair and its mirror image share the larger allowance (where the mirror pair is tested at all)
        m = pose_rig.frame.mirror
        tested = set(keys)
        for a, b in list(allowances):
            k = tuple(sorted((int(m[a]), int(m[b]))))
            if k in tested:
                allowances[(a, b)] = allowances[k] = max(allowances[(a, b)], allowances.get(k, 0.0))
    cal = RigCalibration(limits, part_allowances=dict(sorted(allowances.items())))
    cal.pass_rates = PoseValidators(pose_rig, cal, cfg).check(given).rates()
    return cal
