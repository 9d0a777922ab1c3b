"""The map store: every finished visit's map on disk, so that visits outlive the process.

One file per visit, ``<store>/<map_id>.ovmap``: a checksummed array bundle (ovman_core.array_bundle,
reading runs no code) holding the instance map (ovman_mapping.map_codec), the camera, the TF frame,
the name, the visit it follows, the code and model identity, its frames' stamps and, for a visit 1,
the depth of its kept frames (a later visit 2's cross-visit evidence). Written atomically; a damaged, truncated or
foreign file is refused with its name. The format is documented in docs/robot.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from pathlib import Path
from typing import Any

import numpy as np

from ovman_core.array_bundle import BundleError, pack_bundle, unpack_bundle
from ovman_core.camera import Intrinsics
from ovman_core.files import atomic_write_bytes
from ovman_mapping.cross_visit import DepthView, PriorVisit
from ovman_mapping.instances import InstanceMap
from ovman_mapping.map_codec import map_document, map_of, stored

STORE_KIND = "ovman-visit-map"
STORE_FORMAT = 1
"""Bumped when the document's shape changes; entries of another format are refused by name."""
SUFFIX = ".ovmap"
STORE_DIR_KEY = "mapping.store_dir"
"""mapping_node's parameter naming the store, which query_node declares too."""


class MapStoreError(ValueError):
    """A store entry cannot be written or read (names the file and what is wrong)."""


@dataclasses.dataclass(frozen=True)
class StoredVisit:
    """One visit's map as the store keeps it.

    ``map_id`` names the file; ``name`` the place mapped (a home, a site); ``follows`` the map_id of
    the visit 1 a visit 2 was mapped against (None for a visit 1); ``frame_id`` the TF frame of the
    map; ``camera`` the visit's intrinsics; ``created_ns`` wall-clock UTC nanoseconds; ``identity``
    the code, segmenter and encoder that built it (strings); ``views`` the depth of a visit 1's kept
    frames (empty for a visit 2); ``stamps`` each fused frame's stamp (ns, by frame index: what the
    map message's sightings carry); ``fused`` and ``skipped`` the visit's frame counts."""

    map_id: str
    name: str
    visit: int
    follows: str | None
    frame_id: str
    camera: Intrinsics | None
    created_ns: int
    identity: dict[str, str]
    map: InstanceMap
    views: tuple[DepthView, ...] = ()
    stamps: tuple[int, ...] = ()
    fused: int = 0
    skipped: int = 0

    @property
    def prior(self) -> PriorVisit:
        """This visit 1 as a later visit 2's mapper holds it."""
        return PriorVisit(self.map, self.views)


def default_store_dir() -> Path:
    """``$XDG_DATA_HOME/ovman/maps`` (``~/.local/share/ovman/maps`` when it is not set)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ovman" / "maps"


def store_dir(configured: str) -> Path:
    """The store folder ``mapping.store_dir`` names (empty: :func:`default_store_dir`)."""
    return Path(configured).expanduser() if configured else default_store_dir()


def new_map_id(visit: int, created_ns: int) -> str:
    """``<UTC date and time to the millisecond>-v<visit>``: sorts in the order visits were stored."""
    moment = datetime.datetime.fromtimestamp(created_ns / 1e9, tz=datetime.UTC)
    return f"{moment:%Y%m%dT%H%M%S}{moment.microsecond // 1000:03d}Z-v{visit}"


def encode_visit(entry: StoredVisit) -> bytes:
    """The bytes of a store file."""
    arrays: list[np.ndarray] = []
    document = {
        "kind": STORE_KIND,
        "format": STORE_FORMAT,
        "map_id": entry.map_id,
        "name": entry.name,
        "visit": entry.visit,
        "follows": entry.follows,
        "frame_id": entry.frame_id,
        "camera": None if entry.camera is None else dataclasses.asdict(entry.camera),
        "created_ns": entry.created_ns,
        "identity": dict(entry.identity),
        "fused": entry.fused,
        "skipped": entry.skipped,
        "map": map_document(entry.map, arrays),
        "views": [_view_document(view, arrays) for view in entry.views],
        "stamps": stored(arrays, np.asarray(entry.stamps, dtype=np.int64).reshape(-1)),
    }
    return pack_bundle(document, arrays)


def decode_visit(data: bytes | bytearray, where: str) -> StoredVisit:
    """The entry in ``data`` (the bytes of file ``where``); MapStoreError when they are not an intact
    store entry of this format."""
    try:
        document, arrays = unpack_bundle(data)
    except BundleError as err:
        raise MapStoreError(f"{where}: not an intact map store entry ({err})") from None
    if not isinstance(document, dict) or document.get("kind") != STORE_KIND:
        raise MapStoreError(f"{where}: not a map store entry (kind {_kind(document)!r}, expected {STORE_KIND!r})")
    if document.get("format") != STORE_FORMAT:
        raise MapStoreError(
            f"{where}: map store format {document.get('format')!r}, expected {STORE_FORMAT} (written by another "
            "version of OVMAN: map the visit again)"
        )
    try:
        camera = document["camera"]
        return StoredVisit(
            map_id=document["map_id"],
            name=document["name"],
            visit=document["visit"],
            follows=document["follows"],
            frame_id=document["frame_id"],
            camera=None if camera is None else Intrinsics(**camera),
            created_ns=document["created_ns"],
            identity=dict(document["identity"]),
            map=map_of(document["map"], arrays),
            views=tuple(_view_of(view, arrays) for view in document["views"]),
            stamps=tuple(arrays[document["stamps"]].tolist()),
            fused=document["fused"],
            skipped=document["skipped"],
        )
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise MapStoreError(f"{where}: malformed map store entry ({type(err).__name__}: {err})") from None


def _kind(document: Any) -> Any:
    return document.get("kind") if isinstance(document, dict) else type(document).__name__


def _view_document(view: DepthView, arrays: list[np.ndarray]) -> dict[str, Any]:
    return {
        "step": view.step,
        "depth": stored(arrays, np.asarray(view.depth, dtype=np.float32)),
        "intrinsics": dataclasses.asdict(view.intrinsics),
        "camera_position": stored(arrays, np.asarray(view.camera_position, dtype=np.float64)),
        "axes": stored(arrays, np.asarray(view.axes, dtype=np.float64)),
    }


def _view_of(document: dict[str, Any], arrays: list[np.ndarray]) -> DepthView:
    return DepthView(
        step=document["step"],
        depth=arrays[document["depth"]],
        intrinsics=Intrinsics(**document["intrinsics"]),
        camera_position=arrays[document["camera_position"]],
        axes=arrays[document["axes"]],
    )


class MapStore:
    """The store directory ``root``: one ``<map_id>.ovmap`` file per stored visit."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_of(self, map_id: str) -> Path:
        if not map_id or "/" in map_id or map_id.startswith("."):
            raise MapStoreError(f"map id {map_id!r}: expected a name such as 20261207T101500000Z-v1")
        return self.root / f"{map_id}{SUFFIX}"

    def write(self, entry: StoredVisit) -> Path:
        """Store ``entry`` atomically (a crash or Ctrl-C leaves the store as it was); its path."""
        path = self.path_of(entry.map_id)
        atomic_write_bytes(path, encode_visit(entry))
        return path

    def load(self, map_id: str) -> StoredVisit:
        """The stored visit ``map_id``; MapStoreError when it is missing, damaged or foreign."""
        path = self.path_of(map_id)
        try:
            data = bytearray(path.read_bytes())
        except FileNotFoundError:
            raise MapStoreError(f"{path}: no such stored map (ovman maps list shows what {self.root} holds)") from None
        entry = decode_visit(data, str(path))
        if entry.map_id != map_id:
            raise MapStoreError(f"{path}: holds map {entry.map_id!r}, not {map_id!r} (renamed by hand?)")
        return entry

    def map_ids(self) -> list[str]:
        """The ids of the files in the store, oldest first (ids sort by time)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name[: -len(SUFFIX)] for p in self.root.glob(f"*{SUFFIX}") if not p.name.startswith("."))

    def remove(self, map_id: str) -> None:
        """Delete stored visit ``map_id`` (MapStoreError when there is none)."""
        path = self.path_of(map_id)
        try:
            path.unlink()
        except FileNotFoundError:
            raise MapStoreError(f"{path}: no such stored map") from None

    def latest(self, visit: int, name: str | None = None) -> StoredVisit | None:
        """The newest stored visit ``visit`` (of place ``name``; None: any), None when there is none;
        MapStoreError when the newest such file is damaged (it is not skipped silently)."""
        for map_id in reversed(self.map_ids()):
            if map_id.endswith(f"-v{visit}"):
                entry = self.load(map_id)
                if name is None or entry.name == name:
                    return entry
        return None

    def pair(self, visit2: str | None = None) -> tuple[StoredVisit, StoredVisit]:
        """A visit 2 (``visit2``, or the newest) and the visit 1 it follows; MapStoreError when the
        store holds none or its visit 1 is gone."""
        second = self.load(visit2) if visit2 else self.latest(2)
        if second is None:
            raise MapStoreError(f"{self.root}: no stored visit 2 (finish a visit 2 first)")
        if second.visit != 2 or second.follows is None:
            raise MapStoreError(f"{self.path_of(second.map_id)}: map {second.map_id} is not a visit 2")
        return self.load(second.follows), second
