"""Cross-visit free-space evidence: what one visit's depth frames saw of the other visit's places.

A pixel-reading segmenter makes spurious segments that nothing in the other visit matches; read as
changes they would swamp the real ones. So the second visit's mapper, holding the first visit's map
and depth (:class:`PriorVisit`), finds ``gone`` visit-1 instances whose place visit 2 saw empty and
``new`` visit-2 instances whose place visit 1 saw empty; the association claims a change only where
it was seen. The test reads **depth only**, never labels; an instance no frame judged is in neither
set. World frame: AI2-THOR's (metres, y up); depth along the optical axis, NaN or 0 where invalid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numba
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
    their depth along the optical axis (m), ``observed`` the frame's depth at their pixels (NaN
    outside) and ``rows``/``cols`` the pixels of the inside points."""

    inside: np.ndarray
    z: np.ndarray
    observed: np.ndarray
    rows: np.ndarray
    cols: np.ndarray


def project(points: np.ndarray, view: DepthView, max_depth: float) -> Projection:
    """Project world ``points`` (N, 3) into ``view`` (see :class:`Projection`): optical
    coordinates ``(points - camera) @ axes``, then per point in front within ``max_depth`` the
    pixel ``rint(f x / z + c)`` on each axis. The rotation is numpy's product; the per-point
    steps run compiled (:func:`_offsets`, :func:`_pixels`: numpy's broadcast subtraction alone,
    three values a row, took a third of this), with the same floats."""
    k = view.intrinsics
    points = np.asarray(points, dtype=float)
    optical = _offsets(points, np.asarray(view.camera_position, dtype=float)) @ view.axes
    inside, rows, cols, observed = _pixels(optical, view.depth, k.fx, k.fy, k.cx, k.cy, k.width, k.height, max_depth)
    return Projection(inside, optical[:, 2], observed, rows, cols)


@numba.njit(cache=True)
def _offsets(points: np.ndarray, origin: np.ndarray) -> np.ndarray:
    out = np.empty((points.shape[0], 3))
    for i in range(points.shape[0]):
        for j in range(3):
            out[i, j] = points[i, j] - origin[j]
    return out


@numba.njit(cache=True)
def _pixels(
    optical: np.ndarray,
    depth: np.ndarray,
    fx: float,
    fy: float,
    cx: float,
    cy: float,
    width: int,
    height: int,
    max_depth: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(inside, rows, cols, observed) of :class:`Projection` for ``optical`` (N, 3) points."""
    n = optical.shape[0]
    inside = np.zeros(n, dtype=np.bool_)
    rows = np.empty(n, dtype=np.int64)
    cols = np.empty(n, dtype=np.int64)
    observed = np.full(n, np.nan)
    m = 0
    for i in range(n):
        z = optical[i, 2]
        if z > 0.0 and z <= max_depth:
            u = np.rint(fx * optical[i, 0] / z + cx)
            v = np.rint(fy * optical[i, 1] / z + cy)
            if u >= 0 and u < width and v >= 0 and v < height:
                inside[i] = True
                rows[m], cols[m] = int(v), int(u)
                observed[i] = depth[rows[m], cols[m]]
                m += 1
    return inside, rows[:m], cols[:m], observed


def check_points(points: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``points`` (N, 3), evenly subsampled in their order."""
    if len(points) > count:
        return points[np.linspace(0, len(points) - 1, count).round().astype(int)]
    return points


@dataclasses.dataclass(frozen=True)
class CheckClouds:
    """The check points of N instances, stacked, for the free-space tests (within a visit, in
    :mod:`ovman_mapping.fusion`, and across visits): ``points`` (P, 3) world metres, ``owner``
    (P,) the instance of each point, ``needed`` (N,) the fewest visible points that judge an
    instance (``mapping.vacancy_min_points``, or all its points when it has fewer) and ``face``
    (N,) the area of its box's largest face, m²."""

    points: np.ndarray
    owner: np.ndarray
    needed: np.ndarray
    face: np.ndarray

    @classmethod
    def of(cls, clouds: Sequence[np.ndarray], params: MappingParams, extents: np.ndarray | None = None) -> CheckClouds:
        """From per-instance point clouds (each (n, 3), world metres), evenly subsampled to
        ``mapping.vacancy_check_points``; ``extents`` (N, 3): the boxes' sizes (default: those of
        the check points)."""
        clouds = [check_points(np.asarray(c, dtype=float).reshape(-1, 3), params.vacancy_check_points) for c in clouds]
        sizes = np.array([len(c) for c in clouds], dtype=int)
        if extents is None:
            extents = np.array([c.max(axis=0) - c.min(axis=0) if len(c) else np.zeros(3) for c in clouds])
        extents = np.asarray(extents, dtype=float).reshape(-1, 3)
        return cls(
            points=np.concatenate(clouds) if clouds else np.zeros((0, 3)),
            owner=np.repeat(np.arange(len(clouds)), sizes),
            needed=np.minimum(params.vacancy_min_points, sizes),
            face=np.max(extents * np.roll(extents, 1, axis=1), axis=1),
        )

    def counts(
        self, view: DepthView, params: MappingParams, other: Callable[[Projection], np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per instance, as ``view`` sees it: (visible points, points seen through, judged); None when
        no point falls in the image. A point is visible when it projects in front within
        ``mapping.max_depth`` where the depth is valid and not nearer than it by more than
        ``mapping.vacancy_margin`` (a hidden point says nothing), seen through when the depth lies
        more than the margin behind it; an instance is judged when ``needed`` points are visible and
        it would cover ``mapping.vacancy_min_pixels``. ``other``: per point, True
        where the view shows something else there (fusion's label evidence, exact labels only);
        such a visible point counts as seen through too."""
        p, count = params, len(self.needed)
        seen = project(self.points, view, p.max_depth)
        if not seen.inside.any():
            return None
        observed, z, inside, owner = seen.observed, seen.z, seen.inside, self.owner
        with np.errstate(invalid="ignore"):
            visible = inside & np.isfinite(observed) & (observed > 0.0) & (observed >= z - p.vacancy_margin)
            through = visible & (observed > z + p.vacancy_margin)
        if other is not None:
            through |= visible & other(seen)
        n_visible = np.bincount(owner[visible], minlength=count)
        n_through = np.bincount(owner[through], minlength=count)
        n_inside = np.bincount(owner[inside], minlength=count)
        mean_depth = np.bincount(owner[inside], weights=z[inside], minlength=count) / np.maximum(n_inside, 1)
        k = view.intrinsics
        # Judge an instance only where it would have been large in the image, had it been there.
        area = k.fx * k.fy * self.face / np.maximum(mean_depth, 1e-6) ** 2
        judged = (n_visible >= self.needed) & (n_visible > 0) & (area >= p.vacancy_min_pixels)
        return n_visible, n_through, judged


def seen_empty(clouds: Sequence[np.ndarray], views: Sequence[DepthView], params: MappingParams) -> np.ndarray:
    """(N,) bool per point cloud (world, metres): the views saw its place empty.

    A judging view votes empty when at least ``mapping.cross_visit_empty_fraction`` of the visible
    points are seen through, occupied when at most ``cross_visit_occupied_fraction`` are, and abstains
    between; a place is empty when more views voted empty than occupied. (Lower than fusion's
    ``vacancy_fraction``: a thin object's points lie a few centimetres above the surface it stood on,
    and seen from above part of them do not pass the margin.)"""
    p = params
    checks = CheckClouds.of(clouds, p)
    empty_votes = np.zeros(len(clouds), dtype=int)
    occupied_votes = np.zeros(len(clouds), dtype=int)
    for view in views if len(clouds) else ():
        counts = checks.counts(view, p)
        if counts is None:
            continue
        n_visible, n_through, judged = counts
        empty_votes += judged & (n_through >= p.cross_visit_empty_fraction * n_visible)
        occupied_votes += judged & (n_through <= p.cross_visit_occupied_fraction * n_visible)
    return (empty_votes > 0) & (empty_votes > occupied_votes)


def cross_visit_evidence(
    prior: PriorVisit, instance_map: InstanceMap, views: Sequence[DepthView], params: MappingParams
) -> CrossVisitEvidence:
    """The evidence of a second visit's map ``instance_map`` (its frames ``views``) against the
    first visit ``prior``: ``gone``, the prior's instances ``views`` saw empty; ``new``, this map's
    instances the prior's views saw empty."""
    gone = seen_empty([i.points for i in prior.map], views, params)
    new = seen_empty([i.points for i in instance_map], prior.views, params)
    return CrossVisitEvidence(
        gone=frozenset(i.uid for i, g in zip(prior.map, gone, strict=True) if g),
        new=frozenset(i.uid for i, n in zip(instance_map, new, strict=True) if n),
    )
