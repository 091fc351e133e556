"""glTF 2.0 container: the JSON document and its binary buffers, with field access that names what is wrong.

Reads ``.gltf`` (JSON with ``data:`` URIs or external files beside it) and ``.glb`` (the binary container:
a 12-byte header, a JSON chunk, an optional BIN chunk). Every malformed input raises :class:`InputError`
naming the file and the field (``"accessors[3]: bufferView 9 does not exist (8 bufferViews)"``); JSON, base64
and struct errors never leak as raw tracebacks.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np

from ._files import read_regular_file
from ._limits import MAX_MAGNITUDE, too_large
from .errors import InputError

__all__ = ["GltfDocument", "GltfWarning"]

_GLB_MAGIC = b"glTF"
_CHUNK_JSON = 0x4E4F534A
_CHUNK_BIN = 0x004E4942
_MISSING: Any = object()
_UNSUPPORTED_EXTENSIONS = {"KHR_draco_mesh_compression", "EXT_meshopt_compression", "KHR_meshopt_compression"}
_HARMLESS_EXTENSIONS = {"KHR_mesh_quantization", "KHR_texture_transform", "KHR_texture_basisu", "EXT_texture_webp",
                        "EXT_texture_avif", "KHR_lights_punctual", "KHR_xmp_json_ld"}  # fmt: skip
"""Extensions a file may require that leave what we read (nodes, skins, geometry, animation) readable as glTF 2.0
core; ``KHR_materials_*`` too (materials are not read). KHR_mesh_quantization's integer attributes are decoded."""


class GltfWarning(UserWarning):
    """The glTF file holds something the importer ignores or repairs (morph weights, scale animation...)."""


class GltfDocument:
    """A parsed glTF document with lazily loaded buffers.

    Attributes:
        path: the file.
        json: the top-level JSON object.
    """

    def __init__(self, path: Path, document: dict, bin_chunk: bytes | None):
        self.path = path
        self.json = document
        self._bin_chunk = bin_chunk
        self._buffers: dict[int, bytes] = {}
        self._tables: dict[str, list[dict]] = {}  # top-level arrays already checked (the JSON is not edited)
        self.accessor_cache: dict[int, np.ndarray] = {}

    # -- loading ----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> GltfDocument:
        """Reads and parses ``path`` (.gltf or .glb, told apart by the GLB magic bytes).

        Raises:
            InputError: unreadable file, truncated/corrupt GLB container, invalid JSON, unsupported version.
        """
        path = Path(path)
        data = read_regular_file(path, "path")
        bin_chunk = None
        if data[:4] == _GLB_MAGIC:
            text, bin_chunk = _split_glb(path, data)
        elif path.suffix.lower() == ".glb" and len(data) < 12:
            raise InputError(path, "header", f"truncated GLB: {len(data)} bytes, the header alone needs 12")
        elif path.suffix.lower() == ".glb":
            raise InputError(path, "header", f"not a GLB file (magic {data[:4]!r}, expected b'glTF')")
        else:
            text = data
        try:
            document = json.loads(text.decode("utf-8-sig"))
        except UnicodeDecodeError as e:
            raise InputError(path, "JSON", f"not UTF-8 text (byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise InputError(path, "JSON", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        except RecursionError:
            raise InputError(path, "JSON", "nested too deeply") from None
        if not isinstance(document, dict):
            raise InputError(path, "JSON", f"top level must be an object, got {type(document).__name__}")
        doc = cls(path, document, bin_chunk)
        asset = doc.get_dict(document, "asset", "asset")
        version = doc.get_str(asset, "version", "asset")
        if not version.startswith("2."):
            raise doc.error("asset.version", f"unsupported glTF version {version!r} (this reader handles 2.x)")
        required = doc.get_list(document, "extensionsRequired", "document", [])
        for i, name in enumerate(required):
            if not isinstance(name, str):
                raise doc.error(f"extensionsRequired[{i}]", f"must be a string, got {_short(name)}")
            if name in _UNSUPPORTED_EXTENSIONS:
                raise doc.error("extensionsRequired", f"{name} is not supported: decompress the file first")
            if name not in _HARMLESS_EXTENSIONS and not name.startswith("KHR_materials_"):
                # glTF 2.0 section 3.12: a loader must refuse a file requiring an extension it does not support
                raise doc.error("extensionsRequired", f"{name} is required by the file and not supported by this "
                                "reader (it could change what nodes, skins, meshes or animations mean)")  # fmt: skip
        return doc

    # -- errors -----------------------------------------------------------------------------------------
    def error(self, field: str, problem: str) -> InputError:
        """An InputError for ``field`` of this file (raise it)."""
        return InputError(self.path, field, problem)

    def warn(self, field: str, problem: str) -> None:
        """Emits a :class:`GltfWarning` naming this file and ``field``."""
        warnings.warn(f"{self.path}: {field}: {problem}", GltfWarning, stacklevel=3)

    # -- typed field access -------------------------------------------------------------------------------
    def table(self, name: str) -> list[dict]:
        """The top-level array ``name`` (``"nodes"``, ``"accessors"``...), empty when absent."""
        if name in self._tables:  # checked once: every index lookup asks for its table
            return self._tables[name]
        value = self.json.get(name, [])
        if not isinstance(value, list):
            raise self.error(name, f"must be an array, got {type(value).__name__}")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.error(f"{name}[{i}]", f"must be an object, got {type(item).__name__}")
        self._tables[name] = value
        return value

    def get(self, obj: dict, key: str, where: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        """``obj[key]`` checked against ``kind``; ``default`` when absent (required when no default)."""
        if key not in obj:
            if default is _MISSING:
                raise self.error(where, f"required property {key!r} is missing")
            return default
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.error(f"{where}.{key}", f"must be {names}, got {type(value).__name__} {_short(value)}")
        return value

    def get_dict(self, obj: dict, key: str, where: str, default: Any = _MISSING) -> dict:
        return self.get(obj, key, where, dict, default)

    def get_list(self, obj: dict, key: str, where: str, default: Any = _MISSING) -> list:
        return self.get(obj, key, where, list, default)

    def get_str(self, obj: dict, key: str, where: str, default: Any = _MISSING) -> str:
        return self.get(obj, key, where, str, default)

    def get_int(self, obj: dict, key: str, where: str, default: Any = _MISSING, minimum: int = 0) -> int:
        value = self.get(obj, key, where, int, default)
        if value is not default and value < minimum:
            raise self.error(f"{where}.{key}", f"must be >= {minimum}, got {value}")
        return value

    def get_index(self, obj: dict, key: str, where: str, table: str, default: Any = _MISSING) -> int:
        """An index into the top-level array ``table``, checked to exist."""
        value = self.get(obj, key, where, int, default)
        if value is default:
            return value
        count = len(self.table(table))
        if not 0 <= value < count:
            raise self.error(where, f"{key} {value} does not exist ({count} {table})")
        return value

    def get_floats(self, obj: dict, key: str, where: str, length: int, default: Any = _MISSING) -> np.ndarray:
        """A fixed-length array of finite numbers as float64."""
        value = self.get(obj, key, where, list, default)
        if value is default:
            return np.array(default, dtype=np.float64)
        if len(value) != length or not all(_is_number(v) for v in value):
            raise self.error(f"{where}.{key}", f"must be {length} numbers, got {_short(value)}")
        out = np.array(value, dtype=np.float64)
        if not np.all(np.isfinite(out)):
            raise self.error(f"{where}.{key}", f"non-finite value in {_short(value)}")
        if too_large(out).any():
            raise self.error(f"{where}.{key}", f"value out of range (> {MAX_MAGNITUDE:g}) in {_short(value)}")
        return out

    def get_index_list(self, obj: dict, key: str, where: str, table: str, default: Any = _MISSING) -> list[int]:
        """A list of indices into ``table``, each checked to exist."""
        value = self.get_list(obj, key, where, default)
        count = len(self.table(table))
        for i, v in enumerate(value):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < count:
                raise self.error(f"{where}.{key}[{i}]", f"{_short(v)} is not a valid index ({count} {table})")
        return list(value)

    # -- binary data --------------------------------------------------------------------------------------
    def buffer(self, index: int) -> bytes:
        """Bytes of ``buffers[index]`` (a data URI, a file beside the document, or the GLB BIN chunk)."""
        if index in self._buffers:
            return self._buffers[index]
        where = f"buffers[{index}]"
        buf = self.table("buffers")[index]
        length = self.get_int(buf, "byteLength", where)
        uri = self.get_str(buf, "uri", where, None)
        if uri is None:
            if index != 0 or self._bin_chunk is None:
                raise self.error(where, "has no uri and there is no GLB BIN chunk to hold it")
            data = self._bin_chunk
        elif uri.startswith("data:"):
            head, sep, payload = uri.partition(",")
            if not sep or not head.endswith(";base64"):
                raise self.error(f"{where}.uri", f"unsupported data URI {head!r} (expected base64)")
            try:
                data = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError) as e:
                raise self.error(f"{where}.uri", f"invalid base64 data ({e})") from None
        else:
            file = self.path.parent / unquote(uri)
            data = read_regular_file(file, f"{where}.uri", "buffer file", error_path=self.path, limit=length)
        if len(data) < length:
            raise self.error(where, f"byteLength is {length} but the data has only {len(data)} bytes")
        self._buffers[index] = data[:length]
        return self._buffers[index]

    def buffer_view(self, index: int) -> tuple[bytes, int | None]:
        """Bytes of ``bufferViews[index]`` and its byteStride (None when tightly packed)."""
        where = f"bufferViews[{index}]"
        view = self.table("bufferViews")[index]
        buffer = self.get_index(view, "buffer", where, "buffers")
        offset = self.get_int(view, "byteOffset", where, 0)
        length = self.get_int(view, "byteLength", where, minimum=1)
        stride = self.get_int(view, "byteStride", where, None, minimum=1)
        data = self.buffer(buffer)
        if offset + length > len(data):
            raise self.error(
                where, f"byteOffset {offset} + byteLength {length} exceeds buffers[{buffer}] ({len(data)} bytes)"
            )
        return data[offset : offset + length], stride


def _split_glb(path: Path, data: bytes) -> tuple[bytes, bytes | None]:
    """JSON text and BIN chunk of a GLB container (validating header and chunk lengths)."""
    if len(data) < 12:
        raise InputError(path, "header", f"truncated GLB: {len(data)} bytes, the header alone needs 12")
    _, version, length = struct.unpack_from("<4sII", data, 0)
    if version != 2:
        raise InputError(path, "header.version", f"unsupported GLB version {version} (expected 2)")
    if length > len(data):
        raise InputError(path, "header.length", f"declares {length} bytes but the file has {len(data)} (truncated)")
    chunks: list[tuple[int, bytes]] = []
    offset = 12
    while offset < length:
        if offset + 8 > length:
            raise InputError(path, f"chunks[{len(chunks)}]", f"truncated chunk header at byte {offset}")
        chunk_length, chunk_type = struct.unpack_from("<II", data, offset)
        start, end = offset + 8, offset + 8 + chunk_length
        if end > length:
            raise InputError(
                path, f"chunks[{len(chunks)}]", f"declares {chunk_length} bytes but only {length - start} remain"
            )
        chunks.append((chunk_type, data[start:end]))
        offset = end + (-chunk_length) % 4  # chunks are 4-byte aligned (tolerate a missing final pad)
    if not chunks or chunks[0][0] != _CHUNK_JSON:
        raise InputError(path, "chunks[0]", "the first GLB chunk must be JSON")
    binary = chunks[1][1] if len(chunks) > 1 and chunks[1][0] == _CHUNK_BIN else None
    return chunks[0][1].rstrip(b" \x00"), binary


def _is_number(value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # a JSON integer beyond float range
        return False


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
