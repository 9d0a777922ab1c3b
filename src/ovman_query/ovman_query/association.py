"""Cross-visit association of instances: two-stage Hungarian assignment (TASK.md §5.2).

Stage one pairs instances that **stayed** (close in 3D and alike), stage two pairs the rest as
**relocated** (alike anywhere); unmatched visit-1 instances are removal candidates, unmatched
visit-2 ones appearance candidates. With the visit-2 map's cross-visit evidence and
``association.require_seen_change``, a change is claimed only where the other visit saw it; the
other unmatched instances are *unconfirmed*, and a third stage pairs them as unseen relocations,
a fallback of the decision rules, never a change. Positions: AI2-THOR world frame; displacement
is the floor distance.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from ovman_core.config import AssociationConfig
from ovman_mapping.fusion import bhattacharyya
from ovman_mapping.instances import InstanceMap

FORBIDDEN = 1.0e9
"""Cost of a pair a stage may not match; such pairs are discarded after the assignment."""

STAGE_STAYED = 1
STAGE_RELOCATED = 2
STAGE_UNSEEN = 3
"""Stage three: a relocation the other visit's frames did not confirm (a fallback, not a change)."""
STAGE_IDENTITY = 0
"""Pairs given by ground-truth identity (oracle-positions arm), not by a solve."""


class AssociationError(ValueError):
    """The two maps cannot be compared (different feature spaces)."""


@dataclasses.dataclass(frozen=True)
class MatchedPair:
    """A visit-1 instance and the visit-2 instance it is associated with.

    ``stage``: 1 stayed, 2 relocated, 0 ground-truth identity. ``cost``: the assignment cost of the
    pair in its stage; ``dissimilarity``: δ; ``distance``: 3D distance (m); ``displacement``:
    floor distance (m).
    """

    uid1: str
    uid2: str
    stage: int
    cost: float
    dissimilarity: float
    distance: float
    displacement: float


@dataclasses.dataclass(frozen=True)
class Association:
    """The change set between two visits; ``unconfirmed``: unmatched instances of either visit
    (visit-1 uids first) that the other visit did not see change; ``unseen``: stage-three pairs,
    not changes (nor in the change set), which the decision rules fall back on only when no seen
    change answers a query."""

    pairs: tuple[MatchedPair, ...]
    removed: tuple[str, ...]
    appeared: tuple[str, ...]
    unconfirmed: tuple[str, ...] = ()
    unseen: tuple[MatchedPair, ...] = ()

    def partner_of_1(self, uid1: str) -> MatchedPair | None:
        return next((p for p in self.pairs if p.uid1 == uid1), None)

    def partner_of_2(self, uid2: str) -> MatchedPair | None:
        return next((p for p in self.pairs if p.uid2 == uid2), None)


CUES = ("embedding", "colour", "extent")
"""The appearance cues of a pair of instances, each a similarity (at most 1: alike):
``embedding``, the cosine of their unit features (the encoder's embedding: the label's text
embedding, or CLIP crop features in clip mode); ``colour``, the Bhattacharyya coefficient of their
hue-saturation histograms; ``extent``, the likeness of their back-projected box sizes,
``exp(−mean_k |ln((a_k + ε) / (b_k + ε))|)`` over the three sorted sizes (metres, ε =
:data:`EXTENT_EPSILON`)."""
EXTENT_EPSILON = 0.01
"""(m) Added to every box size before the ratio of the extent cue (a flat box is not infinitely unlike)."""


def extent_similarity(map1: InstanceMap, map2: InstanceMap) -> np.ndarray:
    """(N1, N2) matrix of the extent cue (see :data:`CUES`)."""
    if not len(map1) or not len(map2):
        return np.zeros((len(map1), len(map2)))
    sizes = [
        np.log(np.sort([np.subtract(i.box.hi, i.box.lo) for i in m], axis=1) + EXTENT_EPSILON) for m in (map1, map2)
    ]
    return np.exp(-np.abs(sizes[0][:, None, :] - sizes[1][None, :, :]).mean(axis=2))


def appearance_cues(map1: InstanceMap, map2: InstanceMap) -> dict[str, np.ndarray]:
    """Each cue of :data:`CUES` as an (N1, N2) matrix; AssociationError when the maps' features or
    histograms are not comparable."""
    if not len(map1) or not len(map2):
        return {cue: np.zeros((len(map1), len(map2))) for cue in CUES}
    f1, f2 = map1.features(), map2.features()
    if f1.shape[1] != f2.shape[1]:
        raise AssociationError(
            f"visit-1 features have {f1.shape[1]} dimensions, visit-2 features {f2.shape[1]}: "
            f"maps built with different encoders ({map1.encoder!r} vs {map2.encoder!r})"
        )
    h1, h2 = map1.colours(), map2.colours()
    if h1.shape[1] != h2.shape[1]:
        raise AssociationError(
            f"colour histograms differ in size ({h1.shape[1]} vs {h2.shape[1]}): "
            "encoder.colour_bins changed between the maps"
        )
    return {"embedding": f1 @ f2.T, "colour": bhattacharyya(h1, h2), "extent": extent_similarity(map1, map2)}


def feature_dissimilarity(
    map1: InstanceMap, map2: InstanceMap, colour_weight: float, extent_weight: float = 0.0
) -> np.ndarray:
    """(N1, N2) matrix of the feature dissimilarity δ: ``1 − ((1 − w_c − w_x)·embedding + w_c·colour
    + w_x·extent)``, with the cues of :func:`appearance_cues`."""
    cues = appearance_cues(map1, map2)
    mix = (1.0 - colour_weight - extent_weight) * cues["embedding"] + colour_weight * cues["colour"]
    return 1.0 - (mix + extent_weight * cues["extent"] if extent_weight else mix)


def _solve(cost: np.ndarray, allowed: np.ndarray) -> list[tuple[int, int]]:
    if cost.size == 0 or not allowed.any():
        return []
    rows, cols = linear_sum_assignment(np.where(allowed, cost, FORBIDDEN))
    return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if allowed[r, c]]


def associate(map1: InstanceMap, map2: InstanceMap, config: AssociationConfig) -> Association:
    """Two-stage Hungarian association of ``map1`` (visit 1) and ``map2`` (visit 2), with stage
    three when ``map2`` carries cross-visit evidence.

    1. Stayed: cost ``feature_weight·δ + distance_weight·‖p_a − p_b‖`` (3D, metres), only pairs
       closer than ``stay_distance_gate`` with ``δ ≤ stay_max_dissimilarity``.
    2. Relocated: the instances left over, cost δ, only pairs with ``δ ≤ relocation_max_dissimilarity``.
    3. Unseen (with evidence only): stage two without the evidence, over what is still unmatched.

    With evidence, an instance seen gone (visit 1) or new (visit 2) cannot have stayed, a relocation
    pairs a gone instance with a new one, and an unmatched instance is a removal only if gone and an
    arrival only if new. Forbidden pairs get :data:`FORBIDDEN` and are dropped after each solve."""
    uids1 = [i.uid for i in map1]
    uids2 = [i.uid for i in map2]
    p1, p2 = map1.positions(), map2.positions()
    dissimilarity = feature_dissimilarity(map1, map2, config.colour_weight, config.extent_weight)
    # (N1, N2) matrices only, never an (N1, N2, 3) difference array: memory is a few N1·N2 doubles.
    distance = cdist(p1, p2) if len(p1) and len(p2) else dissimilarity * 0.0
    floor = cdist(p1[:, [0, 2]], p2[:, [0, 2]]) if len(p1) and len(p2) else distance

    evidence = map2.prior if config.require_seen_change else None
    gone = np.array([uid in evidence.gone for uid in uids1], dtype=bool) if evidence else np.ones(len(uids1), bool)
    new = np.array([uid in evidence.new for uid in uids2], dtype=bool) if evidence else np.ones(len(uids2), bool)
    # Without evidence, nothing is known to be gone or new: stage one is not restricted by it.
    changed = (gone[:, None] | new[None, :]) if evidence else np.zeros(distance.shape, dtype=bool)

    stay_cost = config.feature_weight * dissimilarity + config.distance_weight * distance
    stay_allowed = (distance <= config.stay_distance_gate) & (dissimilarity <= config.stay_max_dissimilarity) & ~changed
    pairs: list[MatchedPair] = []
    for r, c in _solve(stay_cost, stay_allowed):
        pairs.append(
            MatchedPair(
                uids1[r],
                uids2[c],
                STAGE_STAYED,
                float(stay_cost[r, c]),
                float(dissimilarity[r, c]),
                float(distance[r, c]),
                float(floor[r, c]),
            )
        )
    stayed1, stayed2 = {p.uid1 for p in pairs}, {p.uid2 for p in pairs}
    left1 = [r for r, uid in enumerate(uids1) if uid not in stayed1]
    left2 = [c for c, uid in enumerate(uids2) if uid not in stayed2]

    def relocations(rows: list[int], cols: list[int], allowed: np.ndarray, stage: int) -> list[MatchedPair]:
        sub = dissimilarity[np.ix_(rows, cols)]
        return [
            MatchedPair(
                uids1[rows[r]],
                uids2[cols[c]],
                stage,
                float(sub[r, c]),
                float(sub[r, c]),
                float(distance[rows[r], cols[c]]),
                float(floor[rows[r], cols[c]]),
            )
            for r, c in _solve(sub, (sub <= config.relocation_max_dissimilarity) & allowed)
        ]

    pairs += relocations(left1, left2, gone[left1][:, None] & new[left2][None, :], STAGE_RELOCATED)
    matched1 = {p.uid1 for p in pairs}
    matched2 = {p.uid2 for p in pairs}
    unseen: list[MatchedPair] = []
    if evidence:
        rest1 = [r for r, uid in enumerate(uids1) if uid not in matched1]
        rest2 = [c for c, uid in enumerate(uids2) if uid not in matched2]
        unseen = relocations(rest1, rest2, np.ones((len(rest1), len(rest2)), dtype=bool), STAGE_UNSEEN)
    order1 = {uid: k for k, uid in enumerate(uids1)}
    gone_uids = {uid for uid, g in zip(uids1, gone, strict=True) if g}
    new_uids = {uid for uid, n in zip(uids2, new, strict=True) if n}
    return Association(
        pairs=tuple(sorted(pairs, key=lambda p: order1[p.uid1])),
        removed=tuple(u for u in uids1 if u not in matched1 and u in gone_uids),
        appeared=tuple(u for u in uids2 if u not in matched2 and u in new_uids),
        unconfirmed=tuple(u for u in uids1 if u not in matched1 and u not in gone_uids)
        + tuple(u for u in uids2 if u not in matched2 and u not in new_uids),
        unseen=tuple(sorted(unseen, key=lambda p: order1[p.uid1])),
    )
