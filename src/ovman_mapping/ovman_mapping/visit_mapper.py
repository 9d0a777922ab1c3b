"""The map of the open visit, fed one synchronised frame at a time (what mapping_node does, without ROS).

:meth:`VisitMapper.start` opens a visit, :meth:`VisitMapper.add` fuses each frame at once
(:class:`ovman_mapping.fusion.MapBuilder`), :meth:`VisitMapper.finish` runs the end-of-visit passes
and returns the map and every fused frame's stamp; frames while no visit is open are counted and
dropped. One camera per visit: a frame whose intrinsics differ from the visit's first is refused.
The latest visit-1 map and its kept frames' depth are kept until the next visit 1, so a visit 2
carries the cross-visit evidence; with a map store every finished visit is stored, and a visit 2
with no visit 1 in memory is mapped against the store's latest. Not thread-safe. World: AI2-THOR's.
"""

from __future__ import annotations

import importlib.metadata
import math
import time
from typing import TYPE_CHECKING

from ovman_core.camera import Intrinsics
from ovman_core.config import MappingConfig
from ovman_mapping.backprojection import hue_saturation_cells
from ovman_mapping.cross_visit import PriorVisit
from ovman_mapping.encoders import FeatureEncoder
from ovman_mapping.fusion import MapBuilder
from ovman_mapping.instances import InstanceMap
from ovman_mapping.map_store import MapStore, MapStoreError, StoredVisit, new_map_id
from ovman_mapping.segmenter import Segmenter, make_segmenter, segmenter_identity

if TYPE_CHECKING:
    from ovman_core.observation import Observation

VISITS = (1, 2)


class VisitError(ValueError):
    """A visit request that does not fit the mapper's state (no open visit, another visit open, a
    frame from another camera than the visit's)."""


class VisitMapper:
    """Builds one visit's map at a time; see the module docstring."""

    def __init__(
        self,
        config: MappingConfig,
        encoder: FeatureEncoder,
        segmenter: Segmenter | None = None,
        max_coordinate: float = math.inf,
        store: MapStore | None = None,
        frame_id: str = "map",
    ) -> None:
        self.config = config
        self.store = store
        """Where finished visits go (None: nowhere), named ``mapping.store_name``, in TF frame ``frame_id``."""
        self.frame_id = frame_id
        if store is not None and not config.mapping.store_name.strip():
            raise VisitError("config mapping_node mapping.store_name must name the place mapped, got an empty string")
        self.max_coordinate = max_coordinate
        self.encoder = encoder
        self.segmenter = (
            segmenter if segmenter is not None else make_segmenter(config.segmenter, encoder=config.encoder)
        )
        self.visit: int | None = None
        self.stamps: list[int] = []
        self.unassigned = 0
        self._builder: MapBuilder | None = None
        self.camera: Intrinsics | None = None
        """The open visit's camera: the intrinsics of its first fused frame."""
        self.prior: PriorVisit | None = None
        self.prior_id: str | None = None
        """The map_id of :attr:`prior` in the store (None: not stored)."""
        self.stored_id: str | None = None
        """The map_id the last finished visit was stored as (None: not stored)."""
        self.store_problem: str | None = None
        """Why the last finished visit could not be stored (None: it was, or there is no store)."""

    def warm_up(self) -> None:
        """Build now what a process's first frame would otherwise build (0.7 s on this machine: the
        colour table of the instances' hue-saturation histograms), so that it waits for nothing."""
        hue_saturation_cells(self.config.encoder.colour_bins)

    @property
    def frames(self) -> int:
        """Frames fused into the open visit."""
        return len(self.stamps)

    @property
    def frames_kept(self) -> tuple[int, int]:
        """(frames the open visit keeps for its evidence, every how many-th frame that is;
        ``mapping.frame_memory_mb``); (0, 1) when no visit is open."""
        return (0, 1) if self._builder is None else self._builder.frames_kept

    def start(self, visit: int) -> None:
        """Open ``visit`` (1 or 2), dropping whatever the previous open visit had fused; a visit 1
        also drops the kept visit-1 map (:attr:`prior`), a visit 2 is mapped against it."""
        if visit not in VISITS:
            raise VisitError(f"visit must be 1 or 2, got {visit}")
        self.visit = visit
        self.stamps = []
        self.camera = None
        if visit == 1:
            self.prior, self.prior_id = None, None
        elif self.prior is None and self.store is not None:
            self._load_prior()
        prior = self.prior if visit == 2 else None
        self._builder = MapBuilder(self.config, self.encoder, visit, self.segmenter, prior, history=False)

    def add(self, observation: Observation, stamp_ns: int) -> bool:
        """Fuse one frame stamped ``stamp_ns`` into the open visit; False (and counted in
        ``unassigned``) when no visit is open. Stamps must increase, the camera must lie within
        ``max_coordinate`` metres of the origin on every axis, and its intrinsics (size, fx, fy, cx,
        cy) must be those of the visit's first frame (VisitError otherwise): one visit's frames are
        one camera's, so its map does not mix two segmenter geometries."""
        if self._builder is None:
            self.unassigned += 1
            return False
        if not all(abs(v) <= self.max_coordinate for v in observation.camera_position):
            raise VisitError(
                f"frame stamped {stamp_ns} ns: camera at {observation.camera_position}; expected finite metres "
                f"within ±{self.max_coordinate} (limits.max_coordinate)"
            )
        if self.stamps and stamp_ns <= self.stamps[-1]:
            raise VisitError(f"frame stamped {stamp_ns} ns after one at {self.stamps[-1]} ns: stamps must increase")
        camera = observation.intrinsics
        if self.camera is not None and camera != self.camera:
            first = self.camera
            mixed = f"a {first.aspect} and a {camera.aspect} camera" if first.aspect != camera.aspect else "two cameras"
            raise VisitError(
                f"frame stamped {stamp_ns} ns: {mixed} mixed in one visit: the visit's first frame came from "
                f"{first.describe()}, this one from {camera.describe()} (one camera per visit: start a new visit)"
            )
        self._builder.add(observation)
        self.stamps.append(stamp_ns)
        self.camera = camera
        return True

    def finish(self, visit: int, skipped: int = 0) -> tuple[InstanceMap, list[int]]:
        """Close ``visit`` (it must be the open one): its map and the stamps of its frames (by frame
        index); stored (:attr:`stored_id`) when there is a store, with ``skipped`` frames counted."""
        if self._builder is None or self.visit is None:
            raise VisitError(f"cannot finish visit {visit}: no visit is open (call start_visit first)")
        if visit != self.visit:
            raise VisitError(f"cannot finish visit {visit}: visit {self.visit} is open")
        instance_map = self._builder.build()
        views = self._builder.views() if visit == 1 else ()
        self.stored_id, self.store_problem = None, None
        if self.store is not None:
            try:
                self.stored_id = self._store(instance_map, views, skipped)
            except OSError as err:  # the map is still returned (and published): only storing it failed
                self.store_problem = f"{self.store.root}: {err}"
        if visit == 1:
            self.prior, self.prior_id = PriorVisit(instance_map, views), self.stored_id
        stamps = self.stamps
        self.visit, self._builder, self.stamps, self.camera = None, None, [], None
        return instance_map, stamps

    def identity(self) -> dict[str, str]:
        """What built this mapper's maps: OVMAN's version, the segmenter and the encoder."""
        try:
            version = importlib.metadata.version("ovman")
        except importlib.metadata.PackageNotFoundError:  # a colcon install has no "ovman" distribution
            version = "unpackaged"
        return {
            "ovman": version,
            "segmenter": segmenter_identity(self.config.segmenter),
            "encoder": self.encoder.description,
        }

    def _store(self, instance_map: InstanceMap, views: tuple, skipped: int) -> str:
        assert self.store is not None
        created = time.time_ns()
        entry = StoredVisit(
            map_id=new_map_id(instance_map.visit, created),
            name=self.config.mapping.store_name,
            visit=instance_map.visit,
            follows=self.prior_id if instance_map.visit == 2 else None,
            frame_id=self.frame_id,
            camera=self.camera,
            created_ns=created,
            identity=self.identity(),
            map=instance_map,
            views=views,
            stamps=tuple(self.stamps),
            fused=len(self.stamps),
            skipped=skipped,
        )
        self.store.write(entry)
        return entry.map_id

    def _load_prior(self) -> None:
        """The store's latest visit 1 of this place as :attr:`prior`; VisitError when it was mapped in
        another frame or by another encoder (a visit 2 must be mapped as its visit 1 was)."""
        assert self.store is not None
        name = self.config.mapping.store_name
        try:
            first = self.store.latest(1, name)
        except MapStoreError as err:
            raise VisitError(f"cannot start visit 2 against the stored visit 1: {err}") from None
        if first is None:
            return
        where = f"stored visit 1 {first.map_id} ({self.store.path_of(first.map_id)})"
        if first.frame_id != self.frame_id:
            raise VisitError(
                f"cannot start visit 2: {where} is in frame {first.frame_id!r}, this node maps in {self.frame_id!r}"
            )
        if first.map.encoder != self.encoder.description:
            raise VisitError(
                f"cannot start visit 2: {where} was built by encoder {first.map.encoder!r}, this node's is "
                f"{self.encoder.description!r} (map visit 1 again, or configure the same encoder)"
            )
        self.prior, self.prior_id = first.prior, first.map_id
