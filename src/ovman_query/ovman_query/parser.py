"""Parse a free-text change query into (noun phrase, relation, confidence).

Words (:mod:`ovman_query.query_text`: normalised, contractions expanded, cue typos repaired), then
the relation from cues with negation and scope (:mod:`ovman_query.relation_cues`), falling back on
the sentence model when no cue says anything, then the noun phrase (:mod:`ovman_query.noun_phrases`).
A parse fails (:class:`ParseError`, saying which) only when no relation or no noun phrase can be
read, or the text is empty or longer than ``parser.max_text_length``. :func:`held_out_report` scores
the parser on held-out phrasings (:mod:`ovman_query.surface_forms`), which it never learned from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from ovman_core.config import ParserConfig
from ovman_core.relations import Relation
from ovman_query.noun_phrases import find_noun_phrase
from ovman_query.query_text import Speller, raw_words, words
from ovman_query.relation_cues import CUES, NEGATORS, PLACE_NOUNS, read_relation
from ovman_query.surface_forms import (
    DEFAULT_CATEGORIES,
    HeldOutPhrasing,
    category_vocabulary,
    held_out_phrasings,
    known_words,
    phrase,
    training_phrasings,
)

TextEmbedder = Callable[[Sequence[str]], np.ndarray]
"""Unit text vectors (N, D) of N phrases: the agent encoder's ``embed_text``."""
PLACEHOLDER_WORD = "something"
REPAIRED_FUNCTION_WORDS = frozenset(
    {"the", "where", "there", "here", "someone", "somebody", "that", "what", "which", "before", "after", "where's"}
)
"""Function words a typo may be repaired to (besides every cue word, negator and place noun)."""
"""What stands for the noun phrase in the text the sentence model reads."""


class ParseError(ValueError):
    """A query could not be parsed; the message says what was missing."""


@dataclasses.dataclass(frozen=True)
class Query:
    """A change query: the noun phrase as written, the relation, the category the noun phrase
    names (None when it names none exactly, or when given directly without one), the parser's
    confidence in the relation (1.0 when given directly) and how the relation was read
    (``cues``, ``sentence model`` or ``given``)."""

    noun_phrase: str
    relation: Relation
    category: str | None = None
    confidence: float = 1.0
    source: str = "given"


class RelationCentroids:
    """The sentence-model fallback: one unit centroid per relation of its training phrasings,
    embedded lazily on first use. The query, its noun phrase replaced by ``something``, is embedded
    by the agent's text encoder; the nearest centroid is the relation, its confidence the softmax over
    ``parser.fallback_scale`` × cosine (below ``parser.fallback_min_confidence`` the text fails)."""

    def __init__(self, embed: TextEmbedder, phrasings: Mapping[Relation, Iterable[str]], scale: float) -> None:
        self.embed = embed
        self.phrasings = {r: tuple(t) for r, t in phrasings.items()}
        self.scale = scale
        self._centroids: tuple[tuple[Relation, ...], np.ndarray] | None = None

    def centroids(self) -> tuple[tuple[Relation, ...], np.ndarray]:
        if self._centroids is None:
            relations = tuple(self.phrasings)
            rows = []
            for relation in relations:
                vectors = self.embed([phrase(t, PLACEHOLDER_WORD) for t in self.phrasings[relation]])
                mean = vectors.mean(axis=0)
                rows.append(mean / np.linalg.norm(mean))
            self._centroids = relations, np.array(rows)
        return self._centroids

    def classify(self, text: str) -> tuple[Relation, float]:
        """The nearest relation of ``text`` and its softmax probability."""
        relations, centroids = self.centroids()
        cosines = centroids @ self.embed([text])[0]
        logits = self.scale * (cosines - cosines.max())
        probabilities = np.exp(logits) / np.exp(logits).sum()
        best = int(np.argmax(probabilities))
        return relations[best], float(probabilities[best])


class QueryParser:
    """Parser over a category vocabulary; ``embed`` enables the sentence-model fallback."""

    def __init__(
        self,
        config: ParserConfig,
        categories: Iterable[str] = DEFAULT_CATEGORIES,
        embed: TextEmbedder | None = None,
        phrasings: Mapping[Relation, Iterable[str]] | None = None,
    ) -> None:
        self.config = config
        self.vocabulary = category_vocabulary(categories)
        cue_words = {w for cue in CUES for slot in cue.slots for w in slot}
        targets = cue_words | REPAIRED_FUNCTION_WORDS | NEGATORS | PLACE_NOUNS
        nouns = {w for name in self.vocabulary for w in name.split()}
        self.speller = Speller(known_words() | nouns, targets)
        self.fallback = (
            RelationCentroids(embed, phrasings or training_phrasings(), config.fallback_scale)
            if embed is not None and config.fallback
            else None
        )

    def words(self, text: str) -> list[str]:
        """The (repaired) words of ``text``; ParseError when it is too long or has none."""
        if len(text) > self.config.max_text_length:
            raise ParseError(
                f"the text has {len(text)} characters, more than parser.max_text_length ({self.config.max_text_length})"
            )
        found = words(text, self.speller)
        if not found:
            raise ParseError(f"cannot parse {_shown(text)}: it has no words")
        return found

    def parse(self, text: str) -> Query:
        """(noun phrase, relation, category, confidence) of ``text``; raises :class:`ParseError`."""
        found = self.words(text)
        reading = read_relation(found)
        noun = find_noun_phrase(found, reading.matches, self.vocabulary)
        if noun is None:
            raise ParseError(f"cannot parse {_shown(text)}: it names no object (no noun phrase)")
        if reading.relation is not None:
            return Query(noun.text, reading.relation, noun.category, round(reading.confidence, 6), "cues")
        if self.fallback is None:
            raise ParseError(f"cannot parse {_shown(text)}: none of its words says which change is meant")
        masked = " ".join([*found[: noun.start], PLACEHOLDER_WORD, *found[noun.end :]])
        relation, confidence = self.fallback.classify(masked)
        if confidence < self.config.fallback_min_confidence:
            raise ParseError(
                f"cannot parse {_shown(text)}: none of its words says which change is meant (the sentence model's "
                f"best guess, {relation.value} at {confidence:.2f}, is below parser.fallback_min_confidence "
                f"{self.config.fallback_min_confidence})"
            )
        return Query(noun.text, relation, noun.category, round(confidence, 6), "sentence model")


def _shown(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


# --------------------------------------------------------------------------------------------- evaluation


@dataclasses.dataclass(frozen=True)
class ParserReport:
    """Accuracy of the parser on a set of phrasings: a query counts when both the noun phrase and
    the relation are right; failures count as wrong. ``confusion[true][read]`` counts relations
    (``read`` is ``failed`` for a parse failure)."""

    total: int
    correct: int
    relation_correct: int
    noun_correct: int
    failures: int
    confusion: Mapping[str, Mapping[str, int]]
    errors: tuple[str, ...]

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


FAILED = "failed"
"""The confusion column of parse failures."""


def evaluate_parser(parser: QueryParser, cases: Iterable[HeldOutPhrasing]) -> ParserReport:
    """Parse every case and score noun phrase and relation (see :class:`ParserReport`)."""
    total = correct = relation_ok = noun_ok = failures = 0
    confusion: dict[str, dict[str, int]] = {r.value: {} for r in Relation}
    errors: list[str] = []
    for case in cases:
        total += 1
        try:
            query = parser.parse(case.text)
        except ParseError as err:
            failures += 1
            row = confusion[case.relation.value]
            row[FAILED] = row.get(FAILED, 0) + 1
            errors.append(str(err))
            continue
        row = confusion[case.relation.value]
        row[query.relation.value] = row.get(query.relation.value, 0) + 1
        relation_right = query.relation is case.relation
        noun_right = query.noun_phrase == " ".join(raw_words(case.noun_phrase))
        relation_ok += relation_right
        noun_ok += noun_right
        correct += relation_right and noun_right
        if not (relation_right and noun_right):
            errors.append(f"{case.text!r} parsed as ({query.noun_phrase!r}, {query.relation.value}) [{query.source}]")
    return ParserReport(total, correct, relation_ok, noun_ok, failures, confusion, tuple(errors))


def training_cases(fill: str = "vase") -> list[HeldOutPhrasing]:
    """The training phrasings filled with ``fill`` (the parser's in-sample check)."""
    return [
        HeldOutPhrasing(phrase(t, fill), fill, relation, "train", t)
        for relation, templates in training_phrasings().items()
        for t in templates
    ]


def held_out_report(parser: QueryParser) -> ParserReport:
    """The parser on the held-out phrasings."""
    return evaluate_parser(parser, held_out_phrasings())
