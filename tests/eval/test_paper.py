"""Side by side with the paper: each quoted number next to ours, computed from the records."""

from __future__ import annotations

import dataclasses

from ovman_eval.analysis.paper import QUOTED, side_by_side_table
from ovman_eval.analysis.stats import mcnemar_exact
from ovman_eval.analysis.table import fmt_ci, fmt_p

from .benchmark_records import paired

TWO = [True, True, False, True, False, True, True, False, True, True, False, True]
ORACLE = [True, True, True, True, False, True, True, True, True, True, True, True]
KEPT = [True, False, False, True, False, False, True, False, True, True, False, True]


def ours(table, source, quantity):
    return next(row[3] for row in table.rows if row[0] == source and row[1] == quantity)


def test_every_quoted_number_gets_a_row_with_ours_beside_it():
    records = paired({"two_visit": TWO, "oracle_grounding": ORACLE, "maintained_map": KEPT})
    table = side_by_side_table(records)
    assert table.key == "paper" and len(table.rows) == len(QUOTED)
    assert [row[2] for row in table.rows] == [q.paper for q in QUOTED]
    assert ours(table, "Table III", "two_visit, static") == fmt_ci(sum(TWO), len(TWO))
    assert ours(table, "Fig. 4", "maintained map, overall") == fmt_ci(sum(KEPT), len(KEPT))
    wins = sum(g and not k for g, k in zip(ORACLE, KEPT, strict=True))
    losses = sum(k and not g for g, k in zip(ORACLE, KEPT, strict=True))
    difference = (sum(ORACLE) - sum(KEPT)) / len(KEPT)
    expected = f"{difference:+.3f} ({wins}:{losses}, p = {fmt_p(mcnemar_exact(wins, losses))})"
    assert ours(table, "Fig. 4", "two-visit reading over the maintained map") == expected
    # The grounding gap is the budget's: oracle_grounding over two_visit.
    assert ours(table, "Fig. 5a", "gap: grounding").startswith(f"{(sum(ORACLE) - sum(TWO)) / len(TWO):+.3f}")


def test_what_the_run_cannot_give_reads_a_dash_and_the_part_gives_the_multi_change_rows():
    records = paired({"two_visit": TWO})
    table = side_by_side_table(records)
    assert ours(table, "Table III", "oracle_positions, static") == "–"
    assert ours(table, "§III-C", "multi-change split, grounding handed over") == "–"
    part = [dataclasses.replace(r, episode_id=f"mc-{r.episode_id}") for r in paired({"oracle_grounding": ORACLE})]
    with_part = side_by_side_table(records, part)
    assert ours(with_part, "§III-C", "multi-change split, grounding handed over") == fmt_ci(sum(ORACLE), len(ORACLE))
    assert "12 multi-change episodes" in with_part.notes[-1]
