"""3D object instances of one visit's map and the map itself.

World frame: AI2-THOR's (metres, y up, left-handed); the floor plane is (x, z). Steps are the
world's step counter at the frame that saw the instance. Features are unit vectors in the
encoder's space (``InstanceMap.encoder`` names it); colour histograms sum to 1.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ovman_core.boxes import Box3, Vec2, Vec3, floor_point
from ovman_mapping.backprojection import remove_outliers, voxel_downsample


@dataclasses.dataclass(frozen=True)
class Sighting:
    """One observation of an instance: the frame, its step, the segment's box centre (world,
    metres) and its size in pixels."""

    frame_index: int
    step: int
    position: Vec3
    pixel_count: int


class SightingSpan:
    """The world steps (first, last) of ``sightings``, a sequence in step order (for a map instance
    and for fusion's working track alike)."""

    sightings: Sequence[Any]

    @property
    def first_step(self) -> int:
        return self.sightings[0].step

    @property
    def last_step(self) -> int:
        return self.sightings[-1].step


@dataclasses.dataclass(frozen=True)
class Instance(SightingSpan):
    """A 3D object instance fused from the segments of one visit.

    - ``uid``: unique within its map (``"v<visit>:<n>"``); not a ground-truth id.
    - ``position``: box centre of the fused points (world, metres); for a moving instance the box
      centre of its latest sighting. ``box`` accordingly.
    - ``points``: float64 (N, 3) voxel-downsampled, outlier-free points (all sightings).
    - ``feature``: float64 (D,) unit vector for grounding and association (encoder space).
    - ``colour``: float64 (bins²,) hue–saturation histogram, sums to 1.
    - ``labels``: segmenter label → share of the instance's pixels carrying it (sums to 1).
    - ``sightings``: per-observation positions in step order; ``first_step``/``last_step`` bound them.
    - ``moving``: the motion attribute (observed at clearly different places during the visit, or
      seen gone from where it was); ``motion_evidence`` says why, empty when not moving.
    """

    uid: str
    position: Vec3
    box: Box3
    points: np.ndarray
    feature: np.ndarray
    colour: np.ndarray
    labels: Mapping[str, float]
    sightings: tuple[Sighting, ...]
    moving: bool = False
    motion_evidence: str = ""

    @property
    def floor(self) -> Vec2:
        """π(position): the floor point (x, z), metres."""
        return floor_point(self.position)

    @property
    def label(self) -> str:
        """The majority segmenter label (ties: alphabetical)."""
        return min(self.labels.items(), key=lambda item: (-item[1], item[0]))[0]

    @property
    def latest_position(self) -> Vec3:
        """Box centre of the latest sighting (world, metres)."""
        return self.sightings[-1].position


class Positions(Mapping[str, Vec3]):
    """Working uid → box centre (world, metres): the first ``len(centres)`` uids of ``uids`` with
    the rows of ``centres`` ((N, 3) float64), in that order.

    Fusion records one per frame. The visit's snapshots share its append-only uid list, so a
    snapshot costs one (N, 3) array, not a dict of N tuples (rebuilding that every frame was 0.24
    ms a frame late in a visit). The uid → row table is built on the first lookup."""

    __slots__ = ("_centres", "_row", "_uids")

    def __init__(self, uids: Sequence[str], centres: np.ndarray) -> None:
        if len(centres) > len(uids) or np.shape(centres)[1:] != (3,):
            raise ValueError(f"positions: {len(uids)} uids for centres of shape {np.shape(centres)}")
        self._uids = uids
        self._centres = centres
        self._row: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self._centres)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._uids[: len(self._centres)])

    def __getitem__(self, uid: str) -> Vec3:
        if self._row is None:
            self._row = {u: k for k, u in enumerate(self._uids[: len(self._centres)])}
        x, y, z = self._centres[self._row[uid]].tolist()
        return (x, y, z)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return Positions, (list(self), self._centres)


@dataclasses.dataclass(frozen=True)
class MapSnapshot:
    """Positions of the instances as the map stood after one frame (for temporal-stability
    diagnostics): working uid → box centre (world, metres); ``seen``: the working uids that frame's
    segments were fused into (sighted in it; the memory diagnostics' last sightings). Resolve uids
    with ``InstanceMap.aliases``."""

    frame_index: int
    step: int
    positions: Mapping[str, Vec3]
    seen: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class CrossVisitEvidence:
    """What a second visit's mapper saw of the places of both visits' instances
    (:mod:`ovman_mapping.cross_visit`): ``gone``, uids of the first visit's instances whose place
    the second visit's frames saw empty; ``new``, uids of the second visit's instances whose place
    the first visit's frames saw empty."""

    gone: frozenset[str] = frozenset()
    new: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class InstanceMap:
    """The 3D instance map of one visit.

    ``encoder`` describes the feature encoder (recorded in every result); ``history`` holds the
    incremental states; ``aliases`` maps every working uid that appears in ``history`` to the uid of
    the final instance it became (fragments merged later), absent when it was dropped. ``prior``:
    for a second visit mapped with the first visit at hand, the cross-visit free-space evidence
    (None: not computed, e.g. a first visit, or a map received without it).
    """

    visit: int
    instances: tuple[Instance, ...]
    encoder: str
    frames: int = 0
    history: tuple[MapSnapshot, ...] = ()
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    prior: CrossVisitEvidence | None = None

    def __len__(self) -> int:
        return len(self.instances)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.instances)

    def __getitem__(self, uid: str) -> Instance:
        for instance in self.instances:
            if instance.uid == uid:
                return instance
        raise KeyError(f"no instance {uid!r} in the visit-{self.visit} map")

    def features(self) -> np.ndarray:
        """(N, D) read-only matrix of instance features (N may be 0; then D is 0), stacked once
        per map (maps are immutable; a query server grounds every query against the same maps)."""
        return self._features

    @functools.cached_property
    def summaries(self) -> tuple[tuple[str, Vec3, bool, int, int], ...]:
        """Per instance (map order): uid, position, motion attribute, last step and sightings,
        collected once per map."""
        return tuple((i.uid, i.position, i.moving, i.last_step, len(i.sightings)) for i in self.instances)

    @functools.cached_property
    def _features(self) -> np.ndarray:
        stacked = np.stack([i.feature for i in self.instances]) if self.instances else np.zeros((0, 0))
        stacked.flags.writeable = False
        return stacked

    def colours(self) -> np.ndarray:
        """(N, bins²) matrix of colour histograms."""
        if not self.instances:
            return np.zeros((0, 0))
        return np.stack([instance.colour for instance in self.instances])

    def positions(self) -> np.ndarray:
        """(N, 3) matrix of instance positions (world, metres)."""
        return np.array([instance.position for instance in self.instances], dtype=float).reshape(-1, 3)


LABEL_SHARE_TOLERANCE = 1e-3
"""Label shares may sum to more than 1 by this (float32 rounding on the wire)."""


def instance_problem(instance: Instance, max_coordinate: float) -> str | None:
    """Why ``instance`` cannot be published or used (None when it can): its position, box and
    points must be finite and within ``max_coordinate`` metres of the origin on every axis, its
    feature and colour histogram finite (the histogram non-negative), its label shares in [0, 1]
    summing to at most 1 (a producer may send only its top candidates) and not all 0, and at least
    one sighting. A map is sent or kept only when every instance passes."""
    geometry = {
        "position": np.asarray(instance.position, dtype=float),
        "box": np.asarray((instance.box.lo, instance.box.hi), dtype=float),
        "points": np.asarray(instance.points, dtype=float),
    }
    for name, values in geometry.items():
        with np.errstate(invalid="ignore"):
            if not np.all(np.abs(values) <= max_coordinate):
                bad = float(values[~(np.abs(values) <= max_coordinate)].ravel()[0])
                return f"instance {instance.uid}: {name} holds {bad!r}; expected finite metres within ±{max_coordinate}"
    for name, values in (("feature", instance.feature), ("colour_histogram", instance.colour)):
        if not np.all(np.isfinite(np.asarray(values, dtype=float))):
            return f"instance {instance.uid}: {name} holds a non-finite value"
    if not np.all(np.asarray(instance.colour, dtype=float) >= 0.0):
        return f"instance {instance.uid}: colour_histogram holds a negative value"
    shares = np.asarray(list(instance.labels.values()), dtype=float)
    valid = len(shares) and np.all((shares >= 0.0) & (shares <= 1.0))
    if not (valid and 0.0 < shares.sum() <= 1.0 + LABEL_SHARE_TOLERANCE):
        return (
            f"instance {instance.uid}: label probabilities {shares.tolist()}; expected values in [0, 1] "
            f"summing to at most 1, not all 0"
        )
    if not instance.sightings:
        return f"instance {instance.uid}: no sightings"
    return None


def map_problem(instance_map: InstanceMap, max_coordinate: float) -> str | None:
    """The first :func:`instance_problem` of the map's instances, prefixed with the visit, or None."""
    for instance in instance_map.instances:
        problem = instance_problem(instance, max_coordinate)
        if problem is not None:
            return f"visit-{instance_map.visit} map: {problem}"
    return None


def at_wire_precision(instance: Instance) -> Instance:
    """``instance`` with its points, feature, colour histogram and label shares as an InstanceMap
    message carries them (float32 values, labels by decreasing share then name), so that a map used
    in process decides exactly as the same map received over the graph: a near-tie between two
    scores must break the same way on both sides. (The wire's frame change permutes and negates
    coordinates, which float32 rounding commutes with.)"""
    labels = sorted(instance.labels.items(), key=lambda item: (-item[1], item[0]))
    return dataclasses.replace(
        instance,
        points=np.asarray(instance.points, dtype=np.float32).astype(float),
        feature=np.asarray(instance.feature, dtype=np.float32).astype(float),
        colour=np.asarray(instance.colour, dtype=np.float32).astype(float),
        labels={name: float(np.float32(share)) for name, share in labels},
    )


def fuse_points(clouds: Sequence[np.ndarray], voxel_size: float, neighbours: int, std_ratio: float) -> np.ndarray:
    """Union of point clouds (each (N_i, 3), world metres), voxel-downsampled, outliers removed."""
    if not clouds:
        return np.empty((0, 3))
    points = voxel_downsample(np.concatenate(clouds), voxel_size)
    cleaned = remove_outliers(points, neighbours, std_ratio)
    return cleaned if len(cleaned) else points


def box_of(points: np.ndarray) -> Box3:
    """Axis-aligned box of a non-empty (N, 3) point set."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    return Box3((float(lo[0]), float(lo[1]), float(lo[2])), (float(hi[0]), float(hi[1]), float(hi[2])))
