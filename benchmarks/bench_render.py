"""Renderer benchmark: frames per second of the differentiable video renderer on the Fox, forward and
forward + backward, at 64x64 and 256x256.

Run:  .venv/bin/python benchmarks/bench_render.py [--asset ../shared/assets/gltf/Fox.glb] [--clip Walk]
          [--resolutions 64,256] [--views 4] [--repeats 5] [--device cpu] [--tile-size 8] [--threads 1]

One "frame" is one rendered image (one view of one time sample). Each timing covers the whole path the optimizer
runs: FK + skinning (Warp, through ``sim.torch_ops.TorchRig``), follow cameras, shading, the Warp soft rasterizer
and the ground, and for forward + backward also the gradient down to the joint rotations and root translation.
The rasterizer alone (Warp kernels + binning) is timed separately, and at the smallest resolution against the dense
torch reference the tests check it with (``distill._reference``, same formulas over every pixel x triangle, on
``--reference-images`` images): the printed ratio is the baseline in the same run. Best of ``--repeats`` after one
warm-up; on CUDA
each timed call ends with a device synchronization (completion time, Warp's and torch's streams alike).
The default asset is ``$KINEDISTILL_ASSETS/gltf/Fox.glb`` (``../shared/assets`` when the variable is unset).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from distill import CameraConfig, RasterSettings, RenderConfig, VideoRenderer, rasterize
from distill._reference import rasterize_reference
from distill.trajectory import body_root_joint
from sim.torch_ops import TorchRig
from usd_io import load_asset

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("KINEDISTILL_ASSETS", REPO.parent / "shared" / "assets"))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_of(fn, repeats: int, device: torch.device) -> float:
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--asset", default=str(ASSETS / "gltf" / "Fox.glb"))
    ap.add_argument("--clip", default="Walk")
    ap.add_argument("--resolutions", default="64,256")
    ap.add_argument("--views", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tile-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (Warp kernels are single-threaded)")
    ap.add_argument("--reference-images", type=int, default=2, help="images the dense reference rasterizes")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    asset = load_asset(args.asset)
    rig, clip = asset.rig, asset.clip(args.clip)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"--device {args.device}: torch has no CUDA (torch.cuda.is_available() is False)")
        # an explicit index: TorchRig compares tensor devices (cuda:0) with its own
        dev = torch.device("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
    trig = TorchRig(rig, device=dev)
    rot = torch.tensor(clip.rotations, dtype=torch.float32, device=dev)
    trans = torch.tensor(clip.local_translations(rig), dtype=torch.float32, device=dev)
    times = torch.tensor(clip.times, dtype=torch.float32, device=dev)
    frames = clip.frame_count
    mesh = rig.merged_mesh()
    print(
        f"asset {args.asset}: {rig.joint_count} joints, {mesh.vertex_count} vertices, {len(mesh.triangles)} triangles"
    )
    print(f"clip {clip.name}: {frames} time samples x {args.views} views = {frames * args.views} frames per call")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    print(f"device {dev} ({name}), torch threads {torch.get_num_threads()}, best of {args.repeats}")
    print()
    print(f"{'resolution':>10} {'forward fps':>12} {'fwd+bwd fps':>12} {'raster fwd fps':>15} {'raster f+b fps':>15}")
    resolutions = [int(r) for r in args.resolutions.split(",")]
    for res in resolutions:
        fps, ref_fps = bench_resolution(rig, trig, rot, trans, times, res, args, reference=res == min(resolutions))
        print(f"{f'{res}x{res}':>10} {fps[0]:12.1f} {fps[1]:12.1f} {fps[2]:15.1f} {fps[3]:15.1f}", flush=True)
        if ref_fps is not None:
            print(f"{'':>10} dense torch reference rasterizer, forward: {ref_fps:.2f} fps on {args.reference_images} "
                  f"images: the Warp rasterizer is {fps[2] / ref_fps:.0f}x faster", flush=True)  # fmt: skip


def bench_resolution(rig, trig, rot, trans, times, res: int, args, reference: bool) -> tuple[list[float], float | None]:
    """Frames per second: (full forward, full forward + backward, rasterizer forward, rasterizer f + b), and the
    dense reference rasterizer's forward when ``reference`` (None otherwise)."""
    dev, frames, pelvis = rot.device, rot.shape[0], body_root_joint(rig)
    azimuths = tuple(360.0 * k / args.views for k in range(args.views))
    cfg = RenderConfig(
        width=res,
        height=res,
        albedo="position",
        albedo_frequency=6.0,
        camera=CameraConfig(azimuths_deg=azimuths, distance=1.0),
        raster=RasterSettings(tile_size=args.tile_size),
    )
    renderer = VideoRenderer(rig, cfg, device=dev)
    rot_p = rot.clone().requires_grad_()
    trans_p = trans.clone().requires_grad_()

    def full(backward: bool) -> None:
        with torch.set_grad_enabled(backward):
            world = trig.forward_kinematics(trans_p[:, 0], rot_p, trans_p)
            pts, nrm = trig.skin(world)
            out = renderer.render(pts, nrm, world[:, pelvis, :3], times)
            if backward:
                out.video.square().mean().backward()

    with torch.no_grad():
        world = trig.forward_kinematics(trans[:, 0], rot, trans)
        pts, nrm = trig.skin(world)
        cams = renderer.cameras(world[:, pelvis, :3], times)
        screen, _ = cams.project(pts)
        colors = renderer.shade(nrm, cams)
    b = screen.shape[0]
    screen = screen.reshape(b * frames, -1, 3).contiguous()
    colors = colors.reshape(b * frames, -1, 3).contiguous()

    def raster(backward: bool) -> None:
        s = screen.clone().requires_grad_(backward)
        c = colors.clone().requires_grad_(backward)
        out = rasterize(s, c, renderer.topology, res, res, cfg.raster)
        if backward:
            (out.rgb.square().mean() + out.alpha.mean()).backward()

    n = frames * args.views
    fps = [n / best_of(lambda bw=bw, f=f: f(bw), args.repeats, dev) for f in (full, raster) for bw in (False, True)]
    if not reference or args.reference_images < 1:
        return fps, None
    k = min(args.reference_images, screen.shape[0])

    def dense() -> None:
        with torch.no_grad():
            rasterize_reference(screen[:k], colors[:k], renderer.topology, res, res, cfg.raster)

    return fps, k / best_of(dense, args.repeats, dev)


if __name__ == "__main__":
    main()
