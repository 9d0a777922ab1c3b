"""Per-visit map building: fuse the segments of a visit's frames into 3D instances.

Geometry and features only; ground-truth ids are never read. Each frame's segments join the tracks
they match or start new ones; after the last frame fragments are merged, free-space evidence marks
tracks vacated or arrived, moving tracks are linked and a second visit gets the cross-visit evidence.
Frames are kept within ``mapping.frame_memory_mb``, colour only as best crops. World: AI2-THOR's.

Why one module: it is one algorithm, the per-frame association of segments to tracks and their
fusion into instances (:class:`MapBuilder`), whose steps share the tracks' state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import linear_sum_assignment

from ovman_core.config import MappingConfig
from ovman_core.frames import optical_axes_thor
from ovman_mapping.backprojection import FrameFormatError, SegmentObservation, segment_frame, voxel_codes
from ovman_mapping.cross_visit import CheckClouds, DepthView, PriorVisit, Projection, cross_visit_evidence
from ovman_mapping.encoders import FeatureEncoder, InstanceEvidence, padded_crop
from ovman_mapping.frame_store import MEGABYTE, FrameStore, KeptFrame, compact_ids
from ovman_mapping.instances import (
    Instance,
    InstanceMap,
    MapSnapshot,
    Positions,
    Sighting,
    SightingSpan,
    box_of,
    fuse_points,
)
from ovman_mapping.segmenter import Segmentation, Segmenter, check_frame, make_segmenter
from ovman_mapping.track_cloud import TrackCloud

if TYPE_CHECKING:
    from ovman_core.observation import Observation

INFEASIBLE = 1.0e6
"""Assignment cost of a forbidden pairing (dropped after the Hungarian solve)."""


@dataclasses.dataclass(frozen=True)
class _View:
    """A crop of a sighting for the encoder: ``key`` (−pixel count, frame index) orders the best first."""

    key: tuple[int, int]
    pixels: np.ndarray


def _best_views(views: Iterable[_View], count: int) -> list[_View]:
    return sorted(views, key=lambda v: v.key)[:count]


@dataclasses.dataclass
class _Track(SightingSpan):
    """A working instance during fusion."""

    uid: str
    sightings: list[Sighting]
    cloud: TrackCloud
    labels: dict[str, int]
    colour_sum: np.ndarray
    pixels: int
    lo: np.ndarray
    hi: np.ndarray
    codes: set[int]
    frames: set[int]
    fragments: list[_Track] = dataclasses.field(default_factory=list)
    evidence: list[str] = dataclasses.field(default_factory=list)
    views: list[_View] = dataclasses.field(default_factory=list)
    """The best crops of its sightings (most pixels first), when the encoder reads views."""
    colour: np.ndarray = dataclasses.field(init=False)
    """The mean colour histogram, ``colour_sum / pixels`` (kept up to date by MapBuilder)."""

    def __post_init__(self) -> None:
        self.colour = self.colour_sum / self.pixels

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2.0


def label_cosines(a: list[dict[str, int]], b: list[dict[str, int]]) -> np.ndarray:
    """(A, B) cosine similarities of label distributions (label → pixels)."""
    names = sorted({name for d in (*a, *b) for name in d})
    index = {name: k for k, name in enumerate(names)}

    def matrix(dists: list[dict[str, int]]) -> np.ndarray:
        out = np.zeros((len(dists), len(names)))
        for row, d in enumerate(dists):
            for name, pixels in d.items():
                out[row, index[name]] = pixels
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    return matrix(a) @ matrix(b).T


def bhattacharyya(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(A, B) Bhattacharyya coefficients of L1-normalised histograms (A, K) and (B, K): 1 = equal."""
    return np.sqrt(a) @ np.sqrt(b).T


def occupancy_codes(points: np.ndarray, voxel_size: float) -> set[int]:
    """Codes of the voxels (edge ``voxel_size``, metres) holding ``points``."""
    return set(voxel_codes(points, voxel_size).tolist())


def _overlap(small: set[int], large: set[int]) -> float:
    """Share of ``small``'s voxels that ``large`` occupies too."""
    return len(small & large) / len(small) if small else 0.0


def _nested_pairs(seg_lo: np.ndarray, seg_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(P,) bool per pair ``k`` of the (P, 3) box corners: the centre of one box lies inside the
    other (computed for candidate pairs only: most pairs are too far apart to matter)."""
    seg_c, trk_c = (seg_lo + seg_hi) / 2.0, (lo + hi) / 2.0
    seg_in = np.all((seg_c >= lo) & (seg_c <= hi), axis=1)
    trk_in = np.all((trk_c >= seg_lo) & (trk_c <= seg_hi), axis=1)
    return seg_in | trk_in


def _gaps(seg_lo: np.ndarray, seg_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(S, T) Euclidean gaps between boxes, metres (0 when they overlap); one axis at a time, so
    no (S, T, 3) temporaries (the same sums in the same order)."""
    total = np.zeros((len(seg_lo), len(lo)))
    for k in range(3):
        d = np.maximum(lo[None, :, k] - seg_hi[:, None, k], seg_lo[:, None, k] - hi[None, :, k])
        np.maximum(d, 0.0, out=d)
        d *= d
        total += d
    return np.sqrt(total, out=total)


class _TrackRows:
    """The working tracks' boxes, mean colours and label pixel counts stacked, row k for
    ``MapBuilder._tracks[k]`` (kept in step while frames are fused, so the per-frame association
    does not restack hundreds of small arrays or dicts). Boxes in metres (world frame); colours as
    :attr:`_Track.colour`; label counts in pixels, one column per label seen so far."""

    def __init__(self, colour_width: int) -> None:
        self._lo = np.empty((64, 3))
        self._hi = np.empty((64, 3))
        self._colour = np.empty((64, colour_width))
        self._counts = np.zeros((64, 16))
        self._norm = np.empty(64)
        self._column: dict[str, int] = {}
        self._count = 0

    @property
    def lo(self) -> np.ndarray:
        return self._lo[: self._count]

    @property
    def hi(self) -> np.ndarray:
        return self._hi[: self._count]

    @property
    def colour(self) -> np.ndarray:
        return self._colour[: self._count]

    def label_cosines(self, label: str) -> np.ndarray:
        """(T,) cosine of a segment carrying only ``label`` with each track's label distribution:
        the track's pixels of that label over the norm of its counts. Bit for bit what
        :func:`label_cosines` gives for such a segment: its row is one-hot (``p / sqrt(p²)`` is
        exactly 1), so the product picks one entry, and a norm of whole pixel counts is exact in any
        order (below 2^53)."""
        column = self._column.get(label)
        if column is None:
            return np.zeros(self._count)
        return self._counts[: self._count, column] / self._norm[: self._count]

    def append(self, track: _Track) -> None:
        if self._count == len(self._lo):
            grow = len(self._lo)
            self._lo = np.concatenate([self._lo, np.empty((grow, 3))])
            self._hi = np.concatenate([self._hi, np.empty((grow, 3))])
            self._colour = np.concatenate([self._colour, np.empty((grow, self._colour.shape[1]))])
            self._counts = np.concatenate([self._counts, np.zeros((grow, self._counts.shape[1]))])
            self._norm = np.concatenate([self._norm, np.empty(grow)])
        self._count += 1
        self.update(self._count - 1, track)

    def update(self, row: int, track: _Track) -> None:
        self._lo[row] = track.lo
        self._hi[row] = track.hi
        self._colour[row] = track.colour
        self._counts[row] = 0.0
        for name, pixels in track.labels.items():
            if name not in self._column:
                if len(self._column) == self._counts.shape[1]:
                    self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)], axis=1)
                self._column[name] = len(self._column)
            self._counts[row, self._column[name]] = pixels
        self._norm[row] = max(math.sqrt(sum(p * p for p in track.labels.values())), 1e-12)


class MapBuilder:
    """Builds the instance map of one visit, one frame at a time.

    A segment matches a track when their features agree (``(1 − w)·cos(label distributions) +
    w·BC(colour histograms) ≥ mapping.merge_feature_similarity``, ``w = mapping.colour_weight``) and
    their geometry does (boxes at most ``mapping.merge_distance`` apart, and ``mapping.merge_overlap``
    of the segment's occupancy voxels already the track's or one box centre inside the other); a
    Hungarian assignment per frame keeps two segments of one frame from joining one track.

    ``batch_frames``: frames are segmented that many at a time (one pass of a network over them)
    and then fused in order; the map does not depend on it, since a frame's segments do not. With
    1 (mapping_node) each frame is fused as it is added; otherwise :meth:`build` fuses what is left.
    ``history``: keep every frame's map state (``InstanceMap.history``, read by the benchmark's
    diagnostics only; mapping_node's map messages do not carry it, so it keeps none)."""

    def __init__(
        self,
        config: MappingConfig,
        encoder: FeatureEncoder,
        visit: int,
        segmenter: Segmenter | None = None,
        prior: PriorVisit | None = None,
        batch_frames: int = 1,
        history: bool = True,
    ) -> None:
        self.params = config.mapping
        self.encoder_config = config.encoder
        self.encoder = encoder
        self.segmenter = (
            segmenter if segmenter is not None else make_segmenter(config.segmenter, encoder=config.encoder)
        )
        self.visit = visit
        self.prior = prior
        self._store = FrameStore(max(1, round(self.params.frame_memory_mb * MEGABYTE)))
        self._fused = 0
        self._tracks: list[_Track] = []
        self._rows = _TrackRows(config.encoder.colour_bins**2)
        self._uids: list[str] = []  # the tracks' uids, row by row (append-only: snapshots share it)
        self._history: list[MapSnapshot] | None = [] if history else None
        self._next_uid = 0
        if batch_frames < 1:
            raise ValueError(f"batch_frames must be >= 1, got {batch_frames}")
        self.batch_frames = batch_frames
        self._pending: list[Observation] = []

    def add(self, observation: Observation) -> None:
        """Add one frame: segmented by ``self.segmenter`` and fused once ``batch_frames`` frames are
        waiting. A malformed frame (images that do not fit its intrinsics) is refused here, with its
        index (FrameFormatError), not when its batch is segmented."""
        rgb, depth = np.asarray(observation.rgb), observation.depth
        try:
            check_frame(rgb, None if depth is None else np.asarray(depth), observation.intrinsics)
        except ValueError as err:
            raise FrameFormatError(f"frame {self._fused + len(self._pending)}: {err}") from None
        self._pending.append(observation)
        if len(self._pending) >= self.batch_frames:
            self._fuse_pending()

    def _fuse_pending(self) -> None:
        pending, self._pending = self._pending, []
        for observation, segmentation in zip(pending, self.segmenter.segment_batch(pending), strict=True):
            self._fuse(observation, segmentation)

    def _fuse(self, observation: Observation, segmentation: Segmentation) -> None:
        """Fuse one frame's segments into the tracks and record the frame's map state."""
        index = self._fused
        self._fused += 1
        pose = observation.pose
        ids, labels = segmentation.ids, segmentation.labels
        frame = KeptFrame(
            index=index,
            step=int(observation.step),
            depth=observation.depth,
            segments=compact_ids(np.asarray(ids)),
            labels=labels,
            intrinsics=observation.intrinsics,
            camera_position=np.asarray(observation.camera_position, dtype=float),
            axes=optical_axes_thor(pose.yaw_deg, pose.horizon_deg),
        )
        self._store.add(frame)
        segments = segment_frame(
            observation.rgb,
            observation.depth,
            ids,
            labels,
            observation.intrinsics,
            observation.camera_position,
            pose.yaw_deg,
            pose.horizon_deg,
            self.params,
            self.encoder_config.colour_bins,
            frame_index=index,
            step=frame.step,
            cell=segmentation.cell,
            lattice=segmentation.lattice,
        )
        touched = self._assign(segments, np.asarray(observation.rgb)) if segments else []
        if self._history is not None:
            positions = Positions(self._uids, (self._rows.lo + self._rows.hi) / 2.0)
            seen = frozenset(self._uids[row] for row in touched)
            self._history.append(MapSnapshot(index, frame.step, positions, seen))

    def _assign(self, segments: list[SegmentObservation], rgb: np.ndarray) -> list[int]:
        """Fuse ``segments`` (one frame's, colour image ``rgb``) into the tracks; returns the rows of
        the tracks they extended or started."""
        p = self.params
        codes = [occupancy_codes(s.points, p.overlap_voxel_size) for s in segments]
        matched: dict[int, int] = {}  # segment -> track row
        if self._tracks:
            seg_lo = np.array([s.lo for s in segments])
            seg_hi = np.array([s.hi for s in segments])
            lo, hi = self._rows.lo, self._rows.hi
            gaps = _gaps(seg_lo, seg_hi, lo, hi)
            cosines = np.array([self._rows.label_cosines(s.label) for s in segments])  # pixel_count >= 1
            similarity = self._similarity(cosines, np.array([s.colour for s in segments]), self._rows.colour)
            candidate = (gaps <= p.merge_distance) & (similarity >= p.merge_feature_similarity)
            overlap = np.zeros_like(gaps)
            rows, cols = np.nonzero(candidate)
            for i, j in zip(rows, cols, strict=True):
                overlap[i, j] = _overlap(codes[i], self._tracks[j].codes)
            nested = np.zeros_like(candidate)
            nested[rows, cols] = _nested_pairs(seg_lo[rows], seg_hi[rows], lo[cols], hi[cols])
            feasible = candidate & ((overlap >= p.merge_overlap) | nested)
            cost = np.where(feasible, (1.0 - similarity) + (1.0 - overlap) + gaps / p.merge_distance, INFEASIBLE)
            rows, cols = linear_sum_assignment(cost)
            matched = {int(r): int(c) for r, c in zip(rows, cols, strict=True) if feasible[r, c]}
        touched = []
        for i, segment in enumerate(segments):
            if i in matched:
                self._extend(self._tracks[matched[i]], segment, codes[i])
                self._rows.update(matched[i], self._tracks[matched[i]])
                touched.append(matched[i])
            else:
                self._tracks.append(self._new_track(segment, codes[i]))
                self._rows.append(self._tracks[-1])
                self._uids.append(self._tracks[-1].uid)
                touched.append(len(self._tracks) - 1)
            self._offer_view(self._tracks[touched[-1]], segment, rgb)
        return touched

    def _offer_view(self, track: _Track, segment: SegmentObservation, rgb: np.ndarray) -> None:
        """Keep a copy of the segment's crop of ``rgb`` if it is among the track's
        ``encoder.views_per_instance`` best views (and the encoder reads views)."""
        if not self.encoder.reads_views:
            return
        count = self.encoder_config.views_per_instance
        key = (-segment.pixel_count, segment.frame_index)
        if len(track.views) >= count and key > track.views[-1].key:
            return
        pixels = np.array(padded_crop(rgb, segment.crop, self.encoder_config.crop_padding))
        track.views = _best_views([*track.views, _View(key, pixels)], count)

    def _similarity(self, cosines: np.ndarray, colours_a: np.ndarray, colours_b: np.ndarray) -> np.ndarray:
        """(A, B) feature similarity in [0, 1]: the (A, B) label ``cosines`` mixed with the colour
        Bhattacharyya coefficient."""
        w = self.params.colour_weight
        return (1.0 - w) * cosines + w * bhattacharyya(colours_a, colours_b)

    def _new_track(self, segment: SegmentObservation, codes: set[int]) -> _Track:
        p = self.params
        uid = f"w{self._next_uid}"
        self._next_uid += 1
        return _Track(
            uid=uid,
            sightings=[_sighting(segment)],
            cloud=TrackCloud((segment.step, segment.frame_index), segment.points, p.fold_points, p.voxel_size),
            labels={segment.label: segment.pixel_count},
            colour_sum=segment.colour * segment.pixel_count,
            pixels=segment.pixel_count,
            lo=segment.lo,
            hi=segment.hi,
            codes=codes,
            frames={segment.frame_index},
        )

    @staticmethod
    def _extend(track: _Track, segment: SegmentObservation, codes: set[int]) -> None:
        track.sightings.append(_sighting(segment))
        track.cloud.add((segment.step, segment.frame_index), segment.points)
        track.labels[segment.label] = track.labels.get(segment.label, 0) + segment.pixel_count
        track.colour_sum = track.colour_sum + segment.colour * segment.pixel_count
        track.pixels += segment.pixel_count
        track.colour = track.colour_sum / track.pixels
        track.lo = np.minimum(track.lo, segment.lo)
        track.hi = np.maximum(track.hi, segment.hi)
        track.codes |= codes
        track.frames.add(segment.frame_index)

    def _absorb(self, into: _Track, other: _Track) -> None:
        into.views = _best_views(into.views + other.views, self.encoder_config.views_per_instance)
        into.sightings = sorted(into.sightings + other.sightings, key=lambda s: (s.step, s.frame_index))
        into.cloud.absorb(other.cloud)
        for name, pixels in other.labels.items():
            into.labels[name] = into.labels.get(name, 0) + pixels
        into.colour_sum = into.colour_sum + other.colour_sum
        into.pixels += other.pixels
        into.colour = into.colour_sum / into.pixels
        into.lo = np.minimum(into.lo, other.lo)
        into.hi = np.maximum(into.hi, other.hi)
        into.codes |= other.codes
        into.frames |= other.frames

    # -- after the last frame ------------------------------------------------------------------

    def build(self) -> InstanceMap:
        """The visit's map: fuse the frames still waiting, merge fragments, read free-space
        evidence, link moving tracks, encode."""
        self._fuse_pending()
        aliases = {t.uid: t.uid for t in self._tracks}
        fragments = self._merge_fragments(list(self._tracks), aliases)
        vacated, arrived = self._free_space_evidence(fragments)
        tracks = self._link_moving(fragments, vacated, arrived, aliases)
        tracks.sort(key=lambda t: (t.first_step, t.sightings[0].frame_index, t.uid))
        final = {t.uid: f"v{self.visit}:{n}" for n, t in enumerate(tracks)}
        instances = self._instances(tracks, final, vacated)
        resolved = {}
        for uid, target in aliases.items():
            while aliases[target] != target:
                target = aliases[target]
            if target in final:
                resolved[uid] = final[target]
        built = InstanceMap(
            visit=self.visit,
            instances=tuple(instances),
            encoder=self.encoder.description,
            frames=self._fused,
            history=tuple(self._history or ()),
            aliases=resolved,
        )
        if self.prior is None:
            return built
        return dataclasses.replace(built, prior=cross_visit_evidence(self.prior, built, self.views(), self.params))

    def views(self) -> tuple[DepthView, ...]:
        """The kept frames that carry depth, as cross-visit evidence reads them (what a
        :class:`PriorVisit` keeps of this visit: no colour, no segments)."""
        self._fuse_pending()
        return tuple(frame.view for frame in self._store if frame.depth is not None)

    @property
    def frames_kept(self) -> tuple[int, int]:
        """(frames kept for the passes after the last frame, every how many-th frame that is)."""
        return len(self._store), self._store.stride

    def _merge_fragments(self, tracks: list[_Track], aliases: dict[str, str]) -> list[_Track]:
        """Merge pairs that never shared a frame and pass the segment-to-instance test."""
        p = self.params
        while len(tracks) > 1:
            lo = np.array([t.lo for t in tracks])
            hi = np.array([t.hi for t in tracks])
            labels = [t.labels for t in tracks]
            colours = np.array([t.colour for t in tracks])
            similarity = self._similarity(label_cosines(labels, labels), colours, colours)
            gaps = _gaps(lo, hi, lo, hi)
            candidate = (gaps <= p.merge_distance) & (similarity >= p.merge_feature_similarity)
            np.fill_diagonal(candidate, False)
            rows, cols = np.nonzero(np.triu(candidate))
            nested = _nested_pairs(lo[rows], hi[rows], lo[cols], hi[cols])
            best: tuple[float, int, int] | None = None
            for i, j, inside in zip(rows, cols, nested, strict=True):
                a, b = tracks[i], tracks[j]
                if a.frames & b.frames:
                    continue
                small, large = (a, b) if len(a.codes) <= len(b.codes) else (b, a)
                overlap = _overlap(small.codes, large.codes)
                if overlap < p.merge_overlap and not inside:
                    continue
                score = float(similarity[i, j] + overlap)
                if best is None or score > best[0]:
                    best = (score, int(i), int(j))
            if best is None:
                break
            _, i, j = best
            self._absorb(tracks[i], tracks[j])
            aliases[tracks[j].uid] = tracks[i].uid
            del tracks[j]
        return tracks

    def _free_space_evidence(self, tracks: list[_Track]) -> tuple[dict[str, int], dict[str, int]]:
        """Per track uid: the first step after its last sighting at which its place was seen empty
        (vacated), and the last step before its first sighting at which it was (arrived)."""
        p = self.params
        vacated: dict[str, int] = {}
        arrived: dict[str, int] = {}
        if not tracks:
            return vacated, arrived
        checks = CheckClouds.of(
            [np.concatenate(t.cloud.clouds()) for t in tracks],
            p,
            extents=np.array([t.hi - t.lo for t in tracks]),
        )
        # A segmenter whose labels never change (the simulator's) also shows an object gone where
        # its pixels carry another label: a thin object leaves almost no depth step on the surface
        # below it. A learned segmenter's labels change from frame to frame: depth only.
        other = None
        if self.segmenter.exact_labels:
            codes: dict[str, int] = {}
            owner_label = np.array([codes.setdefault(_majority(t.labels), len(codes)) for t in tracks])[checks.owner]
        for frame in self._store:
            if self.segmenter.exact_labels:
                other = _other_label(frame, codes, owner_label)
            counts = None if frame.depth is None else checks.counts(frame.view, p, other)
            if counts is None:
                continue
            n_visible, n_through, judged = counts
            seen_empty = judged & (n_through >= p.vacancy_fraction * n_visible)
            for i in np.nonzero(seen_empty)[0]:
                track = tracks[int(i)]
                if frame.index in track.frames or _label_in_box_view(track, frame, self.params.vacancy_margin):
                    continue
                if frame.step > track.last_step and track.uid not in vacated:
                    vacated[track.uid] = frame.step
                if frame.step < track.first_step:
                    arrived[track.uid] = frame.step
        return vacated, arrived

    def _link_moving(
        self, tracks: list[_Track], vacated: dict[str, int], arrived: dict[str, int], aliases: dict[str, str]
    ) -> list[_Track]:
        """Chain vacated fragments to their continuation: a vacated fragment is linked to the earliest
        later fragment with matching features that arrived or was itself vacated (one track of a moving
        object, with its latest fragment's geometry). The motion attribute marks tracks whose sightings
        lie at least ``mapping.motion_distance`` apart and vacated tracks with no continuation."""
        p = self.params
        ordered = sorted(tracks, key=lambda t: (t.first_step, t.uid))
        successor: dict[str, _Track] = {}
        taken: set[str] = set()
        for a in ordered:
            if a.uid not in vacated:
                continue
            candidates = [
                b
                for b in ordered
                if b.uid not in taken
                and b is not a
                and b.first_step > a.last_step
                and not (a.frames & b.frames)
                and (b.uid in arrived or b.uid in vacated)
            ]
            if not candidates:
                continue
            labels = [b.labels for b in candidates]
            colours = np.array([b.colour for b in candidates])
            similarity = self._similarity(label_cosines([a.labels], labels), a.colour[None], colours)[0]
            ok = [b for b, s in zip(candidates, similarity, strict=True) if s >= p.merge_feature_similarity]
            if ok:
                b = min(ok, key=lambda t: (t.first_step, t.uid))
                successor[a.uid] = b
                taken.add(b.uid)
        heads = [t for t in ordered if t.uid not in taken]
        out: list[_Track] = []
        for head in heads:
            chain = [head]
            while chain[-1].uid in successor:
                chain.append(successor[chain[-1].uid])
            if len(chain) == 1:
                out.append(head)
                continue
            track = _Track(
                uid=head.uid,
                sightings=[s for fragment in chain for s in fragment.sightings],
                cloud=chain[-1].cloud,
                labels=_summed_labels(chain),
                colour_sum=sum((f.colour_sum for f in chain), np.zeros_like(head.colour_sum)),
                pixels=sum(f.pixels for f in chain),
                lo=chain[-1].lo,
                hi=chain[-1].hi,
                codes=chain[-1].codes,
                frames=set().union(*(f.frames for f in chain)),
                fragments=chain,
                evidence=[f"track of {len(chain)} fragments, each seen gone before the next was seen arrive"],
                views=_best_views((v for f in chain for v in f.views), self.encoder_config.views_per_instance),
            )
            for fragment in chain[1:]:
                aliases[fragment.uid] = head.uid
            out.append(track)
        return out

    def _instances(self, tracks: list[_Track], final: dict[str, str], vacated: dict[str, int]) -> list[Instance]:
        p = self.params
        evidence_inputs: list[InstanceEvidence] = []
        geometry = []
        for track in tracks:
            cloud = track.fragments[-1].cloud if track.fragments else track.cloud
            points = fuse_points(cloud.clouds(), p.voxel_size, p.outlier_neighbours, p.outlier_std_ratio)
            geometry.append(points)
            label_pixels = track.labels
            views = [v.pixels for v in track.views]
            total = sum(label_pixels.values())
            evidence_inputs.append(InstanceEvidence({k: v / total for k, v in sorted(label_pixels.items())}, views))
        features = self.encoder.embed_instances(evidence_inputs) if tracks else np.zeros((0, 0))
        instances = []
        for n, track in enumerate(tracks):
            points = geometry[n]
            box = box_of(points)
            sightings = tuple(track.sightings)
            evidence = []
            if track.fragments:
                spread = _spread(np.array([s.position for s in sightings]))
                if spread >= p.motion_distance:
                    evidence = [*track.evidence, f"sightings {spread:.2f} m apart"]
            elif track.uid in vacated:
                evidence = [f"seen gone from its place at step {vacated[track.uid]}"]
            instances.append(
                Instance(
                    uid=final[track.uid],
                    position=box.center,
                    box=box,
                    points=points,
                    feature=features[n],
                    colour=track.colour,
                    labels=evidence_inputs[n].labels,
                    sightings=sightings,
                    moving=bool(evidence),
                    motion_evidence="; ".join(evidence),
                )
            )
        return instances


def _sighting(segment: SegmentObservation) -> Sighting:
    """The record a track keeps of a segment fused into it (its points go to the track's cloud)."""
    c = (segment.lo + segment.hi) / 2.0
    return Sighting(segment.frame_index, segment.step, (float(c[0]), float(c[1]), float(c[2])), segment.pixel_count)


def _spread(positions: np.ndarray) -> float:
    """Largest floor distance between two of the given world positions (metres)."""
    if len(positions) < 2:
        return 0.0
    floor = positions[:, [0, 2]]
    diff = floor[:, None, :] - floor[None]
    return float(np.sqrt((diff * diff).sum(axis=2)).max())


def _other_label(
    frame: KeptFrame, codes: dict[str, int], owner_label: np.ndarray
) -> Callable[[Projection], np.ndarray]:
    """Per projected point: whether ``frame``'s segment at its pixel carries another label than
    its instance's (``owner_label``, codes of ``codes``; no segment counts as another label)."""
    top = max((int(i) for i in frame.labels), default=0)
    table = np.full(top + 2, -1)
    for segment_id, name in frame.labels.items():
        if int(segment_id) > 0:
            table[int(segment_id)] = codes.get(name, -1)

    def other(seen: Projection) -> np.ndarray:
        label = np.full(len(seen.inside), -1)
        pixels = np.asarray(frame.segments)[seen.rows, seen.cols]
        label[seen.inside] = table[np.clip(pixels, 0, len(table) - 1)]
        return label != owner_label

    return other


def _label_in_box_view(track: _Track, frame: KeptFrame, margin: float) -> bool:
    """Whether the frame shows, inside the image rectangle of ``track``'s box, a pixel that the
    segmenter gives the track's label at a depth within the box's depth range (± ``margin``).
    Guards the point test against thin parts seen edge-on and points between surfaces."""
    corners = np.array([[x, y, z] for x in (track.lo[0], track.hi[0]) for y in (track.lo[1], track.hi[1])
                        for z in (track.lo[2], track.hi[2])])  # fmt: skip
    optical = (corners - frame.camera_position) @ frame.axes
    depth = optical[:, 2]
    if np.any(depth <= 0.0) or frame.depth is None:
        return False
    k = frame.intrinsics
    u = k.fx * optical[:, 0] / depth + k.cx
    v = k.fy * optical[:, 1] / depth + k.cy
    u0, u1 = max(int(np.floor(u.min())), 0), min(int(np.ceil(u.max())) + 1, k.width)
    v0, v1 = max(int(np.floor(v.min())), 0), min(int(np.ceil(v.max())) + 1, k.height)
    if u0 >= u1 or v0 >= v1:
        return False
    label = _majority(track.labels)
    ids = [i for i, name in frame.labels.items() if name == label]
    if not ids:
        return False
    window = np.isin(np.asarray(frame.segments)[v0:v1, u0:u1], ids)
    seen = np.asarray(frame.depth)[v0:v1, u0:u1][window]
    with np.errstate(invalid="ignore"):
        return bool(np.any((seen >= depth.min() - margin) & (seen <= depth.max() + margin)))


def _majority(labels: Mapping[str, int]) -> str:
    return min(labels.items(), key=lambda item: (-item[1], item[0]))[0]


def _summed_labels(tracks: list[_Track]) -> dict[str, int]:
    total: dict[str, int] = {}
    for track in tracks:
        for name, pixels in track.labels.items():
            total[name] = total.get(name, 0) + pixels
    return total


def build_map(
    observations: Iterable[Observation],
    config: MappingConfig,
    encoder: FeatureEncoder,
    visit: int,
    segmenter: Segmenter | None = None,
    prior: PriorVisit | None = None,
) -> InstanceMap:
    """The instance map of one visit from its observation stream (frames in recording order);
    ``segmenter`` None: the one ``config.segmenter`` names; ``prior``: the first visit, for a
    second visit's cross-visit evidence. Frames are segmented ``config.segmenter.batch_frames`` at a time."""
    return _built(observations, MapBuilder(config, encoder, visit, segmenter, prior, config.segmenter.batch_frames))[0]


def build_visits(
    visit1: Iterable[Observation],
    visit2: Iterable[Observation],
    config: MappingConfig,
    encoder: FeatureEncoder,
    segmenter: Segmenter | None = None,
) -> tuple[InstanceMap, InstanceMap]:
    """Both visits' maps, the second with the cross-visit evidence against the first (what
    mapping_node does for a visit 1 followed by its visit 2)."""
    batch = config.segmenter.batch_frames
    map1, builder1 = _built(visit1, MapBuilder(config, encoder, 1, segmenter, batch_frames=batch))
    prior = PriorVisit(map1, builder1.views())
    del builder1  # its frames' segment ids are not needed any more
    map2, _ = _built(visit2, MapBuilder(config, encoder, 2, segmenter, prior, batch))
    return map1, map2


def _built(observations: Iterable[Observation], builder: MapBuilder) -> tuple[InstanceMap, MapBuilder]:
    for observation in observations:
        builder.add(observation)
    return builder.build(), builder
