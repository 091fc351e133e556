"""One entry point for every source of rigs and motions: glTF, BVH, UsdSkel stages, procedural characters."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

from sim import Motion, Rig

from .errors import InputError

__all__ = ["PROCEDURAL_PREFIX", "Asset", "load_asset"]

PROCEDURAL_PREFIX = "procedural:"


@dataclass
class Asset:
    """A rig and its named motion clips, in the toolkit's frame (SI metres, Z-up).

    Attributes:
        rig: the character (skeleton and, when the source has one, skinned meshes).
        clips: motion clips by name, in source order; the first is the default.
        source: where it came from (a path or ``procedural:NAME``).
        source_meters_per_unit: the source's length unit [m] (1.0 for glTF; the chosen scale for BVH).
    """

    rig: Rig
    clips: dict[str, Motion] = field(default_factory=dict)
    source: str = ""
    source_meters_per_unit: float = 1.0

    def clip(self, name: str | None = None) -> Motion:
        """The clip called ``name`` (the first clip when None); KeyError listing the available clips otherwise."""
        if not self.clips:
            raise KeyError(f"{self.source}: has no animation clips")
        if name is None:
            return next(iter(self.clips.values()))
        if name not in self.clips:
            raise KeyError(f"{self.source}: no clip {name!r}; available: {', '.join(self.clips)}")
        return self.clips[name]


def load_asset(source: str | Path, *, skeleton: str | None = None, **options) -> Asset:
    """Reads a rig and its clips from ``source``.

    Args:
        source: a ``.gltf``/``.glb``, ``.bvh`` or ``.usd``/``.usda``/``.usdc`` file, or ``procedural:NAME``
            (see :func:`sim.characters.procedural_asset_names`).
        skeleton: USD files only: absolute prim path of the Skeleton to read (``"/World/B/C/Skeleton"``); default:
            the one under the stage's defaultPrim, the first (with a :class:`usd_io.UsdSkelWarning`) when several
            qualify (see :func:`usd_io.read_usdskel`).
        **options: passed to the reader (e.g. ``meters_per_unit`` for BVH, ``scene`` for glTF, ``config`` for
            procedural characters); an option the source's kind does not take is an :class:`InputError`.

    Raises:
        InputError: unreadable or malformed file, unknown format, ``skeleton`` naming no Skeleton in a SkelRoot or
            given for a source that is not a USD file (the message names file and field); for ``procedural:NAME``,
            an unknown name (field ``name``) or a config option of the wrong type, out of range, or one the legs or
            the skin grid cannot follow (field ``options``, the problem naming the config field).
    """
    text = str(source)
    if skeleton is not None and not text.lower().endswith((".usd", ".usda", ".usdc")):
        raise InputError(text, "skeleton", "only USD files hold Skeleton prims to choose from")
    if text.startswith(PROCEDURAL_PREFIX):
        from sim import characters

        name = text[len(PROCEDURAL_PREFIX) :]
        _check_options(text, characters.build, options, "procedural assets")
        try:
            rig, clips = characters.build(name, **options)
        except KeyError as e:
            raise InputError(text, "name", str(e.args[0])) from None
        except (TypeError, ValueError) as e:  # a config of the wrong type or out of range, a gait the legs can't follow
            raise InputError(text, "options", str(e)) from e
        return Asset(rig, clips, text, 1.0)
    path = Path(source)
    if path.is_dir():
        raise InputError(path, "path", "is a folder, not a file")
    if not path.is_file():
        raise InputError(path, "path", "no such file")
    suffix = path.suffix.lower()
    if suffix in (".gltf", ".glb"):
        from ._gltf import read_gltf as reader
    elif suffix == ".bvh":
        from ._bvh import read_bvh as reader
    elif suffix in (".usd", ".usda", ".usdc"):
        from ._usdskel_read import read_usdskel as reader

        options = {"skeleton": skeleton, **options}
    else:
        raise InputError(
            path, "extension", f"unsupported format {suffix!r} (expected .gltf, .glb, .bvh, .usd, .usda, .usdc)"
        )
    _check_options(path, reader, options, f"{suffix} files")
    return reader(path, **options)


def _check_options(source: str | Path, reader, options: dict, kind: str) -> None:
    """Refuses reader options the source's kind does not take, naming the source and the options it does."""
    params = inspect.signature(reader).parameters
    accepted = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(
            source,
            "options",
            f"{kind} take no option {', '.join(map(repr, unknown))} (they take: {', '.join(accepted) or 'none'})",
        )
