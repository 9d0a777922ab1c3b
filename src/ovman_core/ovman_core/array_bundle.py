"""A checksummed file holding a JSON document and numeric numpy arrays; reading it runs no code.

Layout (integers little-endian): ``MAGIC``, the sha256 of the payload, the header length (uint64),
the UTF-8 JSON header ``{"document": ..., "arrays": [[dtype, shape, offset], ...]}`` padded so the
data starts on a multiple of :data:`ALIGNMENT`, then each array's C-order bytes. Arrays keep dtype
and shape, so floats come back bit for bit; only booleans, integers and floats, never object arrays
or pickles. The checksum detects damage (a flipped byte, a truncated file), not tampering.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

MAGIC = b"OVBUNDL1"
ALIGNMENT = 64
"""Bytes: the data and every array start on a multiple of this (numpy wants aligned buffers)."""
_DIGEST = hashlib.sha256().digest_size
_PREFIX = len(MAGIC) + _DIGEST + 8
_NUMERIC = frozenset("biuf")
"""``numpy.dtype.kind`` of the arrays a bundle holds: bool, signed and unsigned integer, float."""


class BundleError(ValueError):
    """The bytes are not an intact bundle (the message says what is wrong)."""


def _padded(length: int) -> int:
    return -length % ALIGNMENT


def pack_bundle(document: Any, arrays: list[np.ndarray]) -> bytes:
    """The bundle of ``document`` (JSON-able; the caller refers to arrays by their index) and
    ``arrays`` (bool, integer or float dtypes). TypeError for another dtype."""
    specs, chunks, offset = [], [], 0
    for array in arrays:
        if array.dtype.kind not in _NUMERIC:
            raise TypeError(f"a bundle holds bool, integer and float arrays only, not {array.dtype}")
        data = array.tobytes(order="C")
        specs.append([array.dtype.str, list(array.shape), offset])
        chunks += [data, bytes(_padded(len(data)))]
        offset += len(data) + _padded(len(data))
    header = json.dumps({"document": document, "arrays": specs}, separators=(",", ":")).encode()
    header += b" " * _padded(_PREFIX + len(header))
    payload = len(header).to_bytes(8, "little") + header + b"".join(chunks)
    return MAGIC + hashlib.sha256(payload).digest() + payload


def unpack_bundle(data: bytes | bytearray) -> tuple[Any, list[np.ndarray]]:
    """The document and arrays of a bundle; the arrays are views of ``data`` (writable when it is a
    bytearray). BundleError when the bytes are not an intact bundle; a header that passes the
    checksum but is malformed (written by other code) raises what parsing it raises."""
    if len(data) < _PREFIX or data[: len(MAGIC)] != MAGIC:
        raise BundleError(f"not a bundle (no {MAGIC.decode()} mark at the start)")
    view = memoryview(data)
    if hashlib.sha256(view[len(MAGIC) + _DIGEST :]).digest() != data[len(MAGIC) : len(MAGIC) + _DIGEST]:
        raise BundleError("sha256 mismatch: the file is damaged or truncated")
    length = int.from_bytes(data[_PREFIX - 8 : _PREFIX], "little")
    start = _PREFIX + length
    header = json.loads(bytes(view[_PREFIX:start]))
    arrays = []
    for dtype, shape, offset in header["arrays"]:
        kind = np.dtype(dtype)
        if kind.kind not in _NUMERIC:
            raise BundleError(f"array of dtype {kind} (a bundle holds bool, integer and float arrays only)")
        arrays.append(np.frombuffer(data, kind, math.prod(shape), start + offset).reshape(shape))
    return header["document"], arrays
