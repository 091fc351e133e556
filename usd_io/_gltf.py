"""glTF 2.0 importer: a skinned character and its animation clips as a :class:`usd_io.Asset`.

What comes in (see :mod:`usd_io._gltf_skeleton` for the frame algebra):

* the rig: the joints of the skins used by the scene's skinned meshes (one skeleton; a joint shared by several
  skins must have one inverse bind matrix), non-joint ancestors and the Y-up -> Z-up rotation folded into the
  root, uniform scales folded into translations and inverse bind matrices. Units stay glTF metres
  (``source_meters_per_unit = 1``), so a model authored in other units keeps its numbers.
* meshes: one :class:`sim.SkinnedMesh` per mesh node of the scene, in depth-first order, its primitives
  concatenated (vertex order kept). The skinned mesh node's own transform is ignored (glTF spec). A mesh without
  a skin whose node lies in the root joint's subtree becomes a one-joint skin (weight 1 on its nearest joint
  ancestor-or-self, points moved to that joint's bind pose); other unskinned meshes are skipped with a warning.
  When an animated non-joint node between two joints lies on the way from that joint down to the mesh, the mesh
  rides instead on the nearest joint below the lowest such node that no clip moves relative to it (so it follows
  the node's animation exactly); without one it keeps the rest offset, with a warning.
* clips: every animation, in file order, named by its ``name`` (``animation_<i>`` when unnamed, repeats made
  unique). A clip's samples are the union of its channels' key times, each channel evaluated with its own
  interpolation (keys keep their times; no resampling). A Motion interpolates linearly (slerp) between samples,
  so a clip also gets: evenly spaced samples at >= 30 per second inside key gaps longer than 1.5 frames of that
  when it has CUBICSPLINE channels on joints or their ancestors (a sparse spline would be flattened) or LINEAR
  rotation channels on non-joint ancestors of joints (the joints below swing along arcs, which a chord would cut);
  and, for each STEP translation or rotation key that changes the value, a hold sample 1 ms (at most half the gap)
  before it with the previous value, so the value jumps instead of ramping. The clip's ``fps`` comes from the key
  (and even) samples, not the hold samples. Unanimated joints hold their rest values. Animated non-joint ancestors
  are folded into the root channels. Joint translations go to ``Motion.translations`` only when some non-root
  joint moves away from its rest translation. Scale channels are honoured only when they hold the rest scale (a
  no-op); any other scale animation is ignored with a warning, as are morph ``weights`` channels and animation of
  nodes between a joint and a rigid mesh.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
import warnings
from pathlib import Path

import numpy as np

from sim import Motion, Rig, RigError, SkinnedMesh
from sim.rig import WEIGHT_SUM_TOLERANCE, RigWarning
from sim.rotations import transform_matrix

from ._gltf_accessors import read_accessor
from ._gltf_animation import Channel, nominal_fps, read_animation, sample_channel
from ._gltf_document import GltfDocument, GltfWarning
from ._gltf_meshes import read_mesh
from ._gltf_nodes import UNIFORM_SCALE_TOLERANCE, NodeTree, read_nodes
from ._gltf_skeleton import Y_UP_TO_Z_UP, Skeleton, build_skeleton, inverse_bind_matrices, unique_names
from ._limits import MAX_MAGNITUDE, too_large
from .asset import Asset
from .errors import InputError

__all__ = ["GltfWarning", "read_gltf"]

DENSE_SAMPLE_FPS = 30.0
"""Clips whose curves a Motion's linear (slerp) interpolation between keys would flatten or cut short (CUBICSPLINE
pose-node channels, LINEAR rotations of non-joint pose nodes) are sampled at least this often between sparse keys
[1/s]. A point at radius ``r`` on a node turning at ``w`` rad/s is then off its arc by at most the sagitta
``r * (1 - cos(w / (2 * DENSE_SAMPLE_FPS)))``: 1.4 mm for half a turn per second at 1 m."""

STEP_HOLD_INTERVAL = 1e-3
"""How long before a STEP key its previous value is still sampled [s] (a hold sample; at most half the gap to the
previous sample, so it stays between the two). A Motion ramps linearly from the hold sample to the key, so the
interval is short against a frame at any common rate (1/240 s = 4.2 ms: uniform resampling rarely lands on the
ramp), yet 0.024 time codes at 24 per second: far above the USD writer's 1e-5 time-code snap, which would
otherwise merge the hold sample into the key."""

TRANSLATION_TOLERANCE = 1e-6
"""Relative (to the longest bone) change of a non-root joint's translation that makes a clip carry translations."""

SINGULAR_DETERMINANT = 1e-12
"""Inverse bind matrices (in skeleton space) whose 3x3 part has ``|det|`` below this are singular (as sim.Rig)."""


def read_gltf(path: str | Path, *, scene: int | None = None) -> Asset:
    """Reads a skinned character and its animations from a ``.gltf`` or ``.glb`` file.

    Args:
        path: the file.
        scene: index of the scene to import; default: the file's ``scene``, else scene 0, else every root node.

    Returns:
        The asset: the rig (Z-up skeleton space, glTF metres), every animation as a :class:`sim.Motion` by name
        in file order, ``source_meters_per_unit = 1.0``.

    Raises:
        InputError: malformed file or unsupported content (non-uniform scale at or above joints, joint trees with
            no common ancestor, no skin), naming the file and the field; among them repeated or non-root
            ``scenes[i].nodes`` entries, repeated skin joints, fewer inverseBindMatrices than joints, a
            non-affine or singular inverse bind matrix, key times that are not FLOAT, negative or so close that the
            clip's rate exceeds :data:`usd_io._limits.MAX_MAGNITUDE`, a CUBICSPLINE rotation through zero.

    Warns:
        GltfWarning: ignored content (scale and morph animation, unattached rigid meshes, rigid meshes that
            cannot follow an animated node, POINTS/LINES primitives); skin weights not summing to 1 (renormalized;
            the message names ``meshes[m].primitives[p].attributes.WEIGHTS_n``, the vertex count and the range of
            the sums).
    """
    path = Path(path)
    try:
        return _read(GltfDocument.load(path), scene)
    except InputError:
        raise
    except RigError as e:
        raise InputError(path, "skins", str(e)) from None
    except (KeyError, TypeError, IndexError, ValueError, AttributeError, OverflowError, struct.error) as e:
        raise InputError(path, "document", f"malformed glTF ({type(e).__name__}: {e})") from e


def _read(doc: GltfDocument, scene: int | None) -> Asset:
    tree = read_nodes(doc)
    scene_nodes = tree.preorder(_scene_roots(doc, tree, scene))
    nodes = doc.table("nodes")
    mesh_nodes = [n for n in scene_nodes if doc.get_index(nodes[n], "mesh", f"nodes[{n}]", "meshes", None) is not None]
    skins: list[int] = []
    for n in mesh_nodes:
        s = doc.get_index(nodes[n], "skin", f"nodes[{n}]", "skins", None)
        if s is not None and s not in skins:
            skins.append(s)
    if not skins:
        skins = list(range(len(doc.table("skins"))))
    if not skins:
        raise doc.error("skins", "the file has no skin: nothing to rig (node animation without a skin is unsupported)")
    _check_skins(doc, tree, skins)
    skeleton = build_skeleton(doc, tree, skins)
    rest_rot, rest_pos = skeleton.world_frames(tree, tree.local_matrices(skeleton.pose_nodes))
    rest_world = transform_matrix(rest_pos[0], rest_rot[0])
    ibm = inverse_bind_matrices(doc, tree, skeleton, skins, rest_world)
    _check_singular_bind(doc, tree, skeleton, skins, ibm)
    local_rot, local_trans = skeleton.local_frames(rest_rot, rest_pos)
    animations = [read_animation(doc, a) for a in range(len(doc.table("animations")))]
    animated = {c.node for _, channels in animations for c in channels if c.path in ("translation", "rotation")}
    meshes = _meshes(doc, tree, skeleton, ibm, mesh_nodes, animated)
    rig = Rig(skeleton.names, skeleton.parents, local_trans[0], local_rot[0], ibm, meshes, name=doc.path.stem)
    names = unique_names([name or f"animation_{a}" for a, (name, _) in enumerate(animations)])
    clips = {
        name: _clip(doc, tree, skeleton, rig, channels, name, mesh_nodes, f"animations[{a}]")
        for a, (name, (_, channels)) in enumerate(zip(names, animations))
    }
    return Asset(rig, clips, str(doc.path), 1.0)


def _scene_roots(doc: GltfDocument, tree: NodeTree, scene: int | None) -> list[int]:
    scenes = doc.table("scenes")
    if scene is None:
        scene = doc.get_index(doc.json, "scene", "document", "scenes", 0 if scenes else None)
        if scene is None:
            return [n for n in range(tree.node_count) if tree.parents[n] < 0]
    elif isinstance(scene, bool) or not isinstance(scene, int) or not 0 <= scene < len(scenes):
        raise doc.error("scene", f"scene {scene!r} does not exist ({len(scenes)} scenes)")
    roots = doc.get_index_list(scenes[scene], "nodes", f"scenes[{scene}]", "nodes", [])
    for k, n in enumerate(roots):  # glTF 2.0 5.29: unique root nodes (else a subtree would be imported twice)
        if roots.index(n) < k:
            raise doc.error(
                f"scenes[{scene}].nodes[{k}]", f"{tree.label(n)} is listed twice (also nodes[{roots.index(n)}])"
            )
        if tree.parents[n] >= 0:
            raise doc.error(
                f"scenes[{scene}].nodes[{k}]",
                f"{tree.label(n)} is not a root node (it is a child of {tree.label(int(tree.parents[n]))})",
            )
    return roots


def _check_skins(doc: GltfDocument, tree: NodeTree, skins: list[int]) -> None:
    """Each skin lists its joints once and, when it has inverseBindMatrices, at least one MAT4 per joint (glTF 2.0
    5.28: extra ones are unused).

    Raises:
        InputError: naming ``skins[s].joints[k]`` (a repeated joint) or ``skins[s].inverseBindMatrices``.
    """
    for s in skins:
        where = f"skins[{s}]"
        skin = doc.table("skins")[s]
        joints = doc.get_index_list(skin, "joints", where, "nodes")
        for k, n in enumerate(joints):
            if joints.index(n) < k:
                raise doc.error(
                    f"{where}.joints[{k}]", f"{tree.label(n)} is listed twice (also joints[{joints.index(n)}])"
                )
        acc = doc.get_index(skin, "inverseBindMatrices", where, "accessors", None)
        if acc is None:
            continue
        ibm = read_accessor(doc, acc)
        if ibm.shape[1:] == (4, 4) and len(ibm) < len(joints):  # the spec allows more (the extra ones unused)
            raise doc.error(
                f"{where}.inverseBindMatrices",
                f"accessors[{acc}] holds {len(ibm)} MAT4 for {len(joints)} joints (one per joint is required)",
            )


def _check_singular_bind(doc: GltfDocument, tree: NodeTree, skeleton: Skeleton, skins: list[int], ibm: np.ndarray):
    """InputError naming the skin's inverseBindMatrices and the joint whose matrix is singular.

    Args:
        ibm: the rig's inverse bind matrices (skeleton space), shape (joint_count, 4, 4); a joint's comes from the
            first skin in ``skins`` that lists it.
    """
    dets = np.abs(np.linalg.det(ibm[:, :3, :3]))
    if not (dets < SINGULAR_DETERMINANT).any():
        return
    node = skeleton.nodes[int(np.argmax(dets < SINGULAR_DETERMINANT))]
    for s in skins:
        joints = doc.table("skins")[s]["joints"]
        if node in joints:
            k = joints.index(node)
            raise doc.error(
                f"skins[{s}].inverseBindMatrices",
                f"matrix {k} (joint {k}, {tree.label(node)}) is singular (determinant of its 3x3 part"
                f" {np.linalg.det(ibm[skeleton.index()[node], :3, :3]):.3g})",
            )


def _meshes(
    doc: GltfDocument,
    tree: NodeTree,
    skeleton: Skeleton,
    ibm: np.ndarray,
    mesh_nodes: list[int],
    animated: set[int],
) -> list[SkinnedMesh]:
    """One SkinnedMesh per mesh node (skinned, or rigid under the skeleton's root).

    ``animated``: nodes with a translation or rotation channel in some animation (they decide which joint a rigid
    mesh rides on, see :func:`_rigid_binding`).
    """
    nodes = doc.table("nodes")
    out: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    reported: set[int] = set()  # meshes (in out) whose weight sums were reported with their field
    for n in mesh_nodes:
        node = nodes[n]
        m = node["mesh"]
        skin = doc.get_index(node, "skin", f"nodes[{n}]", "skins", None)
        name = doc.get_str(doc.table("meshes")[m], "name", f"meshes[{m}]", None) or tree.names[n] or f"mesh{n}"
        if skin is None:
            binding = _rigid_binding(tree, skeleton, animated, n)
            if binding is None:
                doc.warn(f"nodes[{n}]", f"mesh of {tree.label(n)} has no skin and is not below a joint: skipped")
                continue
            joint, rel, unfollowed = binding
            if unfollowed:
                doc.warn(
                    f"nodes[{n}]",
                    f"animation of {', '.join(tree.label(a) for a in unfollowed)} moves the joints below it but not "
                    f"the rigid mesh {name!r} of {tree.label(n)}: the mesh follows joint {skeleton.names[joint]!r} "
                    f"at its rest offset (no joint below {tree.label(unfollowed[0])} is unanimated relative to it)",
                )
            data = read_mesh(doc, m, node, n, skinned=False)
            to_bind = np.linalg.inv(ibm[joint]) @ np.diag([skeleton.scales[joint]] * 3 + [1.0]) @ rel
            points = data.points @ to_bind[:3, :3].T + to_bind[:3, 3]
            joints = np.full((len(points), 1), joint)
            weights = np.ones((len(points), 1))
            if np.linalg.det(to_bind[:3, :3]) < 0:  # glTF 3.7.4: a mirroring node reverses the winding
                data = dataclasses.replace(data, triangles=data.triangles[:, ::-1].copy())
        else:
            data = read_mesh(doc, m, node, n, skinned=True)
            points = data.points @ Y_UP_TO_Z_UP[:3, :3].T
            joints, weights = _remap_influences(doc, skeleton, skin, n, data.joints, data.weights)
        if not len(points):
            doc.warn(f"nodes[{n}]", f"mesh of {tree.label(n)} has no triangle primitives: skipped")
            continue
        if skin is not None and _warn_weight_sums(doc, m, weights):
            reported.add(len(out))
        out.append((name, points, data.triangles, joints, weights))
    names = unique_names([o[0] for o in out])
    meshes = []
    for i, (nm, (_, p, t, j, w)) in enumerate(zip(names, out)):
        with warnings.catch_warnings():
            if i in reported:  # reported with file and field: not again without them
                warnings.simplefilter("ignore", RigWarning)
            meshes.append(SkinnedMesh(nm, p, t, j, w, joint_count=skeleton.joint_count))
    return meshes


def _warn_weight_sums(doc: GltfDocument, mesh: int, weights: np.ndarray) -> bool:
    """Warns, per primitive, about vertices whose weights do not sum to 1 (the rig renormalizes them).

    Args:
        mesh: the mesh index.
        weights: the mesh's influence weights as read (its triangle primitives' vertices concatenated in file
            order, as :func:`read_mesh` returns them), shape (V, K).

    Returns:
        whether a warning was emitted (a GltfWarning naming ``meshes[m].primitives[p].attributes.WEIGHTS_n``).
    """
    totals = weights.sum(axis=1)
    off = np.abs(totals - 1.0) > WEIGHT_SUM_TOLERANCE
    if not off.any():
        return False
    start = 0
    for p, prim in enumerate(doc.table("meshes")[mesh]["primitives"]):
        if prim.get("mode", 4) not in (4, 5, 6):  # POINTS / LINES: skipped by read_mesh
            continue
        count = int(doc.table("accessors")[prim["attributes"]["POSITION"]]["count"])
        bad = off[start : start + count]
        if bad.any():
            sets = sum(1 for key in prim["attributes"] if key.startswith("WEIGHTS_"))
            field = "WEIGHTS_0" if sets == 1 else f"WEIGHTS_0..WEIGHTS_{sets - 1}"
            sums = totals[start : start + count][bad]
            doc.warn(
                f"meshes[{mesh}].primitives[{p}].attributes.{field}",
                f"the weights of {int(bad.sum())} of {count} vertices sum to {sums.min():.6g} .. {sums.max():.6g},"
                f" not 1 (tolerance {WEIGHT_SUM_TOLERANCE:g}): renormalized",
            )
        start += count
    return True


def _rigid_binding(
    tree: NodeTree, skeleton: Skeleton, animated: set[int], node: int
) -> tuple[int, np.ndarray, list[int]] | None:
    """The joint a rigid mesh on ``node`` rides on and the mesh node's rest matrix relative to that joint.

    Normally the nearest joint ancestor-or-self ``J``, relative matrix :func:`_relative_matrix` (the rest
    transforms below ``J``). When a non-joint pose node (one with joints below it) on the way from ``J`` down to
    ``node`` is animated, that matrix would freeze it at rest: the mesh then rides on the nearest joint ``D`` below
    the lowest such node ``A`` whose path from ``A`` (``D`` included) no animation moves, so that
    ``world(node) = world(D) @ inv(rel(A, D)) @ rel(A, node)`` at every frame of every clip.

    Args:
        animated: nodes with a translation or rotation channel in some animation.

    Returns:
        ``(joint index, relative matrix (4, 4), unfollowed)`` where ``unfollowed`` lists the animated pose nodes
        the mesh does not follow (lowest first; empty when exact), or None when ``node`` is not below a joint.
    """
    index = skeleton.index()
    chain = [node, *tree.ancestors(node)]
    top = next((a for a in chain if a in index), None)
    if top is None:
        return None
    pose = set(skeleton.pose_nodes)
    moving = [a for a in chain[: chain.index(top)] if a in pose and a in animated]  # lowest first
    if not moving:
        return index[top], _relative_matrix(tree, top, node), []
    carrier = _still_joint_below(tree, index, animated, moving[0])
    if carrier is None:
        return index[top], _relative_matrix(tree, top, node), moving
    rel = np.linalg.inv(_relative_matrix(tree, moving[0], carrier)) @ _relative_matrix(tree, moving[0], node)
    return index[carrier], rel, []


def _still_joint_below(tree: NodeTree, index: dict[int, int], animated: set[int], top: int) -> int | None:
    """The nearest joint below ``top`` (breadth-first, children in file order) with no animated node on the path
    from ``top`` (excluded) down to it (included), or None."""
    queue = [c for c in tree.children[top] if c not in animated]
    for n in queue:  # grows while iterating: breadth-first
        if n in index:
            return n
        queue.extend(c for c in tree.children[n] if c not in animated)
    return None


def _relative_matrix(tree: NodeTree, top: int, node: int) -> np.ndarray:
    """Product of the rest local matrices on the path strictly below ``top`` down to ``node`` (identity if equal)."""
    chain = [node, *tree.ancestors(node)]
    path = chain[: chain.index(top)][::-1]
    m = np.eye(4)
    for k in path:
        m = m @ tree.local_matrices([k])[0, 0]
    return m


def _remap_influences(
    doc: GltfDocument, skeleton: Skeleton, skin: int, node: int, joints: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Skin-local joint indices -> rig joint indices; vertices without weight go rigidly to the root."""
    skin_nodes = doc.table("skins")[skin]["joints"]
    index = skeleton.index()
    lookup = np.array([index[n] for n in skin_nodes])
    used = weights > 0
    if np.any(joints[used] >= len(lookup)):
        v = int(np.argwhere(used & (joints >= len(lookup)))[0, 0])
        raise doc.error(
            f"nodes[{node}]", f"vertex {v} is weighted to joint {joints[v].max()} but skins[{skin}] has {len(lookup)}"
        )
    if np.any(weights < 0):
        v = int(np.argwhere(weights < 0)[0, 0])
        raise doc.error(f"nodes[{node}]", f"vertex {v} has a negative weight {weights[v].min()}")
    rig_joints = np.where(used, lookup[np.where(used, joints, 0)], 0)
    weights = weights.copy()
    empty = ~used.any(axis=1)
    if empty.any():
        doc.warn(f"nodes[{node}]", f"{int(empty.sum())} vertices have no weight: bound rigidly to the root joint")
        weights[empty, 0] = 1.0
        rig_joints[empty, 0] = 0
    return rig_joints, weights


def _clip(
    doc: GltfDocument,
    tree: NodeTree,
    skeleton: Skeleton,
    rig: Rig,
    channels: list[Channel],
    name: str,
    mesh_nodes: list[int],
    where: str,
) -> Motion:
    """An animation's channels sampled at the union of their key times (densified and with STEP hold samples where
    a Motion's linear interpolation needs them, see the module docstring), as a Motion of ``rig``.

    Raises:
        InputError: keys so close (under ``1 / MAX_MAGNITUDE`` s apart) that the clip's rate is out of range,
            naming the animation ``where``.
    """
    times = np.unique(np.concatenate([c.times for c in channels])) if channels else np.zeros(1)
    pose = {n: k for k, n in enumerate(skeleton.pose_nodes)}
    posed = [c for c in channels if c.node in pose and c.path in ("translation", "rotation")]
    joints = set(skeleton.nodes)
    if any(
        c.interpolation == "CUBICSPLINE"
        or (c.interpolation == "LINEAR" and c.path == "rotation" and c.node not in joints)
        for c in posed
    ):
        times = _densified(times)
    fps = nominal_fps(times)  # before the hold samples, which are closer than a frame
    if too_large(fps):
        k = int(np.argmin(np.diff(times)))
        raise doc.error(
            where, f"key times {times[k]:.17g} and {times[k + 1]:.17g} s are {times[k + 1] - times[k]:.3g} s apart:"
            f" the clip's frame rate {fps:.3g} per second is out of range (> {MAX_MAGNITUDE:g})"
        )  # fmt: skip
    times = _with_step_holds(times, [c for c in posed if c.interpolation == "STEP"])
    t = np.broadcast_to(tree.translations[skeleton.pose_nodes], (len(times), len(pose), 3)).copy()
    q = np.broadcast_to(tree.rotations[skeleton.pose_nodes], (len(times), len(pose), 4)).copy()
    rigid_paths = _rigid_mesh_paths(doc, tree, skeleton, mesh_nodes)
    ignored_weights = []
    seen: dict[tuple[int, str], str] = {}
    for c in channels:
        if c.path == "weights":
            ignored_weights.append(c.where)
            continue
        if c.node not in pose:
            if c.node in rigid_paths:
                doc.warn(c.where, f"animation of {tree.label(c.node)} below a joint and above a rigid mesh ignored")
            continue
        if c.node in tree.matrices:
            raise doc.error(f"{c.where}.target", f"{tree.label(c.node)} has a matrix and cannot be animated")
        if (c.node, c.path) in seen:
            doc.warn(c.where, f"{tree.label(c.node)} {c.path} is also animated by {seen[c.node, c.path]}: last wins")
        seen[c.node, c.path] = c.where
        if c.path == "scale":
            _check_scale_channel(doc, tree, c)
        elif c.path == "translation":
            t[:, pose[c.node]] = sample_channel(doc, c, times)
        else:
            q[:, pose[c.node]] = sample_channel(doc, c, times)
    if ignored_weights:
        doc.warn(ignored_weights[0], f"{len(ignored_weights)} morph target weights channel(s) ignored")
    world_rot, world_pos = skeleton.world_frames(tree, tree.local_matrices(skeleton.pose_nodes, t, q))
    rot, trans = skeleton.local_frames(world_rot, world_pos)
    moved = np.abs(trans[:, 1:] - rig.rest_translations[1:]).max(initial=0.0)
    bone = max(float(rig.bone_lengths().max()), 1e-12)
    translations = trans if moved > TRANSLATION_TOLERANCE * bone else None
    return Motion(fps, trans[:, 0], rot, translations, times=times, name=name)


def _densified(times: np.ndarray) -> np.ndarray:
    """Key times with every gap longer than ``1.5 / DENSE_SAMPLE_FPS`` split evenly into steps of at most
    ``1 / DENSE_SAMPLE_FPS``: between keys a Motion interpolates linearly (slerp), which would flatten a sparse
    CUBICSPLINE curve or cut across the arc of a joint below a rotating non-joint node (keys a frame apart are
    kept as they are)."""
    out = [times[:1]]
    for a, b in itertools.pairwise(times):
        n = int(np.ceil((b - a) * DENSE_SAMPLE_FPS - 1e-9)) if (b - a) * DENSE_SAMPLE_FPS > 1.5 else 1
        out.append(np.append(a + (b - a) * np.arange(1, n) / n, b))  # b itself: keys keep their exact times
    return np.concatenate(out)


def _with_step_holds(times: np.ndarray, step_channels: list[Channel]) -> np.ndarray:
    """``times`` [s] plus, before every key of a STEP channel that changes its value, a hold sample
    ``min(STEP_HOLD_INTERVAL, gap / 2)`` earlier (``gap``: to the previous sample), where the channel still holds
    the previous key: a Motion interpolates linearly between samples and would otherwise ramp to the new value
    over the whole gap instead of jumping at the key (glTF STEP).

    Args:
        times: sample times, strictly increasing, containing every key time of ``step_channels``, shape (F,).

    Returns:
        the sample times with the hold samples, strictly increasing, shape (F + holds,).
    """
    holds = []
    for c in step_channels:
        keys = c.times[1:][np.any(c.values[1:] != c.values[:-1], axis=1)]
        previous = times[np.searchsorted(times, keys) - 1]  # keys > times[0]: the sample before each key
        hold = keys - np.minimum(STEP_HOLD_INTERVAL, 0.5 * (keys - previous))
        holds.append(hold[(hold > previous) & (hold < keys)])  # gaps at float resolution get no hold
    return np.union1d(times, np.concatenate(holds)) if holds else times


def _check_scale_channel(doc: GltfDocument, tree: NodeTree, channel: Channel) -> None:
    """Scale animation is supported only as a no-op: it must hold the node's rest scale at every key."""
    values = channel.values[:, 1] if channel.interpolation == "CUBICSPLINE" else channel.values
    rest = tree.scales[channel.node]
    tangents_zero = channel.interpolation != "CUBICSPLINE" or not np.any(channel.values[:, [0, 2]])
    if tangents_zero and np.abs(values - rest).max() <= UNIFORM_SCALE_TOLERANCE * np.abs(rest).max():
        return
    doc.warn(
        channel.where,
        f"scale animation of {tree.label(channel.node)} ignored (only the rest scale {rest.tolist()} is supported)",
    )


def _rigid_mesh_paths(doc: GltfDocument, tree: NodeTree, skeleton: Skeleton, mesh_nodes: list[int]) -> set[int]:
    """Non-joint nodes from a rigid (unskinned) mesh node up to, excluding, its nearest joint."""
    joints = set(skeleton.nodes)
    out: set[int] = set()
    for n in mesh_nodes:
        if "skin" in doc.table("nodes")[n]:
            continue
        chain = []
        for a in [n, *tree.ancestors(n)]:
            if a in joints:
                out.update(chain)
                break
            chain.append(a)
    return out
