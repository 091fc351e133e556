"""audit_file on the shared assets, write_audit's folder, and the pytest assertion helpers' messages."""

from __future__ import annotations

import json

import numpy as np
import pytest
from audit_cases import limb_through_body, sliding, sunk

import sim
import usd_io
from sim.audit import AuditConfig
from sim.contact_metrics import ContactConfig
from usd_io import (
    AUDIT_FILES,
    assert_ground_contact,
    assert_no_foot_skate,
    assert_no_self_intersection,
    audit_asset,
    audit_file,
    write_audit,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def biped():
    asset = usd_io.load_asset("procedural:biped-walk")
    return asset.rig, asset.clip()


@pytest.mark.parametrize("clip", ["Survey", "Walk", "Run"])
def test_audit_fox_clips(assets_dir, clip):
    report = audit_file(assets_dir / "gltf" / "Fox.glb", clip)
    assert report.has_mesh and report.clip_name == clip
    assert report.check("self_intersection").status in ("pass", "fail")
    data = json.loads(report.to_json())
    assert data["metrics"]["self_intersection"]["face_count"] == 576
    assert np.isfinite(data["metrics"]["ground"]["max_penetration_m"])
    # the Fox's clips keep their feet on the ground within 2.5% of its size and never float
    assert report.check("ground_penetration").status == "pass"
    assert report.check("floating").status == "pass"


@pytest.mark.parametrize("name", ["131_01.bvh", "131_02.bvh"])
def test_audit_cmu_bvh_runs_on_joints(assets_dir, name):
    report = audit_file(assets_dir / "bvh" / name)
    assert not report.has_mesh
    assert report.check("self_intersection").status == "skipped"
    assert report.frame_count > 900 and report.fps == pytest.approx(120.0)
    assert report.check("bone_length").status == "pass"  # BVH offsets are fixed
    json.loads(report.to_json())


def test_write_audit_writes_three_files(biped, tmp_path):
    out = tmp_path / "audit"
    report = write_audit(out, *biped)
    assert sorted(p.name for p in out.iterdir()) == sorted(AUDIT_FILES)
    data = json.loads((out / "report.json").read_text())
    assert data["passed"] is report.passed is True
    for png in ("timeline.png", "worst_frame.png"):
        assert (out / png).read_bytes().startswith(PNG_MAGIC)


def test_assert_ground_contact(biped):
    rig, walk = biped
    assert_ground_contact((rig, walk), max_penetration_m=0.01)
    with pytest.raises(AssertionError) as err:
        assert_ground_contact((rig, sunk(walk, 20, 45, 0.03)), max_penetration_m=0.01)
    msg = str(err.value)
    assert "frames 20-44 (0.67-1.47 s)" in msg
    assert "foot" in msg or "toes" in msg


def test_assert_no_foot_skate(biped):
    rig, walk = biped
    assert_no_foot_skate((rig, walk))
    with pytest.raises(AssertionError, match=r"(left|right)_(foot|toes)' slides .* over frames \d+-\d+"):
        assert_no_foot_skate((rig, sliding(walk, 20, 45, 0.8)))
    # a NaN threshold is refused, not passed (the helpers skipped the config check)
    with pytest.raises(ValueError, match=r"AuditConfig\.slide_rel: must be a positive finite number"):
        assert_no_foot_skate((rig, walk), config=AuditConfig(slide_rel=float("nan")))
    with pytest.raises(ValueError, match=r"AuditConfig\.contact\.ground_height: must be a finite number"):
        assert_ground_contact((rig, walk), config=AuditConfig(contact=ContactConfig(ground_height=float("nan"))))


def test_assert_no_foot_skate_fails_sliding_back_and_forth():
    """The idle's whole body shuffling +-4 cm three times a second for 2 s: the planted feet slide ~0.9 m with no
    net displacement, which the net slide alone passed; the slide path fails."""
    asset = usd_io.load_asset("procedural:biped-idle")
    rig, walk = asset.rig, asset.clip().slice(0, 61)
    offset = 0.04 * np.sin(2 * np.pi * 3 * (walk.times - walk.times[0]))
    root = walk.root_translations.copy()
    root[:, 0] += offset
    shuffle = sim.Motion(walk.fps, root, walk.rotations, walk.translations, times=walk.times)
    with pytest.raises(AssertionError, match=r"slides .* m net along a .* m path over frames"):
        assert_no_foot_skate((rig, shuffle))


def test_audit_asset_derives_limits_a_glitch_cannot_drag():
    """A single-clip asset (its limits come from the clip itself): a hind leg turned +100 deg for 5 of the walk's
    49 frames dragged the 5% range with it and passed."""
    asset = usd_io.load_asset("procedural:quadruped-walk")
    walk = asset.clip()
    j = asset.rig.joint_index("hind_left_upper_leg")
    rot = walk.rotations.copy()
    q = sim.rotations.axis_angle_to_quat(np.array([0.0, np.deg2rad(100.0), 0.0]))
    rot[10:15, j] = sim.rotations.quat_multiply(np.broadcast_to(q, rot[10:15, j].shape), rot[10:15, j])
    glitch = sim.Motion(walk.fps, walk.root_translations, rot, walk.translations, name="glitch")
    check = audit_asset(usd_io.Asset(asset.rig, {"glitch": glitch}, "glitch.usda")).check("joint_limits")
    assert check.status == "fail", check.message
    assert [(r.start, r.stop) for r in check.frame_ranges] == [(10, 15)]
    assert audit_asset(asset).check("joint_limits").status == "pass"


def test_assert_no_self_intersection(biped):
    rig, walk = biped
    assert_no_self_intersection((rig, walk), max_contour_m=0.0)
    with pytest.raises(AssertionError) as err:
        assert_no_self_intersection((rig, limb_through_body(rig, walk, "left_upper_arm", 20, 45, -45.0)))
    msg = str(err.value)
    assert "frames 20-44" in msg and "left_upper_arm" in msg


def test_sources_and_errors(assets_dir, tmp_path):
    path = assets_dir / "gltf" / "Fox.glb"
    asset = usd_io.load_asset(path)
    # a path, an Asset and a (rig, motion) pair give the same metrics
    a = assert_ground_contact(path, max_penetration_m=10.0, clip="Walk")
    b = assert_ground_contact(asset, max_penetration_m=10.0, clip="Walk")
    c = assert_ground_contact((asset.rig, asset.clips["Walk"]), max_penetration_m=10.0)
    np.testing.assert_array_equal(a.penetration_max, b.penetration_max)
    np.testing.assert_array_equal(a.penetration_max, c.penetration_max)
    with pytest.raises(usd_io.InputError, match="clip"):
        audit_file(path, "Gallop")
    with pytest.raises(usd_io.InputError, match="no such file"):
        audit_file(tmp_path / "missing.glb")
    with pytest.raises(usd_io.InputError, match="meshes"):
        assert_no_self_intersection(assets_dir / "bvh" / "131_01.bvh")


def test_audit_usdskel_stage_matches_in_memory(biped, tmp_path):
    rig, walk = biped
    bad = sunk(walk, 20, 45, 0.03)
    stage = tmp_path / "sunk.usda"
    usd_io.write_usdskel(stage, rig, [bad])
    from_file = audit_file(stage)
    check = from_file.check("ground_penetration")
    assert check.status == "fail" and [(r.start, r.stop) for r in check.frame_ranges] == [(20, 45)]
    in_memory = assert_ground_contact((rig, bad), max_penetration_m=1.0)
    np.testing.assert_allclose(from_file.series["penetration_m"], in_memory.penetration_max, atol=1e-5)


@pytest.mark.parametrize(
    ("helper", "argument", "value"),
    [(assert_ground_contact, "max_penetration_m", float("nan")), (assert_ground_contact, "max_penetration_m", -1.0),
     (assert_ground_contact, "max_penetration_m", float("inf")), (assert_no_foot_skate, "max_slide_m", float("nan")),
     (assert_no_foot_skate, "max_slide_m", -0.1), (assert_no_self_intersection, "max_contour_m", float("nan")),
     (assert_no_self_intersection, "max_depth_m", float("nan")), (assert_no_self_intersection, "max_depth_m", -1.0)],
)  # fmt: skip
def test_assert_helpers_refuse_unusable_thresholds(biped, helper, argument, value):
    """A NaN limit passed every frame (no comparison with NaN is true): 5 cm of ground penetration passed."""
    rig, walk = biped
    with pytest.raises(ValueError) as e:
        helper((rig, sunk(walk, 20, 45, 0.05)), **{argument: value})
    assert str(e.value) == f"{argument}: must be a finite number >= 0 [m], got {value!r}"


def test_assert_helpers_refuse_another_config_class(biped):
    """sim.contact_metrics.ContactConfig passed as `config` failed deep inside (AttributeError 'check')."""
    rig, walk = biped
    for helper in (assert_ground_contact, assert_no_foot_skate, assert_no_self_intersection):
        with pytest.raises(TypeError) as e:
            helper((rig, walk), config=ContactConfig())
        assert str(e.value) == "config: expected a sim.audit.AuditConfig, got a sim.contact_metrics.ContactConfig"


def test_unknown_clip_names_the_file_once(assets_dir):
    path = assets_dir / "gltf" / "Fox.glb"
    for call in (lambda: assert_ground_contact(path, clip="Jump"), lambda: audit_file(path, "Jump")):
        with pytest.raises(usd_io.InputError) as e:
            call()
        assert str(e.value) == f"{path}: clip: no clip 'Jump'; available: Survey, Walk, Run"


def test_audit_folder_names_are_unique_ignoring_case_and_short():
    """'Walk 1' and 'Walk:1' (and 'Walk' / 'walk' on a case-insensitive disk) shared one folder: one clip's audit
    overwrote the other's; a 300-character clip name failed with 'File name too long'."""
    from usd_io import audit_folder_names

    names = audit_folder_names(["Walk 1", "Walk:1", "Walk_1", "walk.", "Walk", "x" * 300, ""])
    assert names[:5] == ["Walk_1", "Walk_1_1", "Walk_1_2", "walk", "Walk_2"]  # 'Walk' clashes with 'walk'
    assert len({n.lower() for n in names}) == len(names)
    assert all(len(n.encode()) <= 255 for n in names) and names[-1] == "clip"
