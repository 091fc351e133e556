"""Slow, obviously-correct glTF 2.0 skinning straight from the file, for tests.

It imports nothing from ``usd_io`` or ``sim``: its own container parsing (``.gltf`` with data URIs or external
files, ``.glb``), its own element-by-element accessor decoding (``struct.unpack_from``; strides, normalized
integers, sparse blocks, missing bufferViews), node world matrices by recursion over the WHOLE node tree (so
non-joint ancestors count), its own animation sampling, and the glTF skinning formula::

    p' = C @ sum_k w_k * (world(joint_k) @ IBM_k) @ p

with ``C`` = +90 deg about X (glTF +Y up -> Z up). Choices it shares with the importer, stated here so a reader
can check them against the glTF spec:

* weights are normalized per vertex (the spec requires unit sums; the importer's SkinnedMesh renormalizes);
* rotation keys are normalized before LINEAR/STEP sampling; CUBICSPLINE rotations are normalized after;
  slerp takes the shorter arc; times outside a channel's keys clamp to its end keys;
* the scene is ``scene`` (else 0, else every root node); meshes come in depth-first node order, their
  primitives in order (POINTS/LINES skipped); default morph weights are applied to positions;
* a mesh without a skin counts when its node lies in the rig root's subtree (the root joint of the union of the
  used skins' joints, or the lowest common ancestor of several joint roots) and is moved by its world matrix;
* scale animation IS applied (this is plain glTF); morph weight animation is not.

Public helpers (paths may be ``str`` or ``Path``; ``clip_name`` is an animation's name or ``animation_<i>``):
``reference_clip_names``, ``reference_key_times``, ``reference_skinned_points``, ``reference_bind_points``,
``reference_model_height``.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
from pathlib import Path
from urllib.parse import unquote

import numpy as np

__all__ = [
    "Y_UP_TO_Z_UP",
    "reference_bind_points",
    "reference_clip_names",
    "reference_key_times",
    "reference_model_height",
    "reference_skinned_points",
]

Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
"""+90 deg about X: glTF (x, y, z) -> (x, -z, y)."""

_FORMATS = {5120: "b", 5121: "B", 5122: "h", 5123: "H", 5125: "I", 5126: "f"}
_WIDTHS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


class _GltfFile:
    """A loaded file: JSON, buffers, decoded accessors (cached)."""

    def __init__(self, path: Path):
        data = path.read_bytes()
        binary = None
        if data[:4] == b"glTF":
            json_length = struct.unpack_from("<I", data, 12)[0]
            text = data[20 : 20 + json_length]
            rest = 20 + json_length
            if rest + 8 <= len(data):
                bin_length = struct.unpack_from("<I", data, rest)[0]
                binary = data[rest + 8 : rest + 8 + bin_length]
        else:
            text = data
        self.gltf = json.loads(text)
        self.buffers = []
        for buf in self.gltf.get("buffers", []):
            uri = buf.get("uri")
            if uri is None:
                self.buffers.append(binary)
            elif uri.startswith("data:"):
                self.buffers.append(base64.b64decode(uri.split(",", 1)[1]))
            else:
                self.buffers.append((path.parent / unquote(uri)).read_bytes())
        self.nodes = self.gltf.get("nodes", [])
        self.parent = {}
        for i, node in enumerate(self.nodes):
            for c in node.get("children", []):
                self.parent[c] = i
        self._accessors: dict[int, np.ndarray] = {}

    def accessor(self, index: int) -> np.ndarray:
        """Elements as float64, shape (count, width); MAT4 elements are the 16 column-major numbers."""
        if index not in self._accessors:
            self._accessors[index] = self._decode(self.gltf["accessors"][index])
        return self._accessors[index]

    def _read(self, view_index, byte_offset, ctype, width, count, stride=None):
        view = self.gltf["bufferViews"][view_index]
        buf = self.buffers[view["buffer"]]
        fmt = "<" + _FORMATS[ctype]
        size = struct.calcsize(fmt)
        stride = stride or view.get("byteStride") or size * width
        start = view.get("byteOffset", 0) + byte_offset
        rows = []
        for e in range(count):
            rows.append([struct.unpack_from(fmt, buf, start + e * stride + k * size)[0] for k in range(width)])
        return rows

    def _decode(self, acc: dict) -> np.ndarray:
        ctype, width, count = acc["componentType"], _WIDTHS[acc["type"]], acc["count"]
        if "bufferView" in acc:
            rows = self._read(acc["bufferView"], acc.get("byteOffset", 0), ctype, width, count)
        else:
            rows = [[0] * width for _ in range(count)]
        sparse = acc.get("sparse")
        if sparse:
            idx, val = sparse["indices"], sparse["values"]
            n = sparse["count"]
            size = struct.calcsize(_FORMATS[idx["componentType"]])
            where = self._read(idx["bufferView"], idx.get("byteOffset", 0), idx["componentType"], 1, n, size)
            size = struct.calcsize(_FORMATS[ctype]) * width
            values = self._read(val["bufferView"], val.get("byteOffset", 0), ctype, width, n, size)
            for (i,), v in zip(where, values):
                rows[i] = v
        out = np.array(rows, dtype=np.float64)
        if acc.get("normalized"):
            bits = 8 * struct.calcsize(_FORMATS[ctype])
            if ctype in (5121, 5123):  # unsigned
                out = out / (2**bits - 1)
            else:
                out = np.maximum(out / (2 ** (bits - 1) - 1), -1.0)
        return out


@functools.lru_cache(maxsize=16)
def _load(path: str, mtime: float) -> _GltfFile:
    return _GltfFile(Path(path))


def _file(path) -> _GltfFile:
    path = Path(path)
    return _load(str(path.resolve()), path.stat().st_mtime)


# -- small math (written out, no library helpers) -----------------------------------------------------------
def _quat_matrix(q) -> np.ndarray:
    x, y, z, w = np.asarray(q, dtype=np.float64) / math.sqrt(sum(c * c for c in q))
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _slerp(a, b, u):
    a = np.asarray(a) / np.linalg.norm(a)
    b = np.asarray(b) / np.linalg.norm(b)
    d = float(np.dot(a, b))
    if d < 0:
        b, d = -b, -d
    if d > 1 - 1e-12:
        out = (1 - u) * a + u * b
    else:
        theta = math.acos(d)
        out = (math.sin((1 - u) * theta) * a + math.sin(u * theta) * b) / math.sin(theta)
    return out / np.linalg.norm(out)


def _sample(f: _GltfFile, sampler: dict, path: str, t: float) -> np.ndarray:
    times = f.accessor(sampler["input"])[:, 0]
    values = f.accessor(sampler["output"])
    mode = sampler.get("interpolation", "LINEAR")
    n = len(times)
    if mode == "CUBICSPLINE":
        key = lambda k: values[3 * k + 1]  # noqa: E731
    else:
        key = lambda k: values[k]  # noqa: E731
    if t <= times[0]:
        out = key(0)
    elif t >= times[-1]:
        out = key(n - 1)
    else:
        k = 0
        while times[k + 1] <= t:
            k += 1
        td = times[k + 1] - times[k]
        u = (t - times[k]) / td
        if mode == "STEP":
            out = key(k)
        elif mode == "LINEAR":
            out = _slerp(key(k), key(k + 1), u) if path == "rotation" else key(k) * (1 - u) + key(k + 1) * u
        else:
            out_tangent, in_tangent = values[3 * k + 2], values[3 * (k + 1)]
            out = (
                (2 * u**3 - 3 * u**2 + 1) * key(k)
                + td * (u**3 - 2 * u**2 + u) * out_tangent
                + (-2 * u**3 + 3 * u**2) * key(k + 1)
                + td * (u**3 - u**2) * in_tangent
            )
    out = np.array(out, dtype=np.float64)
    return out / np.linalg.norm(out) if path == "rotation" else out


def _animation(f: _GltfFile, clip_name: str) -> dict:
    for i, anim in enumerate(f.gltf.get("animations", [])):
        if anim.get("name") == clip_name or (anim.get("name") is None and clip_name == f"animation_{i}"):
            return anim
    raise KeyError(f"no animation {clip_name!r}")


def _pose(f: _GltfFile, clip_name: str | None, time: float) -> dict[tuple[int, str], np.ndarray]:
    """Animated (node, path) -> value at ``time``."""
    if clip_name is None:
        return {}
    anim = _animation(f, clip_name)
    out = {}
    for channel in anim["channels"]:
        target = channel["target"]
        if "node" in target and target["path"] in ("translation", "rotation", "scale"):
            sampler = anim["samplers"][channel["sampler"]]
            out[target["node"], target["path"]] = _sample(f, sampler, target["path"], time)
    return out


def _local(f: _GltfFile, n: int, pose: dict) -> np.ndarray:
    node = f.nodes[n]
    if "matrix" in node:
        return np.array(node["matrix"], dtype=np.float64).reshape(4, 4).T
    t = pose.get((n, "translation"), node.get("translation", [0.0, 0.0, 0.0]))
    r = pose.get((n, "rotation"), node.get("rotation", [0.0, 0.0, 0.0, 1.0]))
    s = pose.get((n, "scale"), node.get("scale", [1.0, 1.0, 1.0]))
    m = np.eye(4)
    m[:3, :3] = _quat_matrix(r) @ np.diag(s)
    m[:3, 3] = t
    return m


def _world(f: _GltfFile, n: int, pose: dict) -> np.ndarray:
    if n not in f.parent:
        return _local(f, n, pose)
    return _world(f, f.parent[n], pose) @ _local(f, n, pose)


def _ancestors(f: _GltfFile, n: int) -> list[int]:
    out = []
    while n in f.parent:
        n = f.parent[n]
        out.append(n)
    return out


def _mesh_nodes(f: _GltfFile) -> list[int]:
    """Mesh nodes of the scene in depth-first order."""
    scenes = f.gltf.get("scenes", [])
    if scenes:
        roots = scenes[f.gltf.get("scene", 0)].get("nodes", [])
    else:
        roots = [i for i in range(len(f.nodes)) if i not in f.parent]
    order = []

    def visit(n):
        order.append(n)
        for c in f.nodes[n].get("children", []):
            visit(c)

    for r in roots:
        visit(r)
    return [n for n in order if "mesh" in f.nodes[n]]


def _rig_root(f: _GltfFile, mesh_nodes: list[int]) -> int:
    skins = sorted({f.nodes[n]["skin"] for n in mesh_nodes if "skin" in f.nodes[n]})
    if not skins:
        skins = list(range(len(f.gltf.get("skins", []))))
    joints = {j for s in skins for j in f.gltf["skins"][s]["joints"]}
    roots = [j for j in joints if not set(_ancestors(f, j)) & joints]
    if len(roots) == 1:
        return roots[0]
    common = [a for a in _ancestors(f, roots[0]) if all(a in _ancestors(f, r) for r in roots[1:])]
    return common[0]


def _positions(f: _GltfFile, n: int, prim: dict) -> np.ndarray:
    pos = f.accessor(prim["attributes"]["POSITION"]).copy()
    weights = f.nodes[n].get("weights", f.gltf["meshes"][f.nodes[n]["mesh"]].get("weights", []))
    for target, w in zip(prim.get("targets", []), weights):
        if "POSITION" in target:
            pos += w * f.accessor(target["POSITION"])
    return pos


def _primitives(f: _GltfFile, n: int) -> list[dict]:
    return [p for p in f.gltf["meshes"][f.nodes[n]["mesh"]]["primitives"] if p.get("mode", 4) >= 4]


def reference_clip_names(path) -> list[str]:
    """Animation names in file order (``animation_<i>`` for unnamed ones)."""
    f = _file(path)
    return [a.get("name", f"animation_{i}") for i, a in enumerate(f.gltf.get("animations", []))]


def reference_key_times(path, clip_name: str) -> np.ndarray:
    """Sorted union of the key times [s] of every channel of the clip, shape (K,)."""
    f = _file(path)
    anim = _animation(f, clip_name)
    times = set()
    for channel in anim["channels"]:
        times.update(f.accessor(anim["samplers"][channel["sampler"]]["input"])[:, 0].tolist())
    return np.array(sorted(times))


def reference_skinned_points(path, clip_name: str | None = None, time: float = 0.0) -> np.ndarray:
    """glTF-skinned vertices of every mesh of the scene at ``time`` [s] of the clip, Z-up, shape (V, 3).

    ``clip_name=None`` gives the rest pose (the nodes' own transforms).
    """
    f = _file(path)
    pose = _pose(f, clip_name, time)
    mesh_nodes = _mesh_nodes(f)
    root = _rig_root(f, mesh_nodes)
    blocks = []
    for n in mesh_nodes:
        node = f.nodes[n]
        if "skin" in node:
            skin = f.gltf["skins"][node["skin"]]
            count = len(skin["joints"])
            ibm = (
                f.accessor(skin["inverseBindMatrices"])[:count].reshape(count, 4, 4).transpose(0, 2, 1)
                if "inverseBindMatrices" in skin
                else np.broadcast_to(np.eye(4), (count, 4, 4))
            )
            joint_matrices = np.array([_world(f, j, pose) @ ibm[k] for k, j in enumerate(skin["joints"])])
        elif n != root and root not in _ancestors(f, n):
            continue
        for prim in _primitives(f, n):
            pos = _positions(f, n, prim)
            hom = np.concatenate([pos, np.ones((len(pos), 1))], axis=1)
            if "skin" not in node:
                blocks.append((hom @ _world(f, n, pose).T)[:, :3])
                continue
            attrs = prim["attributes"]
            sets = [(f.accessor(attrs[f"JOINTS_{i}"]), f.accessor(attrs[f"WEIGHTS_{i}"])) for i in range(8)
                    if f"JOINTS_{i}" in attrs]  # fmt: skip
            joints = np.concatenate([j for j, _ in sets], axis=1).astype(int)
            weights = np.concatenate([w for _, w in sets], axis=1)
            weights = weights / weights.sum(axis=1, keepdims=True)
            out = np.zeros((len(pos), 4))
            for k in range(joints.shape[1]):  # influence column k: w * (jointMatrix[j] @ p), all vertices at once
                used = weights[:, k] > 0
                m = joint_matrices[joints[used, k]]  # (n, 4, 4)
                out[used] += weights[used, k, None] * np.einsum("nab,nb->na", m, hom[used])
            blocks.append(out[:, :3])
    return np.concatenate(blocks) @ Y_UP_TO_Z_UP.T


def reference_bind_points(path) -> np.ndarray:
    """Bind-pose vertices, Z-up, shape (V, 3): skinned meshes' POSITION as stored; unskinned meshes (in the rig
    root's subtree) moved by their rest world matrix."""
    f = _file(path)
    mesh_nodes = _mesh_nodes(f)
    root = _rig_root(f, mesh_nodes)
    blocks = []
    for n in mesh_nodes:
        skinned = "skin" in f.nodes[n]
        if not skinned and n != root and root not in _ancestors(f, n):
            continue
        world = np.eye(4) if skinned else _world(f, n, {})
        for prim in _primitives(f, n):
            pos = _positions(f, n, prim)
            blocks.append(pos @ world[:3, :3].T + world[:3, 3])
    return np.concatenate(blocks) @ Y_UP_TO_Z_UP.T


def reference_model_height(path) -> float:
    """Extent of the bind-pose vertices along Z (glTF Y) [file units]."""
    z = reference_bind_points(path)[:, 2]
    return float(z.max() - z.min())
