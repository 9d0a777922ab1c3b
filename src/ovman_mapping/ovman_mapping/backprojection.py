"""Back-project the segments of one camera frame into world points.

Input: an :class:`ovman_core.observation.Observation` (planar depth in metres, per-frame segment ids,
camera centre, yaw/horizon); output: one :class:`SegmentObservation` per usable segment, its points
in the **AI2-THOR world frame** (metres, y up, left-handed), voxel-downsampled and outlier-cleaned.
Bad input (no depth, NaN/inf or non-positive depth, beyond ``mapping.max_depth``, tiny segments)
yields fewer segments, never an error. Ground-truth instance ids are never read: segments are
identified only within their frame.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

import numpy as np
from PIL import Image
from scipy.spatial import cKDTree

from ovman_core.boxes import Box3, Vec3
from ovman_core.camera import Intrinsics
from ovman_core.config import MappingParams
from ovman_core.frames import optical_axes_thor

_CODE_OFFSET = 1 << 20


class FrameFormatError(ValueError):
    """An observation's arrays do not have the documented shapes or types."""


@dataclasses.dataclass(frozen=True)
class CellLattice:
    """Where back-projection samples segments that come in cells off the image's pixel grid (a
    camera read through a model's geometry, :mod:`ovman_mapping.camera_resampling`): one camera row
    per cell row the camera sees and one column per cell column, near each cell's centre.

    - ``rows`` (n,), ``columns`` (m,): int64, ascending, the sampled camera rows and columns.
    - ``row_spans`` (n, 2), ``column_spans`` (m, 2): int64, each cell's first and last camera row or
      column (inclusive); the ids are constant on each cell's span.
    """

    rows: np.ndarray
    columns: np.ndarray
    row_spans: np.ndarray
    column_spans: np.ndarray


@dataclasses.dataclass(frozen=True)
class SegmentObservation:
    """One segment of one frame, back-projected into the world.

    - ``points``: float64 (N, 3), N >= 1, world frame (metres), voxel-downsampled, outliers removed.
    - ``pixel_count``: pixels of the segment in the image (before any depth filtering).
    - ``crop``: pixel rectangle ``(row0, col0, row1, col1)``, half-open, around the segment.
    - ``colour``: float64 (bins², ) hue–saturation histogram of the segment's pixels, sums to 1.
    - ``frame_index``: position of the frame in the visit's stream; ``step``: the world's step.
    """

    frame_index: int
    step: int
    label: str
    points: np.ndarray
    pixel_count: int
    crop: tuple[int, int, int, int]
    colour: np.ndarray

    @property
    def centroid(self) -> Vec3:
        c = self.points.mean(axis=0)
        return (float(c[0]), float(c[1]), float(c[2]))

    @functools.cached_property
    def lo(self) -> np.ndarray:
        """float64 (3,): the smallest coordinate of the points on each axis (world, metres)."""
        return self.points.min(axis=0)

    @functools.cached_property
    def hi(self) -> np.ndarray:
        """float64 (3,): the largest coordinate of the points on each axis (world, metres)."""
        return self.points.max(axis=0)

    @property
    def box(self) -> Box3:
        lo, hi = self.lo, self.hi
        return Box3((float(lo[0]), float(lo[1]), float(lo[2])), (float(hi[0]), float(hi[1]), float(hi[2])))


def camera_points(
    intrinsics: Intrinsics,
    camera_position: Vec3,
    yaw_deg: float,
    horizon_deg: float,
    u: np.ndarray,
    v: np.ndarray,
    depth: np.ndarray,
) -> np.ndarray:
    """World points (N, 3) of pixels (u right, v down) with **planar** depth (metres along the
    optical axis), for a camera at ``camera_position`` (world, metres) with AI2-THOR yaw and horizon
    (degrees). Pixels must have finite positive depth (filter first)."""
    optical = intrinsics.back_project(u, v, depth)
    axes = optical_axes_thor(yaw_deg, horizon_deg)
    return optical @ axes.T + np.asarray(camera_position, dtype=float)


def voxel_downsample(points: np.ndarray, voxel_size: float) -> np.ndarray:
    """Mean point per occupied voxel of edge ``voxel_size`` (metres); (N, 3) → (M, 3), M <= N.

    The output is ordered by voxel key, so it does not depend on the input order.
    """
    if len(points) == 0:
        return np.empty((0, 3))
    _, inverse, counts = np.unique(voxel_codes(points, voxel_size), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    sums = np.stack([np.bincount(inverse, weights=points[:, k], minlength=len(counts)) for k in range(3)], axis=1)
    return sums / counts[:, None]


def voxel_codes(points: np.ndarray, voxel_size: float) -> np.ndarray:
    """One int64 code per point naming its voxel (edge ``voxel_size``, metres); valid within
    ±2^20 voxels of the origin on each axis."""
    keys = np.floor(points / voxel_size).astype(np.int64) + _CODE_OFFSET
    return (keys[:, 0] << 42) | (keys[:, 1] << 21) | keys[:, 2]


def remove_outliers(points: np.ndarray, neighbours: int, std_ratio: float) -> np.ndarray:
    """Statistical outlier removal: drop points whose mean distance to their ``neighbours``
    nearest neighbours exceeds the mean of that statistic plus ``std_ratio`` standard deviations.

    Sets with no more than ``neighbours`` points are returned unchanged (too few to judge).
    """
    if len(points) <= neighbours:
        return points
    # An unbalanced tree (split at the midpoint) builds faster and gives the same distances.
    distances, _ = cKDTree(points, balanced_tree=False).query(points, k=neighbours + 1)
    mean_distance = distances[:, 1:].mean(axis=1)
    limit = mean_distance.mean() + std_ratio * mean_distance.std()
    return points[mean_distance <= limit]


def nearest_largest_depth_parts(ids: np.ndarray, depth: np.ndarray, gap: float) -> np.ndarray:
    """(N,) bool: the pixels (segment ``ids``, ``depth`` metres) of each segment's largest *depth
    part*. A segment's depths, sorted, are split wherever consecutive ones differ by more than
    ``gap``; the part with the most pixels is kept (ties: the nearest). A mask that spills over an
    object's edge takes in the background metres behind it; this keeps the object."""
    order = np.lexsort((depth, ids))
    ids_sorted, depth_sorted = ids[order], depth[order]
    new_segment = np.r_[True, ids_sorted[1:] != ids_sorted[:-1]]
    starts = new_segment | np.r_[False, np.diff(depth_sorted) > gap]
    part = np.cumsum(starts) - 1
    sizes = np.bincount(part)
    segment_of_part = np.cumsum(new_segment)[starts] - 1
    # Per segment, its first part in the order (segment, most pixels first, nearest first).
    ranked = np.lexsort((np.arange(len(sizes)), -sizes, segment_of_part))
    first = np.r_[True, segment_of_part[ranked][1:] != segment_of_part[ranked][:-1]]
    kept = np.zeros(len(sizes), dtype=bool)
    kept[ranked[first]] = True
    keep = np.empty(len(ids), dtype=bool)
    keep[order] = kept[part]
    return keep


def segment_frame(
    rgb: np.ndarray,
    depth: np.ndarray | None,
    segments: np.ndarray,
    labels: Mapping[int, str],
    intrinsics: Intrinsics,
    camera_position: Vec3,
    yaw_deg: float,
    horizon_deg: float,
    params: MappingParams,
    colour_bins: int,
    frame_index: int = 0,
    step: int = 0,
    cell: int = 1,
    lattice: CellLattice | None = None,
) -> list[SegmentObservation]:
    """Every usable segment of one frame, back-projected (see the module docstring).

    A segment is usable when it has at least ``params.min_segment_pixels`` pixels and, on the
    sampling lattice, at least ``params.min_segment_points`` pixels with valid depth (finite,
    positive, at most ``params.max_depth``). The lattice has stride ``params.pixel_stride`` from
    pixel (0, 0); when ``segments`` come in ``cell`` × ``cell`` blocks of one id
    (:attr:`ovman_mapping.segmenter.Segmentation.cell`) larger than that stride, it holds one pixel
    a block, the block's centre pixel (``cell // 2`` down and right); with a ``lattice``
    (:attr:`ovman_mapping.segmenter.Segmentation.lattice`) it is the lattice's pixels, one a cell, and
    a segment's pixels are its cells' spans. Segments are returned
    in raster order of their first sampled pixel (never in id order); ``labels`` maps segment id →
    category label (a segment without a label gets the empty string).
    """
    height, width = intrinsics.height, intrinsics.width
    if segments.shape != (height, width):
        raise FrameFormatError(
            f"frame {frame_index}: segments have shape {segments.shape}, intrinsics say {(height, width)}"
        )
    if rgb.shape != (height, width, 3):
        raise FrameFormatError(f"frame {frame_index}: rgb has shape {rgb.shape}, expected {(height, width, 3)}")
    if depth is None:
        return []
    if depth.shape != (height, width):
        raise FrameFormatError(f"frame {frame_index}: depth has shape {depth.shape}, expected {(height, width)}")
    segments = np.asarray(segments)
    if lattice is not None:  # one pixel a cell tells its segment; its span, how many pixels
        sub_seg = segments[np.ix_(lattice.rows, lattice.columns)].astype(np.int64)
        row_extent, column_extent = (
            np.diff(spans, axis=1)[:, 0] + 1 for spans in (lattice.row_spans, lattice.column_spans)
        )
        counts = np.bincount(sub_seg.ravel(), weights=np.outer(row_extent, column_extent).ravel())
        present = np.flatnonzero(counts[1:]) + 1
        pixel_counts = np.rint(counts[present]).astype(np.int64)
    elif cell > 1 and height % cell == 0 and width % cell == 0:  # one pixel a block tells its segment
        present, pixel_counts = _segment_sizes(segments[::cell, ::cell].astype(np.int64))
        pixel_counts = pixel_counts * (cell * cell)
    else:
        present, pixel_counts = _segment_sizes(segments.astype(np.int64))
    if present.size == 0:
        return []
    stride, offset = (cell, cell // 2) if cell > params.pixel_stride else (params.pixel_stride, 0)
    if lattice is not None:
        sub_depth = np.asarray(depth)[np.ix_(lattice.rows, lattice.columns)].astype(float)
    else:
        sub_seg = segments[offset::stride, offset::stride].astype(np.int64)
        sub_depth = np.asarray(depth)[offset::stride, offset::stride].astype(float)
    # Index of each sampled pixel's segment in ``present`` (background and unknown ids: none).
    slot = np.searchsorted(present, sub_seg)
    slot_ok = (sub_seg > 0) & (slot < len(present))
    usable = np.zeros(sub_seg.shape, dtype=bool)
    usable[slot_ok] = pixel_counts[slot[slot_ok]] >= params.min_segment_pixels
    with np.errstate(invalid="ignore"):
        valid = usable & np.isfinite(sub_depth) & (sub_depth > 0.0) & (sub_depth <= params.max_depth)
    rows, cols = np.nonzero(valid)
    if len(rows) == 0:
        return []
    if params.segment_depth_gap > 0.0:
        keep = nearest_largest_depth_parts(sub_seg[rows, cols], sub_depth[rows, cols], params.segment_depth_gap)
        rows, cols = rows[keep], cols[keep]
    if lattice is not None:
        v, u = lattice.rows[rows], lattice.columns[cols]
        v0, v1 = lattice.row_spans[rows, 0], lattice.row_spans[rows, 1] + 1
        u0, u1 = lattice.column_spans[cols, 0], lattice.column_spans[cols, 1] + 1
    else:
        v, u = rows * stride + offset, cols * stride + offset
        v0, v1, u0, u1 = v - offset, v - offset + stride, u - offset, u - offset + stride
    world = camera_points(
        intrinsics, camera_position, yaw_deg, horizon_deg, u.astype(float), v.astype(float), sub_depth[rows, cols]
    )
    ids = sub_seg[rows, cols]
    codes = voxel_codes(world, params.voxel_size)
    # Sort by segment, then voxel: segments and their voxels become contiguous runs.
    order = np.lexsort((codes, ids))
    ids, codes, world, v, u = ids[order], codes[order], world[order], v[order], u[order]
    v0, v1, u0, u1 = v0[order], v1[order], u0[order], u1[order]
    segment_starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    segment_ends = np.r_[segment_starts[1:], len(ids)]
    voxel_starts = np.flatnonzero(np.r_[True, (ids[1:] != ids[:-1]) | (codes[1:] != codes[:-1])])
    voxel_points = np.add.reduceat(world, voxel_starts, axis=0) / np.diff(np.r_[voxel_starts, len(ids)])[:, None]
    voxel_bounds = np.searchsorted(voxel_starts, np.r_[segment_starts, len(ids)])
    row0, row1 = np.minimum.reduceat(v0, segment_starts), np.maximum.reduceat(v1, segment_starts)
    col0, col1 = np.minimum.reduceat(u0, segment_starts), np.maximum.reduceat(u1, segment_starts)
    colours = _segment_histograms(
        rgb[v, u],
        np.repeat(np.arange(len(segment_starts)), segment_ends - segment_starts),
        len(segment_starts),
        colour_bins,
    )
    counts_of = dict(zip(present.tolist(), pixel_counts.tolist(), strict=True))
    # Output order: by the first sampled pixel in raster order, so it never depends on the ids.
    first_pixel = np.minimum.reduceat(v * width + u, segment_starts)
    out: list[SegmentObservation] = []
    for k in np.argsort(first_pixel, kind="stable").tolist():
        start, end = int(segment_starts[k]), int(segment_ends[k])
        if end - start < params.min_segment_points:
            continue
        segment_id = int(ids[start])
        # A copy: a track keeps its sightings' points, and a view would keep the whole frame's.
        points = voxel_points[voxel_bounds[k] : voxel_bounds[k + 1]].copy()
        if params.segment_outlier_removal:
            points = remove_outliers(points, params.outlier_neighbours, params.outlier_std_ratio)
        out.append(
            SegmentObservation(
                frame_index=frame_index,
                step=step,
                label=str(labels.get(segment_id, "")),
                points=points,
                pixel_count=int(counts_of[segment_id]),
                crop=(int(row0[k]), int(col0[k]), int(min(row1[k], height)), int(min(col1[k], width))),
                colour=colours[k],
            )
        )
    return out


def _segment_sizes(seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, pixel counts) of the segments (id > 0) in ``seg``, ids ascending: one bincount when
    the ids are small (a segmenter's 1..n), else a sort."""
    top = int(seg.max(initial=0))
    if top <= 4 * seg.size:
        counts = np.bincount(seg[seg > 0], minlength=top + 1)
        present = np.flatnonzero(counts)
        return present, counts[present]
    return np.unique(seg[seg > 0], return_counts=True)


def _segment_histograms(rgb_samples: np.ndarray, owner: np.ndarray, segments: int, bins: int) -> np.ndarray:
    """(segments, bins²) L1-normalised hue × saturation histograms of uint8 RGB samples (N, 3)
    owned by segment ``owner`` (N,); hue and saturation as PIL's HSV conversion gives them."""
    rgb = rgb_samples.astype(np.int64)
    cell = hue_saturation_cells(bins)[(rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]]
    counts = np.bincount(owner * bins * bins + cell, minlength=segments * bins * bins).reshape(segments, bins * bins)
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)


@functools.lru_cache(maxsize=2)
def hue_saturation_cells(bins: int) -> np.ndarray:
    """(2^24,) the hue × saturation cell, ``(h * bins >> 8) * bins + (s * bins >> 8)``, of every
    24-bit colour (index ``r << 16 | g << 8 | b``), h and s (0-255) from PIL's HSV conversion.

    Built once per process (0.4 s: PIL converts all the colours, a million at a time), 16 MB for
    ``bins`` up to 16: a frame's histograms are then a table lookup instead of a conversion through
    PIL (0.11 ms a frame), with the same cells by construction.
    """
    table = np.empty(1 << 24, dtype=np.uint8 if bins <= 16 else np.uint16)
    low = np.arange(1 << 20, dtype=np.int64)
    chunk = np.empty((1 << 20, 3), dtype=np.uint8)
    chunk[:, 1], chunk[:, 2] = (low >> 8) & 255, low & 255
    for k in range(16):
        chunk[:, 0] = (k << 4) | (low >> 16)
        hsv = np.asarray(Image.fromarray(chunk.reshape(1024, 1024, 3)).convert("HSV")).reshape(-1, 3).astype(np.int64)
        table[k << 20 : (k + 1) << 20] = ((hsv[:, 0] * bins) >> 8) * bins + ((hsv[:, 1] * bins) >> 8)
    return table
