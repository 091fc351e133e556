"""BVH (Biovision Hierarchy) motion-capture reader.

A BVH file has two sections::

    HIERARCHY
    ROOT Hips
    {
        OFFSET 0 0 0
        CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
        JOINT Chest
        {
            OFFSET 0 5.2 0
            CHANNELS 3 Zrotation Xrotation Yrotation
            End Site
            {
                OFFSET 0 4.1 0
            }
        }
    }
    MOTION
    Frames: 2
    Frame Time: 0.0333333
    <one row of channel values per frame, in the order the CHANNELS lines appear>

Conventions used here (those of the Biovision format and of the common exporters):

* A joint's local transform is ``T @ R`` with ``T`` its OFFSET -- or, when the joint has position channels, the
  channel values (they *replace* the offset; a component without a channel keeps the offset's value) -- and
  ``R = R_c1 @ R_c2 @ R_c3`` for the rotation channels ``c1, c2, c3`` in their listed order (intrinsic rotations,
  the first listed is the outermost), angles in degrees. Position channels are a translation in the parent frame
  wherever they appear in the channel list.
* Every ``End Site`` becomes a joint called ``"<parent>_end"`` (made unique with a number when needed) that never
  moves relative to its parent, so the importer's joint list is every JOINT and End Site in file order (which is
  parents-first).
* Units: BVH has no unit field. ``meters_per_unit=None`` picks the candidate of :data:`BVH_UNIT_CANDIDATES` that
  makes the rest skeleton's height (its extent along the up axis, End Sites included) closest to
  :data:`BVH_EXPECTED_HEIGHT` in log ratio. The CMU database's BVH conversions keep the ASF skeleton's lengths,
  whose unit is ``1/0.45`` inch (0.05644 m): with it their skeletons are ~1.4 m tall from toe to head End Site.
* Axes: BVH files are usually Y-up; the toolkit is Z-up. With ``up_axis="Y"`` the rotation ``C`` (+90 degrees about
  X, mapping BVH +Y to +Z and BVH +Z to -Y) is folded into the root's rest and motion channels, so every joint's
  world position is ``meters_per_unit * C @ p_bvh``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from sim import Motion, Rig, RigError
from sim.rotations import euler_to_quat, quat_identity, quat_multiply

from ._files import read_regular_file
from ._limits import MAX_MAGNITUDE, too_large
from .asset import Asset
from .errors import InputError

__all__ = ["BVH_EXPECTED_HEIGHT", "BVH_UNIT_CANDIDATES", "choose_meters_per_unit", "read_bvh"]

BVH_UNIT_CANDIDATES: dict[str, float] = {
    "m": 1.0,
    "cm": 0.01,
    "mm": 0.001,
    "inch": 0.0254,
    "cmu_asf": 0.0254 / 0.45,
}
"""Length units the automatic scale chooses from [m per file unit]; ``cmu_asf`` is the CMU ASF unit (1/0.45 inch)."""

BVH_EXPECTED_HEIGHT = 1.7
"""Height [m] the automatic unit choice aims the rest skeleton at."""

MAX_CHANNELLESS_FRAMES = 10**6
"""Most frames a BVH file without channels may declare: its ``Frames:`` count alone would size the clip."""

MAX_FRAME_JOINTS = 1 << 25
"""Most frames x joints a clip may hold (~1.9 GB of float64 rotations and translations; a 10-minute 120 fps capture
of 100 joints holds 7.2e6). Joints and End Sites without channels cost no file bytes per frame, so a small file
could otherwise ask for any amount of memory."""

FPS_SNAP_TOLERANCE = 1e-3
"""``1 / Frame Time`` is rounded to the nearest integer rate when within this relative distance of it."""

_CHANNELS = {f"{a}{k}".lower(): (f"{a}{k}", k, i) for i, a in enumerate("XYZ") for k in ("position", "rotation")}
_FRAMES_RE = re.compile(r"^\s*frames\s*:?\s*(\S*)\s*$", re.IGNORECASE)
_FRAME_TIME_RE = re.compile(r"^\s*frame\s*time\s*:?\s*(\S*)\s*$", re.IGNORECASE)
_TOKEN_RE = re.compile(r"[{}]|[^\s{}]+")
# +90 degrees about X: BVH +Y (up) -> +Z, BVH +Z -> -Y
_Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
_Y_UP_TO_Z_UP_QUAT = np.array([math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4)])


@dataclass
class _Joint:
    """One JOINT / ROOT / End Site as read from the HIERARCHY."""

    name: str
    parent: int
    line: int
    is_end: bool = False
    offset: np.ndarray | None = None
    channels: list[str] | None = None
    first_column: int = 0


def read_bvh(
    path: str | Path,
    *,
    meters_per_unit: float | None = None,
    up_axis: Literal["Y", "Z"] = "Y",
) -> Asset:
    """Reads a BVH file into a meshless rig and one motion clip named after the file.

    Args:
        path: the ``.bvh`` file.
        meters_per_unit: the file's length unit [m]; None chooses one of :data:`BVH_UNIT_CANDIDATES` from the rest
            skeleton's height (see the module docstring).
        up_axis: the file's up axis: ``"Y"`` (usual; rotated to Z-up) or ``"Z"`` (taken as is).

    Returns:
        An :class:`~usd_io.Asset` whose rig has one joint per JOINT and End Site (rest rotations identity except the
        root's, which holds the up-axis rotation; inverse bind matrices from the rest pose), whose single clip
        (absent when the file has zero frames) holds every frame at ``fps = 1 / Frame Time`` (snapped to an integer
        rate within :data:`FPS_SNAP_TOLERANCE`), and whose ``source_meters_per_unit`` is the scale used.

    Raises:
        InputError: unreadable file or malformed content; the message names the file and the section and line.
        InputError: ``meters_per_unit`` not a positive finite number, or an unknown ``up_axis`` (names the file and
            the option); frames x joints beyond :data:`MAX_FRAME_JOINTS`.
    """
    path = Path(path)
    if meters_per_unit is not None:
        try:
            meters_per_unit = float(meters_per_unit)
        except (TypeError, ValueError):
            meters_per_unit = math.nan
    if meters_per_unit is not None and not (math.isfinite(meters_per_unit) and meters_per_unit > 0):
        raise InputError(path, "meters_per_unit", f"must be a positive finite number, got {meters_per_unit!r}")
    if str(up_axis).upper() not in ("Y", "Z"):
        raise InputError(path, "up_axis", f"must be 'Y' or 'Z', got {up_axis!r}")
    y_up = str(up_axis).upper() == "Y"

    lines = _read_lines(path)
    joints, motion_line = _HierarchyParser(path, lines).parse()
    channel_count = _assign_columns(joints)
    frame_time, values = _parse_motion(path, lines, motion_line, channel_count)
    if len(values) * len(joints) > MAX_FRAME_JOINTS:
        raise InputError(path, "MOTION", f"{len(values)} frames x {len(joints)} joints (with End Sites) exceeds "
                         f"{MAX_FRAME_JOINTS} samples: split the clip")  # fmt: skip
    _assign_end_names(joints)

    offsets = np.array([j.offset for j in joints])
    parents = np.array([j.parent for j in joints], dtype=np.int64)
    if meters_per_unit is None:
        meters_per_unit = choose_meters_per_unit(offsets, parents, up_index=1 if y_up else 2)
    scale = float(meters_per_unit)
    up = _Y_UP_TO_Z_UP if y_up else np.eye(3)
    up_quat = _Y_UP_TO_Z_UP_QUAT if y_up else quat_identity()

    rest_translations = offsets * scale
    rest_translations[0] = up @ rest_translations[0]
    _check_scaled(path, rest_translations, scale, "HIERARCHY OFFSET")
    rest_rotations = quat_identity((len(joints),))
    rest_rotations[0] = up_quat
    try:
        rig = Rig([j.name for j in joints], parents, rest_translations, rest_rotations, name=path.stem)
    except RigError as e:
        raise InputError(path, "HIERARCHY", str(e)) from None

    clips: dict[str, Motion] = {}
    if len(values):
        rotations, translations, moved = _local_channels(joints, values)
        rotations[:, 0] = quat_multiply(up_quat, rotations[:, 0])
        translations *= scale
        _check_scaled(path, translations, scale, "MOTION position channels")
        root_translations = translations[:, 0] @ up.T
        fps = _frame_rate(frame_time)
        try:
            clips[path.stem] = Motion(
                fps,
                root_translations,
                rotations,
                translations if moved else None,
                times=np.arange(len(values)) / fps,
                name=path.stem,
            )
        except RigError as e:
            raise InputError(path, "MOTION", str(e)) from None
    return Asset(rig, clips, str(path), scale)


def _check_scaled(path: Path, lengths: np.ndarray, scale: float, where: str) -> None:
    """InputError naming ``meters_per_unit`` when it scales the file's lengths [m] past :data:`MAX_MAGNITUDE` (1e300
    wrote a stage of inf translations and reported success)."""
    with np.errstate(over="ignore", invalid="ignore"):
        big = ~np.isfinite(lengths) | too_large(lengths)
    if big.any():
        raise InputError(path, "meters_per_unit", f"{scale:g} scales the {where} to {np.abs(lengths).max():.3g} m, "
                         f"beyond {MAX_MAGNITUDE:g} m")  # fmt: skip


def choose_meters_per_unit(offsets: np.ndarray, parents: np.ndarray, up_index: int = 1) -> float:
    """The unit of :data:`BVH_UNIT_CANDIDATES` that makes the rest skeleton closest to 1.7 m tall (log ratio).

    Args:
        offsets: joint offsets in file units, shape (joint_count, 3).
        parents: parent index per joint (parents first, root -1), shape (joint_count,).
        up_index: the file's up axis (1 for Y, 2 for Z).

    Returns:
        The chosen unit [m per file unit]; 1.0 for a skeleton of zero height.
    """
    world = np.zeros_like(offsets, dtype=np.float64)
    for j, p in enumerate(parents):
        world[j] = offsets[j] + (world[p] if p >= 0 else 0.0)
    height = float(np.ptp(world[:, up_index])) if len(world) else 0.0
    if not height > 0:
        return 1.0
    return min(
        BVH_UNIT_CANDIDATES.values(),
        key=lambda unit: abs(math.log(height * unit / BVH_EXPECTED_HEIGHT)),
    )


# -- reading -------------------------------------------------------------------------------------------------------


def _read_lines(path: Path) -> list[str]:
    data = read_regular_file(path, "file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.splitlines()  # handles LF, CRLF, CR and mixtures


class _HierarchyParser:
    """Recursive-descent parsing of the HIERARCHY section, written as a loop over tokens with a stack of open joints."""

    def __init__(self, path: Path, lines: list[str]):
        self.path = path
        self.tokens: list[str] = []
        self.token_lines: list[int] = []  # 1-based line number of each token
        self.eof_line = len(lines)
        for number, line in enumerate(lines, start=1):
            toks = _TOKEN_RE.findall(line)
            if toks and toks[0].upper() == "MOTION":
                # the hierarchy ends at the first line starting with MOTION; the data rows are parsed elsewhere
                self.tokens.append("MOTION")
                self.token_lines.append(number)
                break
            self.tokens.extend(toks)
            self.token_lines.extend([number] * len(toks))
        self.pos = 0

    def error(self, line: int | None, problem: str) -> InputError:
        return InputError(self.path, "HIERARCHY" if line is None else f"HIERARCHY line {line}", problem)

    def next(self) -> tuple[str | None, int]:
        if self.pos >= len(self.tokens):
            return None, self.eof_line
        self.pos += 1
        return self.tokens[self.pos - 1], self.token_lines[self.pos - 1]

    def peek(self) -> tuple[str | None, int]:
        if self.pos >= len(self.tokens):
            return None, self.eof_line
        return self.tokens[self.pos], self.token_lines[self.pos]

    def parse(self) -> tuple[list[_Joint], int]:
        """Returns the joints (file order) and the MOTION line number (1-based)."""
        tok, line = self.next()
        if tok is None:
            raise self.error(None, "empty file (expected 'HIERARCHY')")
        if tok.upper() != "HIERARCHY":
            shown = repr(tok) if len(tok) <= 40 else f"{tok[:40]!r} ... ({len(tok)} characters: not a BVH text file?)"
            raise self.error(line, f"expected 'HIERARCHY' at the start of the file, got {shown}")
        joints: list[_Joint] = []
        stack: list[int] = []
        names: dict[str, int] = {}
        while True:
            tok, line = self.next()
            if tok is None:
                if stack:
                    j = joints[stack[-1]]
                    raise self.error(
                        None, f"end of file inside {self.describe(j)} opened at line {j.line} (missing '}}')"
                    )
                if not joints:
                    raise self.error(None, "no ROOT joint")
                raise InputError(self.path, "MOTION", "missing MOTION section")
            key = tok.upper()
            if key == "MOTION":
                if stack:
                    j = joints[stack[-1]]
                    raise self.error(line, f"'MOTION' inside {self.describe(j)} opened at line {j.line} (missing '}}')")
                if not joints:
                    raise self.error(line, "MOTION before any ROOT joint")
                return joints, line
            if key in ("ROOT", "JOINT", "END"):
                if key == "ROOT" and joints:
                    raise self.error(line, "a second ROOT joint (only one skeleton per file is supported)")
                if key != "ROOT" and not stack:
                    raise self.error(line, f"{tok!r} outside the ROOT joint's braces")
                if stack and joints[stack[-1]].is_end:
                    raise self.error(line, "an End Site cannot have child joints")
                parent = stack[-1] if stack else -1
                joint = self.open_joint(key, tok, line, parent, joints[parent].name if stack else "")
                if not joint.is_end:
                    if joint.name in names:
                        first = joints[names[joint.name]].line
                        raise self.error(line, f"duplicate joint name {joint.name!r} (first at line {first})")
                    names[joint.name] = len(joints)
                stack.append(len(joints))
                joints.append(joint)
            elif tok == "}":
                if not stack:
                    raise self.error(line, "'}' without a matching '{'")
                j = joints[stack.pop()]
                if j.offset is None:
                    raise self.error(j.line, f"{self.describe(j)} has no OFFSET")
                if j.channels is None:
                    j.channels = []
                if not stack:  # the root is closed: only MOTION may follow
                    nxt, nline = self.peek()
                    if nxt == "}":
                        raise self.error(nline, "'}' without a matching '{'")
                    if nxt is not None and nxt.upper() not in ("MOTION", "ROOT"):
                        raise self.error(nline, f"unexpected {nxt!r} after the ROOT joint's closing '}}'")
            elif tok == "{":
                raise self.error(line, "'{' without a JOINT, ROOT or End Site before it")
            elif key in ("OFFSET", "CHANNELS"):
                if not stack:
                    raise self.error(line, f"{tok} outside a joint")
                j = joints[stack[-1]]
                if key == "OFFSET":
                    self.read_offset(j, line)
                else:
                    self.read_channels(j, line)
            else:
                where = f" in {self.describe(joints[stack[-1]])}" if stack else ""
                raise self.error(line, f"unexpected {tok!r}{where}")

    @staticmethod
    def describe(j: _Joint) -> str:
        return f"End Site of joint {j.name!r}" if j.is_end else f"joint {j.name!r}"

    def open_joint(self, key: str, tok: str, line: int, parent: int, parent_name: str) -> _Joint:
        if key == "END":
            site, sline = self.next()
            if site is None or site.upper() != "SITE" or sline != line:
                raise self.error(line, f"expected 'End Site', got {tok!r} followed by {site!r}")
            name = parent_name  # provisional (for messages); the unique "<parent>_end" name is assigned later
        else:
            parts = []
            while self.peek()[1] == line and self.peek()[0] not in (None, "{", "}"):
                parts.append(self.next()[0])
            if not parts:
                raise self.error(line, f"{tok} without a name")
            name = " ".join(parts)
        joint = _Joint(name=name, parent=parent, line=line, is_end=key == "END")
        brace, bline = self.next()
        if brace is None:
            raise self.error(None, f"end of file inside {self.describe(joint)} opened at line {line} (missing '{{')")
        if brace != "{":
            raise self.error(bline, f"expected '{{' after {tok} {name!r}, got {brace!r}")
        return joint

    def read_offset(self, j: _Joint, line: int) -> None:
        if j.offset is not None:
            raise self.error(line, f"second OFFSET in {self.describe(j)}")
        values = []
        for _ in range(3):
            tok, tline = self.next()
            v = _number(tok)
            if v is None:
                raise self.error(tline, f"OFFSET of {self.describe(j)}: expected 3 numbers, got {tok!r}")
            if not math.isfinite(v):
                raise self.error(tline, f"OFFSET of {self.describe(j)}: non-finite value {tok!r}")
            if abs(v) > MAX_MAGNITUDE:
                raise self.error(
                    tline, f"OFFSET of {self.describe(j)}: value {tok!r} out of range (> {MAX_MAGNITUDE:g})"
                )
            values.append(v)
        j.offset = np.array(values)

    def read_channels(self, j: _Joint, line: int) -> None:
        if j.channels is not None:
            raise self.error(line, f"second CHANNELS in {self.describe(j)}")
        tok, tline = self.next()
        count = _count(tok)
        if count is None:
            raise self.error(tline, f"CHANNELS of {self.describe(j)}: count {tok!r} is not a non-negative integer")
        listed: list[str] = []
        while True:
            nxt, nline = self.peek()
            if nxt is None or (nline != line and nxt.lower() not in _CHANNELS):
                break
            self.next()
            if nxt.lower() not in _CHANNELS:
                raise self.error(
                    nline,
                    f"CHANNELS of {self.describe(j)}: unknown channel {nxt!r} "
                    "(expected Xposition, Yposition, Zposition, Xrotation, Yrotation or Zrotation)",
                )
            listed.append(_CHANNELS[nxt.lower()][0])
        if len(listed) != count:
            raise self.error(line, f"CHANNELS of {self.describe(j)} declares {count} channels but lists {len(listed)}")
        positions = [c for c in listed if c.endswith("position")]
        if len(set(positions)) != len(positions):
            raise self.error(line, f"CHANNELS of {self.describe(j)}: a position channel is listed twice")
        if j.is_end and count:
            raise self.error(line, f"{self.describe(j)} cannot have channels")
        j.channels = listed


def _number(text: str | None) -> float | None:
    """``float(text)`` for a number as BVH writes it, else None (Python's ``float`` also reads ``4_0`` as 40)."""
    if text is None or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _count(text: str | None) -> int | None:
    """``int(text)`` for a plain non-negative decimal integer, else None."""
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def _assign_columns(joints: list[_Joint]) -> int:
    """Sets each joint's first column in a MOTION row; returns the total channel count."""
    column = 0
    for j in joints:
        j.first_column = column
        column += len(j.channels or ())
    return column


def _assign_end_names(joints: list[_Joint]) -> None:
    """Names every End Site ``"<parent>_end"``, adding a number when that name is taken."""
    taken = {j.name for j in joints if not j.is_end}
    for j in joints:
        if not j.is_end:
            continue
        base = f"{joints[j.parent].name}_end"
        name, k = base, 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        taken.add(name)
        j.name = name


def _parse_motion(path: Path, lines: list[str], motion_line: int, channel_count: int) -> tuple[float, np.ndarray]:
    """Parses the MOTION header and rows; returns the frame time [s] and values, shape (frame_count, channel_count)."""
    extra = lines[motion_line - 1].split()[1:]
    if extra:
        raise InputError(path, f"MOTION line {motion_line}", f"unexpected {extra[0]!r} after 'MOTION'")
    k = motion_line  # 0-based index of the line after MOTION

    def header(regex: re.Pattern, label: str) -> tuple[str, int]:
        nonlocal k
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k >= len(lines):
            raise InputError(path, f"MOTION {label}", f"end of file before '{label}:'")
        m = regex.match(lines[k])
        if not m or not m.group(1):
            raise InputError(path, f"MOTION line {k + 1}", f"expected '{label}: <value>', got {lines[k].strip()!r}")
        k += 1
        return m.group(1), k

    frames_text, frames_line = header(_FRAMES_RE, "Frames")
    frame_count = _count(frames_text)
    if frame_count is None:
        raise InputError(path, f"MOTION line {frames_line}", f"Frames: {frames_text!r} is not a non-negative integer")
    time_text, time_line = header(_FRAME_TIME_RE, "Frame Time")
    frame_time = _number(time_text)
    if frame_time is None or not (math.isfinite(frame_time) and frame_time > 0):
        raise InputError(
            path, f"MOTION line {time_line}", f"Frame Time: {time_text!r} is not a positive finite number [s]"
        )
    rate, duration = 1.0 / frame_time, max(frame_count - 1, 0) * frame_time  # [1/s], [s]
    if not math.isfinite(rate) or too_large([frame_time, rate, duration]).any():
        raise InputError(
            path,
            f"MOTION line {time_line}",
            f"Frame Time: {time_text!r} out of range: it, the frame rate 1 / Frame Time ({rate:g} per second) and"
            f" the clip's duration ({duration:g} s) must not exceed {MAX_MAGNITUDE:g}",
        )

    rows: list[list[str]] = []
    row_lines: list[int] = []
    for number in range(k + 1, len(lines) + 1):
        toks = lines[number - 1].split()
        if toks:
            rows.append(toks)
            row_lines.append(number)
    for toks, number in zip(rows, row_lines):
        if len(toks) != channel_count:
            raise InputError(
                path,
                f"MOTION line {number}",
                f"frame row has {len(toks)} values, expected {channel_count} (the total of the CHANNELS counts)",
            )
    if channel_count == 0:
        if frame_count > MAX_CHANNELLESS_FRAMES:  # no rows to check the count against: it alone would size the clip
            raise InputError(
                path,
                f"MOTION line {frames_line}",
                f"Frames: {frame_count} with no CHANNELS (more than {MAX_CHANNELLESS_FRAMES} rest-pose frames)",
            )
        rows, row_lines = [[]] * frame_count, [0] * frame_count  # nothing to read: every frame is the rest pose
    if len(rows) != frame_count:
        raise InputError(
            path,
            f"MOTION line {frames_line}",
            f"Frames: {frame_count} but the file has {len(rows)} frame rows",
        )
    try:
        if any("_" in lines[number - 1] for number in row_lines if number):
            raise ValueError("underscore")  # float() reads 4_0 as 40; BVH numbers have no underscores
        flat = np.array(list(map(float, (t for toks in rows for t in toks))), dtype=np.float64)
    except ValueError:
        for toks, number in zip(rows, row_lines):
            for c, t in enumerate(toks):
                if _number(t) is None:
                    raise InputError(path, f"MOTION line {number}", f"value {c + 1} ({t!r}) is not a number") from None
        raise  # unreachable: some token failed above
    values = flat.reshape(frame_count, channel_count)
    bad = ~np.isfinite(values)
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        raise InputError(path, f"MOTION line {row_lines[r]}", f"value {c + 1} ({rows[r][c]!r}) is not finite")
    huge = too_large(values)
    if huge.any():
        r, c = (int(i) for i in np.argwhere(huge)[0])
        raise InputError(
            path, f"MOTION line {row_lines[r]}", f"value {c + 1} ({rows[r][c]!r}) out of range (> {MAX_MAGNITUDE:g})"
        )
    return frame_time, values


def _frame_rate(frame_time: float) -> float:
    """``1 / frame_time``, snapped to the nearest integer when within :data:`FPS_SNAP_TOLERANCE` (relative)."""
    fps = 1.0 / frame_time
    nearest = round(fps)
    if nearest > 0 and abs(fps - nearest) <= FPS_SNAP_TOLERANCE * fps:
        return float(nearest)
    return fps


def _local_channels(joints: list[_Joint], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Local rotations (F, J, 4) and translations (F, J, 3) [file units] from the channel values.

    Returns:
        rotations, translations, and whether any non-root joint has position channels.
    """
    frames, count = len(values), len(joints)
    rotations = np.empty((frames, count, 4))
    translations = np.empty((frames, count, 3))
    by_order: dict[str, tuple[list[int], list[list[int]]]] = {}
    moved = False
    for index, j in enumerate(joints):
        translations[:, index] = j.offset
        order, rot_columns = "", []
        for c, name in enumerate(j.channels or ()):
            axis, kind, component = _CHANNELS[name.lower()]
            if kind == "position":
                translations[:, index, component] = values[:, j.first_column + c]
                moved = moved or index > 0
            else:
                order += axis[0]
                rot_columns.append(j.first_column + c)
        group = by_order.setdefault(order, ([], []))
        group[0].append(index)
        group[1].append(rot_columns)
    for order, (indices, columns) in by_order.items():
        if not order:
            rotations[:, indices] = quat_identity()
            continue
        angles = np.radians(values[:, np.array(columns)])  # (F, n, len(order))
        rotations[:, indices] = euler_to_quat(angles, order)
    return rotations, translations, moved
