# Plausibility audit of an animation: ground contact, foot skate, self-intersection, joint limits, jitter.
#
#   .venv/bin/python examples/audit.py --input ../shared/assets/gltf/Fox.glb --clip Walk --output out/audit-fox
#   .venv/bin/python examples/audit.py --input ../shared/assets/bvh/131_01.bvh --output out/audit-131
#   .venv/bin/python examples/audit.py --input procedural:biped-walk --output out/audit-biped
#
# Writes OUTPUT/report.json (every metric, threshold, pass/fail per check, failing frame ranges, body parts),
# OUTPUT/timeline.png and OUTPUT/worst_frame.png, each atomically; an earlier report there is removed first (a
# `note: replacing` line says so), and an interrupted write is removed, never left half-written.
# Exit status: 0 when every check passes, 1 when any fails, 2 on bad input (one line naming file and problem),
# 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (kill, docker stop: handled as Ctrl-C is).
"""Audit an animation (UsdSkel stage, glTF clip, BVH, or procedural:NAME) for physical plausibility."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import tyro

from sim import RigError
from sim.audit import AuditConfig
from usd_io import AUDIT_FILES, InputError, audit_asset, interrupt_exit_status, load_asset, stop_on_sigterm, write_audit

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for the examples' shared helpers only
from _example_cli import check_not_empty, error_text, format_warning, note_replacing, print_error

sys.path.pop(0)


@dataclass
class AuditCliConfig:
    input: str
    """Source: a .usd/.usda/.usdc stage, a .gltf/.glb, a .bvh, or procedural:biped-walk etc."""
    output: Path = Path("audit")
    """Folder for report.json, timeline.png and worst_frame.png (created when missing)."""
    clip: str | None = None
    """Clip to audit (default: the first clip of the file)."""
    skeleton: str | None = None
    """USD input holding several skeletons: the Skeleton prim path to read (default: the one under the stage's
    defaultPrim; when several remain, the first, with a warning naming the others)."""
    meters_per_unit: float | None = None
    """BVH only: the file's length unit in metres (default: detected from the skeleton's height)."""
    audit: AuditConfig = field(default_factory=AuditConfig)
    """Thresholds and contact settings (all lengths relative to the character's size)."""


def _remove_report(folder: Path) -> None:
    """Removes the report files (and temporary files of writes killed midway) from ``folder``."""
    for name in AUDIT_FILES:
        path = folder / name
        path.unlink(missing_ok=True)
        for tmp in folder.glob(f".{path.stem}.*.tmp{path.suffix}"):  # atomic_output's temporary names
            tmp.unlink(missing_ok=True)


def main(cfg: AuditCliConfig) -> int:
    try:
        return _audit(cfg)
    except KeyboardInterrupt as e:
        print(f"interrupted: no report written to {cfg.output}", file=sys.stderr)
        return interrupt_exit_status(e)


def _audit(cfg: AuditCliConfig) -> int:
    try:
        check_not_empty(cfg.input, "--input", "the animation to audit (or procedural:NAME)")
    except ValueError as e:
        print_error(e)
        return 2
    options = {}
    if cfg.meters_per_unit is not None:
        if not cfg.input.lower().endswith(".bvh"):
            print(f"error: {cfg.input}: --meters-per-unit applies to BVH input only", file=sys.stderr)
            return 2
        options["meters_per_unit"] = cfg.meters_per_unit
    try:
        cfg.audit.check()  # a bad threshold is a settings error, reported before loading anything
    except ValueError as e:
        print_error(e, cfg)  # naming the flag (--audit.penetration-rel), not the field (AuditConfig.penetration_rel)
        return 2
    try:
        asset = load_asset(cfg.input, skeleton=cfg.skeleton, **options)
        report = audit_asset(asset, cfg.clip, cfg.audit)
    except (InputError, RigError) as e:
        print_error(e, cfg)
        return 2
    except ValueError as e:  # e.g. a clip whose frames cannot be measured
        print(f"error: {cfg.input}: {error_text(e, cfg)}", file=sys.stderr)
        return 2
    try:
        # an earlier report's files would pass for this one's until each is replaced (or for ever, when interrupted)
        if cfg.output.is_dir():
            note_replacing(cfg.output / "report.json")  # an earlier report
            _remove_report(cfg.output)
        try:
            write_audit(cfg.output, asset.rig, report=report, motion=asset.clip(cfg.clip))
        except KeyboardInterrupt:
            _remove_report(cfg.output)  # half a report
            raise
    except InputError as e:  # the folder cannot be created or written (names it and the reason)
        print_error(e, cfg)
        return 2
    except OSError as e:
        print(f"error: {cfg.output}: cannot write the report ({e.strerror or e})", file=sys.stderr)
        return 2
    print(report.summary())
    print(f"wrote {cfg.output / 'report.json'}, timeline.png, worst_frame.png")
    return 0 if report.passed else 1


if __name__ == "__main__":
    import warnings

    warnings.formatwarning = format_warning  # one line, no source echo, flags for the library's API names
    stop_on_sigterm()
    sys.exit(main(tyro.cli(AuditCliConfig, description=__doc__)))
