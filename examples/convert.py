# Convert a rig and its animation (glTF, BVH, UsdSkel or a built-in character) to a UsdSkel stage.
#
#   .venv/bin/python examples/convert.py --input procedural:quadruped --output out/quadruped.usda
#   .venv/bin/python examples/convert.py --input ../shared/assets/gltf/Fox.glb --output fox.usda --clip Walk
#
# Writes OUTPUT atomically and, unless --no-audit, OUTPUT.audit/CLIP/ for every written clip; an earlier run's
# OUTPUT.audit is removed first (also with --no-audit), and an interrupted audit is removed, never left half-written.
# Replacing an existing OUTPUT (or OUTPUT.audit) prints a `note: replacing PATH` line. Every clip is held to joint
# limits derived from all of the file's clips, as examples/audit.py holds it.
# Every clip is audited before the stage is written: a clip the audit cannot measure (e.g. a skeleton with no extent)
# is refused with nothing written (--no-audit converts it anyway); a failure writing the audit removes the stage.
# Exit status: 0 on success, 2 on bad input (one-line error naming the file and the problem; nothing written),
# 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (kill, docker stop: handled as Ctrl-C is); one line names what
# was written.
"""Convert glTF / BVH / USD / procedural characters to UsdSkel (SkelRoot, Skeleton, SkelAnimation, skinned mesh)."""

from __future__ import annotations

import contextlib
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from sim import RigError
from sim.audit import audit_motion, derived_joint_limits
from usd_io import (
    InputError,
    audit_folder_names,
    interrupt_exit_status,
    load_asset,
    stop_on_sigterm,
    write_audit,
    write_usdskel,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for the examples' shared helpers only
from _example_cli import audit_verdict, check_not_empty, format_warning, note_replacing, print_error

sys.path.pop(0)

USD_SUFFIXES = (".usda", ".usdc", ".usd")


@dataclass
class ConvertConfig:
    input: str
    """Source: a .gltf/.glb, .bvh or .usd/.usda/.usdc file, or procedural:quadruped / procedural:biped."""
    output: Path
    """Destination stage (.usda text, .usdc or .usd binary); written atomically."""
    clip: str | None = None
    """Clip to write (bound to the skeleton). Default: every clip, each a SkelAnimation, the first one bound."""
    skeleton: str | None = None
    """USD input holding several skeletons: the Skeleton prim path to read (default: the one under the stage's
    defaultPrim; when several remain, the first, with a warning naming the others)."""
    meters_per_unit: float | None = None
    """BVH only: the file's length unit in metres (default: detected from the skeleton's height)."""
    audit: bool = True
    """Audit every written clip for physical plausibility next to the output: OUTPUT.audit/CLIP/ holds report.json,
    timeline.png and worst_frame.png (see examples/audit.py)."""


def _check_output(cfg: ConvertConfig, audit_root: Path) -> None:
    """Fails before the input loads when OUTPUT (or OUTPUT.audit) cannot be written; creates nothing."""
    output = cfg.output
    if output.suffix.lower() not in USD_SUFFIXES:  # USD picks the file format from the extension
        raise InputError(
            output, "--output", f"a USD stage must end in {', '.join(USD_SUFFIXES)}, not {output.suffix!r}"
        )
    try:
        if output.is_dir():
            raise InputError(output, "output", "is a folder, not a file")
        for parent in output.parents:
            if parent.exists() and not parent.is_dir():
                raise InputError(output.parent, "output", f"cannot create the folder: {parent} is a file")
        if cfg.audit and audit_root.exists() and not audit_root.is_dir():
            raise InputError(audit_root, "output", "the audit folder is a file (or pass --no-audit)")
    except OSError as e:  # a parent that cannot be entered (Path.is_dir/exists re-raise EACCES)
        raise InputError(output, "output", f"cannot reach it ({e.strerror or e})") from e


def _audit_reports(cfg: ConvertConfig, asset, clips) -> list:
    """Every clip's audit report, computed before anything is written: InputError naming the input and the clip
    when the audit cannot measure a clip (e.g. a rig whose bind pose has no extent). The joint limits come from
    all of the file's clips (also with --clip), as examples/audit.py (usd_io.audit_asset) derives them: a clip's
    own range alone gave the two another verdict for the same clip."""
    rig, limits, reports = asset.rig, None, []
    for motion in clips:
        try:
            if limits is None:
                limits = derived_joint_limits(rig, list(asset.clips.values()))
            reports.append(audit_motion(rig, motion, limits=limits, source=f"{cfg.input}#{motion.name}"))
        except (RigError, ValueError) as e:
            raise InputError(cfg.input, f"clip {motion.name!r}", f"cannot be audited: {e} (or pass --no-audit)") from e
    return reports


def _remove_audit(audit_root: Path) -> None:
    """Removes an audit folder; InputError naming it when that fails (a PermissionError traceback, exit 1, before,
    with the new stage left beside the earlier audit)."""
    try:
        if audit_root.is_dir():
            shutil.rmtree(audit_root)
    except OSError as e:
        where = e.filename or audit_root
        raise InputError(where, "output", f"cannot remove the earlier audit ({e.strerror or e})") from e


def _remove_outputs(cfg: ConvertConfig, audit_root: Path) -> None:
    """Removes the stage and its (unfinished) audit after a failure to write the audit (best effort: the failure
    is what gets reported)."""
    cfg.output.unlink(missing_ok=True)
    with contextlib.suppress(InputError):
        _remove_audit(audit_root)


def main(cfg: ConvertConfig) -> int:
    try:
        check_not_empty(cfg.input, "--input", "the file to convert (or procedural:NAME)")
    except ValueError as e:
        print_error(e)
        return 2
    options = {}
    if cfg.meters_per_unit is not None:
        if not cfg.input.lower().endswith(".bvh"):
            print(f"error: {cfg.input}: --meters-per-unit applies to BVH input only", file=sys.stderr)
            return 2
        m = cfg.meters_per_unit
        if not (math.isfinite(m) and m > 0):  # (the reader would name its own field, not the flag)
            print(f"error: --meters-per-unit: must be a finite length > 0 [m per BVH unit], got {m!r}",
                  file=sys.stderr)  # fmt: skip
            return 2
        options["meters_per_unit"] = m
    if not cfg.output.name:  # "", "." or "/": Path.with_name below would raise
        print(f"error: --output {str(cfg.output)!r}: names no file; give the stage to write (e.g. out/character.usda)",
              file=sys.stderr)  # fmt: skip
        return 2
    audit_root = cfg.output.with_name(cfg.output.name + ".audit")
    written = False
    try:
        try:
            _check_output(cfg, audit_root)  # fail before loading (and auditing), with nothing written
            asset = load_asset(cfg.input, skeleton=cfg.skeleton, **options)
            clips = [asset.clip(cfg.clip)] if cfg.clip is not None else list(asset.clips.values())
            reports = _audit_reports(cfg, asset, clips) if cfg.audit else []
            note_replacing(cfg.output, audit_root)  # an earlier stage (or its audit) there
            # an earlier run's audit (other clips, or none wanted) would pass for this stage's: removed first, so a
            # folder that cannot be cleared fails with the earlier stage and audit as they were
            _remove_audit(audit_root)
            write_usdskel(cfg.output, asset.rig, clips)
            written = True
        except (InputError, RigError, ValueError, KeyError) as e:  # KeyError: an unknown clip, listing the others
            print_error(e, cfg)
            return 2
        rig = asset.rig
        vertices = sum(m.vertex_count for m in rig.meshes)
        listed = ", ".join(f"{c.name} ({c.frame_count} keys)" for c in clips) or "none"
        print(f"wrote {cfg.output}: rig {rig.name!r} ({rig.joint_count} joints, {vertices} vertices), clips: {listed}")
        if cfg.audit and clips:
            folders = audit_folder_names([motion.name for motion in clips])
            for motion, report, name in zip(clips, reports, folders, strict=True):
                folder = audit_root / name
                try:
                    write_audit(folder, rig, motion, report=report)
                except (InputError, RigError, ValueError) as e:  # e.g. no permission, a plot that cannot be drawn
                    _remove_outputs(cfg, audit_root)
                    print(f"error: {e} (audit of clip {motion.name!r}; {cfg.output} removed)", file=sys.stderr)
                    return 2
                print(f"audit {motion.name}: {audit_verdict(report)}")
            print(f"wrote {audit_root}/")
        return 0
    except KeyboardInterrupt as e:
        if written:  # a half-written audit (or an earlier run's) would pass for this stage's
            with contextlib.suppress(InputError):
                _remove_audit(audit_root)
            print(f"interrupted: wrote {cfg.output}, its audit unfinished (removed)", file=sys.stderr)
        else:
            print(f"interrupted: {cfg.output} not written", file=sys.stderr)
        return interrupt_exit_status(e)


if __name__ == "__main__":
    import warnings

    warnings.formatwarning = format_warning  # one line, no source echo, flags for the library's API names
    stop_on_sigterm()
    sys.exit(main(tyro.cli(ConvertConfig, description=__doc__)))
