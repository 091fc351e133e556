"""Torch device names checked before any work: a misspelt or unavailable device is a one-line ValueError naming the
setting, not an assertion deep inside torch after the run folder was made."""

from __future__ import annotations

import torch

__all__ = ["SUPPORTED_DEVICE_TYPES", "check_device_name", "resolve_device"]

SUPPORTED_DEVICE_TYPES = ("cpu", "cuda", "mps")
"""Device types a run can compute on ('meta' and friends hold no data)."""


def check_device_name(name: str, field: str) -> None:
    """Checks the spelling of a device setting: ``auto`` or a torch device of a supported type (``cpu``,
    ``cuda``, ``cuda:1``, ``mps``); availability is checked by :func:`resolve_device`.

    Raises:
        ValueError: naming ``field``.
    """
    if not isinstance(name, str):
        raise ValueError(f"{field}: expected a device name such as 'cpu', 'cuda' or 'auto', got {name!r}")
    if name == "auto":
        return
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise ValueError(f"{field}: {name!r} is not a device name (expected auto, cpu, cuda, cuda:N or mps)") from None
    if dev.type not in SUPPORTED_DEVICE_TYPES:
        supported = ", ".join(SUPPORTED_DEVICE_TYPES)
        raise ValueError(f"{field}: {name!r} cannot run a distillation (supported: auto, {supported})")


def resolve_device(name: str | torch.device, field: str) -> torch.device:
    """The torch device of a setting, checked to exist on this machine (``auto``: cuda when available, else cpu).

    Raises:
        ValueError: naming ``field``: a misspelt, unsupported or unavailable device.
    """
    if isinstance(name, torch.device):
        name = str(name)
    check_device_name(name, field)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "without CUDA"
            raise ValueError(
                f"{field}: {name!r}: no CUDA device is available on this machine (torch {torch.__version__} {build})"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"{field}: {name!r}: this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{field}: {name!r}: MPS is not available on this machine")
    return dev
