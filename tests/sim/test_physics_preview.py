"""Preview of a physical motion: meshless rigs are drawn (bone prisms), frame limits are checked."""

from __future__ import annotations

import numpy as np
import pytest
from physics_rigs import table_quadruped

import sim
from sim.physics.preview import _bone_tubes, render_preview

pytest.importorskip("matplotlib")
imageio = pytest.importorskip("imageio.v2")

RADIUS_ATOL = 1e-12


def _meshless(rig: sim.Rig) -> sim.Rig:
    return sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, name="bones")


def _still(rig: sim.Rig, frames: int = 3) -> sim.Motion:
    return sim.Motion(
        30.0, np.repeat(rig.rest_translations[:1], frames, 0), np.repeat(rig.rest_rotations[None], frames, 0)
    )


def _coloured_pixels(path) -> list[int]:
    """Per frame, pixels clearly coloured (the character is orange; ground grid and text are grey)."""
    counts = []
    for img in imageio.mimread(path):
        rgb = np.asarray(img)[..., :3].astype(np.int32)
        counts.append(int(((rgb.max(axis=-1) - rgb.min(axis=-1)) > 60).sum()))
    return counts


def test_bone_tubes_surround_each_bone(rng):
    pos = rng.normal(size=(2, 4, 3))
    parents = np.array([-1, 0, 1, 1])
    radius = 0.05
    pts, tris = _bone_tubes(pos, parents, radius, sides=6)
    assert pts.shape == (2, 3 * 12, 3) and tris.shape == (3 * 12, 3) and tris.max() < pts.shape[1]
    for bone, (p, c) in enumerate([(0, 1), (1, 2), (1, 3)]):
        ring = pts[:, bone * 12 : (bone + 1) * 12]
        a, b = pos[:, p, None], pos[:, c, None]
        axis = (b - a) / np.linalg.norm(b - a, axis=-1, keepdims=True)
        rel = ring - a
        perp = rel - (rel * axis).sum(-1, keepdims=True) * axis
        np.testing.assert_allclose(np.linalg.norm(perp, axis=-1), radius, atol=RADIUS_ATOL)
        along = (rel * axis).sum(-1) / np.linalg.norm(b - a, axis=-1)
        np.testing.assert_allclose(along[:, :6], 0.0, atol=RADIUS_ATOL)  # one ring at the parent joint
        np.testing.assert_allclose(along[:, 6:], 1.0, atol=RADIUS_ATOL)  # one at the child joint


def test_meshless_rig_preview_draws_the_character(tmp_path):
    rig = table_quadruped()
    bones = _meshless(rig)
    path = tmp_path / "bones.gif"
    render_preview(path, bones, _still(bones), _still(bones), max_frames=2, size=(160, 120))
    # a 13-bone table at this size covers a few hundred pixels (zero-area bone triangles drew none)
    assert min(_coloured_pixels(path)) > 100, "the bones are not drawn"


def test_preview_frame_limit(tmp_path):
    rig = table_quadruped()
    motion = _still(rig, frames=7)
    render_preview(tmp_path / "a.gif", rig, motion, max_frames=3, size=(80, 60))
    assert len(imageio.mimread(tmp_path / "a.gif")) == 3  # every 3rd of 7 frames
    with pytest.raises(ValueError, match="max_frames"):
        render_preview(tmp_path / "b.gif", rig, motion, max_frames=0)
