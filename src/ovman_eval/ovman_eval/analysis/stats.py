"""The benchmark's statistics (TASK.md §7): intervals, paired tests, the Poisson–binomial tail, Holm.

Every function is exact where the name says so and works in float64. Counts are episodes; a
success is one Bernoulli outcome per episode. Inputs are validated and bad ones raise
:class:`ValueError` (or :class:`TypeError` for a wrong kind of value) naming the argument.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.stats import binomtest, norm, poisson_binom


def _count(value: object, name: str) -> int:
    """``value`` as a non-negative int (numpy integers included; bools and floats refused)."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer count, got the bool {value!r}")
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer count, got {type(value).__name__} {value!r}") from None
    if count < 0:
        raise ValueError(f"{name} must be a non-negative count, got {count}")
    return count


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion: ``k`` successes in ``n`` trials.

    Returns ``(low, high)`` with ``0 ≤ low ≤ k/n ≤ high ≤ 1``, the two-sided interval at level
    ``confidence`` without continuity correction, with ``z = Φ⁻¹(1 − (1 − confidence)/2)`` from
    :func:`scipy.stats.norm.ppf`. Closed form, exact up to float64 rounding (the rounding is clipped
    so that the bounds stay in [0, 1] and bracket k/n).
    The paper's 0.388–0.518 is this interval for 99/219.

    References: E. B. Wilson, "Probable inference, the law of succession, and statistical
    inference", JASA 22 (1927) 209–212; Brown, Cai & DasGupta, "Interval estimation for a binomial
    proportion", Statistical Science 16 (2001) 101–133.
    """
    k = _count(k, "k")
    n = _count(n, "n")
    if n == 0:
        raise ValueError("wilson_interval needs n ≥ 1 trials; with n = 0 there is no proportion to bound")
    if k > n:
        raise ValueError(f"k = {k} successes exceeds n = {n} trials")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    z = float(norm.ppf(0.5 + confidence / 2.0))
    z2 = z * z
    p_hat = k / n
    denominator = 1.0 + z2 / n
    centre = (p_hat + z2 / (2.0 * n)) / denominator
    half_width = (z / denominator) * math.sqrt(p_hat * (1.0 - p_hat) / n + z2 / (4.0 * n * n))
    # The bounds bracket k/n exactly; clipping only removes float64 rounding (e.g. 1e-17 at k = 0).
    return min(max(0.0, centre - half_width), p_hat), max(min(1.0, centre + half_width), p_hat)


def mcnemar_exact(wins: int, losses: int) -> float:
    """Exact two-sided McNemar test on paired outcomes, from the discordant pairs only.

    ``wins`` are episodes arm A solved and arm B did not, ``losses`` the reverse; concordant pairs
    carry no information about the difference and are not inputs. Under H0 the wins among the
    ``wins + losses`` discordant pairs are Binomial(n, 1/2); the p-value is the two-sided exact
    binomial test (:func:`scipy.stats.binomtest`), which for p = 1/2 equals
    ``min(1, 2 · P(X ≤ min(wins, losses)))``. Returns 1.0 when there are no discordant pairs.
    The paper's 83:11 gives p < 1e-14, 59:22 gives p < 1e-4 and 49:35 gives p ≈ 0.16.

    References: Q. McNemar, "Note on the sampling error of the difference between correlated
    proportions or percentages", Psychometrika 12 (1947) 153–157; the exact (binomial) form as in
    Fagerland, Lydersen & Laake, BMC Med. Res. Methodol. 13 (2013) 91.
    """
    wins = _count(wins, "wins")
    losses = _count(losses, "losses")
    discordant = wins + losses
    if discordant == 0:
        return 1.0
    return float(binomtest(wins, discordant, 0.5, alternative="two-sided").pvalue)


def poisson_binomial_sf(k: int, probs: Sequence[float] | np.ndarray) -> float:
    """``P(X ≥ k)`` for X the number of successes of independent trials with success ``probs``.

    X is Poisson–binomial (one Bernoulli(p_i) per episode; used for the single-visit arm, whose
    per-episode success is a probability, at the two-visit agent's success count k). Exact: the
    probability mass function comes from the direct convolution over the trials in float64
    (:data:`scipy.stats.poisson_binom`, Biscarri, Zhao & Brunner 2018), and the upper tail is the
    correctly rounded sum (:func:`math.fsum`) of the masses from k to n. Summing the tail rather
    than taking ``1 − cdf`` keeps full relative precision for tails far below 1e-16.
    ``k ≤ 0`` gives 1.0 and ``k > n`` gives 0.0 (including for no trials).

    References: Y. H. Wang, "On the number of successes in independent trials", Statistica Sinica
    3 (1993) 295–312; W. Biscarri, S. D. Zhao, R. J. Brunner, "A simple and fast method for
    computing the Poisson binomial distribution function", CSDA 122 (2018) 92–100.
    """
    if isinstance(k, bool | np.bool_):
        raise TypeError(f"k must be an integer count, got the bool {k!r}")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"k must be an integer count, got {type(k).__name__} {k!r}") from None
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"probs must be a 1-D sequence of per-trial probabilities, got shape {p.shape}")
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))  # NaN fails both comparisons
    if bad.size:
        raise ValueError(f"probs must lie in [0, 1]; entry {int(bad[0])} is {p[bad[0]]!r}")
    n = p.size
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    masses = poisson_binom(p).pmf(np.arange(k, n + 1))
    return min(1.0, math.fsum(masses.tolist()))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p-values, in the input order (float64 array, shape (m,)).

    With the p-values sorted ascending, ``p̃_(j) = max_{i ≤ j} min(1, (m − i + 1) · p_(i))``
    (1-based ranks): monotone in the sorted order, capped at 1, and each ≥ its raw p-value.
    Rejecting where ``p̃ ≤ α`` controls the family-wise error rate at α under any dependence.
    Ties get equal adjusted values. An empty input gives an empty array.

    Reference: S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian
    Journal of Statistics 6 (1979) 65–70.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"pvalues must be a 1-D sequence, got shape {p.shape}")
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))
    if bad.size:
        raise ValueError(f"p-values must lie in [0, 1]; entry {int(bad[0])} is {p[bad[0]]!r}")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


class PairedCounts(NamedTuple):
    """The 2×2 table of two arms on the same episodes (unpacks as a tuple in this order)."""

    wins: int
    """Episodes arm A solved and arm B did not."""
    losses: int
    """Episodes arm B solved and arm A did not."""
    both: int
    """Episodes both arms solved."""
    neither: int
    """Episodes neither arm solved."""


def paired_counts(a: Sequence[bool], b: Sequence[bool]) -> PairedCounts:
    """Count the paired outcomes of arm A (``a``) and arm B (``b``) episode by episode.

    ``a[i]`` and ``b[i]`` are the successes of the two arms on the same episode i, so the
    sequences must have equal length and hold bools (Python or numpy). ``wins:losses`` is what
    the paper reports and what :func:`mcnemar_exact` takes.
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need one entry per episode in both arms, got {len(a)} and {len(b)}")
    for name, outcomes in (("a", a), ("b", b)):
        for i, value in enumerate(outcomes):
            if not isinstance(value, bool | np.bool_):
                raise TypeError(f"{name}[{i}] must be a bool success flag, got {type(value).__name__} {value!r}")
    wins = losses = both = neither = 0
    for x, y in zip(a, b, strict=True):
        if x and y:
            both += 1
        elif x:
            wins += 1
        elif y:
            losses += 1
        else:
            neither += 1
    return PairedCounts(wins, losses, both, neither)
