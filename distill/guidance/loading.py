"""Guidance configuration, model presets, and construction (real weights from a local directory / HF cache, tiny
random models, or the oracle).

Real weights are never fetched implicitly: ``from_pretrained`` runs with ``local_files_only=True`` unless
``allow_download`` is set, so a missing model fails at once with a message that says how to get it.

GPU requirements (not measured here: these machines have no GPU). Published inference figures: CogVideoX-2b
~12 GB (diffusers, FP16) and ~90 s per 50 steps on one A100 (~45 s on H100); CogVideoX-5b ~20.7 GB (diffusers,
BF16) and ~180 s per 50 steps on A100 (~90 s on H100) (model card); Wan2.1-T2V-1.3B 8.19 GB and ~4 min per 5 s 480p
video on an RTX 4090. One SDS step costs about one CFG denoising step (a batch-2 transformer pass) plus a VAE encode
with its backward pass per rendered view, i.e. roughly 2-4 s per view on an A100 for CogVideoX-2b at 480x720x49.
The VAE backward adds activation memory: keep ``vae_gradient_checkpointing`` (CogVideoX) and render fewer frames
or a smaller ``model_height/width`` first; budget >= 24 GB for 2b and >= 40 GB for 5b. On CPU a full-size
random-weight CogVideoX-2b step took ~23 s and ~9 GB (field notes); the tiny models take ~0.1 s.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from sim._numbers import is_finite_real

from ..devices import check_device_name, resolve_device
from ._sds import TimestepSchedule, VideoSDS, Weighting
from .cogvideox import GuidanceCogVideoX
from .oracle import OracleDenoiser, PixelVAE
from .text import encode_prompts
from .tiny import cogvideox_scheduler, tiny_cogvideox, tiny_wan
from .wan import GuidanceWan

__all__ = ["MODEL_PRESETS", "GuidanceConfig", "GuidanceKind", "GuidanceModelError", "ModelPreset", "build_guidance"]

GuidanceKind = Literal["cogvideox-2b", "cogvideox-5b", "wan2.1-1.3b", "tiny", "tiny-wan", "oracle"]
GuidanceDtype = Literal["auto", "float32", "float16", "bfloat16"]


class GuidanceModelError(RuntimeError):
    """The guidance model's weights are missing or unreadable; the message says what to do."""


@dataclass(frozen=True)
class ModelPreset:
    """A released text-to-video model."""

    family: Literal["cogvideox", "wan"]
    hub_id: str
    dtype: str
    height: int
    width: int
    frames: int
    fps: int
    text_length: int


MODEL_PRESETS: dict[str, ModelPreset] = {
    "cogvideox-2b": ModelPreset("cogvideox", "THUDM/CogVideoX-2b", "float16", 480, 720, 49, 8, 226),
    "cogvideox-5b": ModelPreset("cogvideox", "THUDM/CogVideoX-5b", "bfloat16", 480, 720, 49, 8, 226),
    "wan2.1-1.3b": ModelPreset("wan", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "bfloat16", 480, 832, 81, 16, 512),
}


@dataclass(frozen=True)
class GuidanceConfig:
    """Which video model scores the renders, and how SDS samples it."""

    kind: GuidanceKind = "tiny"
    """Model: a released one (weights needed), 'tiny' / 'tiny-wan' (random, offline) or 'oracle'."""
    model: str | None = None
    """Local diffusers directory or Hugging Face hub id (default: the preset's hub id, from the local cache)."""
    dtype: GuidanceDtype = "auto"
    """Weights dtype; 'auto' = the preset's on CUDA, float32 on CPU. The tiny models and the oracle are float32
    ('auto' or 'float32'; another dtype is refused: only a released model's weights load in a chosen dtype)."""
    device: str = "auto"
    """Torch device of the model; 'auto' = the distiller's device (build_guidance alone: cuda when available). The
    rendered videos move to it and their gradients come back."""
    allow_download: bool = False
    """Let from_pretrained download missing weights (off: only local files are used)."""
    guidance_scale: float = 25.0
    """Classifier-free guidance scale (1 = no unconditional pass); the oracle has no text branch and runs at 1."""
    negative_prompt: str = ""
    """Negative prompt for the unconditional branch."""
    schedule: TimestepSchedule = field(default_factory=TimestepSchedule)
    """Timestep range and its annealing."""
    weighting: Weighting = "noise_level"
    """SDS weight w(t): 'uniform' or 'noise_level' (1 - alpha_bar, or sigma for flow)."""
    model_height: int | None = None
    """Renders are resized to this height before encoding (None keeps the render size)."""
    model_width: int | None = None
    """Renders are resized to this width before encoding (None keeps the render size)."""
    vae_gradient_checkpointing: bool = True
    """Recompute VAE activations in backward (CogVideoX VAE only; Wan's does not support it)."""
    vae_tiling: bool = False
    """Tiled VAE encode (less memory at large sizes; gradients flow through tiles)."""
    tiny_seed: int = 0
    """Seed of the tiny models' random weights."""

    def __post_init__(self):
        for name, choices in (("kind", GuidanceKind), ("dtype", GuidanceDtype), ("weighting", Weighting)):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in choices.__args__:
                raise ValueError(
                    f"GuidanceConfig.{name}: expected one of {', '.join(map(repr, choices.__args__))}, got {value!r}"
                )
        if self.kind not in MODEL_PRESETS and self.dtype not in ("auto", "float32"):
            raise ValueError(
                f"GuidanceConfig.dtype: {self.kind} builds float32 weights (only a released model's weights load in a "
                f"chosen dtype: {', '.join(MODEL_PRESETS)}), got {self.dtype!r}; use 'auto' or 'float32'"
            )
        g = self.guidance_scale
        if not is_finite_real(g):  # True became 1.0: classifier-free guidance silently off
            raise ValueError(f"GuidanceConfig.guidance_scale: must be a finite number, got {g!r}")
        # a dict (as config.json stores it) or None passed here and failed at step 0 (AttributeError)
        if not isinstance(self.schedule, TimestepSchedule):
            raise ValueError(f"GuidanceConfig.schedule: must be a TimestepSchedule, got {self.schedule!r}")
        if not isinstance(self.negative_prompt, str):
            raise ValueError(f"GuidanceConfig.negative_prompt: must be a string, got {self.negative_prompt!r}")
        if self.model is not None and not isinstance(self.model, str):
            raise ValueError(f"GuidanceConfig.model: must be a folder or hub id (a string) or None, got {self.model!r}")
        for name in ("allow_download", "vae_gradient_checkpointing", "vae_tiling"):  # "no" is truthy: tiling on
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"GuidanceConfig.{name}: must be True or False, got {getattr(self, name)!r}")
        check_device_name(self.device, "GuidanceConfig.device")
        if (self.model_height is None) != (self.model_width is None):
            raise ValueError(
                f"GuidanceConfig.model_height, model_width: give both or neither, got {self.model_height!r}, "
                f"{self.model_width!r}"
            )
        for name in ("model_height", "model_width"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"GuidanceConfig.{name}: must be an integer >= 1 [px] or None, got {value!r}")
        if self.kind == "oracle" and self.model_height is not None:  # it was ignored: the target kept its size
            raise ValueError(
                "GuidanceConfig.model_height, model_width: the oracle compares renders at their own size; leave "
                f"them None (got {self.model_height!r}, {self.model_width!r})"
            )
        if isinstance(self.tiny_seed, bool) or not isinstance(self.tiny_seed, int):
            raise ValueError(f"GuidanceConfig.tiny_seed: must be an integer, got {self.tiny_seed!r}")


def _dtype(name: str, preset: ModelPreset | None, device: torch.device) -> torch.dtype:
    if name == "auto":
        name = preset.dtype if (preset is not None and device.type == "cuda") else "float32"
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


FAMILY_CLASSES = {
    "cogvideox": ("CogVideoXTransformer3DModel", "CogVideoX"),
    "wan": ("WanTransformer3DModel", "Wan"),
}
"""Per model family: the transformer class in ``transformer/config.json`` and the pipeline class prefix in
``model_index.json``."""
FAMILY_COMPONENTS = {
    "cogvideox": (("vae", "config.json", "_class_name", ("AutoencoderKLCogVideoX",)),
                  ("text_encoder", "config.json", "model_type", ("t5",))),
    "wan": (("vae", "config.json", "_class_name", ("AutoencoderKLWan",)),
            ("text_encoder", "config.json", "model_type", ("umt5",))),
}  # fmt: skip
"""Per model family: (subfolder, config file, field, accepted values) of the components that must be the family's
own (a CogVideoX VAE in a Wan folder loaded with its tensors left on the meta device; a UMT5 text encoder in a
CogVideoX folder loaded as T5 with only a warning)."""
SCHEDULER_CLASSES = {
    "cogvideox": ("CogVideoXDDIMScheduler", "CogVideoXDPMScheduler"),
    "wan": ("UniPCMultistepScheduler", "FlowMatchEulerDiscreteScheduler", "DPMSolverMultistepScheduler"),
}
"""Per model family: the scheduler classes ``scheduler/scheduler_config.json`` may name (CogVideoX's DDPM-family
schedulers; Wan's flow-matching ones, which carry a ``flow_shift`` / ``shift``)."""
LATENT_CHANNELS_FIELD = {"cogvideox": "latent_channels", "wan": "z_dim"}
"""Per model family: the field of ``vae/config.json`` that gives the latent channels (a text-to-video transformer
takes and returns exactly these; image-to-video ones take the image latents as extra input channels)."""
REQUIRED_CONFIGS = (
    "transformer/config.json", "vae/config.json", "text_encoder/config.json", "scheduler/scheduler_config.json"
)  # fmt: skip
"""The config files a local folder must hold, checked before anything loads (a missing scheduler config was
reported only after every large component had loaded)."""
COGVIDEOX_PREDICTION_TYPES = ("v_prediction", "epsilon")
"""Prediction types :class:`GuidanceCogVideoX` converts to a noise estimate."""
COGVIDEOX_SCHEDULER_KEYS = ("prediction_type", "rescale_betas_zero_snr", "snr_shift_scale")
"""Keys a CogVideoX scheduler config must set: diffusers' defaults for them are not CogVideoX's."""
MISSING_TENSORS_SHOWN = 5
"""How many of a checkpoint's missing tensors an error names."""
TOKENIZER_FILES = ("spiece.model", "tokenizer.json")
"""A tokenizer folder needs one of these vocabularies (an empty folder made transformers build a T5 tokenizer
without one, which turned every prompt into <unk>)."""
MAX_UNKNOWN_FRACTION = 0.5
"""A prompt whose tokens are more than this fraction <unk> is refused (the tokenizer cannot read it)."""


def _read_config(path: Path) -> dict:
    """A JSON config file's contents ({} when it holds no JSON object).

    Raises:
        GuidanceModelError: the file cannot be read or is not valid JSON (named).
    """
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GuidanceModelError(
            f"{path}: not a valid JSON file ({type(e).__name__}: {e}); the file is there but unreadable (truncated or "
            "corrupt?): download it again"
        ) from None
    except OSError as e:
        raise GuidanceModelError(f"{path}: unreadable ({type(e).__name__}: {e}); corrupt? download it again") from None
    if not isinstance(data, dict):
        raise GuidanceModelError(
            f"{path}: expected a JSON object (a diffusers config), got a JSON {type(data).__name__}; corrupt? download"
            " it again"
        )
    return data


def _read_class_name(path: Path) -> str | None:
    """``_class_name`` of a diffusers config file (None when it has none).

    Raises:
        GuidanceModelError: the file is not valid JSON.
    """
    return _read_config(path).get("_class_name")


def _download_hint(hub_id: str, subfolder: str) -> str:
    return f"`hf download {hub_id} --include '{subfolder}/*' --local-dir DIR`"


def _check_components(path: Path, preset: ModelPreset, kind: str) -> None:
    """Refuses a folder whose VAE or text encoder config names another model's component (a mixed folder)."""
    for sub, file, key, expected in FAMILY_COMPONENTS[preset.family]:
        config = path / sub / file
        value = _read_config(config).get(key) if config.is_file() else None
        if value is not None and value not in expected:
            raise GuidanceModelError(
                f"{config}: {key} is {value!r}, expected {' or '.join(map(repr, expected))} for {kind} (a component "
                f"of another model?): download {sub}/ again ({_download_hint(preset.hub_id, sub)})"
            )


def _check_scheduler_config(config: dict, preset: ModelPreset, where: str, kind: str) -> None:
    """Refuses a scheduler config of another model family, or a Wan one without a usable flow shift (a CogVideoX
    DDIM config in a Wan folder loaded silently with flow shift 1.0).

    Args:
        config: the raw contents of ``scheduler/scheduler_config.json``.
        preset: the model being loaded.
        where: the file, for the message.
        kind: the guidance kind, for the message.
    """
    hint = f"download scheduler/ again ({_download_hint(preset.hub_id, 'scheduler')})"
    expected = SCHEDULER_CLASSES[preset.family]
    name = config.get("_class_name")
    if name is not None and name not in expected:
        raise GuidanceModelError(
            f"{where}: _class_name is {name!r}, expected {' or '.join(expected)} for {kind} (a scheduler of another "
            f"model?): {hint}"
        )
    prediction = config.get("prediction_type")
    if preset.family == "cogvideox":
        # diffusers' defaults for a missing key are not CogVideoX's (epsilon, no zero-SNR rescale, shift 3.0 for
        # the 5b's 1.0): a silently wrong SDS gradient
        missing = [k for k in COGVIDEOX_SCHEDULER_KEYS if k not in config]
        if missing:
            raise GuidanceModelError(
                f"{where}: {', '.join(missing)} not set (diffusers would default to values that are not {kind}'s and"
                f" the gradient would be wrong): {hint}"
            )
        if prediction is not None and prediction not in COGVIDEOX_PREDICTION_TYPES:
            accepted = " or ".join(map(repr, COGVIDEOX_PREDICTION_TYPES))
            raise GuidanceModelError(
                f"{where}: prediction_type is {prediction!r}, expected {accepted} for {kind}: {hint}"
            )
        return
    if prediction is not None and prediction != "flow_prediction":
        raise GuidanceModelError(
            f"{where}: prediction_type is {prediction!r}, expected 'flow_prediction' for {kind} (a flow-matching "
            f"scheduler): {hint}"
        )
    key = next((k for k in ("flow_shift", "shift") if k in config), None)
    if key is None:
        raise GuidanceModelError(
            f"{where}: no flow shift (neither flow_shift nor shift), expected one for {kind} (Wan 2.1: flow_shift "
            f"3.0): {hint}"
        )
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise GuidanceModelError(f"{where}: {key} is {value!r}, expected a finite number > 0 for {kind}: {hint}")
    if config.get("use_dynamic_shifting"):
        raise GuidanceModelError(
            f"{where}: use_dynamic_shifting is true, expected false for {kind} (the SDS noise levels use the fixed "
            f"{key}): {hint}"
        )


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_text_to_video(path: Path, preset: ModelPreset, kind: str) -> None:
    """Refuses a folder that is not a single-transformer text-to-video model: Wan 2.2's two experts
    (``model_index.json`` with ``transformer_2`` / ``boundary_ratio``: built silently with one expert used at every
    timestep), or an image-to-video transformer (its ``in_channels`` / ``out_channels`` not the VAE's latent
    channels, or Wan's ``image_dim``: loaded fully, then a channel mismatch deep in a conv at the first step)."""
    hint = f"{kind} guidance takes a text-to-video model (e.g. `hf download {preset.hub_id} --local-dir DIR`)"
    index_file = path / "model_index.json"
    index = _read_config(index_file) if index_file.is_file() else {}
    second = index.get("transformer_2")
    if isinstance(second, (list, tuple)) and all(v is None for v in second):
        second = None  # diffusers' "[null, null]": no such component (Wan 2.2 TI2V-5B)
    for key, value in (("transformer_2", second), ("boundary_ratio", index.get("boundary_ratio"))):
        if value is not None:
            raise GuidanceModelError(
                f"{index_file}: {key} is {value!r}: a Wan 2.2 model with two experts (a high-noise and a low-noise "
                f"transformer, switched at boundary_ratio) is not supported; {hint}"
            )
    if (path / "transformer_2" / "config.json").is_file():
        raise GuidanceModelError(
            f"{path / 'transformer_2'}: a second transformer (a Wan 2.2 model with two experts) is not "
            f"supported; {hint}"
        )
    transformer_file = path / "transformer" / "config.json"
    transformer = _read_config(transformer_file)
    field_name = LATENT_CHANNELS_FIELD[preset.family]
    latent = _read_config(path / "vae" / "config.json").get(field_name)
    if _is_count(latent):
        for key in ("in_channels", "out_channels"):
            value = transformer.get(key)
            if _is_count(value) and value != latent:
                raise GuidanceModelError(
                    f"{transformer_file}: {key} is {value}, expected {latent} (vae/config.json {field_name}): an "
                    f"image-to-video model? {hint}"
                )
    if transformer.get("image_dim") is not None:
        raise GuidanceModelError(
            f"{transformer_file}: image_dim is {transformer['image_dim']!r}, expected null: an image-to-video model "
            f"(conditioned on an image embedding) is not supported; {hint}"
        )


def _text_length(source: str, preset: ModelPreset) -> int:
    """The T5 token count the folder's transformer takes (``max_text_seq_length`` in its config: the patch embedding
    needs exactly that many), else the preset's."""
    file = Path(source).expanduser() / "transformer" / "config.json"
    value = _read_config(file).get("max_text_seq_length") if file.is_file() else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else preset.text_length


def _resolve(source: str, preset: ModelPreset, kind: str) -> str:
    path = Path(source).expanduser()
    hub_like = source.count("/") == 1 and not source.startswith((".", "/", "~")) and not path.exists()
    if hub_like:
        return source
    if not path.is_dir():
        raise GuidanceModelError(
            f"--guidance-model {source!r}: no such directory (pass a local diffusers folder of {kind}, e.g. "
            f"one made with `hf download {preset.hub_id} --local-dir DIR`)"
        )
    missing = [s for s in ("transformer", "vae", "scheduler", "text_encoder", "tokenizer") if not (path / s).is_dir()]
    if missing:
        raise GuidanceModelError(
            f"--guidance-model {source!r}: not a diffusers {kind} folder, missing subfolder(s) {', '.join(missing)}"
        )
    absent = [f for f in REQUIRED_CONFIGS if not (path / f).is_file()]
    if absent:  # before anything loads (a missing scheduler config was found after the large components loaded)
        subs = [f.split("/")[0] for f in absent]
        hint = (
            _download_hint(preset.hub_id, subs[0])
            if len(subs) == 1
            else f"`hf download {preset.hub_id} --local-dir DIR`"
        )
        raise GuidanceModelError(
            f"--guidance-model {source!r}: missing {', '.join(absent)} (an incomplete download?); nothing was loaded: "
            f"download {', '.join(s + '/' for s in subs)} again ({hint})"
        )
    # the right family: a Wan folder loaded as CogVideoX (or the reverse) failed with TypeErrors deep in diffusers
    transformer_cls, pipeline_prefix = FAMILY_CLASSES[preset.family]
    found, family = [], None
    for file, expected in (("model_index.json", pipeline_prefix), ("transformer/config.json", transformer_cls)):
        name = _read_class_name(path / file) if (path / file).is_file() else None
        if name is not None and not name.startswith(expected):
            found.append(f"{file} names {name}")
            family = family or next((f for f, classes in FAMILY_CLASSES.items() if name.startswith(classes)), None)
    if found:
        hint = "" if family is None else f"; pass a {family} --guidance kind ({', '.join(_kinds(family))})"
        raise GuidanceModelError(
            f"--guidance-model {source!r}: not a {kind} folder ({'; '.join(found)}, expected {transformer_cls}){hint}"
        )
    _check_components(path, preset, kind)
    _check_text_to_video(path, preset, kind)
    if not any((path / "tokenizer" / f).is_file() for f in TOKENIZER_FILES):
        raise GuidanceModelError(
            f"--guidance-model {source!r}: tokenizer/ holds no vocabulary (neither {' nor '.join(TOKENIZER_FILES)}); "
            f"download it again (`hf download {preset.hub_id} --include 'tokenizer/*' --local-dir DIR`)"
        )
    return str(path)


def _kinds(family: str) -> list[str]:
    return [k for k, m in MODEL_PRESETS.items() if m.family == family]


MISSING_MARKERS = (
    "no file named",
    "does not appear to have",
    "couldn't connect",
    "could not connect",
    "couldn't find",
    "not found",
    "not a local folder",
    "offline mode",
    "can't load",
    "no such file",
)
"""Phrases of from_pretrained's errors that mean the files are absent (anything else: present but unreadable)."""


MISMATCH_MARKERS = ("Error(s) in loading state_dict", "ignore_mismatched_sizes")
"""Phrases of the RuntimeErrors diffusers / transformers raise for a checkpoint whose tensors have other shapes."""


class _MissingWeightsFilter(logging.Filter):
    """Drops diffusers' / transformers' missing-weights warnings ("You should probably TRAIN this model"): a model
    with missing tensors is refused by :func:`_check_complete` with a message that names the folder instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        diffusers_missing = (
            "were not initialized from the model checkpoint" in message and "newly initialized:" in message
        )
        transformers_missing = "LOAD REPORT" in message and "MISSING" in message
        return not (diffusers_missing or transformers_missing)


MISSING_WEIGHTS_LOGGERS = ("diffusers.models.modeling_utils", "transformers.modeling_utils")
"""The loggers that report a checkpoint's missing tensors."""


@contextlib.contextmanager
def _missing_weights_warnings_dropped():
    dropped = _MissingWeightsFilter()
    for name in MISSING_WEIGHTS_LOGGERS:
        logging.getLogger(name).addFilter(dropped)
    try:
        yield
    finally:
        for name in MISSING_WEIGHTS_LOGGERS:
            logging.getLogger(name).removeFilter(dropped)


def _load(cls, source: str, subfolder: str, cfg: GuidanceConfig, kind: str, hub_id: str, **kw):
    download = f"`hf download {hub_id} --local-dir DIR`"
    is_module = isinstance(cls, type) and issubclass(cls, torch.nn.Module)
    if is_module:  # (model, {"missing_keys": ...}): the tensors the checkpoint lacks
        kw["output_loading_info"] = True
    try:
        with _missing_weights_warnings_dropped():
            loaded = cls.from_pretrained(source, subfolder=subfolder, local_files_only=not cfg.allow_download, **kw)
    except OSError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        # the weights are not there (transformers raises FileNotFoundError for a missing shard of an index)
        if isinstance(e, FileNotFoundError) or any(m in str(e).lower() for m in MISSING_MARKERS):
            raise GuidanceModelError(
                f"cannot load the {kind} {subfolder} from {source!r}: {first}. The weights are not available "
                f"locally: download them on a machine with internet access ({download}) and pass --guidance-model "
                "DIR" + ("" if cfg.allow_download else " (or allow downloads with --guidance-allow-download)")
            ) from None
        raise GuidanceModelError(  # there, but truncated or garbled (a broken download or copy)
            f"cannot load the {kind} {subfolder} from {source!r}: {first.rstrip('.')}. The files are there but "
            f"unreadable (truncated or corrupt?): download them again ({download})"
        ) from None
    except (ValueError, ImportError) as e:  # the files are there but cannot be read (e.g. a missing converter)
        raise GuidanceModelError(
            f"cannot load the {kind} {subfolder} from {source!r}: {type(e).__name__}: {_one_line(e)}"
        ) from None
    except (TypeError, KeyError, AttributeError) as e:  # a config value of the wrong kind ("4" heads, an int list)
        raise GuidanceModelError(
            f"cannot load the {kind} {subfolder} from {source!r}: {subfolder}/config.json has a malformed value"
            f" ({type(e).__name__}: {_one_line(e)}): download {subfolder}/ again ({_download_hint(hub_id, subfolder)})"
        ) from None
    except Exception as e:  # safetensors' own errors (a truncated file read by transformers) are not OSErrors
        if isinstance(e, RuntimeError) and any(m in str(e) for m in MISMATCH_MARKERS):  # another model's tensors
            raise GuidanceModelError(
                f"cannot load the {kind} {subfolder} from {source!r}: {_one_line(e)} The checkpoint's tensors do not "
                f"fit {getattr(cls, '__name__', cls)} (weights of another model or version?): download {subfolder}/ "
                f"again ({_download_hint(hub_id, subfolder)})"
            ) from None
        if not type(e).__module__.startswith("safetensors"):
            raise
        raise GuidanceModelError(
            f"cannot load the {kind} {subfolder} from {source!r}: {type(e).__name__}: {_one_line(e)}. The weights "
            f"are there but unreadable (truncated or corrupt?): download them again ({download})"
        ) from None
    if not is_module:
        return loaded
    model, info = loaded
    _check_complete(model, info, source, subfolder, kind, hub_id)
    return model


def _check_complete(model: torch.nn.Module, info: dict, source: str, subfolder: str, kind: str, hub_id: str) -> None:
    """Refuses a model whose checkpoint lacked some of its tensors.

    diffusers leaves them on the meta device (the next ``.to(device)`` raised ``NotImplementedError: Cannot copy out
    of meta tensor``, naming nothing); transformers initialises them randomly with only a warning.
    """
    meta = [n for n, t in itertools.chain(model.named_parameters(), model.named_buffers()) if t.is_meta]
    missing = list(dict.fromkeys([*meta, *sorted((info or {}).get("missing_keys") or ())]))
    if not missing:
        return
    shown = ", ".join(missing[:MISSING_TENSORS_SHOWN]) + (", ..." if len(missing) > MISSING_TENSORS_SHOWN else "")
    raise GuidanceModelError(
        f"cannot load the {kind} {subfolder} from {source!r}: {source}/{subfolder} lacks {len(missing)} of the "
        f"{len(model.state_dict())} tensors of {type(model).__name__} ({shown}): the weights are incomplete or of "
        f"another model or version; download {subfolder}/ again ({_download_hint(hub_id, subfolder)})"
    )


def _one_line(e: BaseException) -> str:
    """An exception's message on one line (transformers' tokenizer errors span several)."""
    return " ".join(line.strip() for line in str(e).strip().splitlines() if line.strip())


def _check_prompt_vocabulary(tokenizer, prompts: list[str], source: str) -> None:
    """Refuses a tokenizer that reads the prompt as mostly <unk> (a folder without its real vocabulary, or a prompt
    in a script the model's tokenizer does not know)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return
    for prompt in prompts:
        if not prompt.strip():
            continue
        ids = list(tokenizer(prompt, add_special_tokens=False).input_ids)
        unknown = sum(int(i) == unk for i in ids)
        if ids and unknown > MAX_UNKNOWN_FRACTION * len(ids):
            raise GuidanceModelError(
                f"{source}/tokenizer reads {unknown} of the {len(ids)} tokens of {prompt!r} as <unk>: the tokenizer "
                "lacks its vocabulary (download tokenizer/ again) or does not know the prompt's script"
            )


def _model_size(cfg: GuidanceConfig) -> tuple[int, int] | None:
    if (cfg.model_height is None) != (cfg.model_width is None):
        raise ValueError("model_height and model_width must be given together")
    return None if cfg.model_height is None else (cfg.model_height, cfg.model_width)


def build_guidance(
    cfg: GuidanceConfig, prompt: str, oracle_target: torch.Tensor | None = None, device: str | None = None
) -> VideoSDS:
    """Builds the guidance of ``cfg.kind`` for ``prompt``.

    Args:
        cfg: the configuration.
        prompt: the text prompt (ignored by the oracle).
        oracle_target: the oracle's target videos, RGB in [0, 1], shape (B, F, 3, H, W) (oracle only).
        device: overrides ``cfg.device``.

    Raises:
        GuidanceModelError: real weights missing or unreadable.
        ValueError: the device does not exist on this machine.
    """
    dev = resolve_device(device or cfg.device, "GuidanceConfig.device" if device is None else "device")
    common = {"guidance_scale": cfg.guidance_scale, "schedule": cfg.schedule, "weighting": cfg.weighting}
    if cfg.kind == "oracle":
        if oracle_target is None:
            raise ValueError("oracle guidance needs oracle_target (the target videos)")
        scheduler = cogvideox_scheduler()
        vae = PixelVAE().to(dev)
        probe = GuidanceCogVideoX(torch.nn.Identity(), vae, scheduler, torch.zeros(1, 1, 1))
        with torch.no_grad():
            target = probe.encode(oracle_target.to(dev))
        oracle = OracleDenoiser(target, "v_prediction", torch.as_tensor(scheduler.alphas_cumprod)).to(dev)
        common["guidance_scale"] = 1.0  # the oracle ignores text: CFG would be an identity
        return GuidanceCogVideoX(oracle, vae, scheduler, torch.zeros(1, 1, 1, device=dev), **common)
    if cfg.kind in ("tiny", "tiny-wan"):
        comps = (tiny_cogvideox if cfg.kind == "tiny" else tiny_wan)(cfg.tiny_seed)
        style = "cogvideox" if cfg.kind == "tiny" else "wan"
        emb = encode_prompts(
            comps.tokenizer, comps.text_encoder, [prompt, cfg.negative_prompt], comps.text_length, style
        )
        pos, neg = emb[:1].to(dev), emb[1:].to(dev)
        transformer, vae = comps.transformer.to(dev), comps.vae.to(dev)
        if style == "cogvideox":
            return GuidanceCogVideoX(
                transformer, vae, comps.scheduler, pos, neg, model_size=_model_size(cfg),
                vae_gradient_checkpointing=cfg.vae_gradient_checkpointing, vae_tiling=cfg.vae_tiling, **common,
            )  # fmt: skip
        return GuidanceWan(
            transformer, vae, comps.scheduler, pos, neg, model_size=_model_size(cfg), vae_tiling=cfg.vae_tiling,
            **common,
        )  # fmt: skip
    if cfg.kind not in MODEL_PRESETS:
        raise ValueError(f"guidance kind: unknown {cfg.kind!r}; expected one of {', '.join(GuidanceKind.__args__)}")
    return _build_released(cfg, MODEL_PRESETS[cfg.kind], prompt, dev, common)


def _build_released(cfg: GuidanceConfig, preset: ModelPreset, prompt: str, dev: torch.device, common: dict):
    import diffusers
    import transformers

    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    source = _resolve(cfg.model or preset.hub_id, preset, cfg.kind)
    scheduler_config, scheduler_where = _scheduler_config(source, cfg)
    if scheduler_config is not None:  # before the big loads: a wrong scheduler fails at once
        _check_scheduler_config(scheduler_config, preset, scheduler_where, cfg.kind)
    dtype = _dtype(cfg.dtype, preset, dev)
    load = lambda cls, sub, **kw: _load(cls, source, sub, cfg, cfg.kind, preset.hub_id, **kw)  # noqa: E731
    prompts = [prompt, cfg.negative_prompt]
    if preset.family == "cogvideox":
        tokenizer = load(transformers.T5Tokenizer, "tokenizer")
        _check_prompt_vocabulary(tokenizer, prompts, source)
        encoder = load(transformers.T5EncoderModel, "text_encoder", torch_dtype=dtype).to(dev)
        length = _text_length(source, preset)
        emb = encode_prompts(tokenizer, encoder, [prompt, cfg.negative_prompt], length, "cogvideox")
        del encoder
        transformer = load(diffusers.CogVideoXTransformer3DModel, "transformer", torch_dtype=dtype).to(dev)
        vae = load(diffusers.AutoencoderKLCogVideoX, "vae", torch_dtype=dtype).to(dev)
        scheduler = load(diffusers.CogVideoXDDIMScheduler, "scheduler")
        return GuidanceCogVideoX(
            transformer, vae, scheduler, emb[:1], emb[1:], model_size=_model_size(cfg),
            vae_gradient_checkpointing=cfg.vae_gradient_checkpointing, vae_tiling=cfg.vae_tiling, **common,
        )  # fmt: skip
    tokenizer = load(transformers.AutoTokenizer, "tokenizer")
    _check_prompt_vocabulary(tokenizer, prompts, source)
    encoder = load(transformers.UMT5EncoderModel, "text_encoder", torch_dtype=dtype).to(dev)
    emb = encode_prompts(tokenizer, encoder, [prompt, cfg.negative_prompt], preset.text_length, "wan")
    del encoder
    transformer = load(diffusers.WanTransformer3DModel, "transformer", torch_dtype=dtype).to(dev)
    # Wan's VAE is kept in float32 as its pipeline does
    vae = load(diffusers.AutoencoderKLWan, "vae", torch_dtype=torch.float32).to(dev)
    scheduler_cls = getattr(diffusers, _scheduler_class(source, cfg, scheduler_config))
    scheduler = load(scheduler_cls, "scheduler")
    return GuidanceWan(
        transformer, vae, scheduler, emb[:1], emb[1:], model_size=_model_size(cfg), vae_tiling=cfg.vae_tiling, **common
    )


def _scheduler_config(source: str, cfg: GuidanceConfig) -> tuple[dict | None, str]:
    """The raw ``scheduler/scheduler_config.json`` of the source (a local folder's file, or for hub ids the config
    in the local Hugging Face cache) and where it is, for messages; None when it cannot be found (loading the
    scheduler then reports the missing files).

    Raises:
        GuidanceModelError: a local file is unreadable or not valid JSON (named).
    """
    path = Path(source) / "scheduler" / "scheduler_config.json"
    if path.is_file():
        return _read_config(path), str(path)
    where = f"{source}/scheduler/scheduler_config.json (Hugging Face cache)"
    try:
        import warnings

        from diffusers import UniPCMultistepScheduler

        with warnings.catch_warnings():  # diffusers passes huggingface_hub a deprecated argument (its noise)
            warnings.filterwarnings("ignore", message=".*local_dir_use_symlinks.*", category=UserWarning)
            config = UniPCMultistepScheduler.load_config(
                source, subfolder="scheduler", local_files_only=not cfg.allow_download
            )  # reads scheduler_config.json whatever the class
    except (OSError, ValueError):  # not cached: loading the scheduler itself reports the missing weights
        return None, where
    return (dict(config) if isinstance(config, dict) else None), where


def _scheduler_class(source: str, cfg: GuidanceConfig, config: dict | None = None) -> str:
    """The scheduler class named in the source's scheduler config (``config`` when already read, else read by
    :func:`_scheduler_config`); UniPC (Wan 2.1's) when it cannot be read, FlowMatchEulerDiscreteScheduler for a
    config with ``shift`` but no class name."""
    if config is None:
        config = _scheduler_config(source, cfg)[0]
    if config is None:
        return "UniPCMultistepScheduler"
    default = "FlowMatchEulerDiscreteScheduler" if "shift" in config else "UniPCMultistepScheduler"
    return str(config.get("_class_name") or default)
