"""Atomic file writes and plain JSON values (ovman_core.files)."""

from __future__ import annotations

import dataclasses
import enum
import os
import stat

import numpy as np
import pytest

from ovman_core.files import FILE_MODE, atomic_write_bytes, atomic_write_text, plain


def test_a_write_replaces_the_whole_file_with_the_file_mode_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "deep" / "out.txt"
    atomic_write_text(path, "first\n")
    atomic_write_bytes(path, b"second")
    assert path.read_bytes() == b"second"
    assert stat.S_IMODE(path.stat().st_mode) == FILE_MODE
    assert [p.name for p in path.parent.iterdir()] == ["out.txt"]


def test_a_failed_write_keeps_the_old_content_and_removes_its_temporary(tmp_path, monkeypatch):
    path = tmp_path / "out.bin"
    atomic_write_bytes(path, b"old")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


class Colour(str, enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    tags: tuple[str, ...]
    colour: Colour


def test_plain_values_are_json_with_rounded_floats():
    value = {"p": Point(1 / 3, ("a", "b"), Colour.RED), 2: [np.float32(0.5), np.int64(3), -1e-12, None, True]}
    assert plain(value, 6, "a test") == {
        "p": {"x": 0.333333, "tags": ["a", "b"], "colour": "red"},
        "2": [0.5, 3, 0.0, None, True],
    }


@pytest.mark.parametrize(
    ("value", "error"), [(float("nan"), ValueError), (float("inf"), ValueError), ({1, 2}, TypeError)]
)
def test_what_json_cannot_hold_is_refused_naming_the_target(value, error):
    with pytest.raises(error, match="into a test line"):
        plain([value], 6, "a test line")
