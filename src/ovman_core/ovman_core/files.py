"""Files written so that no reader ever sees half of them, and values made plain JSON.

:func:`atomic_write_bytes` writes a temporary file in the target's folder, flushes it to disk and
renames it over the target: readers (other processes, a resumed run, parallel workers sharing a
cache) see the old content or the new, never a mix, and a crash leaves no partial file.

:func:`plain` turns dataclasses, enums, tuples and numpy scalars into JSON values, rounding floats
to a fixed number of decimals (so that a file's bytes do not depend on float noise) and refusing
what JSON cannot hold faithfully.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import tempfile
from pathlib import Path
from typing import Any

FILE_MODE = 0o644
"""Permissions of the files written (mkstemp would leave them private to the owner)."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (its folder made as needed) so that readers see the old or the
    new content, never a mix; the file gets :data:`FILE_MODE`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8, newlines as written."""
    atomic_write_bytes(path, text.encode("utf-8"))


def plain(value: Any, decimals: int, what: str) -> Any:
    """``value`` as JSON values: dataclasses as objects (field order), dicts with their keys as
    strings, tuples as lists, enums as their values, numpy scalars as numbers, floats rounded to
    ``decimals`` (``-0.0`` written ``0.0``). ValueError for a non-finite float, TypeError for
    anything else, each naming ``what`` is being written."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), decimals, what) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): plain(v, decimals, what) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [plain(v, decimals, what) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write the non-finite float {value!r} into {what}")
        rounded = round(value, decimals)
        return 0.0 if rounded == 0.0 else rounded
    if hasattr(value, "item"):  # numpy scalars
        return plain(value.item(), decimals, what)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into {what}")
