"""Success tests and SPL (TASK.md §3). Floor points (x, z) and footprints in metres."""

from __future__ import annotations

import math

from ovman_core.boxes import Footprint, Vec2

ROUNDING_TOLERANCE = 1e-9
"""(m) Slack on the inclusive radius tests so that a point exactly at R is not lost to rounding."""


def embodied_success(stop: Vec2 | None, region: Footprint, success_radius: float) -> bool:
    """Eq. 4: the agent stopped (``stop`` is not None) within ``success_radius`` of the footprint.

    The distance is 0 inside the footprint, so a vacated place counts when the agent stands on it.
    """
    if stop is None:
        return False
    return region.distance_to(stop) <= success_radius + ROUNDING_TOLERANCE


def static_success(predicted: Vec2 | None, answer_point: Vec2, gate_radius: float) -> bool:
    """Static gate: the predicted point is within ``gate_radius`` of the answer point; abstaining
    (``predicted`` is None) fails."""
    if predicted is None:
        return False
    distance = math.hypot(predicted[0] - answer_point[0], predicted[1] - answer_point[1])
    return distance <= gate_radius + ROUNDING_TOLERANCE


def spl(success: bool, shortest_path: float, executed_path: float) -> float:
    """Success weighted by path length (Anderson et al. 2018): ``S · l / max(p, l)``.

    ``shortest_path`` (l) is the shortest reachable path from the start to any position that
    passes the success test; ``executed_path`` (p) the length the agent walked, metres.
    """
    if shortest_path < 0 or executed_path < 0:
        raise ValueError(f"path lengths must be non-negative, got l={shortest_path}, p={executed_path}")
    if not success:
        return 0.0
    longest = max(executed_path, shortest_path)
    return 1.0 if longest == 0 else shortest_path / longest
