"""Bad input to the USD, glTF and BVH readers: wrongly typed attributes, blocked samples, singular or out-of-range
transforms, times and rates, duplicate scene entries and skin joints, all named by file and field."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import gltf_builders as B
import numpy as np
import pytest

import sim
from usd_io import InputError, UsdSkelWarning, load_asset
from usd_io._gltf import GltfWarning, read_gltf

# -- USD ------------------------------------------------------------------------------------------------------
USDA = """#usda 1.0
(
    defaultPrim = "Root"
    metersPerUnit = 1
    startTimeCode = 0
    endTimeCode = 2
    timeCodesPerSecond = 2
    upAxis = "Z"
)

def SkelRoot "Root"
{
    def Skeleton "Skel"
    {
        uniform token[] joints = ["a", "a/b"]
        uniform matrix4d[] bindTransforms = [
            ( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1) ),
            ( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1) ),
        ]
        uniform matrix4d[] restTransforms = [
            ( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1) ),
            ( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1) ),
        ]
    }

    def SkelAnimation "Anim"
    {
        uniform token[] joints = ["a", "a/b"]
        float3[] translations.timeSamples = {
            0: [(0, 0, 0), (0, 0, 1)],
            1: [(0, 0, 0), (0, 0, 1)],
            2: [(0, 0, 0), (0, 0, 1)],
        }
        quatf[] rotations.timeSamples = {
            0: [(1, 0, 0, 0), (1, 0, 0, 0)],
            1: [(1, 0, 0, 0), (0.9553365, 0, 0, 0.29552022)],
            2: [(1, 0, 0, 0), (1, 0, 0, 0)],
        }
        half3[] scales = [(1, 1, 1), (1, 1, 1)]
    }

    def Mesh "Mesh" (
        prepend apiSchemas = ["SkelBindingAPI"]
    )
    {
        int[] faceVertexCounts = [3, 3]
        int[] faceVertexIndices = [0, 1, 3, 0, 3, 2]
        point3f[] points = [(0, 0, 0), (0.2, 0, 0), (0, 0, 2), (0.2, 0, 2)]
        matrix4d primvars:skel:geomBindTransform = ( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1) )
        int[] primvars:skel:jointIndices = [0, 0, 1, 1] (
            elementSize = 1
            interpolation = "vertex"
        )
        float[] primvars:skel:jointWeights = [1, 1, 1, 1] (
            elementSize = 1
            interpolation = "vertex"
        )
        rel skel:skeleton = </Root/Skel>
        rel skel:animationSource = </Root/Anim>
    }
}
"""

TRANSLATIONS = """float3[] translations.timeSamples = {
            0: [(0, 0, 0), (0, 0, 1)],
            1: [(0, 0, 0), (0, 0, 1)],
            2: [(0, 0, 0), (0, 0, 1)],
        }"""
ROTATIONS = """quatf[] rotations.timeSamples = {
            0: [(1, 0, 0, 0), (1, 0, 0, 0)],
            1: [(1, 0, 0, 0), (0.9553365, 0, 0, 0.29552022)],
            2: [(1, 0, 0, 0), (1, 0, 0, 0)],
        }"""
IDENTITY = "( (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1) )"


def _usda(tmp_path: Path, *edits: tuple[str, str], name: str = "bad.usda") -> Path:
    """USDA with each ``(old, new)`` replaced once (``old`` must occur)."""
    text = USDA
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return path


USD_BAD = {
    # a float2[] translation was reshaped to 3-vectors: 3 pairs for 2 joints loaded as 2 wrong triples
    "translations float2, 3 values": (
        (TRANSLATIONS, "float2[] translations = [(0, 0), (0, 1), (0, 2)]"),
        "/Root/Anim.translations",
        "declared as float2[], expected float3[] or half3[] or double3[]",
    ),
    # ... and 2 pairs raised a raw numpy reshape ValueError
    "translations float2": (
        (TRANSLATIONS, "float2[] translations = [(0, 0), (0, 1)]"),
        "/Root/Anim.translations",
        "declared as float2[]",
    ),
    # a float4[] (w, x, y, z) read as xyzw: identity became 180 degrees about X
    "rotations float4": (
        (ROTATIONS, "float4[] rotations = [(1, 0, 0, 0), (1, 0, 0, 0)]"),
        "/Root/Anim.rotations",
        "declared as float4[], expected quatf[] or quath[] or quatd[]",
    ),
    # 6 2D points read as 4 3D points
    "points float2": (
        ("point3f[] points = [(0, 0, 0), (0.2, 0, 0), (0, 0, 2), (0.2, 0, 2)]",
         "float2[] points = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]"),
        "/Root/Mesh.points",
        "declared as float2[], expected point3f[]",
    ),
    "weights int": (
        ("float[] primvars:skel:jointWeights", "int[] primvars:skel:jointWeights"),
        "/Root/Mesh.primvars:skel:jointWeights",
        "declared as int[], expected float[]",
    ),
    # blocked samples raised a raw reshape ValueError without the file
    "blocked translation sample": (
        ("1: [(0, 0, 0), (0, 0, 1)],", "1: None,"),
        "/Root/Anim.translations",
        "no value at time code 1.0 (a blocked time sample",
    ),
    "blocked rotation sample": (
        ("1: [(1, 0, 0, 0), (0.9553365, 0, 0, 0.29552022)],", "1: None,"),
        "/Root/Anim.rotations",
        "no value at time code 1.0",
    ),
    # an all-zero bind transform collapsed every point to the origin
    "zero geomBindTransform": (
        (f"primvars:skel:geomBindTransform = {IDENTITY}", "primvars:skel:geomBindTransform = "
         "( (0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 1) )"),
        "/Root/Mesh.primvars:skel:geomBindTransform",
        "the matrix is singular (determinant 0)",
    ),
    # times of 1e300 s were accepted
    "tiny timeCodesPerSecond": (
        ("timeCodesPerSecond = 2", "timeCodesPerSecond = 1e-300"),
        "timeCodesPerSecond",
        "out of range [1e-15, 1e+15], got 1e-300",
    ),
    "time codes far away": (
        ("2: [(1, 0, 0, 0), (1, 0, 0, 0)],", "1e300: [(1, 0, 0, 0), (1, 0, 0, 0)],"),
        "/Root/Anim",
        "out of range (> 1e+15 s)",
    ),
    # was reported as a singular skeleton xformOp, with a numpy overflow warning
    "huge metersPerUnit": (
        ("metersPerUnit = 1", "metersPerUnit = 1e300"),
        "metersPerUnit",
        "out of range [1e-15, 1e+15], got 1e+300",
    ),
    "tiny metersPerUnit": (
        ("metersPerUnit = 1", "metersPerUnit = 1e-300"),
        "metersPerUnit",
        "out of range",
    ),
}  # fmt: skip


@pytest.mark.usd
@pytest.mark.parametrize("case", list(USD_BAD))
def test_usd_bad_input_names_file_and_field(tmp_path, case):
    pytest.importorskip("pxr")
    edit, field, problem = USD_BAD[case]
    path = _usda(tmp_path, edit)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy overflow on the way
        with pytest.raises(InputError) as err:
            load_asset(path)
    assert err.value.path == str(path)
    assert err.value.field == field, str(err.value)
    assert problem in err.value.problem, str(err.value)


@pytest.mark.usd
def test_usd_base_stage_and_other_precisions_read(tmp_path):
    """The base stage reads; double3[] translations and quatd[] rotations (other precisions than the schema's)
    read as the same values: the type check refuses other shapes, not other precisions."""
    pytest.importorskip("pxr")
    base = load_asset(_usda(tmp_path, name="base.usda"))
    assert [m.name for m in base.rig.meshes] == ["Mesh"] and base.clip().frame_count == 3
    other = load_asset(
        _usda(
            tmp_path,
            ("float3[] translations.timeSamples", "double3[] translations.timeSamples"),
            ("quatf[] rotations.timeSamples", "quatd[] rotations.timeSamples"),
            name="double.usda",
        )
    )
    np.testing.assert_allclose(other.clip().rotations, base.clip().rotations, atol=1e-6)
    np.testing.assert_allclose(other.clip().root_translations, base.clip().root_translations, atol=1e-6)


@pytest.mark.usd
def test_usd_mesh_without_faces_is_skipped_with_a_warning(tmp_path):
    """As the glTF reader skips a mesh without triangles; it was imported silently as points without faces."""
    pytest.importorskip("pxr")
    path = _usda(
        tmp_path,
        ("int[] faceVertexCounts = [3, 3]", "int[] faceVertexCounts = []"),
        ("int[] faceVertexIndices = [0, 1, 3, 0, 3, 2]", "int[] faceVertexIndices = []"),
    )
    with pytest.warns(UsdSkelWarning, match=r"bad\.usda: /Root/Mesh\.faceVertexCounts: the mesh has 4 points but no"):
        asset = load_asset(path)
    assert asset.rig.meshes == ()


# -- glTF -----------------------------------------------------------------------------------------------------
def _cubic_zero(b):  # q and -q with zero tangents: the Hermite curve passes through 0 at t = 0.5
    b.doc["animations"] = []
    keys = np.zeros((2, 3, 4))
    keys[0, 1], keys[1, 1] = [0, 0, 0, 1], [0, 0, 0, -1]
    b.animation("Z", [(0, "rotation", [0.0, 1.0], keys, "CUBICSPLINE")])


def _key_times(times):
    def edit(b):
        b.doc["animations"] = []
        b.animation("T", [(0, "rotation", times, [[0, 0, 0, 1], [0, 0, 0.3, 0.95]], "LINEAR")])

    return edit


def _int_times(b):
    b.doc["animations"][0]["samplers"][0]["input"] = b.accessor(np.array([0, 1, 2]), B.UINT)


def _edit(path: str, value):
    def apply(b):
        *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        target = b.doc
        for key in head:
            target = target[key]
        target[last] = value(b) if callable(value) else value

    return apply


GLTF_BAD = {
    # "malformed glTF (LinAlgError: SVD did not converge)" with a RuntimeWarning
    "cubic zero rotation": (
        _cubic_zero, "animations[0].channels[0]", "CUBICSPLINE rotation is a zero quaternion at t=0.5 s"
    ),
    # nodes: 0 tip, 1 root, 2 body: the mesh was imported twice ('strip' and 'strip_1')
    "scene node twice": (_edit("scenes.0.nodes", [2, 1, 2]), "scenes[0].nodes[2]", "nodes[2] 'body' is listed twice"),
    "scene node not a root": (_edit("scenes.0.nodes", [2, 1, 0]), "scenes[0].nodes[2]", "is not a root node"),
    # glTF 3.11: key times are FLOAT and start at t >= 0; both were accepted
    "negative key times": (_key_times([-2.0, -1.0]), "animations[0].samplers[0].input", "key 0 is at -2 s"),
    "integer key times": (_int_times, "animations[0].samplers[0].input", "componentType 5125: key times must be FLOAT"),
    # a rate of 1e30 per second was accepted
    "keys 1e-30 s apart": (_key_times([0.0, 1e-30]), "animations[0]", "frame rate 1e+30 per second is out of range"),
    "fewer inverse bind matrices than joints": (  # more are allowed (glTF 2.0: at least one per joint)
        _edit("skins.0.inverseBindMatrices", lambda b: b.accessor(np.stack([np.eye(4)] * 1))),
        "skins[0].inverseBindMatrices",
        "holds 1 MAT4 for 2 joints",
    ),
    "skin joint twice": (_edit("skins.0.joints", [1, 0, 0]), "skins[0].joints[2]", "nodes[0] 'tip' is listed twice"),
    # was reported with the field 'skins' only
    "zero inverse bind matrix": (
        _edit("skins.0.inverseBindMatrices", lambda b: b.accessor(np.tile(np.diag([0.0, 0.0, 0.0, 1.0]), (2, 1, 1)))),
        "skins[0].inverseBindMatrices",
        "matrix 0 (joint 0, nodes[1] 'root') is singular",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(GLTF_BAD))
def test_gltf_bad_input_names_file_and_field(tmp_path, case):
    edit, field, problem = GLTF_BAD[case]
    b = B.minimal_skin()
    edit(b)
    path = b.write(tmp_path / "bad.gltf")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(InputError) as err:
            read_gltf(path)
    assert err.value.path == str(path)
    assert err.value.field == field, str(err.value)
    assert problem in err.value.problem, str(err.value)


def test_gltf_weight_sums_are_reported_per_primitive(tmp_path):
    """Two primitives, the second one's weights doubled: one GltfWarning names that primitive's WEIGHTS_0 (the rig's
    RigWarning, which named neither file nor field, is not repeated)."""
    b = B.minimal_skin()
    prim = b.doc["meshes"][0]["primitives"][0]
    doubled = copy.deepcopy(prim)
    weights = np.tile([0.5, 0.5, 0.0, 0.0], (10, 1)) * 2.0
    doubled["attributes"]["WEIGHTS_0"] = b.accessor(weights)
    b.doc["meshes"][0]["primitives"].append(doubled)
    path = b.write(tmp_path / "w.gltf")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        asset = read_gltf(path)
    assert not [w for w in record if issubclass(w.category, sim.RigWarning)]
    (message,) = [str(w.message) for w in record if issubclass(w.category, GltfWarning)]
    assert message.startswith(f"{path}: meshes[0].primitives[1].attributes.WEIGHTS_0: the weights of 10 of 10")
    assert "sum to 2 .. 2, not 1" in message
    np.testing.assert_allclose(asset.rig.meshes[0].influence_weights.sum(axis=1), 1.0, atol=1e-12)


def test_rig_weight_warning_reports_the_largest_deviation():
    """'worst' was the first bad vertex's sum (1.1), not the one furthest from 1 (3.0)."""
    with pytest.warns(sim.RigWarning, match=r"2 vertices have weights not summing to 1 \(worst 3\)"):
        sim.SkinnedMesh("m", [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], [[0], [0], [0]], [[1.1], [3.0], [1.0]])
    with pytest.warns(sim.RigWarning, match=r"\(worst 0.2\)"):
        sim.SkinnedMesh("m", [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], [[0], [0], [0]], [[0.9], [0.2], [1.5]])


# -- BVH ------------------------------------------------------------------------------------------------------
BVH = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT Knee
  {
    OFFSET 0 -4 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 -4 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.04
0 9 0 10 20 30 1 2 3
0 9 0 10 20 30 1 2 4
"""


@pytest.mark.parametrize(
    ("frame_time", "rate"),
    [("1e-320", "inf"), ("1e-200", "1e+200"), ("1e200", "1e-200")],
)
def test_bvh_frame_time_out_of_range(tmp_path, frame_time, rate):
    """1e-320 raised a raw OverflowError (1 / Frame Time is inf); 1e-200 and 1e200 gave rates of 1e200 and
    1e-200 per second (times of 1e200 s)."""
    path = tmp_path / "bad.bvh"
    path.write_text(BVH.replace("Frame Time: 0.04", f"Frame Time: {frame_time}"))
    with pytest.raises(InputError) as err:
        load_asset(path, meters_per_unit=1.0)
    assert err.value.path == str(path)
    assert err.value.field == "MOTION line 18"
    assert f"Frame Time: {frame_time!r} out of range" in err.value.problem
    assert f"({rate} per second)" in err.value.problem
    path.write_text(BVH)
    assert load_asset(path, meters_per_unit=1.0).clip().fps == 25.0
