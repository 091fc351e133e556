"""Preview of a physical motion: meshless rigs are drawn (bone prisms), frame limits are checked, both characters
stay whole in every frame (a standing biped, a fallen one beside its walking reference), and the GIF plays at the
motion's rate (its delays are 10 ms steps that add up)."""

from __future__ import annotations

import numpy as np
import pytest
from physics_rigs import table_quadruped

import sim
from sim import characters
from sim.kinematics import pose_motion
from sim.physics import preview
from sim.physics.preview import _bone_tubes, render_preview
from sim.rotations import axis_angle_to_quat, quat_multiply

pytest.importorskip("matplotlib")
imageio = pytest.importorskip("imageio.v2")

RADIUS_ATOL = 1e-12
GIF_STEP_MS = 10  # GIF delays are whole centiseconds
BODY_SPREAD = 2  # channel spread above which a drawn pixel shows a character (grid, text and background are grey)
MIN_PIXELS = 1000  # of each character in a 480 x 320 frame (the fallen biped covers about 5000)


def _meshless(rig: sim.Rig) -> sim.Rig:
    return sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, name="bones")


def _still(rig: sim.Rig, frames: int = 3, fps: float = 30.0) -> sim.Motion:
    return sim.Motion(
        fps, np.repeat(rig.rest_translations[:1], frames, 0), np.repeat(rig.rest_rotations[None], frames, 0)
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


def _gif_durations(path) -> list[int]:
    """The delays [ms] a GIF's frames are written with."""
    from PIL import Image

    durations = []
    with Image.open(path) as im:
        for k in range(im.n_frames):
            im.seek(k)
            durations.append(im.info["duration"])
    return durations


def test_gif_frame_durations_carry_the_rounding():
    """30 fps was written as 30 ms a frame (GIF keeps whole centiseconds): 10% fast."""
    durations = preview.gif_frame_durations_ms(30, 30.0)
    assert durations[:3] == [30, 40, 30] and sum(durations) == 1000
    for fps in (30.0, 24.0, 12.0, 29.97, 7.0):
        durations = preview.gif_frame_durations_ms(97, fps)
        assert all(d % GIF_STEP_MS == 0 and d > 0 for d in durations)
        elapsed = np.cumsum(durations)
        np.testing.assert_allclose(elapsed, 1000.0 * np.arange(1, 98) / fps, atol=GIF_STEP_MS / 2)
    assert preview.gif_frame_durations_ms(0, 30.0) == []
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="fps"):
            preview.gif_frame_durations_ms(3, bad)


@pytest.mark.parametrize("fps", [30.0, 24.0, 12.0, 60.0])
def test_gif_preview_plays_at_the_motion_rate(tmp_path, fps):
    """The written GIF lasts as long as the motion: each frame took 1000 / fps ms cut to 10 ms steps (30 fps: 30 ms,
    10% fast; 60 fps: 10 ms, which many viewers play as 100 ms, so every 2nd frame is drawn at 30 fps)."""
    rig = table_quadruped()
    frames = 12
    path = tmp_path / "a.gif"
    render_preview(path, rig, _still(rig, frames, fps), size=(80, 60))
    durations = _gif_durations(path)
    assert abs(sum(durations) - 1000.0 * frames / fps) <= GIF_STEP_MS
    assert min(durations) >= 1000.0 / preview.GIF_MAX_FPS


@pytest.fixture(scope="module")
def biped_walk():
    rig, clips = characters.build("biped-walk")
    return rig, clips["walk"]


def _turned(motion: sim.Motion, yaw: float) -> sim.Motion:
    """``motion`` turned about the vertical through the world origin by ``yaw`` [rad]."""
    q = axis_angle_to_quat(np.array([0.0, 0.0, yaw]))
    c, s = np.cos(yaw), np.sin(yaw)
    root = motion.root_translations @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    rot = motion.rotations.copy()
    rot[:, 0] = quat_multiply(q, rot[:, 0])
    return sim.Motion(motion.fps, root, rot)


def _fallen(rig: sim.Rig, motion: sim.Motion) -> sim.Motion:
    """``motion``'s first pose tipped onto its back and lying there: the simulation fell where the reference walks
    on."""
    frames = motion.frame_count
    rot = np.repeat(motion.rotations[:1], frames, 0)
    rot[:, 0] = quat_multiply(axis_angle_to_quat(np.array([0.0, -np.pi / 2, 0.0])), rot[:, 0])
    root = np.repeat(motion.root_translations[:1], frames, 0)
    lying = sim.Motion(motion.fps, root, rot)
    root[:, 2] -= pose_motion(rig, lying)[0][..., 2].min()  # on the ground
    return sim.Motion(motion.fps, root, rot)


def _drawn_frames(monkeypatch, *args, **kwargs) -> list[np.ndarray]:
    """``render_preview(*args, **kwargs)``'s frames as drawn, before the GIF's palette tints the greys."""
    import sim.physics.preview as preview

    drawn = []
    save = preview.write_video

    def capture(path, images, fps):
        drawn.extend(np.array(img) for img in images)
        return save(path, images, fps)

    monkeypatch.setattr(preview, "write_video", capture)
    render_preview(*args, **kwargs)
    return drawn


def _frame_pixels(frames) -> list[tuple[int, int, int, int]]:
    """Per frame: character pixels on the image border and in the caption's box, the simulation's (orange) and the
    ghost's (bluish) pixels."""
    rows = []
    for img in frames:
        rgb = np.asarray(img)[..., :3].astype(np.int32)
        spread = rgb.max(axis=-1) - rgb.min(axis=-1)
        body = spread > BODY_SPREAD
        border = np.concatenate([body[0], body[-1], body[:, 0], body[:, -1]]).sum()
        r, c = np.nonzero((spread == 0) & (rgb.max(axis=-1) < 128))  # the caption's dark grey text
        caption = body[r.min() : r.max() + 1, c.min() : c.max() + 1].sum()
        solid = ((rgb[..., 0] - rgb[..., 2]) > 60).sum()
        ghost = ((rgb[..., 2] - rgb[..., 0]) > BODY_SPREAD).sum()
        rows.append((int(border), int(caption), int(solid), int(ghost)))
    return rows


@pytest.mark.parametrize("case", ["standing", "fallen", "fallen, walking along y"])
def test_both_characters_stay_whole_in_every_frame(tmp_path, monkeypatch, biped_walk, case):
    """The camera centred on the simulation at 1.6 heights, looking across its travel: a walking biped's head
    touched the top edge (and the caption), and beside a fallen simulation the reference walked out of the image."""
    rig, walk = biped_walk
    if case.endswith("along y"):
        walk = _turned(walk, np.pi / 2)  # the clip walks along x
    motion = walk if case == "standing" else _fallen(rig, walk)
    frames = _drawn_frames(monkeypatch, tmp_path / "p.gif", rig, motion, walk, max_frames=12, title="biped walk")
    rows = _frame_pixels(frames)
    assert len(rows) == 12
    for k, (border, caption, solid, ghost) in enumerate(rows):
        assert border == 0, f"frame {k}: {border} character pixels on the image border"
        assert caption == 0, f"frame {k}: {caption} character pixels in the caption's box"
        assert solid > MIN_PIXELS and ghost > MIN_PIXELS, f"frame {k}: {solid} simulation, {ghost} ghost pixels"


@pytest.mark.parametrize("name", ["preview", "preview.webp"])
def test_any_suffix_but_mp4_is_a_gif(tmp_path, name):
    """The temporary file's suffix chose imageio's format: no suffix failed in a TIFF writer after rendering every
    frame, ``.webp`` wrote a WebP."""
    rig = table_quadruped()
    path = tmp_path / name
    render_preview(path, rig, _still(rig), size=(80, 60))
    assert path.read_bytes()[:4] == b"GIF8"
    assert len(imageio.mimread(path, format="GIF")) == 3
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left


@pytest.mark.parametrize("name", ["clip.mp4", "clip.MP4"])
def test_mp4_keeps_the_frame_size_in_any_case_of_suffix(tmp_path, name):
    """imageio rescaled frames whose size is not a multiple of 16 (61 x 90 came back 64 x 96, every pixel
    resampled), and an upper-case ``.MP4`` went to a TIFF writer that took no fps (TypeError)."""
    from sim.physics.preview import write_video

    y, x = np.mgrid[0:61, 0:90]
    frame = np.stack([x * 2, y * 3, np.full_like(x, 128)], axis=-1).astype(np.uint8)  # smooth ramps
    frames = np.stack([frame, np.roll(frame, 3, axis=1), np.roll(frame, 6, axis=1)])
    path = write_video(tmp_path / name, frames, 12.0)
    back = imageio.mimread(path, format="FFMPEG")
    assert len(back) == 3 and back[0].shape == (62, 90, 3)  # one edge row repeated for an even height
    err = np.abs(back[0][:61].astype(float) - frame).mean()
    assert err < 3.0, err  # the same pixels (H.264's loss), not a resampled image
    np.testing.assert_allclose(back[0][61].astype(float), back[0][60].astype(float), atol=8)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left
    with pytest.raises(ValueError, match=r"frames: expected RGB uint8 frames"):
        write_video(tmp_path / "x.mp4", frames.astype(np.float32), 12.0)
    with pytest.raises(ValueError, match=r"fps: must be a positive finite number"):
        write_video(tmp_path / "x.gif", frames, float("nan"))
