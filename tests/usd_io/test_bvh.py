"""BVH importer: joint world positions against an independent 4x4-matrix BVH forward kinematics, units, axes,
frame rates, and one InputError per kind of malformed file."""

from __future__ import annotations

import math
import re
from pathlib import Path

import bvh_reference
import numpy as np
import pytest

import sim
import usd_io
from usd_io import InputError
from usd_io._bvh import read_bvh

POSE_TOL = 1e-5
"""Allowed joint position error, relative to the skeleton's size."""
EXACT_TOL = 1e-12
"""For quantities the importer only scales or rotates (rest pose, times)."""
CMU_UNIT = 0.0254 / 0.45
Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # +90 deg about X


# -- helpers ---------------------------------------------------------------------------------------------------


def joint(name, offset, channels, *children):
    return {"name": name, "offset": offset, "channels": channels.split(), "children": children}


def end_site(offset):
    return {"name": None, "offset": offset, "channels": [], "children": ()}


def channel_count(node) -> int:
    return len(node["channels"]) + sum(channel_count(c) for c in node["children"])


def bvh_text(root, values, frame_time=1 / 30, nl="\n", indent="\t", number="{:.6f}", row_sep=" ") -> str:
    """BVH text for a tree of :func:`joint` / :func:`end_site` nodes and frame rows ``values`` (F, C)."""
    lines = ["HIERARCHY"]

    def emit(node, depth, keyword):
        pad = indent * depth
        lines.append(f"{pad}{keyword} {node['name']}" if node["name"] else f"{pad}End Site")
        lines.append(pad + "{")
        lines.append(f"{pad}{indent}OFFSET " + " ".join(number.format(v) for v in node["offset"]))
        if node["name"]:
            lines.append(f"{pad}{indent}CHANNELS {len(node['channels'])} " + " ".join(node["channels"]))
        for child in node["children"]:
            emit(child, depth + 1, "JOINT")
        lines.append(pad + "}")

    emit(root, 0, "ROOT")
    lines += ["MOTION", f"Frames: {len(values)}", f"Frame Time: {frame_time}"]
    lines += [row_sep.join(number.format(v) for v in row) for row in values]
    return nl.join(lines) + nl


def random_values(rng, root, frames=7) -> np.ndarray:
    """Channel values: rotations anywhere in [-180, 180] deg, positions of the size of the offsets."""
    return rng.uniform(-180.0, 180.0, size=(frames, channel_count(root)))


def write(tmp_path: Path, text: str, name: str = "clip.bvh") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def check_against_reference(path: Path, asset: usd_io.Asset, up: np.ndarray) -> float:
    """Asserts posed joint positions == scale * up @ reference positions; returns the max error / skeleton size."""
    names, reference = bvh_reference.bvh_world_positions(path)
    expected = np.einsum("ab,fjb->fja", up, reference) * asset.source_meters_per_unit
    got, _ = sim.pose_motion(asset.rig, asset.clip())
    assert got.shape == expected.shape
    size = float(np.ptp(expected.reshape(-1, 3), axis=0).max())
    np.testing.assert_allclose(got, expected, rtol=0, atol=POSE_TOL * size)
    assert [n for n in asset.rig.joint_names if not n.endswith("_end")] == [n for n in names if "End Site" not in n]
    return float(np.abs(got - expected).max() / size)


# -- CMU files -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("stem", "frames"), [("131_01", 994), ("131_02", 1247)])
def test_cmu_against_reference(assets_dir, stem, frames):
    path = assets_dir / "bvh" / f"{stem}.bvh"
    asset = usd_io.load_asset(path)
    clip = asset.clip()
    assert asset.source == str(path)
    assert clip.frame_count == frames
    assert clip.fps == 120.0  # Frame Time .0083333
    np.testing.assert_allclose(clip.times, np.arange(frames) / 120.0, rtol=0, atol=EXACT_TOL)
    assert asset.rig.meshes == ()
    # the CMU conversions keep the ASF lengths (unit 1/0.45 inch): the automatic choice must find it
    assert asset.source_meters_per_unit == pytest.approx(CMU_UNIT, rel=1e-12)
    error = check_against_reference(path, asset, Y_UP_TO_Z_UP)
    print(f"{stem}: max joint position error {error:.2e} x skeleton size")

    # a human-sized figure standing on the ground, Z up
    pos, _ = sim.pose_motion(asset.rig, clip)
    assert 1.2 < asset.rig.height() < 2.0
    toes = [asset.rig.joint_index(n) for n in ("LeftToe_end", "RightToe_end")]
    head = asset.rig.joint_index("Head_end")
    assert abs(pos[:, toes, 2].min()) < 0.1
    assert 1.2 < pos[:, head, 2].mean() < 2.0


def test_cmu_parse_is_consistent_with_explicit_unit(assets_dir):
    path = assets_dir / "bvh" / "131_01.bvh"
    auto = read_bvh(path)
    meters = read_bvh(path, meters_per_unit=1.0, up_axis="Z")
    assert meters.source_meters_per_unit == 1.0
    check_against_reference(path, meters, np.eye(3))
    np.testing.assert_allclose(
        auto.clip().root_translations, meters.clip().root_translations @ Y_UP_TO_Z_UP.T * CMU_UNIT, atol=EXACT_TOL
    )


# -- synthetic files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channels", "angles", "child_bvh"),
    [
        ("Zrotation", [90.0], [-1.0, 0.0, 0.0]),  # right-handed about Z: +Y -> -X
        ("Xrotation", [90.0], [0.0, 0.0, 1.0]),  # about X: +Y -> +Z
        ("Zrotation Xrotation", [90.0, 90.0], [0.0, 0.0, 1.0]),  # Rz @ Rx: X first on the offset, then Z
        ("Xrotation Zrotation", [90.0, 90.0], [-1.0, 0.0, 0.0]),  # Rx @ Rz
    ],
)
def test_hand_computed_rotations(tmp_path, channels, angles, child_bvh):
    """Pins the Euler convention (first listed channel outermost) with values worked out by hand."""
    root = joint("Root", [0, 0, 0], channels, joint("Child", [0, 1, 0], "", end_site([0, 1, 0])))
    path = write(tmp_path, bvh_text(root, np.array([angles])))
    expected_bvh = np.array([[0, 0, 0], child_bvh, 2 * np.array(child_bvh)], dtype=float)
    _, reference = bvh_reference.bvh_world_positions(path)
    np.testing.assert_allclose(reference[0], expected_bvh, atol=EXACT_TOL)
    asset = read_bvh(path, meters_per_unit=1.0)
    got, _ = sim.pose_motion(asset.rig, asset.clip())
    np.testing.assert_allclose(got[0], expected_bvh @ Y_UP_TO_Z_UP.T, atol=EXACT_TOL)


def orders_tree():
    return joint(
        "Hips", [0.5, 90.0, -1.0], "Xposition Yposition Zposition Zrotation Yrotation Xrotation",
        joint("Spine", [0.0, 10.0, 1.0], "Xrotation Yrotation Zrotation",
              joint("Neck", [0.0, 30.0, 0.0], "Yrotation Xrotation Zrotation",
                    joint("Head", [0.0, 10.0, 2.0], "Zrotation Yrotation Xrotation", end_site([0.0, 15.0, 0.0])))),
        joint("Leg", [10.0, -5.0, 0.0], "Zrotation Xrotation Yrotation",
              joint("Shin", [0.0, -40.0, 0.0], "Xrotation", end_site([0.0, -45.0, 3.0]))),
    )  # fmt: skip


@pytest.mark.parametrize("up_axis", ["Y", "Z"])
def test_rotation_orders_against_reference(tmp_path, rng, up_axis):
    root = orders_tree()
    path = write(tmp_path, bvh_text(root, random_values(rng, root)))
    asset = read_bvh(path, meters_per_unit=0.01, up_axis=up_axis)
    check_against_reference(path, asset, Y_UP_TO_Z_UP if up_axis == "Y" else np.eye(3))
    assert asset.clip().translations is None
    assert asset.rig.joint_names == ("Hips", "Spine", "Neck", "Head", "Head_end", "Leg", "Shin", "Shin_end")
    assert asset.rig.parents.tolist() == [-1, 0, 1, 2, 3, 0, 5, 6]


def test_position_channels_on_non_root_joints(tmp_path, rng):
    root = joint(
        "Root", [1.0, 2.0, 3.0], "Zrotation Yrotation Xrotation",  # root without position channels
        joint("Slider", [0.0, 5.0, 0.0], "Xposition Yposition Zposition Zrotation Xrotation Yrotation",
              joint("Partial", [1.0, 2.0, 3.0], "Yposition Xrotation", end_site([0.0, 4.0, 0.0]))),
        joint("Mixed", [0.0, -5.0, 1.0], "Zrotation Xposition Yrotation Zposition Xrotation",
              end_site([2.0, 0.0, 0.0])),
    )  # fmt: skip
    path = write(tmp_path, bvh_text(root, random_values(rng, root)))
    asset = read_bvh(path, meters_per_unit=0.5)
    check_against_reference(path, asset, Y_UP_TO_Z_UP)
    clip = asset.clip()
    assert clip.translations is not None
    # the root has no position channels: it stays at its (rotated, scaled) offset
    np.testing.assert_allclose(
        clip.root_translations, np.tile(Y_UP_TO_Z_UP @ [0.5, 1.0, 1.5], (clip.frame_count, 1)), atol=EXACT_TOL
    )
    # the partial joint keeps its offset's X and Z
    partial = asset.rig.joint_index("Partial")
    np.testing.assert_allclose(clip.translations[:, partial, [0, 2]], np.tile([0.5, 1.5], (7, 1)), atol=EXACT_TOL)


def test_crlf_tabs_whitespace_and_scientific_notation(tmp_path, rng):
    root = orders_tree()
    values = random_values(rng, root)
    plain = write(tmp_path, bvh_text(root, values), "plain.bvh")
    messy_text = bvh_text(root, values, nl="\r\n", indent=" \t  ", number="{:.9e}", row_sep=" \t ")
    messy_text = messy_text.replace("Frames: ", "Frames:\t").replace("\r\nMOTION", "\r\n\r\n  MOTION  ")
    messy_text = messy_text.replace("}\r\n", "}  \r\n\r\n") + "\r\n\r\n"
    messy = write(tmp_path, "\ufeff" + messy_text, "messy.bvh")
    a, b = read_bvh(plain, meters_per_unit=0.01), read_bvh(messy, meters_per_unit=0.01)
    check_against_reference(messy, b, Y_UP_TO_Z_UP)
    np.testing.assert_allclose(a.clip().rotations, b.clip().rotations, atol=1e-8)
    np.testing.assert_allclose(a.clip().root_translations, b.clip().root_translations, atol=1e-8)


def test_rest_pose_and_end_site_names(tmp_path):
    text = """HIERARCHY
ROOT Hips
{
OFFSET 1 2 3
CHANNELS 3 Xposition Yposition Zposition
JOINT Head{ OFFSET 0 10 0
CHANNELS 1 Zrotation
End Site { OFFSET 0 5 0 }
End Site { OFFSET 1 5 0 }
}
JOINT Head_end
{
OFFSET 4 0 0
CHANNELS 0
End Site
{
OFFSET 0 0 1
}
}
}
MOTION
Frames: 1
Frame Time: 0.04
1 2 3 90
"""
    asset = read_bvh(write(tmp_path, text), meters_per_unit=0.1)
    rig = asset.rig
    assert rig.joint_names == ("Hips", "Head", "Head_end1", "Head_end2", "Head_end", "Head_end_end")
    assert rig.parents.tolist() == [-1, 0, 1, 1, 0, 4]
    offsets = np.array([[1, 2, 3], [0, 10, 0], [0, 5, 0], [1, 5, 0], [4, 0, 0], [0, 0, 1]], dtype=float)
    world = np.array([offsets[0], offsets[:2].sum(0), offsets[:3].sum(0), offsets[[0, 1, 3]].sum(0),
                      offsets[[0, 4]].sum(0), offsets[[0, 4, 5]].sum(0)])  # fmt: skip
    np.testing.assert_allclose(rig.rest_world_transforms()[0], 0.1 * world @ Y_UP_TO_Z_UP.T, atol=EXACT_TOL)
    np.testing.assert_allclose(rig.inverse_bind_matrices @ rig.rest_world_matrices(), np.tile(np.eye(4), (6, 1, 1)),
                               atol=EXACT_TOL)  # fmt: skip
    assert asset.clip().fps == 25.0


@pytest.mark.parametrize(
    ("height", "unit"),
    [(1.75, 1.0), (172.0, 0.01), (1650.0, 0.001), (68.0, 0.0254), (30.0, CMU_UNIT), (0.0, 1.0)],
)
def test_automatic_unit(tmp_path, height, unit):
    root = joint("Hips", [0, 0, 0], "Xposition Yposition Zposition",
                 joint("Head", [0, 0.4 * height, 0], "Zrotation", end_site([0, 0.1 * height, 0])),
                 joint("Foot", [0, -0.5 * height, 0], "Zrotation"))  # fmt: skip
    path = write(tmp_path, bvh_text(root, np.zeros((2, channel_count(root)))))
    asset = read_bvh(path)
    assert asset.source_meters_per_unit == unit
    if height:
        assert math.log(asset.rig.height() / 1.7) == pytest.approx(math.log(height * unit / 1.7), abs=1e-12)


@pytest.mark.parametrize(("frame_time", "fps"), [("0.0083333", 120.0), (".04", 25.0), ("0.0333333", 30.0),
                                                 ("0.0123", 1 / 0.0123), ("1e-2", 100.0)])  # fmt: skip
def test_frame_rate(tmp_path, frame_time, fps):
    root = joint("Hips", [0, 0, 0], "Zrotation")
    text = bvh_text(root, np.zeros((3, 1))).replace("Frame Time: 0.03333333333333333", f"Frame Time: {frame_time}")
    clip = read_bvh(write(tmp_path, text)).clip()
    assert clip.fps == fps
    np.testing.assert_allclose(clip.times, np.arange(3) / fps, rtol=0, atol=EXACT_TOL)


def test_zero_frames_gives_no_clip(tmp_path):
    root = joint("Hips", [0, 0, 0], "Zrotation", end_site([0, 1, 0]))
    asset = read_bvh(write(tmp_path, bvh_text(root, np.zeros((0, 1)))))
    assert asset.clips == {}
    assert asset.rig.joint_count == 2


def test_bad_arguments(tmp_path):
    path = write(tmp_path, bvh_text(joint("Hips", [0, 0, 0], "Zrotation"), np.zeros((1, 1))))
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: meters_per_unit: .*got 0.0"):
        read_bvh(path, meters_per_unit=0.0)  # names the file (the convert CLI printed the bare option)
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: up_axis: must be 'Y' or 'Z', got 'X'"):
        read_bvh(path, up_axis="X")  # was a bare ValueError without the file


# -- malformed files -------------------------------------------------------------------------------------------

GOOD = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT LeftHip
  {
    OFFSET 1 -1 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    JOINT LeftKnee
    {
      OFFSET 0 -4 0
      CHANNELS 3 Yrotation Xrotation Zrotation
      End Site
      {
        OFFSET 0 -4 0
      }
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.04
0 9 0 10 20 30 1 2 3 4 5 6
0 9 0 10 20 30 1 2 3 4 5 7
"""

CHANNELLESS = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  End Site
  {
    OFFSET 0 1 0
  }
}
MOTION
Frames: 3
Frame Time: 0.04
"""

# (case id, text -> bad text, expected field, expected words in the problem)
MALFORMED = [
    ("extra_close", lambda t: t.replace("}\nMOTION", "}\n}\nMOTION"), "HIERARCHY line 21",
     "'}' without a matching '{'"),
    ("missing_close", lambda t: t.replace("OFFSET 0 -4 0\n      }\n", "OFFSET 0 -4 0\n"), "HIERARCHY line 20",
     "'MOTION' inside joint 'Hips'"),
    ("end_of_file_inside_joint", lambda t: t[: t.index("      End Site")], "HIERARCHY",
     "end of file inside joint 'LeftKnee' opened at line 10 (missing '}')"),
    ("stray_open", lambda t: t.replace("    OFFSET 1 -1 0", "    {\n    OFFSET 1 -1 0"), "HIERARCHY line 8",
     "'{' without a JOINT"),
    ("no_open_brace", lambda t: t.replace("JOINT LeftKnee\n    {", "JOINT LeftKnee"), "HIERARCHY line 11",
     "expected '{' after JOINT 'LeftKnee'"),
    ("unknown_channel", lambda t: t.replace("Zrotation Xrotation Yrotation", "Zrotation Xrot Yrotation"),
     "HIERARCHY line 9", "unknown channel 'Xrot'"),
    ("channel_count", lambda t: t.replace("CHANNELS 3 Yrotation Xrotation Zrotation", "CHANNELS 3 Yrotation Xrotation"),
     "HIERARCHY line 13", "declares 3 channels but lists 2"),
    ("channel_count_bad", lambda t: t.replace("CHANNELS 3 Yrotation", "CHANNELS three Yrotation"),
     "HIERARCHY line 13", "count 'three'"),
    ("offset_not_numeric", lambda t: t.replace("OFFSET 1 -1 0", "OFFSET 1 -1 x"), "HIERARCHY line 8",
     "OFFSET of joint 'LeftHip': expected 3 numbers, got 'x'"),
    ("offset_short", lambda t: t.replace("OFFSET 1 -1 0", "OFFSET 1 -1"), "HIERARCHY line 9",
     "expected 3 numbers, got 'CHANNELS'"),
    ("offset_nan", lambda t: t.replace("OFFSET 1 -1 0", "OFFSET 1 nan 0"), "HIERARCHY line 8", "non-finite"),
    ("duplicate_name", lambda t: t.replace("JOINT LeftKnee", "JOINT LeftHip"), "HIERARCHY line 10",
     "duplicate joint name 'LeftHip' (first at line 6)"),
    ("no_hierarchy", lambda t: t.replace("HIERARCHY\n", ""), "HIERARCHY line 1", "expected 'HIERARCHY'"),
    ("empty_file", lambda t: "", "HIERARCHY", "empty file"),
    ("missing_motion", lambda t: t[: t.index("MOTION")], "MOTION", "missing MOTION section"),
    ("frames_mismatch", lambda t: t.replace("Frames: 2", "Frames: 3"), "MOTION line 22",
     "Frames: 3 but the file has 2 frame rows"),
    ("frames_not_integer", lambda t: t.replace("Frames: 2", "Frames: 2.5"), "MOTION line 22", "'2.5'"),
    ("frames_missing", lambda t: t.replace("Frames: 2\n", ""), "MOTION line 22", "expected 'Frames: <value>'"),
    ("row_too_long", lambda t: t.replace("4 5 7", "4 5 7 8"), "MOTION line 25", "has 13 values, expected 12"),
    ("row_too_short", lambda t: t.replace("4 5 6\n", "4 5\n"), "MOTION line 24", "has 11 values, expected 12"),
    ("value_not_numeric", lambda t: t.replace("4 5 7", "4 abc 7"), "MOTION line 25",
     "value 11 ('abc') is not a number"),
    ("value_nan", lambda t: t.replace("4 5 7", "4 NaN 7"), "MOTION line 25", "value 11 ('NaN') is not finite"),
    ("binary", lambda t: "\x00\xff\xfe" * 100, "HIERARCHY line 1", "... (300 characters: not a BVH text file?)"),
    ("value_huge", lambda t: t.replace("4 5 7", "4 1e308 7"), "MOTION line 25",
     "value 11 ('1e308') out of range (> 1e+15)"),
    ("offset_huge", lambda t: t.replace("OFFSET 1 -1 0", "OFFSET 1 -1e300 0"), "HIERARCHY line 8", "out of range"),
    ("value_inf", lambda t: t.replace("0 9 0 10 20 30 1 2 3 4 5 6", "0 9 0 10 -inf 30 1 2 3 4 5 6"),
     "MOTION line 24", "value 5 ('-inf') is not finite"),
    ("frame_time_zero", lambda t: t.replace("Frame Time: 0.04", "Frame Time: 0"), "MOTION line 23",
     "Frame Time: '0' is not a positive"),
    ("frame_time_negative", lambda t: t.replace("Frame Time: 0.04", "Frame Time: -0.04"), "MOTION line 23",
     "Frame Time: '-0.04' is not a positive"),
    ("two_roots", lambda t: t.replace("}\nMOTION", "}\nROOT Other\n{\nOFFSET 0 0 0\n}\nMOTION"),
     "HIERARCHY line 21", "a second ROOT"),
    ("frames_superscript_digit", lambda t: t.replace("Frames: 2", "Frames: \u00b2"), "MOTION line 22",
     "is not a non-negative integer"),
    ("frames_arabic_indic_digit", lambda t: t.replace("Frames: 2", "Frames: \u0662"), "MOTION line 22",
     "is not a non-negative integer"),
    ("value_underscore", lambda t: t.replace("4 5 7", "4 5_0 7"), "MOTION line 25",
     "value 11 ('5_0') is not a number"),
    ("offset_underscore", lambda t: t.replace("OFFSET 1 -1 0", "OFFSET 1 -1_0 0"), "HIERARCHY line 8",
     "expected 3 numbers, got '-1_0'"),
    ("frame_time_underscore", lambda t: t.replace("Frame Time: 0.04", "Frame Time: 0.0_4"), "MOTION line 23",
     "Frame Time: '0.0_4' is not a positive"),
    ("channelless_huge_frames", lambda t: CHANNELLESS.replace("Frames: 3", "Frames: 100000000000"), "MOTION line 11",
     "Frames: 100000000000 with no CHANNELS"),
    ("end_site_channels", lambda t: t.replace("OFFSET 0 -4 0\n      }", "OFFSET 0 -4 0\nCHANNELS 1 Xrotation\n      }"),
     "HIERARCHY line 17", "End Site of joint 'LeftKnee' cannot have channels"),
]  # fmt: skip


def test_good_base_file_parses(tmp_path):
    asset = read_bvh(write(tmp_path, GOOD), meters_per_unit=1.0)
    assert asset.rig.joint_names == ("Hips", "LeftHip", "LeftKnee", "LeftKnee_end")
    channelless = read_bvh(write(tmp_path, CHANNELLESS, "channelless.bvh"), meters_per_unit=1.0)
    assert channelless.clip().frame_count == 3  # rest pose throughout


@pytest.mark.parametrize(("edit", "field", "problem"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_file(tmp_path, edit, field, problem):
    bad = edit(GOOD)
    assert bad != GOOD or not bad
    path = write(tmp_path, bad, "bad file.bvh")
    with pytest.raises(usd_io.InputError) as info:
        usd_io.load_asset(path)
    err = info.value
    assert err.path == str(path)
    assert str(err).startswith(f"{path}: {field}: ")
    assert err.field == field
    assert problem in err.problem


@pytest.mark.parametrize("unit", [1e300, 1e14])
def test_a_unit_scaling_lengths_out_of_range_is_refused(tmp_path, unit):
    """meters_per_unit 1e300 wrote a stage of inf translations (convert.py reported success, the audit passed a NaN
    bone length); lengths past the importers' range are refused naming the option."""
    root = joint("Root", [0, 0, 0], "Xposition Yposition Zposition Zrotation", joint("Child", [0, 50, 0], "",
                                                                                     end_site([0, 50, 0])))  # fmt: skip
    path = write(tmp_path, bvh_text(root, np.array([[0.0, 90.0, 0.0, 0.0]])))
    with pytest.raises(InputError, match=re.escape(f"{path.name}: meters_per_unit: {unit:g} scales the HIERARCHY")):
        read_bvh(path, meters_per_unit=unit)
    assert read_bvh(path, meters_per_unit=1e12).rig.height() == pytest.approx(1e14)
