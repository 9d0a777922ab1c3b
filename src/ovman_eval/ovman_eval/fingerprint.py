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
"""(package, file name) pairs; a file name of None means every ``.py`` file of the package."""


@functools.lru_cache(maxsize=8)
def source_fingerprint(sources: Sources) -> str:
    """sha256 (hex) over the names and bytes of the source files ``sources`` lists, in order."""
    digest = hashlib.sha256()
    for package, name in sources:
        folder = Path(importlib.import_module(package).__file__).parent  # type: ignore[arg-type]
        for path in sorted(folder.glob("*.py")) if name is None else [folder / name]:
            digest.update(f"{package}/{path.name}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
