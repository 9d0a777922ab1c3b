"""The true category of every map instance: what its points lie inside (the oracle_grounding arm).

The agent's own map (its segmenter's instances) with each instance's category taken from ground
truth: the majority of its fused points by the smallest ground-truth box holding each.
Ground truth is read here and nowhere on the agent's side: the shares go to the oracle arm only
(:func:`ovman_query.arms.oracle_grounding`). Frames: AI2-THOR world (metres).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ovman_core.config import ConfigError
from ovman_core.world_state import ObjectState
from ovman_mapping.instances import InstanceMap
from ovman_query.arms import BACKGROUND, TrueShares


def check_margin(margin: float) -> None:
    """ConfigError unless ``margin`` (``benchmark_node.diagnostics.truth_margin``) is a finite
    distance ≥ 0, metres."""
    if not (math.isfinite(margin) and margin >= 0.0):
        raise ConfigError(
            f"config benchmark_node.diagnostics.truth_margin = {margin!r}: expected a finite distance >= 0 (metres)"
        )


def true_shares(instance_map: InstanceMap, objects: Iterable[ObjectState], margin: float) -> TrueShares:
    """Per instance uid of ``instance_map``: category → share of its points, each point (at wire
    precision) taking the category of the smallest box of ``objects`` that holds it, grown by
    ``margin`` on every side (fused points are voxel centres and depth is noisy), else
    :data:`ovman_query.arms.BACKGROUND`. ``objects``: every distinct box the visit's recording shows,
    so a mover's points find its box wherever they were seen. An instance without points has no
    shares (grounded by nothing)."""
    check_margin(margin)
    boxes = list(objects)
    categories = sorted({o.category for o in boxes})
    code = np.array([categories.index(o.category) for o in boxes], dtype=np.int64)
    lo = np.array([o.box.lo for o in boxes], dtype=float).reshape(-1, 3) - margin
    hi = np.array([o.box.hi for o in boxes], dtype=float).reshape(-1, 3) + margin
    volume = np.prod(hi - lo, axis=1)
    names = [*categories, BACKGROUND]
    out: dict[str, dict[str, float]] = {}
    for instance in instance_map:
        points = np.asarray(instance.points, dtype=np.float32).astype(float).reshape(-1, 3)
        out[instance.uid] = {}
        if not len(points):
            continue
        # Only the boxes that meet the instance's own box can hold one of its points.
        near = np.nonzero(np.all((lo <= points.max(axis=0)) & (hi >= points.min(axis=0)), axis=1))[0]
        code_of = np.full(len(points), len(categories), dtype=np.int64)  # background unless a box holds it
        if len(near):
            inside = np.all((points[:, None, :] >= lo[near][None]) & (points[:, None, :] <= hi[near][None]), axis=2)
            smallest = near[np.argmin(np.where(inside, volume[near][None], np.inf), axis=1)]
            held = inside.any(axis=1)
            code_of[held] = code[smallest[held]]
        votes = np.bincount(code_of, minlength=len(names))
        out[instance.uid] = {names[k]: int(votes[k]) / len(points) for k in np.nonzero(votes)[0]}
    return out
