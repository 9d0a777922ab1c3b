"""Grounding: G_v = {i : s_i >= max_j s_j - delta_g} (TASK.md §5.3)."""

import numpy as np
import pytest

from ovman_query.grounding import GroundingError, ground, grounded_indices

from .maps import feature, instance, instance_map, text


def test_near_tie_within_delta_keeps_both_instances():
    # cos(feature("Vase", tilt), vase) = 1 / sqrt(1 + tilt^2): 0.1 tilt scores 0.995, within 0.05.
    m = instance_map(
        2, instance("a", "Vase", 0, 0), instance("b", "Vase", 5, 0, tilt=0.1), instance("c", "Chair", 1, 1)
    )
    g = ground(m, text("Vase"), delta_g=0.05)
    assert g.grounded == ("a", "b")
    assert g.scores["b"] == pytest.approx(1 / np.sqrt(1.01))
    assert g.best == pytest.approx(1.0)


def test_instances_beyond_delta_are_not_grounded():
    m = instance_map(2, instance("a", "Vase", 0, 0), instance("b", "Vase", 5, 0, tilt=0.5))
    assert ground(m, text("Vase"), delta_g=0.05).grounded == ("a",)
    assert ground(m, text("Vase"), delta_g=0.2).grounded == ("a", "b")


def test_delta_zero_keeps_only_exact_ties_best_first():
    assert grounded_indices(np.array([0.2, 0.9, 0.9, 0.5]), 0.0).tolist() == [1, 2]
    assert grounded_indices(np.array([0.2, 0.85, 0.9]), 0.1).tolist() == [2, 1]
    assert grounded_indices(np.array([]), 0.1).tolist() == []


def test_empty_map_grounds_nothing():
    g = ground(instance_map(1), text("Vase"), delta_g=0.05)
    assert g.grounded == () and g.best is None


def test_query_from_another_encoder_is_a_named_error():
    m = instance_map(1, instance("a", "Vase", 0, 0))
    with pytest.raises(GroundingError, match="different encoders"):
        ground(m, np.ones(7) / np.sqrt(7), delta_g=0.05)
    with pytest.raises(GroundingError, match="delta_g"):
        ground(m, feature("Vase"), delta_g=-0.1)


def test_rounded_scores_make_float_noise_a_tie_in_map_order():
    # A tilt of 1e-4 costs "b" 5e-9 of cosine: a strict loss as computed, a tie at 6 decimals.
    m = instance_map(2, instance("b", "Vase", 5, 0, tilt=1e-4), instance("a", "Vase", 0, 0))
    assert ground(m, text("Vase"), delta_g=0.0).grounded == ("a",)
    rounded = ground(m, text("Vase"), delta_g=0.0, decimals=6)
    assert rounded.grounded == ("b", "a") and rounded.scores == {"a": 1.0, "b": 1.0}
