"""glTF accessor decoding: typed views of buffer data as NumPy arrays.

Handles every componentType, ``normalized`` integers (glTF 2.0 section 3.11: unsigned ``c / (2^n - 1)``,
signed ``max(c / (2^(n-1) - 1), -1)``), ``byteStride``, ``byteOffset``, the 4-byte column alignment of
MAT2/MAT3 with 1- and 2-byte components, sparse substitution (with or without a base bufferView) and
accessors without a bufferView (all zeros).
"""

from __future__ import annotations

import math

import numpy as np

from ._gltf_document import GltfDocument

__all__ = ["COMPONENT_DTYPES", "read_accessor"]

COMPONENT_DTYPES = {
    5120: np.dtype("<i1"),
    5121: np.dtype("<u1"),
    5122: np.dtype("<i2"),
    5123: np.dtype("<u2"),
    5125: np.dtype("<u4"),
    5126: np.dtype("<f4"),
}
"""glTF componentType -> little-endian NumPy dtype."""

MAX_ZERO_ACCESSOR_BYTES = 1 << 29
"""Largest decoded size [bytes, 8 per component] of an accessor without a bufferView: its data is allocated, not
read, so its count alone would size it (512 MiB: 2^26 scalars or 2^22 MAT4s)."""

_TYPE_SHAPES = {
    "SCALAR": (),
    "VEC2": (2,),
    "VEC3": (3,),
    "VEC4": (4,),
    "MAT2": (2, 2),
    "MAT3": (3, 3),
    "MAT4": (4, 4),
}
_SPARSE_INDEX_TYPES = (5121, 5123, 5125)


def read_accessor(doc: GltfDocument, index: int) -> np.ndarray:
    """Decodes ``accessors[index]``.

    Args:
        doc: the document.
        index: accessor index (must exist).

    Returns:
        shape ``(count,)`` for SCALAR, ``(count, n)`` for VECn, ``(count, n, n)`` for MATn (row-major: the
        stored column-major data is transposed so ``m[i] @ v`` applies it). float64 for float and normalized
        accessors, int64 for plain integer accessors. Cached per document: do not modify the result.

    Raises:
        InputError: bad componentType/type/count, missing or too small bufferView, bad sparse block.
    """
    if index in doc.accessor_cache:
        return doc.accessor_cache[index]
    where = f"accessors[{index}]"
    acc = doc.table("accessors")[index]
    ctype = doc.get_int(acc, "componentType", where)
    if ctype not in COMPONENT_DTYPES:
        raise doc.error(where, f"componentType {ctype} is not a glTF component type ({sorted(COMPONENT_DTYPES)})")
    dtype = COMPONENT_DTYPES[ctype]
    type_name = doc.get_str(acc, "type", where)
    if type_name not in _TYPE_SHAPES:
        raise doc.error(where, f"type {type_name!r} is not one of {', '.join(_TYPE_SHAPES)}")
    shape = _TYPE_SHAPES[type_name]
    count = doc.get_int(acc, "count", where, minimum=1)
    normalized = doc.get(acc, "normalized", where, bool, False)
    if normalized and ctype in (5125, 5126):
        raise doc.error(where, f"normalized is only allowed for 8- and 16-bit integers, not componentType {ctype}")
    offset = doc.get_int(acc, "byteOffset", where, 0)
    view_index = doc.get_index(acc, "bufferView", where, "bufferViews", None)
    if view_index is None:
        size = count * math.prod(shape) * 8
        if size > MAX_ZERO_ACCESSOR_BYTES:
            raise doc.error(where, f"count {count} of {type_name} without a bufferView would decode to {size} bytes "
                            f"(more than {MAX_ZERO_ACCESSOR_BYTES})")  # fmt: skip
        raw = np.zeros((count, *shape), dtype=dtype)
    else:
        data, stride = doc.buffer_view(view_index)
        layout = _Layout(dtype, shape)
        if stride is not None and stride < layout.size:
            raise doc.error(
                f"bufferViews[{view_index}].byteStride",
                f"{stride} is smaller than the element size {layout.size} of {where} ({type_name} of {dtype.name})",
            )
        stride = layout.size if stride is None else stride
        need = offset + stride * (count - 1) + layout.size
        if need > len(data):
            raise doc.error(
                where,
                f"needs {need} bytes of bufferViews[{view_index}] (byteOffset {offset}, count {count}, stride "
                f"{stride}) but the view has {len(data)}",
            )
        raw = layout.gather(data, offset, stride, count)
    sparse = doc.get_dict(acc, "sparse", where, None)
    if sparse is not None:
        raw = raw.copy()
        _apply_sparse(doc, sparse, f"{where}.sparse", raw, dtype, shape)
    out = _convert(raw, ctype, normalized)
    out.setflags(write=False)
    doc.accessor_cache[index] = out
    return out


class _Layout:
    """Byte layout of one accessor element (with glTF's 4-byte column alignment for matrices)."""

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]):
        self.dtype, self.shape = dtype, shape
        comp = dtype.itemsize
        if len(shape) == 2:
            rows, cols = shape
            col_stride = -(-rows * comp // 4) * 4
            # component k of the column-major element (col = k // rows, row = k % rows)
            self.offsets = np.array([c * col_stride + r * comp for c in range(cols) for r in range(rows)])
            self.size = cols * col_stride
        else:
            n = int(np.prod(shape)) if shape else 1
            self.offsets = np.arange(n) * comp
            self.size = n * comp

    def gather(self, data: bytes, offset: int, stride: int, count: int) -> np.ndarray:
        """Elements at ``offset + i * stride`` as an array of shape ``(count, *shape)`` (matrices row-major).

        The caller has checked that ``offset + stride * (count - 1) + size <= len(data)``.
        """
        comp = self.dtype.itemsize
        if len(self.shape) < 2 or self.size == len(self.offsets) * comp:  # no column padding: a strided view
            view = np.ndarray((count, len(self.offsets)), self.dtype, data, offset, (stride, comp)).copy()
            if len(self.shape) == 2:
                rows, cols = self.shape
                return view.reshape(count, cols, rows).transpose(0, 2, 1).copy()
            return view.reshape(count, *self.shape)
        buf = np.frombuffer(data, dtype=np.uint8)
        starts = offset + stride * np.arange(count)[:, None] + self.offsets[None, :]  # (count, ncomp)
        raw = buf[starts[..., None] + np.arange(comp)]  # (count, ncomp, comp) bytes
        values = np.ascontiguousarray(raw).view(self.dtype)[..., 0]
        if len(self.shape) == 2:
            rows, cols = self.shape
            return values.reshape(count, cols, rows).transpose(0, 2, 1).copy()
        return values.reshape(count, *self.shape)


def _apply_sparse(doc, sparse: dict, where: str, raw: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """Overwrites the elements of ``raw`` listed by a sparse block with its values."""
    count = doc.get_int(sparse, "count", where, minimum=1)
    if count > len(raw):
        raise doc.error(f"{where}.count", f"{count} exceeds the accessor count {len(raw)}")
    idx_obj = doc.get_dict(sparse, "indices", where)
    val_obj = doc.get_dict(sparse, "values", where)
    idx_type = doc.get_int(idx_obj, "componentType", f"{where}.indices")
    if idx_type not in _SPARSE_INDEX_TYPES:
        raise doc.error(f"{where}.indices", f"componentType {idx_type} must be one of {_SPARSE_INDEX_TYPES}")
    indices = _read_block(doc, idx_obj, f"{where}.indices", COMPONENT_DTYPES[idx_type], (), count).astype(np.int64)
    values = _read_block(doc, val_obj, f"{where}.values", dtype, shape, count)
    if indices.max() >= len(raw):
        raise doc.error(f"{where}.indices", f"index {int(indices.max())} >= accessor count {len(raw)}")
    if len(indices) > 1 and not np.all(np.diff(indices) > 0):
        k = int(np.argmax(np.diff(indices) <= 0)) + 1
        raise doc.error(f"{where}.indices", f"indices must be strictly increasing: index {int(indices[k])} at"
                        f" position {k} follows {int(indices[k - 1])}")  # fmt: skip
    raw[indices] = values


def _read_block(doc, obj: dict, where: str, dtype: np.dtype, shape: tuple[int, ...], count: int) -> np.ndarray:
    """A tightly packed array from ``obj.bufferView`` at ``obj.byteOffset`` (sparse indices or values)."""
    view_index = doc.get_index(obj, "bufferView", where, "bufferViews")
    offset = doc.get_int(obj, "byteOffset", where, 0)
    data, _ = doc.buffer_view(view_index)
    layout = _Layout(dtype, shape)
    need = offset + layout.size * count
    if need > len(data):
        raise doc.error(where, f"needs {need} bytes of bufferViews[{view_index}] but the view has {len(data)}")
    return layout.gather(data, offset, layout.size, count)


def _convert(raw: np.ndarray, ctype: int, normalized: bool) -> np.ndarray:
    if ctype == 5126:
        return raw.astype(np.float64)  # non-finite values are reported by the consumer, which knows the field
    if not normalized:
        return raw.astype(np.int64)
    bits = raw.dtype.itemsize * 8
    if raw.dtype.kind == "u":
        return raw.astype(np.float64) / (2.0**bits - 1.0)
    return np.maximum(raw.astype(np.float64) / (2.0 ** (bits - 1) - 1.0), -1.0)
