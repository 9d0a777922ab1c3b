"""The parser over the benchmark's surface forms: training and held-out phrasings, clear failures."""

import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_query.parser import ParseError, QueryParser, evaluate_parser, held_out_accuracy
from ovman_query.surface_forms import (
    DEFAULT_CATEGORIES,
    PHRASINGS,
    SYNONYMS,
    category_vocabulary,
    held_out_phrasings,
    phrase,
    surface_names,
    training_phrasings,
)
from ovman_sim.homes import CATEGORIES as EMBEDDED_CATEGORIES

CONFIG = load_config().query_node.parser


@pytest.fixture(scope="module")
def parser():
    return QueryParser(CONFIG)


def test_every_relation_has_at_least_six_phrasings_split_into_disjoint_sets():
    assert set(PHRASINGS) == set(Relation)
    for forms in PHRASINGS.values():
        assert len(forms.train) + len(forms.held_out) >= 6
        assert forms.train and forms.held_out
        assert not set(forms.train) & set(forms.held_out)
        assert all("{x}" in form for form in (*forms.train, *forms.held_out))


def test_the_vocabulary_covers_the_embedded_world_and_names_are_unambiguous():
    assert set(EMBEDDED_CATEGORIES) <= set(DEFAULT_CATEGORIES)
    vocabulary = category_vocabulary()
    assert vocabulary["couch"] == "Sofa" and vocabulary["coffee table"] == "CoffeeTable"
    assert all(category in DEFAULT_CATEGORIES for category in SYNONYMS)


def test_every_training_phrasing_parses_for_every_surface_name():
    report = evaluate_parser(QueryParser(CONFIG), training_phrasings())
    assert report.accuracy == 1.0, report.errors[:5]
    assert report.total == sum(len(f.train) for f in PHRASINGS.values()) * sum(
        len(surface_names(c)) for c in DEFAULT_CATEGORIES
    )


def test_held_out_accuracy_is_reported_and_high():
    report = held_out_accuracy(CONFIG)
    assert report.total == sum(len(f.held_out) for f in PHRASINGS.values()) * sum(
        len(surface_names(c)) for c in DEFAULT_CATEGORIES
    )
    assert report.accuracy >= 0.85
    # Every held-out error is a clear failure or a wrong relation, never a wrong category.
    assert report.category_correct == report.total - report.failures


@pytest.mark.parametrize(
    ("text", "noun", "relation", "category"),
    [
        ("Go to where the couch used to be!", "couch", Relation.FORMER, "Sofa"),
        ("find the coffee table that was moved", "coffee table", Relation.MOVED, "CoffeeTable"),
        ("the TV that wasn't there before", "tv", Relation.APPEARED, "Television"),
        ("take me to the spot of the missing trash can", "trash can", Relation.REMOVED, "GarbageCan"),
        ("follow the moving basketball", "basketball", Relation.MOVING, "Basketball"),
        ("the arm chair that stayed put", "arm chair", Relation.STABLE, "ArmChair"),
    ],
)
def test_free_text_gives_noun_phrase_relation_and_category(parser, text, noun, relation, category):
    query = parser.parse(text)
    assert (query.noun_phrase, query.relation, query.category) == (noun, relation, category)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("colourless green ideas sleep furiously", "no known object category"),
        ("", "no words"),
        ("go to the sofa", "says which change"),
        ("the vase next to the sofa that was moved", "several categories"),
        ("blorp the chair zibble", "says which change"),
    ],
)
def test_parse_failures_raise_with_a_reason_never_a_default(parser, text, reason):
    with pytest.raises(ParseError, match=reason):
        parser.parse(text)


def test_held_out_phrasings_are_never_seen_by_the_parser():
    training = {form for forms in training_phrasings().values() for form in forms}
    for forms in held_out_phrasings().values():
        assert not training & set(forms)
    assert phrase("find the {x}", "mug") == "find the mug"
    with pytest.raises(ValueError, match="placeholder"):
        phrase("find the mug", "mug")
