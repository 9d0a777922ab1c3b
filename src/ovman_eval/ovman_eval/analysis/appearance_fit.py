"""The association's appearance cues fitted on one run and scored on another (the paper's §III-C).

A balanced logistic regression on one run's same/different-object pairs gives each cue of
:data:`ovman_query.association.CUES` a weight for the association's "fitted" variant; each cue's
AUROC and the fitted score's are given in sample and on the other run's pairs (held out). The fit is
kept in ``RUN/appearance_fit.json`` (:data:`FIT_FILE`). Pure: pairs in, numbers out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ovman_eval.analysis.diagnostics import auroc
from ovman_eval.analysis.table import Table, fmt_num
from ovman_eval.analysis.tables import CuePairs
from ovman_query.association import CUES

FIT_FILE = "appearance_fit.json"
IN_SAMPLE, HELD_OUT = "in-sample", "held-out"
FITTED = "fitted"
VARIANTS: dict[str, tuple[float, float] | None] = {
    "embedding": (0.0, 0.0),
    "colour": (1.0, 0.0),
    "extent": (0.0, 1.0),
    FITTED: None,
}
"""The association variants beside the configured one: (colour_weight, extent_weight); None: the
fitted weights."""


class CueFitError(ValueError):
    """The pairs cannot be fitted (too few of a class, or no cue carries weight)."""


@dataclasses.dataclass(frozen=True)
class CueFit:
    """A fit: the regression's ``coefficients`` (per cue) and ``intercept``, the association
    ``weights`` they give (per cue, summing to 1), each split's pair counts (same, different) and
    AUROC per cue and of the fitted score (None: a class is empty)."""

    coefficients: dict[str, float]
    intercept: float
    weights: dict[str, float]
    pairs: dict[str, tuple[int, int]]
    auroc: dict[str, dict[str, float | None]]

    @property
    def colour_weight(self) -> float:
        return self.weights["colour"]

    @property
    def extent_weight(self) -> float:
        return self.weights["extent"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cues": list(CUES),
            "coefficients": self.coefficients,
            "intercept": self.intercept,
            "weights": self.weights,
            "pairs": {split: list(counts) for split, counts in self.pairs.items()},
            "auroc": self.auroc,
        }


def pooled(groups: Mapping[str, CuePairs]) -> tuple[np.ndarray, np.ndarray]:
    """(pairs × cues) matrix and 0/1 labels of every group that recorded all of :data:`CUES`, in
    group order, same-object pairs first in each group."""
    rows: list[Sequence[float]] = []
    labels: list[int] = []
    for pairs in groups.values():
        columns = [pairs.names.index(c) for c in CUES if c in pairs.names]
        if len(columns) < len(CUES):
            continue
        for label, kind in ((1, pairs.same), (0, pairs.different)):
            rows += [[row[k] for k in columns] for row in kind]
            labels += [label] * len(kind)
    return np.array(rows, dtype=float).reshape(-1, len(CUES)), np.array(labels, dtype=int)


def _aurocs(x: np.ndarray, y: np.ndarray, score: np.ndarray) -> dict[str, float | None]:
    out: dict[str, float | None] = {
        cue: auroc(x[y == 1, k].tolist(), x[y == 0, k].tolist()) for k, cue in enumerate(CUES)
    }
    out[FITTED] = auroc(score[y == 1].tolist(), score[y == 0].tolist())
    return out


def fit_cues(fitting: Mapping[str, CuePairs], held_out: Mapping[str, CuePairs]) -> CueFit:
    """The fit on ``fitting``'s pairs, scored on them and on ``held_out``'s.

    Classes are balanced (the different-object pairs far outnumber the others); a cue's weight is its
    coefficient clipped at 0 and normalised to sum 1, the embedding taking what colour and extent leave."""
    from sklearn.linear_model import LogisticRegression

    x, y = pooled(fitting)
    if min(int((y == 1).sum()), int((y == 0).sum())) < 2:
        raise CueFitError(
            f"the fitting run has {int((y == 1).sum())} same-object and {int((y == 0).sum())} different-object "
            "pairs with every cue; at least 2 of each are needed"
        )
    model = LogisticRegression(class_weight="balanced", solver="lbfgs", max_iter=1000).fit(x, y)
    coefficients = {cue: float(c) for cue, c in zip(CUES, model.coef_[0], strict=True)}
    positive = {cue: max(c, 0.0) for cue, c in coefficients.items()}
    total = sum(positive.values())
    if total <= 0.0:
        raise CueFitError(f"no cue has a positive coefficient ({coefficients}): none tells the same object apart")
    weights = {cue: round(w / total, 6) for cue, w in positive.items()}
    weights["embedding"] = round(1.0 - weights["colour"] - weights["extent"], 6)
    x_out, y_out = pooled(held_out)
    splits = {IN_SAMPLE: (x, y), HELD_OUT: (x_out, y_out)}
    return CueFit(
        coefficients=coefficients,
        intercept=float(model.intercept_[0]),
        weights=weights,
        pairs={s: (int((yy == 1).sum()), int((yy == 0).sum())) for s, (_, yy) in splits.items()},
        auroc={
            s: _aurocs(xx, yy, model.decision_function(xx) if len(xx) else np.zeros(0))
            for s, (xx, yy) in splits.items()
        },
    )


def fit_tables(document: Mapping[str, Any]) -> list[Table]:
    """The report's tables of an ``appearance_fit.json`` document: each cue's AUROC and weight, in
    sample and held out; and each variant's static success on the held-out run, when measured."""
    fit = document["fit"]
    rows = tuple(
        (
            cue,
            fmt_num(fit["auroc"][IN_SAMPLE].get(cue)),
            fmt_num(fit["auroc"][HELD_OUT].get(cue)),
            "" if cue == FITTED else f"{fit['coefficients'][cue]:+.3f}",
            "" if cue == FITTED else fmt_num(fit["weights"][cue]),
        )
        for cue in (*CUES, FITTED)
    )
    (same_in, diff_in), (same_out, diff_out) = fit["pairs"][IN_SAMPLE], fit["pairs"][HELD_OUT]
    notes = (
        f"Logistic regression on {same_in} same-object and {diff_in} different-object same-category pairs of "
        f"{document['fitting']} (in-sample), scored on {same_out} and {diff_out} of {document['held_out']} "
        "(held out). The fitted weight of a cue is its coefficient clipped at 0, normalised to sum 1.",
    )
    tables = [
        Table(
            "appearance_fit",
            "Appearance cues fitted: AUROC in-sample and held out",
            ("cue", "AUROC in-sample", "AUROC held-out", "coefficient", "fitted weight"),
            rows,
            notes,
        )
    ]
    variants = document.get("variants")
    if variants:
        arms = list(next(iter(variants.values()))["success"])
        vrows = tuple(
            (
                name,
                fmt_num(v["colour_weight"], 2),
                fmt_num(v["extent_weight"], 2),
                *(
                    f"{v['success'][arm][0] / v['success'][arm][1]:.3f} ({v['success'][arm][0]}/{v['success'][arm][1]})"
                    if v["success"][arm][1]
                    else "–"
                    for arm in arms
                ),
            )
            for name, v in variants.items()
        )
        tables.append(
            Table(
                "appearance_variants",
                "Appearance variants of the association: static success on the held-out episodes",
                ("variant", "colour weight", "extent weight", *(f"{arm} static" for arm in arms)),
                vrows,
                (
                    f"Every variant re-associates the same cached maps of {document['held_out_dataset']}; "
                    "the embedding takes 1 − colour − extent weight.",
                ),
            )
        )
    return tables
