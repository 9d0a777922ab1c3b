"""Cross-visit free-space evidence: what one visit's depth frames saw of the other visit's places.

A segmenter that reads pixels makes spurious segments, and every one seen once or twice becomes an
instance that nothing in the other visit matches. Read as changes, they swamp the real ones. So the
mapper of a second visit, holding the first visit's map and its frames' depth (:class:`PriorVisit`),
asks each frame of the other visit whether it saw an instance's place empty:

- ``gone``: visit-1 instances whose place the visit-2 frames saw empty;
- ``new``: visit-2 instances whose place the visit-1 frames saw empty.

The association (:mod:`ovman_query.association`) then claims a change only where it was seen: a
removal needs ``gone``, an arrival ``new``, a relocation both, and a stayed pair neither.

The test reads **depth only**, never labels (a spurious segment sits on a real surface, which the
other visit sees at the same depth whatever it calls it). Per instance, its check points are its
fused points, evenly subsampled to ``mapping.vacancy_check_points``. Per frame of the other visit:

- a point is *visible* when it projects into the image, in front of the camera within
  ``mapping.max_depth``, where the observed depth is valid and not nearer than the point by more
  than ``mapping.vacancy_margin`` (a point hidden behind something nearer says nothing);
- the frame *judges* the instance when at least ``min(mapping.vacancy_min_points, n)`` points are
  visible (n: its check points) and the instance would cover ``mapping.vacancy_min_pixels`` there;
- it sees the place *empty* when at least ``mapping.cross_visit_empty_fraction`` of the visible
  points have the observed depth more than ``mapping.vacancy_margin`` behind them (the view passes
  through where the object was), *occupied* when at most ``mapping.cross_visit_occupied_fraction``
  have, and abstains between the two. (Lower than the within-visit ``vacancy_fraction``, which also
  reads labels: a thin object's points lie a few centimetres above the surface it stood on, and
  seen from above part of them do not pass the margin.)

The place was seen empty when more frames saw it empty than occupied. An instance no frame
judged is in neither set: the other visit did not look, so nothing is claimed.

World frame: AI2-THOR's (metres, y up); depth along the optical axis, metres, NaN or 0 where
invalid; ``axes`` rows are the camera's optical x, y, z axes in the world frame.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ovman_core.camera import Intrinsics
from ovman_core.config import MappingParams
from ovman_mapping.instances import CrossVisitEvidence, InstanceMap


@dataclasses.dataclass(frozen=True)
class DepthView:
    """What the evidence needs of one frame: its step, depth (H, W) float32 metres (NaN or 0 where
    invalid), intrinsics, the camera position (world, metres) and its optical axes (3, 3)."""

    step: int
    depth: np.ndarray
    intrinsics: Intrinsics
    camera_position: np.ndarray
    axes: np.ndarray


@dataclasses.dataclass(frozen=True)
class PriorVisit:
    """The first visit as the mapper of the second holds it: its map and its frames' depth."""

    map: InstanceMap
    views: tuple[DepthView, ...]


@dataclasses.dataclass(frozen=True)
class Projection:
    """Points seen from one view: ``inside`` (N,) in the image and in front within the range, ``z``
    their depth along the optical axis (m) and ``observed`` the frame's depth at their pixels (NaN
    outside), ``rows``/``cols`` the pixels of the inside points."""

    inside: np.ndarray
    z: np.ndarray
    observed: np.ndarray
    rows: np.ndarray
    cols: np.ndarray


def project(points: np.ndarray, view: DepthView, max_depth: float) -> Projection:
    """Project world ``points`` (N, 3) into ``view`` (see :class:`Projection`)."""
    k = view.intrinsics
    optical = (points - view.camera_position) @ view.axes
    z = optical[:, 2]
    in_front = (z > 0.0) & (z <= max_depth)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.rint(k.fx * optical[:, 0] / z + k.cx)
        v = np.rint(k.fy * optical[:, 1] / z + k.cy)
    inside = in_front & (u >= 0) & (u < k.width) & (v >= 0) & (v < k.height)
    rows, cols = v[inside].astype(int), u[inside].astype(int)
    observed = np.full(len(points), np.nan)
    observed[inside] = view.depth[rows, cols]
    return Projection(inside, z, observed, rows, cols)


def check_points(points: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``points`` (N, 3), evenly subsampled in their order."""
    if len(points) > count:
        return points[np.linspace(0, len(points) - 1, count).round().astype(int)]
    return points


def seen_empty(clouds: Sequence[np.ndarray], views: Sequence[DepthView], params: MappingParams) -> np.ndarray:
    """(N,) bool per point cloud (world, metres): the views saw its place empty (module docstring)."""
    p = params
    count = len(clouds)
    if not count or not views:
        return np.zeros(count, dtype=bool)
    clouds = [check_points(np.asarray(c, dtype=float).reshape(-1, 3), p.vacancy_check_points) for c in clouds]
    sizes = np.array([len(c) for c in clouds])
    points = np.concatenate(clouds)
    owner = np.repeat(np.arange(count), sizes)
    lo = np.array([c.min(axis=0) if len(c) else np.zeros(3) for c in clouds])
    hi = np.array([c.max(axis=0) if len(c) else np.zeros(3) for c in clouds])
    extent = hi - lo
    face = np.max(extent * np.roll(extent, 1, axis=1), axis=1)  # the largest face of the box, m²
    needed = np.minimum(p.vacancy_min_points, sizes)
    empty_votes = np.zeros(count, dtype=int)
    occupied_votes = np.zeros(count, dtype=int)
    for view in views:
        seen = project(points, view, p.max_depth)
        if not seen.inside.any():
            continue
        observed, z = seen.observed, seen.z
        with np.errstate(invalid="ignore"):
            visible = seen.inside & np.isfinite(observed) & (observed > 0.0) & (observed >= z - p.vacancy_margin)
            through = visible & (observed > z + p.vacancy_margin)
        n_visible = np.bincount(owner[visible], minlength=count)
        n_through = np.bincount(owner[through], minlength=count)
        n_inside = np.bincount(owner[seen.inside], minlength=count)
        mean_depth = np.bincount(owner[seen.inside], weights=z[seen.inside], minlength=count) / np.maximum(n_inside, 1)
        k = view.intrinsics
        area = k.fx * k.fy * face / np.maximum(mean_depth, 1e-6) ** 2
        judged = (sizes > 0) & (n_visible >= needed) & (n_visible > 0) & (area >= p.vacancy_min_pixels)
        empty_votes += judged & (n_through >= p.cross_visit_empty_fraction * n_visible)
        occupied_votes += judged & (n_through <= p.cross_visit_occupied_fraction * n_visible)
    return (empty_votes > 0) & (empty_votes > occupied_votes)


def cross_visit_evidence(
    prior: PriorVisit, instance_map: InstanceMap, views: Sequence[DepthView], params: MappingParams
) -> CrossVisitEvidence:
    """The evidence of a second visit's map ``instance_map`` (its frames ``views``) against the
    first visit ``prior`` (see the module docstring)."""
    gone = seen_empty([i.points for i in prior.map], views, params)
    new = seen_empty([i.points for i in instance_map], prior.views, params)
    return CrossVisitEvidence(
        gone=frozenset(i.uid for i, g in zip(prior.map, gone, strict=True) if g),
        new=frozenset(i.uid for i, n in zip(instance_map, new, strict=True) if n),
    )
