"""The statistics of TASK.md §7 against independent references and the paper's quoted numbers."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from ovman_eval.analysis.stats import holm, mcnemar_exact, paired_counts, poisson_binomial_sf, wilson_interval

# --- references written independently of the module -------------------------------------------


def exact_poisson_binomial_tail(k: int, numerators: list[int], denominator: int) -> Fraction:
    """P(X ≥ k) with p_i = numerators[i] / denominator, exactly: the integer coefficients of
    ∏ ((denominator − a_i) + a_i·x) are denominator^n · P(X = j)."""
    coefficients = [1]
    for a in numerators:
        shifted = [0, *coefficients]
        coefficients = [(denominator - a) * c for c in coefficients] + [0]
        coefficients = [c + a * s for c, s in zip(coefficients, shifted, strict=True)]
    return Fraction(sum(coefficients[k:]), denominator ** len(numerators))


def brute_force_tail(k: int, probs: list[float]) -> float:
    """P(X ≥ k) by summing the probability of every one of the 2^n outcomes.

    Each outcome's probability is a product of n positive factors (relative error ≤ n·eps) and the
    sum is correctly rounded, so the reference is good to ~1e-14 relative even in far tails.
    """
    p = np.asarray(probs, dtype=np.float64)
    outcomes = np.array(list(itertools.product((False, True), repeat=p.size)), dtype=bool).reshape(2**p.size, p.size)
    weights = np.prod(np.where(outcomes, p, 1.0 - p), axis=1)
    return math.fsum(weights[outcomes.sum(axis=1) >= k].tolist())


def direct_mcnemar(wins: int, losses: int) -> Fraction:
    """Two-sided exact McNemar as a direct binomial sum: min(1, 2 · P(X ≤ min) ), X ~ Bin(n, 1/2)."""
    n = wins + losses
    if n == 0:
        return Fraction(1)
    tail = Fraction(sum(math.comb(n, i) for i in range(min(wins, losses) + 1)), 2**n)
    return min(Fraction(1), 2 * tail)


def loop_holm(pvalues: list[float]) -> list[float]:
    """Holm step-down written as the textbook loop over ranks."""
    m = len(pvalues)
    ranked = sorted(range(m), key=lambda i: (pvalues[i], i))
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(ranked):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


probability = st.floats(0.0, 1.0, allow_nan=False)

# --- the paper's numbers ------------------------------------------------------------------------


def test_wilson_reproduces_the_papers_interval_for_99_of_219():
    low, high = wilson_interval(99, 219)
    assert (round(low, 3), round(high, 3)) == (0.388, 0.518)


def test_wilson_reproduces_the_papers_oracle_positions_interval():
    # 0.991 embodied with oracle positions on 219 episodes is 217 successes; the paper quotes 0.967–0.997.
    low, high = wilson_interval(217, 219)
    assert (round(low, 3), round(high, 3)) == (0.967, 0.997)


def test_mcnemar_reproduces_the_papers_p_values():
    assert mcnemar_exact(83, 11) < 1e-14
    assert mcnemar_exact(59, 22) < 1e-4
    assert round(mcnemar_exact(49, 35), 2) == 0.16


# --- Wilson -------------------------------------------------------------------------------------


@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))), st.floats(0.5, 0.999))
def test_wilson_matches_scipy_proportion_ci(kn, confidence):
    k, n = kn
    reference = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert low == pytest.approx(reference.low, abs=1e-12)
    assert high == pytest.approx(reference.high, abs=1e-12)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_wilson_widens_with_confidence_and_narrows_with_n():
    assert wilson_interval(50, 100, 0.99)[0] < wilson_interval(50, 100, 0.95)[0]
    assert wilson_interval(500, 1000)[1] - wilson_interval(500, 1000)[0] < wilson_interval(50, 100)[1] - 0.5


@pytest.mark.parametrize(
    ("k", "n", "confidence", "error"),
    [
        (0, 0, 0.95, ValueError),
        (5, 4, 0.95, ValueError),
        (-1, 4, 0.95, ValueError),
        (1, 4, 1.0, ValueError),
        (1, 4, 0.0, ValueError),
        (1.0, 4, 0.95, TypeError),
        (True, 4, 0.95, TypeError),
    ],
)
def test_wilson_rejects_bad_counts_and_levels(k, n, confidence, error):
    with pytest.raises(error):
        wilson_interval(k, n, confidence)


def test_wilson_with_no_trials_says_so():
    with pytest.raises(ValueError, match="n = 0"):
        wilson_interval(0, 0)


# --- McNemar ------------------------------------------------------------------------------------


@given(st.integers(0, 300), st.integers(0, 300))
def test_mcnemar_matches_a_direct_binomial_sum(wins, losses):
    assert mcnemar_exact(wins, losses) == pytest.approx(float(direct_mcnemar(wins, losses)), rel=1e-9)


@given(st.integers(0, 200), st.integers(0, 200))
def test_mcnemar_is_symmetric_in_wins_and_losses(wins, losses):
    assert mcnemar_exact(wins, losses) == pytest.approx(mcnemar_exact(losses, wins), rel=1e-12)


def test_mcnemar_without_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(7, 7) == 1.0


def test_mcnemar_rejects_negative_or_fractional_counts():
    with pytest.raises(ValueError, match="losses"):
        mcnemar_exact(3, -1)
    with pytest.raises(TypeError, match="wins"):
        mcnemar_exact(2.5, 1)


# --- Poisson–binomial ---------------------------------------------------------------------------


@given(st.lists(probability, min_size=0, max_size=12), st.integers(-2, 14))
@settings(max_examples=150, deadline=None)
def test_poisson_binomial_tail_matches_enumeration_of_all_outcomes(probs, k):
    expected = brute_force_tail(k, probs)
    assert poisson_binomial_sf(k, probs) == pytest.approx(expected, rel=1e-12, abs=1e-300)


DENOMINATOR = 1000


@given(st.lists(st.integers(0, 600), min_size=20, max_size=120), st.data())
@settings(max_examples=60, deadline=None)
def test_poisson_binomial_far_upper_tail_keeps_relative_precision(numerators, data):
    # Tails far below 1e-16 must come out with full relative accuracy, not as 1 - cdf.
    k = data.draw(st.integers(len(numerators) // 2, len(numerators)))
    probs = [a / DENOMINATOR for a in numerators]
    exact = exact_poisson_binomial_tail(k, numerators, DENOMINATOR)
    assert poisson_binomial_sf(k, probs) == pytest.approx(float(exact), rel=1e-9, abs=1e-300)


def test_poisson_binomial_with_equal_probabilities_is_the_binomial_tail():
    n, p = 219, 0.2
    expected = math.fsum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(91, n + 1))
    assert poisson_binomial_sf(91, [p] * n) == pytest.approx(expected, rel=1e-9)
    assert poisson_binomial_sf(91, [p] * n) < 1e-12


def test_poisson_binomial_edges():
    assert poisson_binomial_sf(0, [0.3, 0.4]) == 1.0
    assert poisson_binomial_sf(-5, []) == 1.0
    assert poisson_binomial_sf(3, [0.3, 0.4]) == 0.0
    assert poisson_binomial_sf(1, []) == 0.0
    assert poisson_binomial_sf(2, [1.0, 1.0, 0.0]) == 1.0
    assert poisson_binomial_sf(3, [1.0, 1.0, 0.0]) == 0.0
    assert poisson_binomial_sf(1, np.array([0.5])) == 0.5


@pytest.mark.parametrize("probs", [[0.2, 1.5], [-0.1], [float("nan")], [[0.1, 0.2]]])
def test_poisson_binomial_rejects_probabilities_outside_the_unit_interval(probs):
    with pytest.raises(ValueError, match="probs"):
        poisson_binomial_sf(1, probs)


def test_poisson_binomial_rejects_a_non_integer_k():
    with pytest.raises(TypeError, match="k"):
        poisson_binomial_sf(1.5, [0.5, 0.5])


# --- Holm ---------------------------------------------------------------------------------------


@given(st.lists(st.one_of(probability, st.sampled_from([0.0, 0.01, 0.05, 1.0])), max_size=12))
def test_holm_matches_a_direct_loop(pvalues):
    np.testing.assert_allclose(holm(pvalues), loop_holm(pvalues), rtol=1e-15, atol=0.0)


@given(st.lists(probability, min_size=1, max_size=12))
def test_holm_is_monotone_capped_and_never_below_the_raw_p(pvalues):
    adjusted = holm(pvalues)
    raw = np.asarray(pvalues)
    assert np.all(adjusted >= raw) and np.all(adjusted <= 1.0)
    order = np.argsort(raw, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= 0.0)


def test_holm_keeps_the_input_order():
    np.testing.assert_allclose(holm([0.04, 0.01, 0.03]), [0.06, 0.03, 0.06])
    np.testing.assert_allclose(holm([0.5, 0.001]), [0.5, 0.002])
    assert holm([]).shape == (0,)


def test_holm_rejects_values_that_are_not_probabilities():
    with pytest.raises(ValueError, match="entry 1"):
        holm([0.1, 1.2])
    with pytest.raises(ValueError, match="entry 0"):
        holm([float("nan")])


# --- paired counts ------------------------------------------------------------------------------


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=50))
def test_paired_counts_partition_the_episodes(pairs):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    counts = paired_counts(a, b)
    assert sum(counts) == len(pairs)
    assert counts.wins == sum(x and not y for x, y in pairs)
    assert counts.losses == sum(y and not x for x, y in pairs)
    assert counts.both == sum(x and y for x, y in pairs)
    reversed_counts = paired_counts(b, a)
    assert (reversed_counts.wins, reversed_counts.losses) == (counts.losses, counts.wins)


def test_paired_counts_unpack_in_the_documented_order():
    wins, losses, both, neither = paired_counts([True, True, False, False], [False, True, True, False])
    assert (wins, losses, both, neither) == (1, 1, 1, 1)
    assert paired_counts(np.array([True, False]), np.array([False, False])).wins == 1


def test_paired_counts_refuse_unequal_lengths_and_non_bools():
    with pytest.raises(ValueError, match="3 and 2"):
        paired_counts([True, False, True], [True, False])
    with pytest.raises(TypeError, match=r"b\[1\]"):
        paired_counts([True, False], [True, 1])
