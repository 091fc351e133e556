"""Issue 2 acceptance: stages written by examples/convert.py, skinned by Pixar's UsdSkel, match the sources.

glTF: UsdSkel skinned points at every keyframe equal glTF linear blend skinning of the source (an independent
reference that reads the file itself) to 1e-5 of the model height. BVH: the stage's joint positions equal the
BVH's own forward kinematics (an independent 4x4 reference) to 1e-5 of the skeleton height.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bvh_reference
import gltf_reference
import numpy as np
import pytest
from pixar_reference import pixar_joint_world_positions, pixar_skinning

from usd_io import validate_stage

pxr = pytest.importorskip("pxr")
from pxr import Usd  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RELATIVE_TOL = 1e-5
"""Allowed error as a fraction of the model (glTF) or skeleton (BVH) height."""
CMU_METERS_PER_UNIT = 0.0254 / 0.45
"""CMU's ASF-derived length unit, passed explicitly so the check does not depend on the importer's guess."""
Y_UP_TO_Z_UP = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])


def convert(*args: str) -> None:
    r = subprocess.run([sys.executable, "examples/convert.py", *args], cwd=REPO, capture_output=True, text=True,
                       timeout=300, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr


def stage_seconds(path: Path, codes: np.ndarray) -> np.ndarray:
    stage = Usd.Stage.Open(str(path))
    assert stage.GetMetadata("upAxis") == "Z"
    return (codes - stage.GetStartTimeCode()) / stage.GetTimeCodesPerSecond()


@pytest.mark.parametrize(
    ("asset", "clip"),
    [("Fox.glb", "Survey"), ("Fox.glb", "Walk"), ("Fox.glb", "Run"), ("SimpleSkin.gltf", "animation_0")],
)
def test_gltf_clip_matches_source_skinning(tmp_path, assets_dir, asset, clip):
    source = assets_dir / "gltf" / asset
    out = tmp_path / "out.usda"
    convert("--input", str(source), "--output", str(out), "--clip", clip)
    assert validate_stage(out) == []

    codes, meshes, skel_to_world = pixar_skinning(out)
    np.testing.assert_allclose(skel_to_world, np.eye(4), atol=1e-12)
    key_times = gltf_reference.reference_key_times(source, clip)
    np.testing.assert_allclose(stage_seconds(out, codes), key_times, atol=1e-6)  # every key kept, none moved
    (points,) = meshes.values()
    tol = RELATIVE_TOL * gltf_reference.reference_model_height(source)
    for frame, t in enumerate(key_times):
        expected = gltf_reference.reference_skinned_points(source, clip, t)
        np.testing.assert_allclose(points[frame], expected, atol=tol, err_msg=f"{clip} key {frame} (t={t:.4f} s)")


@pytest.mark.parametrize("name", ["131_01.bvh", "131_02.bvh"])
def test_bvh_joint_positions_match_bvh_fk(tmp_path, assets_dir, name):
    source = assets_dir / "bvh" / name
    out = tmp_path / "mocap.usdc"
    convert("--input", str(source), "--output", str(out), "--meters-per-unit", str(CMU_METERS_PER_UNIT))
    assert validate_stage(out) == []

    codes, joints, positions = pixar_joint_world_positions(out)
    names, reference = bvh_reference.bvh_world_positions(source)
    assert len(joints) == len(names) and len(codes) == len(reference)
    np.testing.assert_allclose(stage_seconds(out, codes), np.arange(len(reference)) / 120.0, atol=1e-9)
    expected = CMU_METERS_PER_UNIT * reference @ Y_UP_TO_Z_UP.T
    rest = expected[0]
    height = rest[:, 2].max() - rest[:, 2].min()
    np.testing.assert_allclose(positions, expected, atol=RELATIVE_TOL * height)
