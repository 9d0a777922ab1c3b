"""The decision rules (Eq. 9, TASK.md §5.4): from grounded instances and the change set to a point.

Over grounded instances only (a pair counts when both are grounded): moved / former → the relocated
pair with the largest displacement ≥ Δmin, its visit-2 / visit-1 position; removed → an unmatched
visit-1 instance; appeared → an unmatched visit-2 one; stable → the pair with displacement ≤ τ and
the highest score, its visit-2 position; moving → the visit-2 instance with the motion attribute, its
latest position. Seen changes come first; unseen relocations and unconfirmed instances are the
fallback, and the explanation says so. No candidate → abstain; ties by score, support, then uid.
Positions: AI2-THOR world (metres); predicted points are floor (x, z).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ovman_core.boxes import Vec2, Vec3, floor_point
from ovman_core.config import TaskConfig
from ovman_core.relations import Relation
from ovman_query.association import Association, MatchedPair

SHOWN_CANDIDATES = 5
"""How many grounded instances an explanation lists per visit."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One instance of one visit as the rules see it: position (world, metres; the latest observed
    one for moving instances), grounding score, whether it is grounded, the motion attribute, the
    step it was last seen at and its support (sightings)."""

    uid: str
    position: Vec3
    score: float
    grounded: bool
    moving: bool = False
    last_step: int = 0
    support: int = 1


@dataclasses.dataclass(frozen=True)
class ChangeEvidence:
    """Both visits' candidates (uid → candidate) and the association between them."""

    visit1: Mapping[str, Candidate]
    visit2: Mapping[str, Candidate]
    association: Association


@dataclasses.dataclass(frozen=True)
class Prediction:
    """An agent's answer to one query.

    ``point``: predicted floor point (x, z), metres, AI2-THOR world frame; None = abstain.
    ``instance_ids``: the instances the answer rests on (map uids, or ground-truth ids for the
    oracle arms), visit-1 first for pairs. ``confidence``: the grounding score behind it.
    ``success_probability``: only for stochastic arms (single visit), the exact probability that
    the pick passes the static gate.
    """

    point: Vec2 | None
    relation: Relation
    noun_phrase: str
    instance_ids: tuple[str, ...]
    confidence: float
    explanation: str
    arm: str = "two_visit"
    success_probability: float | None = None

    @property
    def abstained(self) -> bool:
        return self.point is None


def _rank(candidate: Candidate) -> tuple[float, int, str]:
    return (-candidate.score, -candidate.support, candidate.uid)


def _grounded_summary(evidence: ChangeEvidence) -> str:
    parts = []
    for visit, candidates in ((1, evidence.visit1), (2, evidence.visit2)):
        grounded = sorted((c for c in candidates.values() if c.grounded), key=_rank)
        shown = ", ".join(f"{c.uid} {c.score:.3f}" for c in grounded[:SHOWN_CANDIDATES])
        more = f" +{len(grounded) - SHOWN_CANDIDATES} more" if len(grounded) > SHOWN_CANDIDATES else ""
        parts.append(f"visit {visit} grounded [{shown}{more}]")
    return "; ".join(parts)


def _pair_grounded(pair: MatchedPair, evidence: ChangeEvidence) -> bool:
    return evidence.visit1[pair.uid1].grounded and evidence.visit2[pair.uid2].grounded


def _pair_score(pair: MatchedPair, evidence: ChangeEvidence) -> float:
    return (evidence.visit1[pair.uid1].score + evidence.visit2[pair.uid2].score) / 2.0


def _pair_support(pair: MatchedPair, evidence: ChangeEvidence) -> int:
    return evidence.visit1[pair.uid1].support + evidence.visit2[pair.uid2].support


def decide(
    relation: Relation, noun_phrase: str, evidence: ChangeEvidence, task: TaskConfig, arm: str = "two_visit"
) -> Prediction:
    """Apply the rule of ``relation`` (see the module docstring)."""

    def abstain(reason: str) -> Prediction:
        text = f"abstain ({relation.value} {noun_phrase!r}): {reason}; {_grounded_summary(evidence)}"
        return Prediction(None, relation, noun_phrase, (), 0.0, text, arm)

    def answer(point: Vec3, ids: tuple[str, ...], confidence: float, reason: str) -> Prediction:
        text = f"{relation.value} {noun_phrase!r}: {reason}; {_grounded_summary(evidence)}"
        return Prediction(floor_point(point), relation, noun_phrase, ids, confidence, text, arm)

    pairs = [p for p in evidence.association.pairs if _pair_grounded(p, evidence)]
    unseen_note = ""
    if relation in (Relation.MOVED, Relation.FORMER):
        relocated = [p for p in pairs if p.displacement >= task.min_displacement]
        if not relocated:
            unseen = [p for p in evidence.association.unseen if _pair_grounded(p, evidence)]
            relocated = [p for p in unseen if p.displacement >= task.min_displacement]
            unseen_note = " (no seen relocation: the other visit did not see both places empty)"
        if not relocated:
            shown = ", ".join(f"{p.uid1}->{p.uid2} {p.displacement:.2f} m" for p in pairs[:SHOWN_CANDIDATES])
            return abstain(f"no grounded matched pair is displaced >= {task.min_displacement:.2f} m [{shown}]")
        best = min(
            relocated,
            key=lambda p: (-p.displacement, -_pair_score(p, evidence), -_pair_support(p, evidence), p.uid1),
        )
        visit = evidence.visit2 if relation is Relation.MOVED else evidence.visit1
        uid = best.uid2 if relation is Relation.MOVED else best.uid1
        score1, score2 = evidence.visit1[best.uid1].score, evidence.visit2[best.uid2].score
        return answer(
            visit[uid].position,
            (best.uid1, best.uid2),
            _pair_score(best, evidence),
            f"pair {best.uid1}->{best.uid2} (scores {score1:.3f}/{score2:.3f}, stage {best.stage}) is the grounded "
            f"pair displaced most, {best.displacement:.2f} m >= {task.min_displacement:.2f} m, of {len(relocated)}"
            f"{unseen_note}; answer at its visit-{1 if relation is Relation.FORMER else 2} position",
        )
    if relation in (Relation.REMOVED, Relation.APPEARED):
        removed = relation is Relation.REMOVED
        pool = evidence.visit1 if removed else evidence.visit2
        unmatched = evidence.association.removed if removed else evidence.association.appeared
        candidates = sorted((pool[u] for u in unmatched if pool[u].grounded), key=_rank)
        visit = 1 if removed else 2
        if not candidates:
            unconfirmed = [u for u in evidence.association.unconfirmed if u in pool]
            candidates = sorted((pool[u] for u in unconfirmed if pool[u].grounded), key=_rank)
            unmatched = (*unmatched, *unconfirmed)
            unseen_note = f" (none seen {'gone' if removed else 'arrive'}: an unconfirmed one)"
        if not candidates:
            return abstain(f"no grounded visit-{visit} instance is unmatched (unmatched: {len(unmatched)})")
        best = candidates[0]
        return answer(
            best.position,
            (best.uid,),
            best.score,
            f"{best.uid} (score {best.score:.3f}) is the best grounded unmatched visit-{visit} instance "
            f"of {len(candidates)}{unseen_note}; answer at its visit-{visit} position",
        )
    if relation is Relation.STABLE:
        stayed = [p for p in pairs if p.displacement <= task.stable_tolerance]
        if not stayed:
            shown = ", ".join(f"{p.uid1}->{p.uid2} {p.displacement:.2f} m" for p in pairs[:SHOWN_CANDIDATES])
            return abstain(f"no grounded matched pair is displaced <= {task.stable_tolerance:.2f} m [{shown}]")
        best = min(stayed, key=lambda p: (-_pair_score(p, evidence), -_pair_support(p, evidence), p.uid1))
        return answer(
            evidence.visit2[best.uid2].position,
            (best.uid1, best.uid2),
            _pair_score(best, evidence),
            f"pair {best.uid1}->{best.uid2} has the highest score ({_pair_score(best, evidence):.3f}) of "
            f"{len(stayed)} grounded pairs displaced <= {task.stable_tolerance:.2f} m "
            f"({best.displacement:.2f} m); answer at its visit-2 position",
        )
    if relation is Relation.MOVING:
        movers = [c for c in evidence.visit2.values() if c.grounded and c.moving]
        if not movers:
            return abstain("no grounded visit-2 instance carries the motion attribute")
        best = min(movers, key=lambda c: (-c.last_step, *_rank(c)))
        return answer(
            best.position,
            (best.uid,),
            best.score,
            f"{best.uid} (score {best.score:.3f}) is the most recently seen (step {best.last_step}) of "
            f"{len(movers)} grounded moving instances; answer at its latest observed position",
        )
    raise ValueError(f"no decision rule for relation {relation!r}")
