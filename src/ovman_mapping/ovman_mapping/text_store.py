"""Text embeddings kept on disk, so a process whose phrases were all embedded before loads no language model.

One ``<directory>/<kind>-<identity>.npz`` per encoder identity (a SHA-256 over the encoder's
description, text settings and model files): ``phrases`` (str, (N,)) and ``vectors`` (float64,
(N, D), unit rows, exactly as the encoder returned them). Writes merge under an exclusive ``fcntl``
lock and replace the file atomically: concurrent writers lose nothing, a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ovman_core.config import EncoderConfig
from ovman_core.files import atomic_write_bytes

STORE_SUBDIR = Path("ovman") / "text-embeddings"
HASH_CHUNK_BYTES = 1 << 20


class TextStoreError(RuntimeError):
    """The store's file cannot be read or written (names the file and what to do)."""


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/ovman/text-embeddings``, else ``~/.cache/ovman/text-embeddings``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / STORE_SUBDIR


def store_directory(config: EncoderConfig) -> Path | None:
    """Where ``config``'s store lives; None when ``encoder.text_cache`` is off."""
    if not config.text_cache:
        return None
    return Path(config.text_cache_dir).expanduser() if config.text_cache_dir else default_directory()


def identity(parts: Sequence[str], files: Iterable[Path]) -> str:
    """Hex SHA-256 of ``parts`` and of every file's name and bytes (files in sorted path order)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    for path in sorted(files):
        digest.update(path.name.encode())
        digest.update(b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(HASH_CHUNK_BYTES):
                digest.update(chunk)
    return digest.hexdigest()


class TextStore:
    """Phrase → unit vector in ``directory/<kind>-<identity[:20]>.npz``. The first vector computed for
    a phrase is the one every later process reads: a batch's padding can move the last bits of a
    transformer's output, and with the store every process sees the same bits."""

    def __init__(self, directory: Path, kind: str, identity_hex: str) -> None:
        self.path = Path(directory) / f"{kind}-{identity_hex[:20]}.npz"

    def read(self) -> dict[str, np.ndarray]:
        """Every stored phrase and its vector (empty when the file does not exist yet)."""
        if not self.path.is_file():
            return {}
        try:
            with np.load(self.path, allow_pickle=False) as data:
                phrases, vectors = data["phrases"], data["vectors"]
        except (OSError, ValueError, KeyError) as err:
            raise TextStoreError(
                f"text-embedding cache {self.path} is unreadable ({err}); delete it (it is rebuilt) "
                "or set encoder.text_cache: false"
            ) from err
        if vectors.ndim != 2 or len(phrases) != len(vectors):
            raise TextStoreError(
                f"text-embedding cache {self.path}: expected 'phrases' (N,) and 'vectors' (N, D), got "
                f"{phrases.shape} and {vectors.shape}; delete it (it is rebuilt)"
            )
        return {str(p): v for p, v in zip(phrases, vectors, strict=True)}

    def add(self, vectors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Merge ``vectors`` into the file (phrases already there keep their stored vector); the
        merged contents."""
        with self._locked():
            merged = {**dict(vectors), **self.read()}
            phrases = sorted(merged)
            dims = {merged[p].shape for p in phrases}
            if len(dims) > 1:
                raise TextStoreError(
                    f"text-embedding cache {self.path}: vectors of shapes {sorted(dims)} for one encoder; "
                    "delete the file (it is rebuilt)"
                )
            stream = io.BytesIO()
            np.savez(stream, phrases=np.array(phrases, dtype=str), vectors=np.stack([merged[p] for p in phrases]))
            atomic_write_bytes(self.path, stream.getvalue())
        return merged

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = self.path.with_name(self.path.name + ".lock").open("a")
        except OSError as err:
            raise TextStoreError(
                f"text-embedding cache: cannot write in {self.path.parent} ({err}); set encoder.text_cache_dir "
                "to a writable folder or encoder.text_cache: false"
            ) from err
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
