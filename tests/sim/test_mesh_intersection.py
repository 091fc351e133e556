"""Mesh self-intersection: constructed cases with known answers and agreement with a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest
from mesh_cases import box, fold, tube, two_boxes
from mesh_intersection_reference import self_intersections_reference

from sim.mesh_intersection import (
    MeshSelfIntersection,
    SelfIntersectionConfig,
    face_labels,
    intersection_segments,
    ring_neighbour_pairs,
)

EXACT = 1e-12
"""Float64 geometry on exactly representable inputs."""
LENGTH_TOL = 1e-9
"""Relative tolerance (x character size) on intersection lengths and on which pairs count as touching."""


def _compare_with_reference(checker: MeshSelfIntersection, points: np.ndarray) -> None:
    """Pairs longer than the touching tolerance agree exactly, lengths to LENGTH_TOL (x size)."""
    tol = LENGTH_TOL * checker.size
    ref_pairs, ref_len = self_intersections_reference(checker.triangles, points, checker.excluded, min_length=tol)
    for method in ("bvh", "brute_force"):
        got = checker.frame(points, method, penetration=False)
        keep = got.lengths > tol
        np.testing.assert_array_equal(got.pairs[keep], ref_pairs)
        np.testing.assert_allclose(got.lengths[keep], ref_len, atol=tol)


@pytest.mark.parametrize("d", [0.05, 0.1, 0.2])
def test_overlapping_boxes_known_amount(d):
    tris, rest, pts = two_boxes(d)
    checker = MeshSelfIntersection(tris, rest)
    frame = checker.frame(pts)
    # A's face x = 1 (faces 2, 3) crosses B's four side faces (faces 16..23) along a 0.5 x 0.5 square
    hit_faces = set(frame.pairs.ravel().tolist())
    assert hit_faces == {2, 3, *range(16, 24)}
    assert frame.lengths.sum() == pytest.approx(2.0, abs=LENGTH_TOL)
    assert frame.depths.max() == pytest.approx(d, abs=EXACT)
    assert frame.face_share == pytest.approx(10 / 24)
    # B's four vertices at x = 1 - d are inside A, exactly d behind A's face x = 1
    np.testing.assert_array_equal(np.sort(frame.inside_vertices), [8, 9, 10, 11])
    np.testing.assert_allclose(frame.inside_depths, d, atol=1e-9)
    assert set(frame.inside_faces.tolist()) <= {2, 3}
    # the contour: four sides of the square at x = 1
    seg = intersection_segments(pts, tris, frame.pairs)
    np.testing.assert_allclose(seg[..., 0], 1.0, atol=EXACT)
    np.testing.assert_allclose(np.linalg.norm(seg[:, 1] - seg[:, 0], axis=1), frame.lengths, atol=EXACT)
    _compare_with_reference(checker, pts)


def test_separate_and_rest_overlapping_boxes_report_nothing():
    tris, rest, pts = two_boxes(0.1)
    checker = MeshSelfIntersection(tris, rest)
    assert len(checker.frame(rest).pairs) == 0
    # boxes already overlapping in the rest pose: those pairs are rest neighbours, never reported
    at_rest = MeshSelfIntersection(tris, pts)
    assert len(at_rest.frame(pts).pairs) == 0
    assert {(2, 16), (3, 22)} <= set(map(tuple, at_rest.excluded.tolist()))


def test_flat_shaded_copy_welds_to_same_topology():
    tris, rest, pts = two_boxes(0.1)
    # every triangle gets its own three vertices (as in glTF flat shading)
    flat_tris = np.arange(3 * len(tris)).reshape(-1, 3)
    shared = MeshSelfIntersection(tris, rest)
    flat = MeshSelfIntersection(flat_tris, rest[tris].reshape(-1, 3))
    np.testing.assert_array_equal(flat.excluded, shared.excluded)
    a, b = shared.frame(pts), flat.frame(pts[tris].reshape(-1, 3))
    np.testing.assert_array_equal(a.pairs, b.pairs)
    np.testing.assert_allclose(a.lengths, b.lengths, atol=EXACT)


def test_ring_neighbour_pairs_on_a_strip():
    # a strip of 6 triangles over vertices 0..7: triangle k = (k, k+1, k+2)
    tris = np.array([[k, k + 1, k + 2] for k in range(6)])
    one = {tuple(p) for p in ring_neighbour_pairs(tris, 8, 1).tolist()}
    # ring 1: sharing a vertex, i.e. |i - j| <= 2
    assert one == {(i, j) for i in range(6) for j in range(6) if i != j and abs(i - j) <= 2}
    two = {tuple(p) for p in ring_neighbour_pairs(tris, 8, 2).tolist()}
    # ring 2: a vertex of j at most one edge from a vertex of i; on this strip edges join |a - b| <= 2
    assert two == {(i, j) for i in range(6) for j in range(6) if i != j and abs(i - j) <= 4}
    assert len(ring_neighbour_pairs(tris, 8, 0)) == 0


def test_folded_tube_intersects_itself_along_two_lines():
    L, r, rings, sides = 2.0, 0.1, 41, 12
    rest, tris = tube(L, r, rings, sides)
    dx = L / (rings - 1)
    folded = fold(rest, L, r)  # the far half turned back onto the near half: surfaces cross along two lines
    far = rest[:, 0] > L / 2 + 1e-9
    checker = MeshSelfIntersection(tris, rest)
    frame = checker.frame(folded)
    assert len(frame.pairs) > 0
    # no pair lies within one half (each half alone is a straight tube)
    near_face, far_face = (~far)[tris].all(axis=1), far[tris].all(axis=1)
    a, b = frame.pairs.T
    assert not np.any((near_face[a] & near_face[b]) | (far_face[a] & far_face[b]))
    # away from the hinge the contour is two lines: faces whose x-extent lies in [0, X] carry length 2 X
    X = 10 * dx
    xmax = folded[tris][:, :, 0].max(axis=1)
    clean = (xmax[frame.pairs[:, 0]] <= X + 1e-9) & (xmax[frame.pairs[:, 1]] <= X + 1e-9)
    assert frame.lengths[clean].sum() == pytest.approx(2 * X, rel=1e-9)
    _compare_with_reference(checker, folded)
    # straight tube: nothing
    assert len(checker.frame(rest).pairs) == 0


def test_face_labels_pick_dominant_joint():
    from sim import SkinnedMesh

    pts = np.zeros((4, 3))
    mesh = SkinnedMesh(
        "m", pts, [[0, 1, 2], [1, 2, 3]], [[0, 1], [0, 1], [1, 2], [2, 0]], [[0.9, 0.1], [0.6, 0.4], [0.5, 0.5], [1, 0]]
    )
    # face 0: joint 0 weight 1.5, joint 1 weight 1.0, joint 2 0.5; face 1: joint 0 0.6, 1 0.9, 2 1.5
    np.testing.assert_array_equal(face_labels(mesh), [0, 2])


def test_input_validation():
    tris, rest, _ = two_boxes(0.1)
    with pytest.raises(ValueError, match="rest_points"):
        MeshSelfIntersection(tris, rest[:, :2])
    with pytest.raises(ValueError, match="out of range"):
        MeshSelfIntersection(tris + 100, rest)
    checker = MeshSelfIntersection(tris, rest, SelfIntersectionConfig(ring_count=1))
    with pytest.raises(ValueError, match="points"):
        checker.frame(rest[:5])
    with pytest.raises(ValueError, match="method"):
        checker.frame(rest, "octree")  # type: ignore[arg-type]


def test_a_mesh_without_faces_has_no_intersections():
    # Warp's BVH build on zero triangles killed the process (segmentation fault) before any frame was tested
    _, rest, _ = two_boxes(0.1)
    checker = MeshSelfIntersection(np.zeros((0, 3), np.int64), rest)
    for method in ("bvh", "brute_force"):
        frame = checker.frame(rest + 0.01, method)
        assert len(frame.pairs) == 0 and frame.face_hit.shape == (0,)
    metrics = checker.motion(np.stack([rest, rest * 1.1]))
    assert metrics.face_count == 0 and metrics.max_depth_m == 0.0 and metrics.intersecting_frames == 0
    with pytest.raises(ValueError, match="non-finite"):
        checker.frame(np.full_like(rest, np.nan))


def test_weld_tolerance_and_size_that_would_weld_everything_are_refused():
    """weld_tolerance_rel 0, or a size of 0, NaN or < 0, rounded every vertex onto one int64 cell (overflow or a
    NaN grid): the whole mesh welded into one vertex, every face pair was a ring neighbour and nothing was tested."""
    tris, rest, _ = two_boxes(0.1)
    assert MeshSelfIntersection(tris, rest).welded.max() > 1
    with pytest.raises(ValueError, match=r"SelfIntersectionConfig\.weld_tolerance_rel: must be a finite number > 0"):
        MeshSelfIntersection(tris, rest, SelfIntersectionConfig(weld_tolerance_rel=0.0))
    for bad in (0.0, float("nan"), -1.0):
        with pytest.raises(ValueError, match="size: must be a finite length > 0"):
            MeshSelfIntersection(tris, rest, size=bad)
    with pytest.raises(ValueError, match="weld grid overflows int64"):
        MeshSelfIntersection(tris, rest + 1e6, SelfIntersectionConfig(weld_tolerance_rel=1e-18))


def test_fox_clips_agree_with_brute_force_on_every_frame(assets_dir):
    import sim
    import usd_io

    asset = usd_io.load_asset(assets_dir / "gltf" / "Fox.glb")
    mesh = asset.rig.merged_mesh()
    checker = MeshSelfIntersection(mesh.triangles, mesh.points)
    frames_tested = 0
    for clip in asset.clips.values():
        points, _ = sim.skin_motion(asset.rig, clip)
        for p in points:
            _compare_with_reference(checker, p)
            frames_tested += 1
    assert frames_tested == sum(c.frame_count for c in asset.clips.values())


def test_contour_segments_agree_with_the_kernel_when_an_edge_lies_in_the_other_plane():
    """A face whose edge lies in the other face's plane, turned so its plane distances are ~1e-17 instead of 0: the
    kernel snaps them and reports the 0.6 m edge; the NumPy contour took an arbitrary part of it, or found no
    crossing and put the segment at the world origin."""
    from sim.rotations import quat_to_matrix

    rng = np.random.default_rng(3)
    a = np.array([[-0.3, 0, 0], [0.3, 0, 0], [0, 1, 0]])  # its first edge lies in B's plane y = 0
    b = np.array([[-1, 0, -1], [1, 0, -1], [0, 0, 1]])
    tris = np.array([[0, 1, 2], [3, 4, 5]])
    config = SelfIntersectionConfig(ring_count=0, rest_clearance_rel=0)
    compared = 0
    for _ in range(20):
        rot, offset = quat_to_matrix(rng.normal(size=4)), np.array([5.0, 3.0, 1.0])
        pts = np.concatenate([a, b]) @ rot.T + offset
        rest = pts + np.array([[0, 0, 0]] * 3 + [[0, 0, 10]] * 3)  # apart at rest: the pair is checked
        frame = MeshSelfIntersection(tris, rest, config).frame(pts, penetration=False)
        if not len(frame.pairs):  # round-off may put the edge on either side: then neither reports it
            continue
        compared += 1
        seg = intersection_segments(pts, tris, frame.pairs)[0]
        assert np.linalg.norm(seg[1] - seg[0]) == pytest.approx(frame.lengths[0], abs=LENGTH_TOL)
        edge = a[:2] @ rot.T + offset
        np.testing.assert_allclose(sorted(map(tuple, seg)), sorted(map(tuple, edge)), atol=1e-9)
    assert compared >= 5


def _pushed_into_unit_box(lower: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit box A (faces 0..11; its top z = 1 is faces 10, 11) and an 8-vertex solid B (``box`` topology, vertex
    4 ix + 2 iy + iz) with corners ``lower``: triangles, rest points with B 5 m above, posed points."""
    va, ta = box((0, 0, 0), (1, 1, 1))
    _, tb = box((0, 0, 0), (1, 1, 1))
    return np.concatenate([ta, tb + 8]), np.concatenate([va, lower + np.array([0, 0, 5])]), np.concatenate([va, lower])


@pytest.mark.parametrize("width", [0.05, 0.3])
@pytest.mark.parametrize("d", [0.1, 0.15])
def test_thin_limb_is_measured_to_the_body_it_went_into(width, d):
    """A stick ``width`` wide pushed ``d`` into the box: its bottom corners lie exactly ``d`` below the box's top. The
    stick's own far side (``width`` away, with the corners behind it) capped the thin stick's depth at 0.05."""
    stick, _ = box((0.5 - width / 2, 0.5 - width / 2, 1 - d), (0.5 + width / 2, 0.5 + width / 2, 1.5))
    tris, rest, pts = _pushed_into_unit_box(stick)
    frame = MeshSelfIntersection(tris, rest, size=1.0).frame(pts)
    np.testing.assert_array_equal(np.sort(frame.inside_vertices), [8, 10, 12, 14])  # the bottom corners (iz = 0)
    np.testing.assert_allclose(frame.inside_depths, d, atol=1e-9)
    assert set(frame.inside_faces.tolist()) <= {10, 11}
    assert frame.penetration_depth == pytest.approx(d, abs=1e-9)


@pytest.mark.parametrize("angle", [75.0, 90.0, 105.0])
def test_arm_swung_into_the_torso_is_as_deep_as_its_distance_to_the_torso(angle):
    """The built-in biped's left arm swung ``angle`` degrees into its torso: the deepest arm vertex is ~0.107 m from the
    torso's surface (float64 distance to every face outside the arm); the depth was 0.041 m at every angle."""
    from audit_cases import limb_through_body
    from mesh_intersection_reference import point_triangle_distances

    import sim
    from sim import characters

    rig, _ = characters.build("biped")
    rest = sim.Motion(30.0, rig.rest_translations[:1], rig.rest_rotations[None])
    points = sim.skin_motion(rig, limb_through_body(rig, rest, "left_upper_arm", 0, 1, -angle))[0][0]
    mesh = rig.merged_mesh()
    checker = MeshSelfIntersection(mesh.triangles, mesh.points)
    frame = checker.frame(points)
    arm = [rig.joint_index(n) for n in ("left_clavicle", "left_upper_arm", "left_lower_arm", "left_hand")]
    on_arm = np.isin(face_labels(mesh), arm)
    weights = np.zeros((mesh.vertex_count, rig.joint_count))
    np.add.at(weights, (np.arange(mesh.vertex_count)[:, None], mesh.influence_joints), mesh.influence_weights)
    arm_inside = frame.inside_vertices[np.isin(weights[frame.inside_vertices].argmax(axis=1), arm)]
    assert len(arm_inside) > 100
    to_torso = point_triangle_distances(points[arm_inside], points[mesh.triangles[~on_arm]])
    assert to_torso.max() > 0.1
    got = dict(zip(frame.inside_vertices.tolist(), frame.inside_depths.tolist(), strict=True))
    deepest = arm_inside[np.argmax(to_torso)]
    assert got[int(deepest)] == pytest.approx(to_torso.max(), abs=1e-3 * checker.size)
    assert frame.penetration_depth == pytest.approx(to_torso.max(), abs=1e-3 * checker.size)


@pytest.mark.parametrize("d", [0.18, 0.2, 0.24])
def test_depth_between_the_last_doubled_box_and_max_depth(d):
    """A frustum (bottom 0.4 wide, top 0.1) pushed ``d`` into the box: its bottom corners lie ``d`` below the box's top,
    farther from the contour (on its slanted sides). The search doubled 0.02 .. 0.16, skipped 0.25 and reported
    max_depth (0.25, face -1) for any d in (0.16, 0.25]."""
    frustum, _ = box((0, 0, 0), (1, 1, 1))
    half = np.where(frustum[:, 2] == 0, 0.2, 0.05)[:, None]
    frustum = np.concatenate([0.5 + (2 * frustum[:, :2] - 1) * half, np.where(frustum[:, 2:] == 0, 1 - d, 1.02)], 1)
    tris, rest, pts = _pushed_into_unit_box(frustum)
    frame = MeshSelfIntersection(tris, rest, size=1.0).frame(pts)
    bottom = np.isin(frame.inside_vertices, [8, 10, 12, 14])
    assert bottom.sum() == 4
    np.testing.assert_allclose(frame.inside_depths[bottom], d, atol=1e-9)
    assert set(frame.inside_faces[bottom].tolist()) <= {10, 11}


def test_depth_search_below_its_first_box():
    """max_depth_rel 0.01 below the search's first box (0.02): a slab 0.002 in reports its face, not -1."""
    slab, _ = box((0.35, 0.35, 1 - 0.002), (0.65, 0.65, 1.5))
    tris, rest, pts = _pushed_into_unit_box(slab)
    frame = MeshSelfIntersection(tris, rest, SelfIntersectionConfig(max_depth_rel=0.01), size=1.0).frame(pts)
    np.testing.assert_allclose(frame.inside_depths, 0.002, atol=1e-9)
    assert set(frame.inside_faces.tolist()) <= {10, 11}


def test_collinear_triangle_never_intersects_after_round_off():
    """B's vertices are collinear (a segment touching A at one point); rotated, its cross product is ~1e-15, not 0,
    and the pair was reported intersecting in ~40% of rotations. A sliver of aspect 1e-6 crossing A still is."""
    from sim.rotations import quat_to_matrix

    a = np.array([[-1.0, 1, -1], [-1, 0, -1], [-1, -2, 1]])
    segment = np.array([[-1.0, -2, -2], [-1, -2, -1], [-1, -2, 2]])
    sliver = np.array([[-1.5, -0.5, -0.3], [-0.5, -0.5, -0.3], [-1.0, -0.5, -0.3 + 1e-6]])
    tris = np.array([[0, 1, 2], [3, 4, 5]])
    config = SelfIntersectionConfig(ring_count=0, rest_clearance_rel=0)
    rng = np.random.default_rng(0)
    sliver_hits = 0
    for _ in range(50):
        rot, offset = quat_to_matrix(rng.normal(size=4)), rng.normal(size=3) * 10
        for other, hits in ((segment, 0), (sliver, 1)):
            pts = np.concatenate([a, other]) @ rot.T + offset
            rest = pts + np.array([[0, 0, 0]] * 3 + [[0, 0, 10]] * 3)
            frame = MeshSelfIntersection(tris, rest, config, size=4.0).frame(pts, penetration=False)
            assert len(frame.pairs) == hits
            sliver_hits += hits
    assert sliver_hits == 50


def test_fold_vertex_is_no_deeper_than_its_distance_to_outside():
    """The built-in biped's idle, frame 90: its deepest inside vertices sit in a fold of the armpit whose crossing
    faces are rest neighbours (no pair records it), 0.4-1 mm from the outside (float64 winding numbers around
    them); they were reported 22 mm deep. Where their edges to outside vertices leave the body bounds them."""
    from mesh_intersection_reference import distance_to_outside

    import sim
    from sim import characters

    rig, clips = characters.build("biped-idle")
    idle = clips["idle"]
    points = sim.skin_motion(rig, sim.Motion(idle.fps, idle.root_translations[90:91], idle.rotations[90:91]))[0][0]
    mesh = rig.merged_mesh()
    checker = MeshSelfIntersection(mesh.triangles, mesh.points)
    frame = checker.frame(points)
    assert len(frame.pairs) > 0
    for k in np.argsort(-frame.inside_depths)[:3]:
        v = int(frame.inside_vertices[k])
        outside = distance_to_outside(points, mesh.triangles, v, 0.005 * checker.size, 1e-6 * checker.size)
        assert frame.inside_depths[k] <= outside + 1e-6 * checker.size
    assert frame.penetration_depth < 0.002
