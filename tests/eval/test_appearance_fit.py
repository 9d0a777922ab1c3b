"""The association's appearance cues fitted on one run's pairs and scored on another's (issue 25)."""

from __future__ import annotations

import numpy as np
import pytest

from ovman_eval.analysis.appearance_fit import FITTED, HELD_OUT, IN_SAMPLE, CueFitError, fit_cues, fit_tables, pooled
from ovman_eval.analysis.diagnostics import auroc
from ovman_eval.analysis.tables import CuePairs
from ovman_query.association import CUES


def groups(seed: int, n: int = 40, colour_signal: float = 0.4) -> dict[str, CuePairs]:
    """Pairs whose colour tells the same object apart and whose embedding and extent do not."""
    rng = np.random.default_rng(seed)

    def rows(same: bool, count: int) -> tuple[tuple[float, ...], ...]:
        colour = rng.uniform(0, 0.6, count) + (colour_signal if same else 0.0)
        return tuple(
            (round(float(e), 4), round(float(c), 4), round(float(x), 4))
            for e, c, x in zip(rng.uniform(0.8, 1.0, count), colour, rng.uniform(0, 1, count), strict=True)
        )

    return {f"g{k}": CuePairs(CUES, rows(True, n // 4), rows(False, n)) for k in range(3)}


def test_the_fit_weighs_the_cue_that_tells_the_same_object_apart_and_scores_both_splits():
    fitting, held = groups(0), groups(1)
    fit = fit_cues(fitting, held)
    assert fit.weights["colour"] > 0.8 and sum(fit.weights.values()) == pytest.approx(1.0)
    assert fit.coefficients["colour"] > 0
    x, y = pooled(fitting)
    k = CUES.index("colour")
    assert fit.auroc[IN_SAMPLE]["colour"] == pytest.approx(auroc(x[y == 1, k].tolist(), x[y == 0, k].tolist()))
    assert fit.auroc[HELD_OUT][FITTED] > 0.75 and 0.3 < fit.auroc[HELD_OUT]["extent"] < 0.7
    assert fit.pairs[IN_SAMPLE] == (30, 120)
    # Deterministic: the same pairs give the same numbers.
    assert fit_cues(fitting, held) == fit


def test_too_few_pairs_or_no_signal_is_refused_with_the_counts():
    one = {"g": CuePairs(CUES, ((0.9, 0.9, 0.9),), ((0.1, 0.1, 0.1), (0.2, 0.2, 0.2)))}
    with pytest.raises(CueFitError, match="1 same-object and 2 different-object"):
        fit_cues(one, one)
    inverted = groups(0, colour_signal=-0.4)
    # Only the colour differs, and against the same object: no cue gets a positive weight, or colour none.
    try:
        fit = fit_cues(inverted, inverted)
    except CueFitError as err:
        assert "no cue has a positive coefficient" in str(err)
    else:
        assert fit.weights["colour"] == 0.0


def test_a_run_without_the_new_cues_is_left_out_of_the_pool():
    colour_only = {"old": CuePairs(("colour",), ((0.9,),), ((0.1,),))}
    x, y = pooled({**groups(0), **colour_only})
    assert x.shape == (150, 3) and y.sum() == 30


def test_the_tables_give_every_cue_and_every_measured_variant():
    fit = fit_cues(groups(0), groups(1))
    document = {
        "fitting": "A",
        "held_out": "B",
        "held_out_dataset": "D",
        "fit": fit.to_dict(),
        "variants": {"configured": {"colour_weight": 0.5, "extent_weight": 0.0, "success": {"two_visit": [3, 4]}}},
    }
    cues, variants = fit_tables(document)
    assert [row[0] for row in cues.rows] == [*CUES, FITTED]
    assert variants.rows == (("configured", "0.50", "0.00", "0.750 (3/4)"),)
