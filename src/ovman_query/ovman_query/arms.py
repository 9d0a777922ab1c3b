"""The arms of the error budget (TASK.md §6), each a function from its inputs to a Prediction.

From the reference agent on both maps down to the true answer, each arm hands the agent one more
piece of ground truth or takes one away (:class:`Arm` says what each reads); ``external`` is an agent
outside OVMAN, evaluated through the ROS graph only. Frames: AI2-THOR world (metres); points are
floor (x, z).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping

import numpy as np

from ovman_core.boxes import Vec2, floor_distance
from ovman_core.relations import Relation
from ovman_core.world_state import WorldState
from ovman_mapping.instances import InstanceMap
from ovman_query.agent import ReferenceAgent, candidates, grounding_phrase
from ovman_query.association import STAGE_IDENTITY, Association, MatchedPair
from ovman_query.decisions import Candidate, ChangeEvidence, Prediction, decide
from ovman_query.grounding import Grounding, grounding_from_scores
from ovman_query.maintained import answer as maintained_answer
from ovman_query.maintained import maintain
from ovman_query.parser import ParseError, Query


class Arm(str, enum.Enum):
    """Arm names as used in config ``benchmark.arms`` and results."""

    TWO_VISIT = "two_visit"  # both maps (the reference agent), given the category and the relation
    TWO_VISIT_TEXT = "two_visit_text"  # both maps, given the query's text: the parser infers phrase and relation
    SIM_PERCEPTION = "sim_perception"  # maps of the simulator's segments (a diagnostic: what perception costs)
    SINGLE_VISIT = "single_visit"  # the visit-2 map: a seeded pick among the grounded, with its success probability
    ORACLE_GROUNDING = "oracle_grounding"  # the agent's maps, each instance grounded by its true category
    ORACLE_POSITIONS = "oracle_positions"  # ground-truth positions and identities; the decision rules still run
    GIVEN_ANSWER = "given_answer"  # the true answer point (the certification oracle)
    CATEGORY_ONLY = "category_only"  # the visit-2 map: the best instance of the category (ObjectNav behaviour)
    MAINTAINED_MAP = "maintained_map"  # one map maintained across both visits (DualMap), grounded as oracle_grounding
    EXTERNAL = "external"  # an agent outside OVMAN, through the graph only: its own maps and answer


BUILT_IN_ARMS: tuple[Arm, ...] = tuple(a for a in Arm if a is not Arm.EXTERNAL)
"""The arms OVMAN computes itself (``all``); ``external`` is a system outside OVMAN that the graph's
benchmark_node evaluates through its services (docs/external-agent.md), never computed in process."""


PARSE_FAILED = "parse failed"
"""How the explanation of a two_visit_text abstention on a parse failure begins."""


class ArmInputError(ValueError):
    """An arm was called without what it needs (e.g. the query's category for an oracle arm)."""


def _category(query: Query, arm: Arm) -> str:
    if query.category is None:
        raise ArmInputError(f"arm {arm.value} needs the query's ground-truth category; {query!r} has none")
    return query.category


def two_visit(agent: ReferenceAgent, map1: InstanceMap, map2: InstanceMap, query: Query) -> Prediction:
    """The reference agent."""
    return agent.answer(map1, map2, query)


def two_visit_text(
    agent: ReferenceAgent, map1: InstanceMap, map2: InstanceMap, text: str, asked: Relation
) -> Prediction:
    """The reference agent given free text: noun phrase and relation come from the parser.

    A parse failure is a failure, never a default (TASK.md §4): the prediction abstains with the
    parser's message. ``asked`` (the relation the episode asks about) is only recorded on that
    abstention, which has no parsed relation; it never informs an answer.
    """
    try:
        query = agent.parse(text)
    except ParseError as err:
        return Prediction(None, asked, "", (), 0.0, f"{PARSE_FAILED}: {err}", Arm.TWO_VISIT_TEXT.value)
    return dataclasses.replace(agent.answer(map1, map2, query), arm=Arm.TWO_VISIT_TEXT.value)


def single_visit(
    agent: ReferenceAgent, map2: InstanceMap, query: Query, seed: int, answer_point: Vec2 | None = None
) -> Prediction:
    """A uniform pick, seeded by ``seed``, among the visit-2 grounded instances.

    ``success_probability`` is the fraction of grounded instances within ``task.static_gate_radius``
    of ``answer_point`` (exact, not sampled); None when no answer point is given.
    """
    grounding = agent.ground(map2, grounding_phrase(query))
    nothing = agent.unmatched(query, grounding) if len(map2) else None
    if nothing is not None:
        return dataclasses.replace(nothing, arm=Arm.SINGLE_VISIT.value, success_probability=0.0)
    grounded = sorted(grounding.grounded)
    if not grounded:
        return Prediction(
            None, query.relation, query.noun_phrase, (), 0.0, "abstain: the visit-2 map is empty", "single_visit", 0.0
        )
    positions = {i.uid: i.floor for i in map2}
    rng = np.random.default_rng(seed)
    pick = grounded[int(rng.integers(len(grounded)))]
    probability = None
    if answer_point is not None:
        gate = agent.config.task.static_gate_radius
        hits = sum(math.dist(positions[u], answer_point) <= gate for u in grounded)
        probability = hits / len(grounded)
    return Prediction(
        positions[pick],
        query.relation,
        query.noun_phrase,
        (pick,),
        grounding.scores[pick],
        f"picked {pick} (score {grounding.scores[pick]:.3f}) uniformly (seed {seed}) among "
        f"{len(grounded)} grounded visit-2 instances",
        Arm.SINGLE_VISIT.value,
        probability,
    )


def sim_perception(agent: ReferenceAgent, map1: InstanceMap, map2: InstanceMap, query: Query) -> Prediction:
    """The reference agent on maps built from the simulator's segments (``map1``, ``map2``)."""
    return dataclasses.replace(agent.answer(map1, map2, query), arm=Arm.SIM_PERCEPTION.value)


TrueShares = Mapping[str, Mapping[str, float]]
"""Per map instance uid: true category → share of the instance's points inside an object of that
category; the points inside no object are the share of :data:`BACKGROUND`."""
BACKGROUND = ""
"""The key of the points that lie inside no ground-truth object."""


def true_category(shares: Mapping[str, float]) -> str:
    """The category holding most of an instance's points (ties: alphabetical); BACKGROUND when
    most lie inside no object, or when there are no shares."""
    if not shares:
        return BACKGROUND
    return min(shares.items(), key=lambda item: (-item[1], item[0]))[0]


def truth_grounding(instance_map: InstanceMap, shares: TrueShares, category: str) -> Grounding:
    """Ground-truth grounding of one map: the instances whose true category (:func:`true_category`)
    is ``category``; score = the share of their points that category holds. An instance missing
    from ``shares`` is grounded by nothing."""
    scores = {i.uid: float(shares.get(i.uid, {}).get(category, 0.0)) for i in instance_map}
    chosen = [i.uid for i in instance_map if true_category(shares.get(i.uid, {})) == category != BACKGROUND]
    grounded = tuple(sorted(chosen, key=lambda u: (-scores[u], u)))
    return Grounding(scores, grounded, 0.0)


def oracle_grounding(
    agent: ReferenceAgent,
    map1: InstanceMap,
    map2: InstanceMap,
    query: Query,
    shares1: TrueShares,
    shares2: TrueShares,
) -> Prediction:
    """The agent's own maps and association, each instance grounded by its true category
    (``shares1``/``shares2``: :data:`TrueShares` of ``map1``/``map2``) instead of the encoder."""
    category = _category(query, Arm.ORACLE_GROUNDING)
    evidence = ChangeEvidence(
        candidates(map1, truth_grounding(map1, shares1, category)),
        candidates(map2, truth_grounding(map2, shares2, category)),
        agent.associate(map1, map2),
    )
    return decide(query.relation, query.noun_phrase, evidence, agent.config.task, Arm.ORACLE_GROUNDING.value)


def maintained_map(
    agent: ReferenceAgent,
    map1: InstanceMap,
    map2: InstanceMap,
    query: Query,
    shares1: TrueShares,
    shares2: TrueShares,
) -> Prediction:
    """The same observations read as one map maintained across both visits (DualMap's reading,
    :mod:`ovman_query.maintained`), grounding handed over as in :func:`oracle_grounding`: the
    paper's Fig. 4 pairs the two."""
    category = _category(query, Arm.MAINTAINED_MAP)
    maintained = maintain(map1, map2, agent.associate(map1, map2))
    grounding = {1: truth_grounding(map1, shares1, category), 2: truth_grounding(map2, shares2, category)}
    return maintained_answer(maintained, query.relation, query.noun_phrase, grounding, Arm.MAINTAINED_MAP.value)


def _state_candidates(
    state: WorldState, category: str, delta_g: float, moving_id: str | None = None
) -> dict[str, Candidate]:
    uids = [o.instance_id for o in state]
    grounding = grounding_from_scores(uids, np.array([float(o.category == category) for o in state]), delta_g)
    return {
        o.instance_id: Candidate(
            o.instance_id,
            o.position,
            grounding.scores[o.instance_id],
            grounding.is_grounded(o.instance_id) and o.category == category,
            moving=o.instance_id == moving_id,
        )
        for o in state
    }


def oracle_positions(
    agent: ReferenceAgent,
    w1: WorldState,
    w2: WorldState,
    query: Query,
    moving_id: str | None = None,
) -> Prediction:
    """Ground-truth positions and identities (``w2`` as at the end of visit 2); the rules still run.

    Identity gives the association: an id in both states is a matched pair, an id only in ``w1``
    a removal, only in ``w2`` an appearance. ``moving_id`` marks the mover's instance.
    """
    category = _category(query, Arm.ORACLE_POSITIONS)
    delta_g = agent.config.query_node.grounding.delta_g
    pairs = tuple(
        MatchedPair(
            o.instance_id,
            o.instance_id,
            STAGE_IDENTITY,
            0.0,
            0.0,
            0.0,
            floor_distance(o.position, w2[o.instance_id].position),
        )
        for o in w1
        if o.instance_id in w2
    )
    association = Association(
        pairs,
        tuple(o.instance_id for o in w1 if o.instance_id not in w2),
        tuple(o.instance_id for o in w2 if o.instance_id not in w1),
    )
    evidence = ChangeEvidence(
        _state_candidates(w1, category, delta_g), _state_candidates(w2, category, delta_g, moving_id), association
    )
    return decide(query.relation, query.noun_phrase, evidence, agent.config.task, Arm.ORACLE_POSITIONS.value)


def given_answer(query: Query, answer_point: Vec2, instance_id: str) -> Prediction:
    """The true answer (navigation is then the only thing tested)."""
    return Prediction(
        (float(answer_point[0]), float(answer_point[1])),
        query.relation,
        query.noun_phrase,
        (instance_id,),
        1.0,
        f"given the true answer ({instance_id})",
        Arm.GIVEN_ANSWER.value,
    )


def category_only(agent: ReferenceAgent, map2: InstanceMap, query: Query) -> Prediction:
    """The best instance of the category in the current (visit-2) map, whatever the relation."""
    grounding = agent.ground(map2, grounding_phrase(query))
    nothing = agent.unmatched(query, grounding) if len(map2) else None
    if nothing is not None:
        return dataclasses.replace(nothing, arm=Arm.CATEGORY_ONLY.value)
    if not grounding.grounded:
        return Prediction(
            None, query.relation, query.noun_phrase, (), 0.0, "abstain: the visit-2 map is empty", "category_only"
        )
    support = {i.uid: len(i.sightings) for i in map2}
    best = min(grounding.grounded, key=lambda u: (-grounding.scores[u], -support[u], u))
    return Prediction(
        map2[best].floor,
        query.relation,
        query.noun_phrase,
        (best,),
        grounding.scores[best],
        f"the best-scoring instance {best} ({grounding.scores[best]:.3f}) of the visit-2 map, relation ignored",
        Arm.CATEGORY_ONLY.value,
    )
