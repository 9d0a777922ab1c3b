"""The checksummed bundle of a JSON document and numeric arrays behind the map cache and the map store."""

from __future__ import annotations

import numpy as np
import pytest

from ovman_core.array_bundle import ALIGNMENT, BundleError, pack_bundle, unpack_bundle


def test_arrays_come_back_with_their_dtype_shape_and_bits_aligned():
    arrays = [
        np.array([0.1, -0.0, np.nan, np.inf, 5e-324]),
        np.arange(6, dtype=np.float32).reshape(2, 3) / 3.0,
        np.arange(24, dtype=">i4").reshape(2, 3, 4)[:, ::2],  # big-endian, not contiguous
        np.zeros((0, 3)),
        np.array(7, dtype=np.uint8),
        np.array([True, False]),
    ]
    document = {"names": ["a", "é"], "n": 3, "x": 0.1, "none": None}
    data = bytearray(pack_bundle(document, arrays))
    got_document, got = unpack_bundle(data)
    assert got_document == document
    start = np.frombuffer(data, np.uint8).ctypes.data
    for array, back in zip(arrays, got, strict=True):
        assert (back.dtype, back.shape, back.tobytes()) == (array.dtype, array.shape, array.tobytes())
        assert (back.ctypes.data - start) % ALIGNMENT == 0
    assert all(back.flags.writeable for back in got)


def test_object_arrays_are_refused():
    with pytest.raises(TypeError, match="bool, integer and float"):
        pack_bundle({}, [np.array([{}], dtype=object)])


def test_damage_is_detected():
    data = pack_bundle({"a": 1}, [np.arange(10.0)])
    for bad in (b"", data[:-1], data[:8], b"x" + data[1:], data[:60] + bytes([data[60] ^ 1]) + data[61:]):
        with pytest.raises(BundleError):
            unpack_bundle(bad)
