"""The reference agent (TASK.md §5): two visits' observations and a query → a predicted point.

Stages: per-visit mapping (:mod:`ovman_mapping.fusion`), cross-visit association
(:mod:`ovman_query.association`), grounding (:mod:`ovman_query.grounding`), the decision rules
(:mod:`ovman_query.decisions`), and the parser for free-text queries (:mod:`ovman_query.parser`).
Navigation is ovman_nav's. Frames: AI2-THOR world (metres); predicted points are floor (x, z).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ovman_core.config import OvmanConfig
from ovman_core.relations import Relation
from ovman_mapping.encoders import FeatureEncoder, label_text, make_encoder
from ovman_mapping.fusion import build_map, build_visits
from ovman_mapping.instances import InstanceMap
from ovman_query.association import Association, associate
from ovman_query.decisions import Candidate, ChangeEvidence, Prediction, decide
from ovman_query.grounding import Grounding, ground
from ovman_query.parser import Query, QueryParser
from ovman_query.surface_forms import DEFAULT_CATEGORIES

if TYPE_CHECKING:
    from ovman_core.observation import Observation


def candidates(instance_map: InstanceMap, grounding: Grounding) -> dict[str, Candidate]:
    """The decision rules' view of one visit's map under a grounding."""
    scores, grounded = grounding.scores, set(grounding.grounded)
    return {
        uid: Candidate(uid, position, scores[uid], uid in grounded, moving, last_step, support)
        for uid, position, moving, last_step, support in instance_map.summaries
    }


class ReferenceAgent:
    """The two-visit reference agent with its encoder (chosen by ``encoder.kind``) and parser."""

    def __init__(
        self,
        config: OvmanConfig,
        encoder: FeatureEncoder | None = None,
        categories: Iterable[str] = DEFAULT_CATEGORIES,
    ) -> None:
        self.config = config
        self.encoder = encoder if encoder is not None else make_encoder(config.mapping_node.encoder)
        self.parser = QueryParser(config.query_node.parser, categories, self.encoder.embed_text)

    @property
    def encoder_description(self) -> str:
        """Recorded with every result."""
        return self.encoder.description

    def build_map(self, observations: Iterable[Observation], visit: int) -> InstanceMap:
        """The instance map of one visit from its recorded frames."""
        return build_map(observations, self.config.mapping_node, self.encoder, visit)

    def parse(self, text: str) -> Query:
        """(noun phrase, relation, category); raises :class:`ovman_query.parser.ParseError`."""
        return self.parser.parse(text)

    def ground(self, instance_map: InstanceMap, phrase: str) -> Grounding:
        """Scores of ``instance_map``'s instances against the text ``phrase`` (see
        :func:`grounding_phrase` for the phrase a query is grounded with)."""
        query = self.encoder.embed_text([phrase])[0]
        grounding = self.config.query_node.grounding
        return ground(instance_map, query, grounding.delta_g, grounding.score_decimals)

    def unmatched(self, query: Query, *groundings: Grounding) -> Prediction | None:
        """The abstention of ``query`` when no instance of the given groundings scores at least
        ``grounding.min_score`` ("nothing in the maps matches"); None when one does."""
        best = max((g.best for g in groundings if g.best is not None), default=None)
        floor = self.config.query_node.grounding.min_score
        if best is not None and best >= floor:
            return None
        shown = "the maps are empty" if best is None else f"the best instance scores {best:.3f}"
        return Prediction(
            None,
            query.relation,
            query.noun_phrase,
            (),
            0.0,
            f"abstain ({query.relation.value} {query.noun_phrase!r}): nothing in the maps matches "
            f"{grounding_phrase(query)!r} ({shown}, below grounding.min_score {floor})",
        )

    def associate(self, map1: InstanceMap, map2: InstanceMap) -> Association:
        return associate(map1, map2, self.config.query_node.association)

    def evidence(
        self, map1: InstanceMap, map2: InstanceMap, query: Query, groundings: tuple[Grounding, Grounding] | None = None
    ) -> ChangeEvidence:
        """Grounded candidates of both visits and the association (the change set)."""
        first, second = groundings or self.groundings(map1, map2, query)
        return ChangeEvidence(candidates(map1, first), candidates(map2, second), self.associate(map1, map2))

    def groundings(self, map1: InstanceMap, map2: InstanceMap, query: Query) -> tuple[Grounding, Grounding]:
        phrase = grounding_phrase(query)
        return self.ground(map1, phrase), self.ground(map2, phrase)

    def answer(self, map1: InstanceMap, map2: InstanceMap, query: Query | str) -> Prediction:
        """The two-visit answer to ``query`` (free text is parsed first; a parse failure raises);
        ABSTAINED when nothing in either map matches the noun phrase (:meth:`unmatched`)."""
        if isinstance(query, str):
            query = self.parse(query)
        groundings = self.groundings(map1, map2, query)
        nothing = self.unmatched(query, *groundings)
        if nothing is not None:
            return nothing
        evidence = self.evidence(map1, map2, query, groundings)
        return decide(query.relation, query.noun_phrase, evidence, self.config.task)

    def run(
        self, visit1: Iterable[Observation], visit2: Iterable[Observation], query: Query | str
    ) -> tuple[Prediction, InstanceMap, InstanceMap]:
        """Map both visits (the second with the cross-visit evidence against the first) and answer
        ``query``; returns the prediction and both maps."""
        map1, map2 = build_visits(visit1, visit2, self.config.mapping_node, self.encoder)
        return self.answer(map1, map2, query), map1, map2


def grounding_phrase(query: Query) -> str:
    """The text a query is grounded with: its category's words when the noun phrase names a
    category of the vocabulary (``settee``, ``couch`` and ``sofa`` all ground as ``sofa``), else
    the noun phrase itself (open vocabulary: ``rocking chair``)."""
    return label_text(query.category) if query.category else query.noun_phrase


def query_of(noun_phrase: str, relation: Relation | str, category: str | None = None) -> Query:
    """A query given directly (the paper's default: category and relation supplied)."""
    return Query(noun_phrase, relation if isinstance(relation, Relation) else Relation.parse(relation), category)
