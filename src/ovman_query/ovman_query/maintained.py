"""One map maintained across both visits, in the manner of DualMap, and what it can answer (the paper's Fig. 4).

It keeps the current state of the world only: visit 2 updates the map visit 1 left, re-observing
instances in place, adding new ones, removing those it saw gone (the cross-visit evidence) and
retaining the rest as stale. Matching is by place, so a relocated object is a new entry and its
superseded position is dropped. The maps are the same per-visit maps the two-visit agent reads, so
the two readings differ in what the map keeps, not in what was seen. Frames: AI2-THOR world,
metres; predicted points are floor points (x, z).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from ovman_core.boxes import Vec2
from ovman_core.relations import Relation
from ovman_mapping.instances import InstanceMap
from ovman_query.association import STAGE_STAYED, Association
from ovman_query.decisions import Prediction
from ovman_query.grounding import Grounding


class Known(str, enum.Enum):
    """What the maintained map knows of an entry's history."""

    REOBSERVED = "reobserved"
    """Known since visit 1 and re-observed in place in visit 2."""
    NEW = "new"
    """First seen in visit 2 (an arrival, or a relocated object: the map cannot tell)."""
    STALE = "stale"
    """Last seen in visit 1; visit 2 neither re-observed it nor saw its place empty."""


@dataclasses.dataclass(frozen=True)
class MaintainedEntry:
    """One instance of the maintained map: ``uid`` in the visit map it was last updated from
    (``visit``: 2, or 1 for a stale entry), its floor position (x, z; world, metres; the latest
    observed one for a moving instance), what the map knows of it, the motion attribute, the step
    it was last seen at and its support (sightings)."""

    uid: str
    visit: int
    floor: Vec2
    known: Known
    moving: bool
    last_step: int
    support: int


@dataclasses.dataclass(frozen=True)
class MaintainedMap:
    """The map at the end of visit 2: its entries and the visit-1 uids it removed (seen gone)."""

    entries: tuple[MaintainedEntry, ...]
    removed: tuple[str, ...]


def maintain(map1: InstanceMap, map2: InstanceMap, association: Association) -> MaintainedMap:
    """Visit 2's update of the map visit 1 left (without cross-visit evidence nothing is seen gone,
    and every unmatched visit-1 instance is retained): ``association`` is the
    agent's association of ``map1`` and ``map2``, of which only the stage-one pairs (re-observed in
    place) are read; the cross-visit evidence is ``map2.prior``."""
    reobserved = {p.uid1: p.uid2 for p in association.pairs if p.stage == STAGE_STAYED}
    kept_since_visit1 = set(reobserved.values())
    gone = map2.prior.gone if map2.prior is not None else frozenset()
    entries = [
        MaintainedEntry(
            i.uid,
            2,
            i.floor,
            Known.REOBSERVED if i.uid in kept_since_visit1 else Known.NEW,
            i.moving,
            i.last_step,
            len(i.sightings),
        )
        for i in map2
    ]
    removed = []
    for i in map1:
        if i.uid in reobserved:
            continue
        if i.uid in gone:
            removed.append(i.uid)
        else:
            entries.append(MaintainedEntry(i.uid, 1, i.floor, Known.STALE, False, i.last_step, len(i.sightings)))
    return MaintainedMap(tuple(entries), tuple(removed))


RULES: dict[Relation, tuple[str, Known | None]] = {
    Relation.STABLE: ("re-observed in place since visit 1", Known.REOBSERVED),
    Relation.APPEARED: ("first seen in visit 2", Known.NEW),
    Relation.MOVED: ("first seen in visit 2 (a relocated object is new to a maintained map)", Known.NEW),
    Relation.MOVING: ("with the motion attribute", None),
    Relation.FORMER: ("retained from visit 1 (superseded positions are dropped)", Known.STALE),
    Relation.REMOVED: ("retained from visit 1 (removed instances are dropped)", Known.STALE),
}
"""Per relation: which entries answer it (None: the moving ones), as the explanation words it."""


def answer(
    maintained: MaintainedMap,
    relation: Relation,
    noun_phrase: str,
    grounding: Mapping[int, Grounding],
    arm: str,
) -> Prediction:
    """The maintained map's answer from the map alone, by :data:`RULES`: stable, a grounded
    re-observed entry; appeared and moved, a grounded new one; moving, the grounded entry with the
    motion attribute (its latest position); former and removed, only grounded stale entries. No
    candidate: abstain; ties: score, then support, then uid. ``grounding``: per visit (1, 2), the
    grounding of that visit's map; an entry is grounded by the grounding of the visit it was last
    updated from."""
    wording, known = RULES[relation]

    def grounded(entry: MaintainedEntry) -> bool:
        return grounding[entry.visit].is_grounded(entry.uid)

    def score(entry: MaintainedEntry) -> float:
        return float(grounding[entry.visit].scores.get(entry.uid, 0.0))

    chosen = [e for e in maintained.entries if grounded(e) and (e.moving if known is None else e.known is known)]
    if not chosen:
        held = sum(grounded(e) for e in maintained.entries)
        return Prediction(
            None,
            relation,
            noun_phrase,
            (),
            0.0,
            f"abstain: no grounded entry of the maintained map {wording} ({held} grounded entries, "
            f"{len(maintained.removed)} visit-1 instances removed)",
            arm,
        )
    recency = (lambda e: -e.last_step) if known is None else (lambda e: 0)  # the most recently seen mover
    best = min(chosen, key=lambda e: (recency(e), -score(e), -e.support, e.uid))
    return Prediction(
        best.floor,
        relation,
        noun_phrase,
        (best.uid,),
        score(best),
        f"maintained map: {best.uid} (visit {best.visit}, score {score(best):.3f}), the best of {len(chosen)} "
        f"grounded entries {wording}",
        arm,
    )
