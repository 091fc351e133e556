"""FK + LBS benchmark: Warp kernels (through the torch bridge) against a vectorized torch implementation.

Run:  .venv/bin/python benchmarks/bench_skinning.py [--device cpu|cuda] [--repeats 5] [--cases small,medium,large]

Both sides compute the same mathematics on the same synthetic rig (a random tree, 4 influences per vertex):
world joint transforms from root translation + local quaternions, then skinned points and normals. The torch
baseline is the usual fast formulation (level-by-level batched quaternion FK, then SMPL-style blending of
skinning matrices with a dense weight matrix ``einsum('vj,njab->nvab')``), differentiated by autograd. The Warp side
is ``sim.torch_ops.TorchRig`` (the path optimization code uses). Printed ratios are Warp time / torch time measured
in this process (< 1 means Warp is faster). On CUDA every timed call ends with a device synchronization, so times
are wall-clock completion times (Warp kernels run on Warp's stream, torch's on torch's; the sync covers both).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch

import sim
from sim.rotations import quat_normalize
from sim.torch_ops import TorchRig, quat_multiply, quat_rotate, quat_to_matrix

CASES = {
    "small": (64, 24, 10_000),
    "medium": (64, 32, 30_000),
    "large": (64, 64, 100_000),
    "xlarge": (256, 64, 100_000),
}


def synthetic_rig(joint_count: int, vertex_count: int, seed: int = 0) -> sim.Rig:
    rng = np.random.default_rng(seed)
    parents = np.array([-1] + [int(rng.integers(max(0, j - 3), j)) for j in range(1, joint_count)])
    rest_t = rng.normal(scale=0.1, size=(joint_count, 3))
    rig = sim.Rig([f"j{i}" for i in range(joint_count)], parents, rest_t, np.tile([0, 0, 0, 1.0], (joint_count, 1)))
    joint_pos = rig.rest_world_transforms()[0]
    points = joint_pos[rng.integers(0, joint_count, vertex_count)] + rng.normal(scale=0.05, size=(vertex_count, 3))
    # 4 nearest joints, inverse-distance weights
    d = np.linalg.norm(points[:, None] - joint_pos[None], axis=-1)
    idx = np.argsort(d, axis=1)[:, :4]
    w = 1.0 / (np.take_along_axis(d, idx, 1) + 1e-3)
    tris = rng.integers(0, vertex_count, size=(vertex_count * 2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.RigWarning)
        mesh = sim.SkinnedMesh("m", points, tris, idx, w / w.sum(1, keepdims=True), joint_count=joint_count)
    return sim.Rig(rig.joint_names, parents, rest_t, rig.rest_rotations, None, [mesh])


class TorchLBS:
    """Vectorized torch FK + LBS (the baseline)."""

    def __init__(self, rig: sim.Rig, device: torch.device | str = "cpu"):
        mesh = rig.meshes[0]
        self.parents = rig.parents
        depths = rig.depths()
        levels = [np.flatnonzero(depths == d) for d in range(1, depths.max() + 1)]
        self.levels = [torch.as_tensor(lv, device=device) for lv in levels]
        self.level_parents = [torch.as_tensor(rig.parents[lv], device=device) for lv in levels]
        self.root_index = torch.tensor([0], device=device)
        self.rest_t = torch.tensor(rig.rest_translations, dtype=torch.float32, device=device)
        dense = np.zeros((mesh.vertex_count, rig.joint_count), dtype=np.float32)
        np.add.at(dense, (np.arange(mesh.vertex_count)[:, None], mesh.influence_joints), mesh.influence_weights)
        self.weights = torch.tensor(dense, device=device)
        self.ibm = torch.tensor(rig.inverse_bind_matrices, dtype=torch.float32, device=device)
        self.points = torch.tensor(mesh.points, dtype=torch.float32, device=device)
        self.normals = torch.tensor(mesh.vertex_normals(), dtype=torch.float32, device=device)

    def __call__(self, root: torch.Tensor, quats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, J = quats.shape[:2]
        quats = quats / quats.norm(dim=-1, keepdim=True)
        local_t = torch.cat([root[:, None], self.rest_t[1:].expand(n, J - 1, 3)], dim=1)
        pos_t = local_t.new_zeros(n, J, 3).index_copy(1, self.root_index, local_t[:, :1])
        rot_t = quats.new_zeros(n, J, 4).index_copy(1, self.root_index, quats[:, :1])
        for lv, lp in zip(self.levels, self.level_parents):
            pq, pp = rot_t[:, lp], pos_t[:, lp]
            rot_t = rot_t.index_copy(1, lv, quat_multiply(pq, quats[:, lv]))
            pos_t = pos_t.index_copy(1, lv, pp + quat_rotate(pq, local_t[:, lv]))
        world34 = torch.cat([quat_to_matrix(rot_t), pos_t[..., None]], -1)  # (n, J, 3, 4)
        skinning = world34 @ self.ibm  # (n, J, 3, 4)
        blended = torch.einsum("vj,njab->nvab", self.weights, skinning)  # (n, V, 3, 4)
        points = (blended[..., :3] @ self.points[None, :, :, None])[..., 0] + blended[..., 3]
        normals = (blended[..., :3] @ self.normals[None, :, :, None])[..., 0]
        return points, normals / normals.norm(dim=-1, keepdim=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up (kernel compilation, allocator)
    _sync(device)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - t0)
    return float(np.median(samples))


def run_case(frames: int, joints: int, vertices: int, repeats: int, device: torch.device) -> dict:
    rig = synthetic_rig(joints, vertices)
    rng = np.random.default_rng(1)
    root = torch.tensor(rng.normal(size=(frames, 3)), dtype=torch.float32, device=device)
    quats = torch.tensor(quat_normalize(rng.normal(size=(frames, joints, 4))), dtype=torch.float32, device=device)
    target = torch.randn(frames, vertices, 3, generator=torch.Generator().manual_seed(2)).to(device)
    trig, base = TorchRig(rig, device=device), TorchLBS(rig, device)

    def warp_fwd():
        with torch.no_grad():
            return trig.skin(trig.forward_kinematics(root, quats))

    def torch_fwd():
        with torch.no_grad():
            return base(root, quats)

    def fwd_bwd(model):
        def step():
            r = root.clone().requires_grad_()
            q = quats.clone().requires_grad_()
            points, normals = model(r, q)
            ((points * target).sum() + (normals * target).sum()).backward()
            return r.grad, q.grad

        return step

    # the two implementations must agree before their times mean anything
    wp_points, _ = warp_fwd()
    th_points, _ = torch_fwd()
    err = float((wp_points - th_points).abs().max())
    g_wp = fwd_bwd(lambda r, q: trig.skin(trig.forward_kinematics(r, q)))()
    g_th = fwd_bwd(base)()
    gerr = float(max((a - b).abs().max() / (b.abs().max() + 1e-9) for a, b in zip(g_wp, g_th)))

    out = {"case": f"{frames}x{joints}x{vertices}", "max_abs_diff": err, "grad_rel_diff": gerr}
    out["warp_fwd"] = _time(warp_fwd, repeats, device)
    out["torch_fwd"] = _time(torch_fwd, repeats, device)
    out["warp_fwdbwd"] = _time(fwd_bwd(lambda r, q: trig.skin(trig.forward_kinematics(r, q))), repeats, device)
    out["torch_fwdbwd"] = _time(fwd_bwd(base), repeats, device)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default="small,medium,large", help=f"comma-separated subset of {list(CASES)}")
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda or cuda:N")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"--device {args.device}: torch has no CUDA (torch.cuda.is_available() is False)")
        # an explicit index: TorchRig compares tensor devices (cuda:0) with its own
        device = torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())
        print(f"device {device}: {torch.cuda.get_device_name(device)}; torch {torch.__version__}")
    else:
        print(f"torch {torch.__version__} threads={torch.get_num_threads()}; warp CPU launches are single-threaded")
    header = (
        f"{'case FxJxV':>16} {'fwd warp/torch':>18} {'ratio':>6} {'fwd+bwd warp/torch':>22} {'ratio':>6}"
        f" {'warp Mvert/s fwd':>17} {'fwd+bwd':>8} {'|dp|':>8} {'|dg|rel':>8}"
    )
    print(header)
    for name in args.cases.split(","):
        f, j, v = CASES[name]
        r = run_case(f, j, v, args.repeats, device)
        verts = f * v / 1e6
        fwd = f"{r['warp_fwd'] * 1e3:8.1f}/{r['torch_fwd'] * 1e3:<8.1f}ms {r['warp_fwd'] / r['torch_fwd']:6.2f}"
        both = f"{r['warp_fwdbwd'] * 1e3:10.1f}/{r['torch_fwdbwd'] * 1e3:<9.1f}ms"
        both += f" {r['warp_fwdbwd'] / r['torch_fwdbwd']:6.2f}"
        rates = f"{verts / r['warp_fwd']:17.1f} {verts / r['warp_fwdbwd']:8.1f}"
        print(f"{r['case']:>16} {fwd} {both} {rates} {r['max_abs_diff']:8.1e} {r['grad_rel_diff']:8.1e}", flush=True)


if __name__ == "__main__":
    main()
