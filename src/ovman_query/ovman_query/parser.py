"""Parse a free-text change query into (noun phrase, relation) over the benchmark's vocabulary.

- The **noun phrase** is the longest category surface name in the text (``coffee table``,
  ``couch``); it must name exactly one category.
- The **relation** comes from a naive Bayes classifier over word n-grams (up to
  ``parser.max_ngram`` words, function words dropped, the noun phrase replaced by ``<x>``) learned
  from the *training* phrasings only (:mod:`ovman_query.surface_forms`). A text with no known
  n-gram, or whose best relation does not beat the second by ``parser.min_log_odds``, fails.

Anything else is a parse failure (:class:`ParseError`), never a default. :func:`held_out_accuracy`
reports accuracy on the held-out phrasings, which the parser never learned from.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping

from ovman_core.config import ParserConfig
from ovman_core.relations import Relation
from ovman_query.surface_forms import (
    DEFAULT_CATEGORIES,
    PLACEHOLDER,
    category_vocabulary,
    held_out_phrasings,
    phrase,
    surface_names,
    training_phrasings,
)

NOUN_TOKEN = "<x>"
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_FUNCTION_WORDS_TEXT = (
    "a an the to of in on at for it its me my you your i we please go find take navigate show where what "
    "which who is are was were be been being has have had do does did that this someone somebody"
)
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())
"""Words that carry no relation: dropped before cues are learned or matched (negations, "still",
"there", "before" and the like stay, since they do carry one)."""


class ParseError(ValueError):
    """A query could not be parsed; the message says what was missing or ambiguous."""


@dataclasses.dataclass(frozen=True)
class Query:
    """A change query: the noun phrase as written, the relation, and the category the noun phrase
    names (None when given directly without a known category)."""

    noun_phrase: str
    relation: Relation
    category: str | None = None


def tokens(text: str) -> list[str]:
    """Lower-case word tokens; a possessive ``'s`` is dropped and ``n't`` becomes ``not``."""
    out = []
    for word in _WORD.findall(text.lower()):
        word = word.removesuffix("'s")
        if word.endswith("n't"):
            out.extend([word.removesuffix("n't"), "not"])
        else:
            out.append(word)
    return out


def cue_words(words: list[str]) -> list[str]:
    """The words cues are made of: function words dropped, adverbs reduced (``newly`` → ``new``)."""
    return [w.removesuffix("ly") if len(w) > 5 else w for w in words if w not in FUNCTION_WORDS]


def _ngrams(words: list[str], max_ngram: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for n in range(1, max_ngram + 1) for i in range(len(words) - n + 1)}


@dataclasses.dataclass(frozen=True)
class RelationModel:
    """Naive Bayes over cue n-grams: log P(n-gram | relation) with additive smoothing, learned from
    phrasings; unseen n-grams carry no evidence."""

    log_likelihood: Mapping[tuple[str, ...], Mapping[Relation, float]]
    max_ngram: int

    @classmethod
    def learn(cls, phrasings: Mapping[Relation, Iterable[str]], max_ngram: int, smoothing: float) -> RelationModel:
        counts: dict[Relation, dict[tuple[str, ...], int]] = {relation: {} for relation in phrasings}
        for relation, templates in phrasings.items():
            for template in templates:
                words = [
                    NOUN_TOKEN if w == "xplaceholderx" else w
                    for w in cue_words(tokens(template.replace(PLACEHOLDER, " xplaceholderx ")))
                ]
                for gram in _ngrams(words, max_ngram):
                    counts[relation][gram] = counts[relation].get(gram, 0) + 1
        vocabulary = sorted({gram for table in counts.values() for gram in table})
        table: dict[tuple[str, ...], dict[Relation, float]] = {gram: {} for gram in vocabulary}
        for relation, grams in counts.items():
            denominator = sum(grams.values()) + smoothing * len(vocabulary)
            for gram in vocabulary:
                table[gram][relation] = math.log((grams.get(gram, 0) + smoothing) / denominator)
        return cls(table, max_ngram)

    def scores(self, words: list[str]) -> tuple[dict[Relation, float], int]:
        """Log-likelihood per relation and how many known n-grams the words hold (the bare noun
        token, which every phrasing has, is no evidence)."""
        known = [
            gram for gram in _ngrams(words, self.max_ngram) if gram in self.log_likelihood and gram != (NOUN_TOKEN,)
        ]
        relations = next(iter(self.log_likelihood.values())).keys() if self.log_likelihood else ()
        return {r: sum(self.log_likelihood[g][r] for g in known) for r in relations}, len(known)


class QueryParser:
    """Parser over a category vocabulary and a relation model learned from the training phrasings."""

    def __init__(
        self,
        config: ParserConfig,
        categories: Iterable[str] = DEFAULT_CATEGORIES,
        phrasings: Mapping[Relation, Iterable[str]] | None = None,
    ) -> None:
        self.config = config
        self.vocabulary = category_vocabulary(categories)
        self._names = sorted(((tuple(name.split()), name) for name in self.vocabulary), key=lambda n: -len(n[0]))
        self.model = RelationModel.learn(
            phrasings if phrasings is not None else training_phrasings(), config.max_ngram, config.smoothing
        )

    def parse(self, text: str) -> Query:
        """(noun phrase, relation, category) of ``text``; raises :class:`ParseError`."""
        words = tokens(text)
        if not words:
            raise ParseError(f"cannot parse {text!r}: no words")
        found: list[tuple[int, int, str]] = []
        taken = [False] * len(words)
        for name_words, name in self._names:
            n = len(name_words)
            for i in range(len(words) - n + 1):
                if tuple(words[i : i + n]) == name_words and not any(taken[i : i + n]):
                    found.append((i, n, name))
                    taken[i : i + n] = [True] * n
        categories = sorted({self.vocabulary[name] for _, _, name in found})
        if not categories:
            raise ParseError(f"cannot parse {text!r}: it names no known object category")
        if len(categories) > 1:
            raise ParseError(f"cannot parse {text!r}: it names several categories ({', '.join(categories)})")
        start, _, name = min(found)
        # The first mention becomes the noun token; other noun words drop out of the cue text.
        rest = [NOUN_TOKEN if i == start else w for i, w in enumerate(words) if not taken[i] or i == start]
        scores, known = self.model.scores(cue_words(rest))
        if known == 0:
            raise ParseError(f"cannot parse {text!r}: none of its words says which change is meant")
        (best, best_score), (second, second_score) = sorted(scores.items(), key=lambda item: -item[1])[:2]
        if best_score - second_score < self.config.min_log_odds:
            raise ParseError(
                f"cannot parse {text!r}: the relation is ambiguous between {best.value} and {second.value} "
                f"(log-odds {best_score - second_score:.2f} < {self.config.min_log_odds})"
            )
        return Query(noun_phrase=name, relation=best, category=categories[0])


@dataclasses.dataclass(frozen=True)
class ParserReport:
    """Accuracy of the parser on a set of phrasings: a query counts when both the category and the
    relation are right; failures count as wrong."""

    total: int
    correct: int
    relation_correct: int
    category_correct: int
    failures: int
    errors: tuple[str, ...]

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def evaluate_parser(
    parser: QueryParser,
    phrasings: Mapping[Relation, Iterable[str]],
    categories: Iterable[str] = DEFAULT_CATEGORIES,
) -> ParserReport:
    """Parse every phrasing filled with every surface name of every category and score it."""
    total = correct = relation_ok = category_ok = failures = 0
    errors: list[str] = []
    for relation, templates in phrasings.items():
        for template in templates:
            for category in sorted(set(categories)):
                for name in surface_names(category):
                    text = phrase(template, name)
                    total += 1
                    try:
                        query = parser.parse(text)
                    except ParseError as err:
                        failures += 1
                        errors.append(str(err))
                        continue
                    relation_ok += query.relation is relation
                    category_ok += query.category == category
                    if query.relation is relation and query.category == category:
                        correct += 1
                    else:
                        errors.append(f"{text!r} parsed as ({query.category}, {query.relation.value})")
    return ParserReport(total, correct, relation_ok, category_ok, failures, tuple(errors))


def held_out_accuracy(config: ParserConfig, categories: Iterable[str] = DEFAULT_CATEGORIES) -> ParserReport:
    """Accuracy of a parser learned from the training phrasings on the held-out phrasings."""
    categories = tuple(categories)
    return evaluate_parser(QueryParser(config, categories), held_out_phrasings(), categories)
