"""Character descriptions: bones (joint, bone end) and the rounded solids that make up the skin around them.

A :class:`CharacterSpec` is pure data in the rest pose (SI metres, Z-up, +X forward, ground plane z = 0). The
skin is the zero level set of a smooth union of the solids (see :mod:`._surface`); every solid belongs to one
bone, which is how the skinning weights know which bone a stretch of skin hugs (see :mod:`._weights`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = ["BoneSpec", "CharacterSpec", "Ellipsoid", "RoundCone", "Shape", "mirror_left_to_right", "shape_bounds"]


@dataclass(frozen=True)
class BoneSpec:
    """One joint and the bone it drives.

    Attributes:
        name: joint name (unique).
        parent: parent joint name, None for the root.
        head: joint position in the rest pose [m], shape (3,).
        tail: end of the bone in the rest pose [m], shape (3,) (the child joint, or the tip of a leaf bone).
    """

    name: str
    parent: str | None
    head: tuple[float, float, float]
    tail: tuple[float, float, float]


@dataclass(frozen=True)
class RoundCone:
    """A capsule whose radius varies linearly from ``a`` to ``b`` (a sphere-swept segment).

    Attributes:
        bone: owning joint name.
        a, b: segment end points [m], shape (3,).
        radius_a, radius_b: radii at ``a`` and ``b`` [m].
    """

    bone: str
    a: tuple[float, float, float]
    b: tuple[float, float, float]
    radius_a: float
    radius_b: float


@dataclass(frozen=True)
class Ellipsoid:
    """An ellipsoid with semi-axes ``radii`` along the columns of ``axes``.

    Attributes:
        bone: owning joint name.
        center: centre [m], shape (3,).
        radii: semi-axis lengths [m], shape (3,).
        axes: the three orthonormal semi-axis directions, one per row (identity = world-aligned), shape (3, 3).
    """

    bone: str
    center: tuple[float, float, float]
    radii: tuple[float, float, float]
    axes: tuple[tuple[float, float, float], ...] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


Shape = RoundCone | Ellipsoid


@dataclass
class CharacterSpec:
    """A character in its rest pose, before meshing.

    Attributes:
        name: rig name.
        bones: joints in parents-first order, root first.
        shapes: solids whose smooth union is the skin.
        blend_radius: smooth-union radius of the skin [m] (how far fillets reach between solids).
        weight_falloff: distance over which a bone's influence decays away from its solids [m].
    """

    name: str
    bones: list[BoneSpec]
    shapes: list[Shape]
    blend_radius: float
    weight_falloff: float

    def bone_names(self) -> list[str]:
        return [b.name for b in self.bones]

    def scaled(self, factor: float) -> CharacterSpec:
        """The same character uniformly scaled about the origin (ground stays at z = 0)."""
        s = float(factor)

        def pt(p):
            return tuple(float(v) * s for v in p)

        bones = [replace(b, head=pt(b.head), tail=pt(b.tail)) for b in self.bones]
        shapes: list[Shape] = []
        for sh in self.shapes:
            if isinstance(sh, RoundCone):
                shapes.append(replace(sh, a=pt(sh.a), b=pt(sh.b), radius_a=sh.radius_a * s, radius_b=sh.radius_b * s))
            else:
                shapes.append(replace(sh, center=pt(sh.center), radii=pt(sh.radii)))
        return CharacterSpec(self.name, bones, shapes, self.blend_radius * s, self.weight_falloff * s)

    def top(self) -> float:
        """Highest point of any solid [m] (the nominal standing height, the ground being z = 0)."""
        return max(shape_bounds(sh)[1][2] for sh in self.shapes)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned box around every solid [m]: (min (3,), max (3,))."""
        lo, hi = zip(*(shape_bounds(sh) for sh in self.shapes))
        return np.min(lo, axis=0), np.max(hi, axis=0)


def shape_bounds(sh: Shape) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(sh, RoundCone):
        a, b = np.asarray(sh.a), np.asarray(sh.b)
        return np.minimum(a - sh.radius_a, b - sh.radius_b), np.maximum(a + sh.radius_a, b + sh.radius_b)
    axes = np.asarray(sh.axes, dtype=np.float64).T  # column k = direction of semi-axis k
    half = np.sqrt(((axes * np.asarray(sh.radii)[None, :]) ** 2).sum(axis=1))
    c = np.asarray(sh.center)
    return c - half, c + half


def _mirror_point(p):
    return (p[0], -p[1], p[2])


def _mirror_name(name: str) -> str:
    return name.replace("left", "right")


def mirror_left_to_right(bones: list[BoneSpec], shapes: list[Shape]) -> tuple[list[BoneSpec], list[Shape]]:
    """Appends the mirror image (y -> -y, "left" -> "right") of every bone and solid whose name says "left".

    The mirrored bones are appended in the order of their twins, so the list stays parents-first.
    """
    out_bones = list(bones)
    for b in bones:
        if "left" in b.name:
            parent = _mirror_name(b.parent) if b.parent and "left" in b.parent else b.parent
            out_bones.append(BoneSpec(_mirror_name(b.name), parent, _mirror_point(b.head), _mirror_point(b.tail)))
    out_shapes: list[Shape] = list(shapes)
    for sh in shapes:
        if "left" not in sh.bone:
            continue
        if isinstance(sh, RoundCone):
            out_shapes.append(replace(sh, bone=_mirror_name(sh.bone), a=_mirror_point(sh.a), b=_mirror_point(sh.b)))
        else:
            axes = tuple(_mirror_point(ax) for ax in sh.axes)
            out_shapes.append(replace(sh, bone=_mirror_name(sh.bone), center=_mirror_point(sh.center), axes=axes))
    return out_bones, out_shapes
