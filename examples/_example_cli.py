"""Helpers the example CLIs share: error lines that name the flag the user typed, notes, audit verdicts.

Not an example itself. The examples import it by path (``sys.path`` gets this folder only for that import: on it,
``examples/distill.py`` and ``examples/posespace.py`` would shadow the packages of the same names).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from sim.audit import json_ready
from usd_io import InputError

_QUALIFIED = re.compile(r"^([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)+)((?:\[[^\]]*\])?):(?=\s|$)")
"""A message's leading ``Class.field:`` (or ``Class.field[key]:``, ``Class.part.field:``), as the library's settings
checks write it."""
_BARE = re.compile(r"^([a-z_]\w*)((?:\[[^\]]*\])?):(?=\s|$)")
"""A message's leading ``field:``: a keyword argument of a library function, e.g. ``loops`` of prepare_reference."""
_API_FLAG = (
    (re.compile(r"\b[a-z_]\w*=True \((--[a-z][\w-]*)\)"), r"\1"),  # "resume=True (--resume)" -> "--resume"
    (re.compile(r"(--[a-z][\w-]*) \([a-z_]\w*=True\)"), r"\1"),  # "--resume (resume=True)" -> "--resume"
    # "skeleton='<Skeleton prim path>' (--skeleton)" -> "--skeleton '<Skeleton prim path>'"
    (re.compile(r"\b[a-z_]\w*=('[^']*') \((--[a-z][\w-]*)\)"), r"\2 \1"),
)
"""The library's Python-API spellings of an option beside its flag: a CLI user only needs the flag."""
_MISSING = ("no such file", "does not exist", "not found")
READER_OPTIONS = ("meters_per_unit", "skeleton")
"""load_asset options an InputError may name as its field: an error line names the CLI's flag for them."""


@dataclasses.dataclass(frozen=True)
class _Option:
    flag: str
    value: object
    default: object  # dataclasses.MISSING: a required option (always given)


def _flag(prefix: str, name: str) -> str:
    """tyro's flag of field ``name`` under ``prefix`` (``"tracking.contact."``): underscores become dashes."""
    return "--" + prefix + name.replace("_", "-")


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _walk(obj, default, prefix: str, found: dict[str, list[_Option]], leaves: list[_Option]) -> None:
    """Collects ``Class.field`` -> options of the dataclass instance ``obj`` (and the ones nested in it, as tyro
    names them: ``--reference.max-fps``), beside ``default``, the instance the defaults give (or MISSING)."""
    cls = type(obj).__name__
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if default is dataclasses.MISSING:
            field_default = _default(f)
        else:
            field_default = getattr(default, f.name, dataclasses.MISSING)
        option = _Option(_flag(prefix, f.name), value, field_default)
        found.setdefault(f"{cls}.{f.name}", []).append(option)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _walk(value, field_default, prefix + f.name.replace("_", "-") + ".", found, leaves)
        else:
            leaves.append(option)


def _options(cfg) -> tuple[dict[str, list[_Option]], list[_Option]]:
    found: dict[str, list[_Option]] = {}
    leaves: list[_Option] = []
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        _walk(cfg, dataclasses.MISSING, "", found, leaves)
    return found, leaves


def _is_set(option: _Option) -> bool:
    """Whether the option holds another value than its default (a required one always counts as set)."""
    if option.default is dataclasses.MISSING:
        return True
    try:
        return not bool(option.value == option.default)
    except (TypeError, ValueError):  # e.g. arrays
        return True


def flag_map(cfg) -> dict[str, list[str]]:
    """``"Class.field"`` -> the flags it is set with in the CLI whose (root) config is ``cfg``, e.g.
    ``"ReferenceConfig.max_fps": ["--reference.max-fps"]``; the root's own fields also as ``"field"``."""
    found, _ = _options(cfg)
    out = {key: [o.flag for o in options] for key, options in found.items()}
    if dataclasses.is_dataclass(cfg):
        for f in dataclasses.fields(cfg):
            out[f.name] = [_flag("", f.name)]
    return out


def _flag_for(options: list[_Option]) -> str:
    """The flag of a ``Class.field`` found at several paths: the one the user set, when exactly one of them is set
    (the value checked is then that one); otherwise every candidate, ``--a.x / --b.x``."""
    if len(options) == 1:
        return options[0].flag
    changed = [o for o in options if _is_set(o)]
    if len(changed) == 1:
        return changed[0].flag
    return " / ".join(o.flag for o in (changed or options))


def flag_message(text: str, cfg, aliases: Mapping[str, str] | None = None) -> str:
    """``text`` with a leading ``Class.field:`` (or the root config's bare ``field:``) rewritten into the flag the
    user typed, ``--class-path.field:``; the rest of the message is kept. ``aliases`` names fields the CLI sets
    under other flags (``{"OptimConfig.steps": "--steps"}``); they take precedence. Names it cannot map to one
    CLI option are left as they are."""
    aliases = aliases or {}
    found, _ = _options(cfg)
    match = _QUALIFIED.match(text)
    if match:
        fields, index, rest = match[2].split(".")[1:], match[3], text[match.end() :]
        if f"{match[1]}{match[2]}" in aliases:
            return f"{aliases[match[1] + match[2]]}{index}:{rest}"
        key = f"{match[1]}.{fields[0]}"
        if key in aliases:
            flag = aliases[key]
        elif key in found:
            flag = _flag_for(found[key])
        else:
            return text
        nested = "".join("." + name.replace("_", "-") for name in fields[1:])  # AuditConfig.contact.hover_time_s
        return " / ".join(f + nested for f in flag.split(" / ")) + f"{index}:{rest}"
    match = _BARE.match(text)
    if match and dataclasses.is_dataclass(cfg):
        names = {f.name for f in dataclasses.fields(cfg) if not dataclasses.is_dataclass(getattr(cfg, f.name))}
        if match[1] in aliases:
            return f"{aliases[match[1]]}{match[2]}:{text[match.end() :]}"
        if match[1] in names:
            return f"{_flag('', match[1])}{match[2]}:{text[match.end() :]}"
    return text


def _path_part(value) -> str | None:
    """The file path of a path option's value (a clip spec's ``#clips`` left off), or None for a value that names
    no relative file (``procedural:NAME``, an absolute path)."""
    if not isinstance(value, (str, Path)):
        return None
    text = str(value).partition("#")[0] if isinstance(value, str) else str(value)
    if not text or re.match(r"^[A-Za-z][\w+.-]*:", text) or Path(text).is_absolute():
        return None
    return text


def default_path_note(text: str, cfg) -> str:
    """``text`` plus ``(the default of --data, relative to the current folder /x)`` when it says that a relative
    path is missing which an option left at its default holds: a default such as ``../shared/assets/...`` only
    exists seen from the folder it was written for."""
    if not any(m in text.lower() for m in _MISSING):
        return text
    _, leaves = _options(cfg)
    for option in leaves:
        if _is_set(option):
            continue
        values = option.value if isinstance(option.value, (tuple, list)) else (option.value,)
        for value in values:
            path = _path_part(value)
            if path is not None and text.startswith(f"{path}:") and not Path(path).exists():
                return f"{text} (the default of {option.flag}, relative to the current folder {Path.cwd()})"
    return text


def _api_to_flags(text: str) -> str:
    """``text`` with the library's Python-API spellings of an option (:data:`_API_FLAG`) replaced by its flag."""
    for pattern, repl in _API_FLAG:
        text = pattern.sub(repl, text)
    return text


def error_text(error: BaseException | str, cfg=None, aliases: Mapping[str, str] | None = None) -> str:
    """The text of an ``error:`` line for ``error``: settings named by their flags (not for an InputError, which
    names a file), a missing default path said to be one, the library's ``x=True`` spellings left off."""
    text = error if isinstance(error, str) else str(error)
    if isinstance(error, KeyError) and error.args:  # an unknown clip: the message lists the available ones
        text = str(error.args[0])
    text = _api_to_flags(text)
    if cfg is None:
        return text
    if not isinstance(error, InputError):
        text = flag_message(text, cfg, aliases)
    elif error.field in READER_OPTIONS and len(flags := flag_map(cfg).get(error.field, ())) == 1:
        text = f"{error.path}: {flags[0]}: {error.problem}"  # the option the user typed
    return default_path_note(text, cfg)


def format_warning(message, *args, **kwargs) -> str:
    """``warnings.formatwarning`` for the examples: ``warning: ...`` on one line (no source echo), the library's
    Python-API spellings of an option replaced by its flag."""
    return f"warning: {_api_to_flags(str(message))}\n"


def print_error(error: BaseException | str, cfg=None, aliases: Mapping[str, str] | None = None) -> None:
    """Prints ``error: ...`` (see :func:`error_text`) on stderr."""
    print(f"error: {error_text(error, cfg, aliases)}", file=sys.stderr)


def check_not_empty(value: str | None, flag: str, what: str) -> None:
    """ValueError naming ``flag`` when it was given as an empty string (``--input ""`` read as the current
    folder: ``.: path: is a folder, not a file``)."""
    if value is not None and not str(value).strip():
        raise ValueError(f"{flag}: is empty; give {what}")


def note_replacing(*paths: Path) -> None:
    """Prints ``note: replacing PATH`` on stderr for the first of ``paths`` that exists (one line): a run replaces
    an earlier output there."""
    for path in paths:
        if path.exists():
            print(f"note: replacing {path}", file=sys.stderr)
            return


def audit_verdict(report) -> str:
    """``passed`` or ``failed CHECK, CHECK`` for an audit report (sim.audit.AuditReport)."""
    failed = ", ".join(c.name for c in report.failed_checks)
    return f"failed {failed}" if failed else "passed"


def strict_json(data, **dumps_kwargs) -> str:
    """``data`` as JSON that strict parsers accept: NaN and infinities become null (``json.dumps`` wrote them as
    the bare tokens ``NaN`` / ``Infinity``, which are not JSON), NumPy values plain numbers and lists
    (:func:`sim.audit.json_ready`), other numbers floats, paths and other objects their strings."""

    def other(x):
        return json_ready(float(x)) if hasattr(x, "__float__") else str(x)

    return json.dumps(json_ready(data), allow_nan=False, default=other, **dumps_kwargs)
