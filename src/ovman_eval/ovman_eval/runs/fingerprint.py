"""Content hashes of source code, for cache keys of what that code produces.

A cached artefact (a default dataset, a map cache entry, re-rendered frames) is keyed on the
source of the code that makes it, so an edit to that code misses the cache instead of serving a
stale artefact.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from pathlib import Path

Sources = tuple[tuple[str, str | None], ...]
"""(package, file name) pairs; a file name of None means every ``.py`` file of the package, one
with ``*`` the files it matches (``phrasings/*.json``: data the code reads)."""


@functools.lru_cache(maxsize=8)
def source_fingerprint(sources: Sources) -> str:
    """sha256 (hex) over the names and bytes of the source files ``sources`` lists, in order."""
    digest = hashlib.sha256()
    for package, name in sources:
        folder = Path(importlib.import_module(package).__file__).parent  # type: ignore[arg-type]
        paths = [folder / name] if name is not None and "*" not in name else sorted(folder.glob(name or "*.py"))
        for path in paths:
            digest.update(f"{package}/{path.relative_to(folder).as_posix()}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
