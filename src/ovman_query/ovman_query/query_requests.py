"""One ``/ovman/query`` request answered from the visit maps: what query_node does, without ROS.

:func:`answer_query` checks the request, parses free text, checks the maps the arm needs and the
excluded ids, then runs the arm. The arms given ground truth (sim_perception, oracle_grounding,
maintained_map, oracle_positions, given_answer) are refused: query_node never receives ground truth,
so the benchmark calls their functions in :mod:`ovman_query.arms` in process. Without exclusions
every arm is exactly its function there. Frames: AI2-THOR world (metres); points are floor (x, z).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

from ovman_core.boxes import Vec2
from ovman_core.relations import Relation
from ovman_mapping.encoders import label_text
from ovman_mapping.instances import InstanceMap
from ovman_query import arms
from ovman_query.agent import ReferenceAgent
from ovman_query.arms import Arm
from ovman_query.association import Association, AssociationError
from ovman_query.decisions import ChangeEvidence, Prediction, decide
from ovman_query.grounding import GroundingError
from ovman_query.parser import ParseError, Query

GROUND_TRUTH_ARMS = frozenset(
    {Arm.SIM_PERCEPTION, Arm.ORACLE_GROUNDING, Arm.ORACLE_POSITIONS, Arm.GIVEN_ANSWER, Arm.MAINTAINED_MAP}
)
"""Arms that need the episode's ground truth; not served from maps."""
TWO_MAP_ARMS = frozenset({Arm.TWO_VISIT, Arm.TWO_VISIT_TEXT})
"""Arms that need both visits' maps; the others need the visit-2 map only."""


class Status(enum.IntEnum):
    """Outcome of a query; the values are those of ovman_interfaces/srv/Query."""

    ANSWERED = 0
    ABSTAINED = 1
    PARSE_FAILED = 2
    NO_MAP = 3
    INVALID_REQUEST = 4


@dataclasses.dataclass(frozen=True)
class QueryRequest:
    """The fields of a Query request: ``text``, or ``category`` + ``relation``; ``arm`` (empty =
    two_visit); wire ids of visit-2 instances that must not be the answer."""

    text: str = ""
    category: str = ""
    relation: str = ""
    arm: str = ""
    exclude_ids: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class VisitMap:
    """One visit's map as the query side holds it: the core map, the wire id of each uid, when it
    was produced (ns), and its ``map_id`` and the ``follows`` of a visit-2 map (InstanceMap.msg)."""

    instance_map: InstanceMap
    ids: Mapping[str, int]
    stamp_ns: int
    map_id: str = ""
    follows: str = ""


def second_visit_of(first: VisitMap, second: VisitMap) -> bool:
    """Whether ``second`` (a visit-2 map) is the second visit of ``first`` (a visit-1 map), so that
    their change set means something: it names ``first`` as the map it follows, or, when neither
    map carries ids (a producer that does not say), it is the newer by stamp."""
    if first.map_id or second.follows:
        return bool(first.map_id) and second.follows == first.map_id
    return second.stamp_ns > first.stamp_ns


@dataclasses.dataclass(frozen=True)
class RejectedMap:
    """The latest map received for a visit could not be used (``reason``): it replaces whatever
    was held for that visit, so an older map is never paired with a newer one of the other visit."""

    reason: str


@dataclasses.dataclass(frozen=True)
class QueryOutcome:
    """What the service answers. ``point``: floor (x, z), world frame, metres, set only when
    answered; ``instance_visit1/2``: wire ids of the answer's instances (-1: none);
    ``confidence`` in [0, 1]; ``prediction``: the arm's own output, when an arm ran."""

    status: Status
    explanation: str
    arm: str = ""
    relation: str = ""
    noun_phrase: str = ""
    point: Vec2 | None = None
    instance_visit1: int = -1
    instance_visit2: int = -1
    confidence: float = 0.0
    prediction: Prediction | None = None


HeldMap = VisitMap | RejectedMap | None
"""What the query side holds for one visit: a usable map, the refusal of the latest one, or nothing yet."""


class CachingAgent(ReferenceAgent):
    """The reference agent for a server answering many queries about the same pair of maps.

    The association depends on the two maps only (maps are immutable), so the association of the
    last pair asked about is kept, keyed on the maps' identity; the encoder's description is read
    once. Answers are exactly those of :class:`ovman_query.agent.ReferenceAgent`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._description = self.encoder.description
        self._last: tuple[InstanceMap, InstanceMap, Association] | None = None

    @property
    def encoder_description(self) -> str:
        return self._description

    def associate(self, map1: InstanceMap, map2: InstanceMap) -> Association:
        last = self._last
        if last is None or last[0] is not map1 or last[1] is not map2:
            last = self._last = (map1, map2, super().associate(map1, map2))
        return last[2]


def resolve_category(vocabulary: Mapping[str, str], category: str) -> tuple[str, str]:
    """``(noun phrase, category)`` of a requested category: a category label (``CoffeeTable``) or
    one of its surface names (``coffee table``, ``low table``); any other label is kept as given,
    with its words as the noun phrase."""
    if category in vocabulary.values():
        return label_text(category), category
    name = " ".join(category.lower().split())
    if name in vocabulary:
        return name, vocabulary[name]
    return label_text(category), category


def _without(instance_map: InstanceMap, uids: frozenset[str]) -> InstanceMap:
    return dataclasses.replace(instance_map, instances=tuple(i for i in instance_map if i.uid not in uids))


def _masked(evidence: ChangeEvidence, uids: frozenset[str]) -> ChangeEvidence:
    visit2 = {u: dataclasses.replace(c, grounded=False) if u in uids else c for u, c in evidence.visit2.items()}
    return dataclasses.replace(evidence, visit2=visit2)


def _map_problem(agent: ReferenceAgent, visit1: HeldMap, visit2: HeldMap, arm: Arm) -> str | None:
    needed = {1: visit1, 2: visit2} if arm in TWO_MAP_ARMS else {2: visit2}
    for visit, held in needed.items():
        if held is None:
            return f"arm {arm.value} needs the visit-{visit} map, and none has been received"
        if isinstance(held, RejectedMap):
            return (
                f"arm {arm.value} needs the visit-{visit} map, and the latest one received was refused "
                f"({held.reason}); no earlier visit-{visit} map is used in its place"
            )
        if held.instance_map.encoder != agent.encoder_description:
            return (
                f"the visit-{visit} map was built with encoder {held.instance_map.encoder!r} but queries are embedded "
                f"with {agent.encoder_description!r}: run mapping_node and query_node with the same encoder.* config"
            )
    both = isinstance(visit1, VisitMap) and isinstance(visit2, VisitMap)
    if arm in TWO_MAP_ARMS and both and not second_visit_of(visit1, visit2):  # type: ignore[arg-type]
        return (
            "the visit-2 map is not the second visit of the visit-1 map (it names another, or is not newer): "
            "visit 2 of this episode has not been mapped yet"
        )
    return None


def _run_arm(agent: ReferenceAgent, arm: Arm, map1: InstanceMap | None, map2: InstanceMap, query: Query,
             seed: int, excluded: frozenset[str]) -> Prediction:  # fmt: skip
    if arm in TWO_MAP_ARMS:
        assert map1 is not None
        if not excluded:
            return dataclasses.replace(arms.two_visit(agent, map1, map2, query), arm=arm.value)
        groundings = agent.groundings(map1, map2, query)
        nothing = agent.unmatched(query, *groundings)
        if nothing is not None:
            return dataclasses.replace(nothing, arm=arm.value)
        evidence = agent.evidence(map1, map2, query, groundings)
        return decide(query.relation, query.noun_phrase, _masked(evidence, excluded), agent.config.task, arm.value)
    remaining = _without(map2, excluded) if excluded else map2
    if arm is Arm.SINGLE_VISIT:
        return arms.single_visit(agent, remaining, query, seed)
    return arms.category_only(agent, remaining, query)


def answer_query(
    agent: ReferenceAgent, visit1: HeldMap, visit2: HeldMap, request: QueryRequest, seed: int
) -> QueryOutcome:
    """Answer ``request`` from the held maps; ``seed`` drives the single-visit arm's pick. Never
    answers a non-finite point: such a prediction is ABSTAINED.

    Checked in this order, stopping at the first problem: the request (an arm the node serves, no
    field longer than ``parser.max_text_length``, free text or a category and a relation, never both)
    → INVALID_REQUEST; free text parses → else PARSE_FAILED; the arm's maps were received, not
    refused, built with the agent's encoder and of one episode (:func:`second_visit_of`) → else
    NO_MAP; every excluded id is a visit-2 instance → else INVALID_REQUEST. Then ANSWERED, or
    ABSTAINED (also when nothing scores ``grounding.min_score``). Excluded ids count as not grounded
    for the two-map arms and are left out of the map for the visit-2-only arms."""
    try:
        arm = Arm(request.arm.strip() or Arm.TWO_VISIT.value)
    except ValueError:
        valid = ", ".join(a.value for a in Arm)
        return QueryOutcome(Status.INVALID_REQUEST, f"unknown arm {request.arm!r}; expected one of {valid}")
    if arm is Arm.EXTERNAL:
        return QueryOutcome(
            Status.INVALID_REQUEST,
            "arm external is an agent outside OVMAN, which serves its own ovman/query (docs/external-agent.md)",
            arm.value,
        )
    if arm in GROUND_TRUTH_ARMS:
        return QueryOutcome(
            Status.INVALID_REQUEST,
            f"arm {arm.value} is given the episode's ground truth, which query_node never receives; "
            f"the benchmark runs it in process (ovman_query.arms.{arm.value})",
            arm.value,
        )
    limit = agent.config.query_node.parser.max_text_length
    for name in ("text", "category", "relation"):
        size = len(getattr(request, name))
        if size > limit:
            return QueryOutcome(
                Status.INVALID_REQUEST,
                f"request field {name!r} has {size} characters, more than parser.max_text_length ({limit})",
                arm.value,
            )
    text, category, relation = request.text.strip(), request.category.strip(), request.relation.strip()
    if text and (category or relation):
        return QueryOutcome(Status.INVALID_REQUEST, "give either text or category and relation, not both", arm.value)
    if arm is Arm.TWO_VISIT_TEXT and not text:
        return QueryOutcome(Status.INVALID_REQUEST, "arm two_visit_text answers free text: set text", arm.value)
    if text:
        try:
            query = agent.parse(text)
        except ParseError as err:
            return QueryOutcome(Status.PARSE_FAILED, str(err), arm.value)
    else:
        if not (category and relation):
            return QueryOutcome(Status.INVALID_REQUEST, "give text, or both category and relation", arm.value)
        try:
            parsed = Relation.parse(relation)
        except ValueError as err:
            return QueryOutcome(Status.INVALID_REQUEST, str(err), arm.value)
        noun_phrase, resolved = resolve_category(agent.parser.vocabulary, category)
        query = Query(noun_phrase, parsed, resolved)
    fields = {"arm": arm.value, "relation": query.relation.value, "noun_phrase": query.noun_phrase}
    problem = _map_problem(agent, visit1, visit2, arm)
    if problem is not None:
        return QueryOutcome(Status.NO_MAP, problem, **fields)
    assert isinstance(visit2, VisitMap)
    uid_of = {wire: uid for uid, wire in visit2.ids.items()}
    unknown = sorted(set(request.exclude_ids) - set(uid_of))
    if unknown:
        return QueryOutcome(
            Status.INVALID_REQUEST, f"exclude_ids {unknown} are not instances of the visit-2 map", **fields
        )
    excluded = frozenset(uid_of[i] for i in request.exclude_ids)
    map1 = visit1.instance_map if isinstance(visit1, VisitMap) else None
    try:
        prediction = _run_arm(agent, arm, map1, visit2.instance_map, query, seed, excluded)
    except (GroundingError, AssociationError) as err:
        return QueryOutcome(Status.NO_MAP, f"the maps cannot answer queries: {err}", **fields)
    if prediction.point is not None and not all(math.isfinite(v) for v in prediction.point):
        return QueryOutcome(
            Status.ABSTAINED, f"the arm's point {prediction.point} is not finite; no goal is given", **fields
        )
    ids1 = visit1.ids if isinstance(visit1, VisitMap) else {}
    wire1 = next((ids1[u] for u in prediction.instance_ids if u in ids1), -1)
    wire2 = next((visit2.ids[u] for u in prediction.instance_ids if u in visit2.ids), -1)
    return QueryOutcome(
        status=Status.ABSTAINED if prediction.abstained else Status.ANSWERED,
        explanation=prediction.explanation,
        point=prediction.point,
        instance_visit1=wire1,
        instance_visit2=wire2,
        confidence=min(max(float(prediction.confidence), 0.0), 1.0),
        prediction=prediction,
        **fields,
    )
