"""Grounding a noun phrase in one visit's map (TASK.md §5.3).

``s_i = ⟨f_i, f_q⟩`` with unit instance features ``f_i`` and the unit text embedding ``f_q`` of the
noun phrase; the grounded set is ``G_v = {i : s_i ≥ max_j s_j − δ_g}``: every instance within
``δ_g`` of the best score, so that a near-tie does not discard the right instance.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ovman_mapping.instances import InstanceMap


class GroundingError(ValueError):
    """Features and query embedding do not live in the same space."""


@dataclasses.dataclass(frozen=True)
class Grounding:
    """Scores of one visit's instances (in map order, keyed by uid) and the grounded uids, best first."""

    scores: dict[str, float]
    grounded: tuple[str, ...]
    delta_g: float

    @property
    def best(self) -> float | None:
        """The highest score, None for an empty map."""
        return max(self.scores.values()) if self.scores else None

    def is_grounded(self, uid: str) -> bool:
        return uid in self.grounded


def grounded_indices(scores: np.ndarray, delta_g: float) -> np.ndarray:
    """Indices ``i`` with ``scores[i] >= max(scores) − delta_g``, best first (ties in index order)."""
    scores = np.asarray(scores, dtype=float)
    if scores.size == 0:
        return np.zeros(0, dtype=int)
    keep = np.nonzero(scores >= scores.max() - delta_g)[0]
    return keep[np.argsort(-scores[keep], kind="stable")]


def ground(
    instance_map: InstanceMap, query_embedding: np.ndarray, delta_g: float, decimals: int | None = None
) -> Grounding:
    """Score every instance of ``instance_map`` against the unit query embedding ``f_q`` (D,);
    ``decimals``: round the scores to this many decimals (None: keep them as computed), so that
    float noise between processes cannot reorder scores that are equal."""
    if delta_g < 0:
        raise GroundingError(f"grounding.delta_g must be non-negative, got {delta_g}")
    if not len(instance_map):
        return Grounding({}, (), delta_g)
    features = instance_map.features()
    query = np.asarray(query_embedding, dtype=float).reshape(-1)
    if features.shape[1] != query.shape[0]:
        raise GroundingError(
            f"visit-{instance_map.visit} features have {features.shape[1]} dimensions but the query embedding has "
            f"{query.shape[0]}: the map ({instance_map.encoder}) and the query use different encoders"
        )
    scores = features @ query
    return grounding_from_scores(
        [i.uid for i in instance_map], scores if decimals is None else np.round(scores, decimals), delta_g
    )


def grounding_from_scores(uids: list[str], scores: np.ndarray, delta_g: float) -> Grounding:
    """A :class:`Grounding` from precomputed scores (one per uid, same order)."""
    scores = np.asarray(scores, dtype=float)
    keep = grounded_indices(scores, delta_g)
    return Grounding(
        {uid: float(s) for uid, s in zip(uids, scores, strict=True)}, tuple(uids[i] for i in keep), delta_g
    )
