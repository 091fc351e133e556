"""Inputs that made the readers read forever, allocate without bound or leak a foreign exception: devices and pipes
named by a path or a buffer URI, lazily read corrupt .usdc data, huge frames x joints BVH clips and bufferless glTF
accessors, deep node chains, glTF extensions that are required and unknown. Each is refused with an InputError
naming the file and the field."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import gltf_builders as B
import numpy as np
import pytest

import usd_io._bvh as bvh_module
from usd_io import InputError, load_asset, read_bvh, read_gltf, read_usdskel, write_usdskel

ZERO_DEVICE = Path("/dev/zero")
"""Reads endless zero bytes: a reader that reads it whole never returns."""

needs_dev_zero = pytest.mark.skipif(not ZERO_DEVICE.exists(), reason="no /dev/zero on this system")

BVH = """HIERARCHY
ROOT hips
{
\tOFFSET 0 0 0
\tCHANNELS 1 Zrotation
\tJOINT a
\t{
\t\tOFFSET 0 1 0
\t\tCHANNELS 0
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 1 0
\t\t}
\t}
}
MOTION
Frames: FRAMES
Frame Time: 0.033333
"""


def _bvh(tmp_path: Path, frames: int) -> Path:
    path = tmp_path / "clip.bvh"
    path.write_text(BVH.replace("FRAMES", str(frames)) + "0\n" * frames)
    return path


# -- devices and pipes --------------------------------------------------------------------------------------------
@needs_dev_zero
@pytest.mark.parametrize("suffix", [".gltf", ".bvh", ".usda"])
def test_a_path_naming_a_device_is_refused(tmp_path, suffix):
    """``read_gltf`` / ``read_bvh`` read /dev/zero forever (``Path.read_bytes``) when a path led to it."""
    link = tmp_path / f"asset{suffix}"
    link.symlink_to(ZERO_DEVICE)
    reader = {".gltf": read_gltf, ".bvh": read_bvh, ".usda": read_usdskel}[suffix]
    with pytest.raises(InputError, match="not a regular file") as err:
        reader(link)
    assert err.value.path == str(link)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_path_naming_a_pipe_is_refused(tmp_path):
    fifo = tmp_path / "clip.bvh"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer that never comes
    with pytest.raises(InputError, match="not a regular file"):
        read_bvh(fifo)


@needs_dev_zero
def test_a_buffer_uri_naming_a_device_is_refused(tmp_path):
    b = B.minimal_skin()
    path = b.write(tmp_path / "skin.gltf", "external")
    doc = path.read_text().replace('"uri": "skin%20data.bin"', f'"uri": "{ZERO_DEVICE}"')
    assert str(ZERO_DEVICE) in doc
    path.write_text(doc)
    with pytest.raises(InputError) as err:
        read_gltf(path)
    assert (err.value.path, err.value.field) == (str(path), "buffers[0].uri")
    assert f"cannot read buffer file '{ZERO_DEVICE}' (not a regular file" in err.value.problem


def test_a_buffer_file_longer_than_its_byte_length_is_read_that_far(tmp_path):
    b = B.minimal_skin()
    path = b.write(tmp_path / "skin.gltf", "external")
    reference = read_gltf(path)
    with (tmp_path / "skin data.bin").open("ab") as f:
        f.write(b"\xff" * 4096)  # trailing bytes beyond byteLength are not part of the buffer
    again = read_gltf(path)
    np.testing.assert_array_equal(again.rig.meshes[0].points, reference.rig.meshes[0].points)


# -- lazily read corrupt USD data -----------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::usd_io.UsdSkelWarning")  # damaged weights are renormalized
def test_corrupt_usdc_data_is_an_input_error(tmp_path):
    """A .usdc with damaged bytes opens (USD reads values lazily) and then raised ``pxr.Tf.ErrorException`` from the
    first value it failed to decompress. Every damaged copy now succeeds or raises InputError."""
    asset = load_asset("procedural:quadruped-walk")
    good = tmp_path / "good.usdc"
    write_usdskel(good, asset.rig, [asset.clip()])
    data = good.read_bytes()
    bad = tmp_path / "bad.usdc"
    lazy = 0
    for seed in range(40):
        rng = random.Random(seed)
        damaged = bytearray(data)
        for _ in range(8):
            damaged[rng.randrange(len(damaged))] ^= 0xFF
        bad.write_bytes(bytes(damaged))
        try:
            read_usdskel(bad)
        except InputError as e:
            assert e.path == str(bad)
            lazy += e.field == "file" and e.problem.startswith("corrupt data (")
    assert lazy > 0  # the damage reached compressed values in some copies (7 of the 40 with usd-core 26.11)


# -- sizes ----------------------------------------------------------------------------------------------------------
def test_bvh_frames_times_joints_is_bounded(tmp_path, monkeypatch):
    """Joints and End Sites without channels cost no bytes per frame: 7000 one-number rows and 5000 such joints (a
    200 kB file) would need 2 GB (56 bytes per frame and joint). The limit is lowered here to keep the test small;
    3 joints x 10 frames = 30."""
    monkeypatch.setattr(bvh_module, "MAX_FRAME_JOINTS", 30)
    assert len(read_bvh(_bvh(tmp_path, 10), meters_per_unit=1.0).clip().rotations) == 10
    with pytest.raises(InputError) as err:
        read_bvh(_bvh(tmp_path, 11), meters_per_unit=1.0)
    assert err.value.field == "MOTION"
    assert "11 frames x 3 joints (with End Sites) exceeds 30 samples" in err.value.problem


def test_a_bufferless_accessor_is_bounded_in_bytes_not_elements(tmp_path):
    """The old limit counted elements (2^26): that many MAT4s without a bufferView would decode to 8.6 GB of
    float64. The limit is now 512 MiB decoded: 2^22 MAT4s, one more is refused."""
    b = B.minimal_skin()
    b.doc["accessors"].append({"componentType": B.FLOAT, "count": (1 << 22) + 1, "type": "MAT4"})
    b.doc["skins"][0]["inverseBindMatrices"] = len(b.doc["accessors"]) - 1
    path = b.write(tmp_path / "big.gltf")
    with pytest.raises(InputError) as err:
        read_gltf(path)
    assert err.value.field == f"accessors[{len(b.doc['accessors']) - 1}]"
    assert f"would decode to {((1 << 22) + 1) * 16 * 8} bytes (more than {1 << 29})" in err.value.problem


def _chain(tmp_path: Path, depth: int) -> Path:
    """A chain of ``depth + 1`` nodes (the last has ``depth`` ancestors) whose last two nodes are a skin's joints."""
    b = B.GltfBuilder()
    nodes = [b.node(f"n{i}", translation=[0.0, 0.001, 0.0]) for i in range(depth + 1)]
    for parent, child in itertools.pairwise(nodes):
        b.add_children(parent, child)
    b.roots(nodes[0])
    b.skin(nodes[-2:])
    return b.write(tmp_path / f"chain{depth}.gltf")


def test_node_hierarchies_deeper_than_the_limit_are_refused(tmp_path):
    """Each joint's ancestor chain is walked: a 4000-deep chain took 2.5 s, quadratic in its depth."""
    from usd_io._gltf_nodes import MAX_NODE_DEPTH

    asset = read_gltf(_chain(tmp_path, MAX_NODE_DEPTH))
    assert asset.rig.joint_count == 2
    path = _chain(tmp_path, MAX_NODE_DEPTH + 1)
    with pytest.raises(InputError) as err:
        read_gltf(path)
    deepest = MAX_NODE_DEPTH + 1
    assert err.value.field == f"nodes[{deepest}]"
    assert f"'n{deepest}' has {deepest} ancestors" in err.value.problem


# -- extensions -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "required, problem",
    [
        (["EXT_mesh_gpu_instancing"], "EXT_mesh_gpu_instancing is required by the file and not supported"),
        (["KHR_materials_unlit", "KHR_animation_pointer"], "KHR_animation_pointer is required by the file"),
        (["EXT_meshopt_compression"], "EXT_meshopt_compression is not supported: decompress the file first"),
    ],
)
def test_unknown_required_extensions_are_refused(tmp_path, required, problem):
    """glTF 2.0 section 3.12: a loader refuses a file that requires an extension it does not support; an
    instancing or animation-pointer file was read as if the extension were absent."""
    b = B.minimal_skin()
    b.doc["extensionsRequired"] = required
    with pytest.raises(InputError) as err:
        read_gltf(b.write(tmp_path / "ext.gltf"))
    assert err.value.field == "extensionsRequired"
    assert problem in err.value.problem


def test_required_extensions_that_leave_the_content_readable_are_accepted(tmp_path):
    b = B.minimal_skin()
    reference = read_gltf(b.write(tmp_path / "plain.gltf"))
    b.doc["extensionsRequired"] = ["KHR_materials_emissive_strength", "KHR_texture_transform", "KHR_mesh_quantization"]
    asset = read_gltf(b.write(tmp_path / "ext.gltf"))
    np.testing.assert_array_equal(asset.rig.meshes[0].points, reference.rig.meshes[0].points)
    b.doc["extensionsRequired"] = [7]
    with pytest.raises(InputError, match=r"extensionsRequired\[0\]: must be a string, got 7"):
        read_gltf(b.write(tmp_path / "bad.gltf"))
