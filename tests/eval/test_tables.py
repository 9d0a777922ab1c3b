"""The benchmark tables: counts, intervals and tests taken from the records and checked against the
statistics module; rendering; refusing unpaired records."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from ovman_core.config import load_config
from ovman_eval.analysis.stats import holm, mcnemar_exact, poisson_binomial_sf, wilson_interval
from ovman_eval.analysis.table import EMBODIED, STATIC, Table, TableError, fmt_p, fmt_rate
from ovman_eval.analysis.tables import (
    Outcomes,
    all_tables,
    anti_shortcut_table,
    by_instances_table,
    embodied_table,
    error_budget,
    failure_table,
    headline_table,
    maintained_table,
    map_table,
    margin_table,
    memory_table,
    pairwise_table,
    parser_confusion_table,
    parser_table,
    per_scene_table,
    relation_comparisons_table,
    seeds_table,
    single_vs_two_table,
    static_table,
    text_query_table,
)
from ovman_query.arms import PARSE_FAILED
from ovman_query.parser import QueryParser, held_out_report

from .benchmark_records import RELATIONS, map_summary, memory, paired, record

TWO = [True, True, False, True, False, True, True, False, True, True, False, True]
ORACLE = [True, True, True, True, False, True, True, True, True, True, True, True]
SINGLE = [False, True, False, False, False, True, False, False, True, False, False, False]


def cell(table: Table, row_label: str, column: str) -> str:
    column_index = table.header.index(column)
    for row in table.rows:
        if row[0] == row_label:
            return row[column_index]
    raise KeyError(row_label)


def test_static_table_overall_cell_is_the_wilson_interval_of_the_successes():
    records = paired({"two_visit": TWO, "oracle_grounding": ORACLE})
    table = static_table(records)
    low, high = wilson_interval(sum(TWO), len(TWO))
    assert cell(table, "two_visit (rung 1)", "overall [95% CI]") == (
        f"{sum(TWO) / len(TWO):.3f} [{low:.3f}, {high:.3f}] ({sum(TWO)}/{len(TWO)})"
    )
    assert cell(table, "oracle_grounding (rung 2)", "moved") == "1.000 (2/2)"


def test_single_visit_appears_as_its_expected_success_and_its_seeded_pick():
    records = paired({"two_visit": TWO})
    probs = [0.25] * len(TWO)
    records += [
        record(f"e{i}", "single_visit", s, s, relation=records[i].relation, probability=p)
        for i, (s, p) in enumerate(zip(SINGLE, probs, strict=True))
    ]
    table = static_table(records)
    assert cell(table, "single_visit (expected)", "overall [95% CI]") == "0.250 (Σp = 3.0)"
    assert cell(table, "single_visit (seeded pick)", "overall [95% CI]").endswith(f"({sum(SINGLE)}/{len(SINGLE)})")


def test_single_vs_two_uses_the_exact_poisson_binomial_tail_and_holm_over_relations():
    records = paired({"two_visit": TWO})
    probs = [0.1 * (i % 5) for i in range(len(TWO))]
    records += [
        record(f"e{i}", "single_visit", False, False, relation=records[i].relation, probability=p)
        for i, p in enumerate(probs)
    ]
    table = single_vs_two_table(records)
    assert table is not None
    overall = poisson_binomial_sf(sum(TWO), probs)
    assert cell(table, "overall", "P(X ≥ k)") == (f"{overall:.1e}" if overall < 1e-3 else f"{overall:.3f}")
    o = Outcomes(records)
    raw = []
    for relation in o.relations:
        episodes = o.relation_episodes(relation)
        raw.append(
            poisson_binomial_sf(
                sum(o.success("two_visit", STATIC, episodes)), o.probabilities("single_visit", episodes)
            )
        )
    adjusted = holm(raw)
    for relation, p in zip(o.relations, adjusted, strict=True):
        assert cell(table, relation, "p (Holm)") == (f"{p:.1e}" if 0 < p < 1e-3 else f"{p:.3f}" if p else "0")


def test_failure_table_partitions_the_episodes_and_counts_lost_in_navigation():
    records = [
        record("a", "two_visit", True, True),
        record("b", "two_visit", True, False),  # lost in navigation
        record("c", "two_visit", False, False, failure="abstained"),
        record("d", "two_visit", False, False, failure="wrong_instance", relation="removed"),
        record("e", "two_visit", False, False, failure="far"),
        record("f", "two_visit", False, True, failure="other"),
    ]
    table = failure_table(records)
    counts = {row[0]: int(row[1]) for row in table.rows}
    assert counts["success"] == 2 and counts["abstained"] == 1 and counts["wrong instance"] == 1
    assert counts["far (> far_miss_distance)"] == 1 and counts["the rest"] == 1
    assert sum(v for k, v in counts.items() if not k.startswith("lost")) == len(records)
    assert counts["lost in navigation (subset of success)"] == 1
    assert cell(table, "wrong instance", "removed") == "1"


def test_error_budget_gaps_are_rung_differences_with_mcnemar_between_rungs():
    positions = [True] * len(TWO)
    records = paired(
        {"two_visit": TWO, "oracle_grounding": ORACLE, "oracle_positions": positions, "given_answer": positions}
    )
    budget = error_budget(records)
    n = len(TWO)
    assert budget.static["two_visit"] == pytest.approx(sum(TWO) / n)
    _, _, grounding = budget.gaps["grounding"]
    assert grounding == pytest.approx((sum(ORACLE) - sum(TWO)) / n)
    wins = sum(o and not t for o, t in zip(ORACLE, TWO, strict=True))
    losses = sum(t and not o for o, t in zip(ORACLE, TWO, strict=True))
    assert budget.tests["grounding"] == (wins, losses, mcnemar_exact(wins, losses))
    assert budget.gaps["navigation"][2] == pytest.approx(0.0)
    assert budget.gaps["answer selection"][2] == pytest.approx(0.0)


def test_relation_comparisons_are_holm_adjusted_per_pair_of_arms():
    records = paired({"two_visit": TWO, "category_only": SINGLE})
    table = relation_comparisons_table(records, STATIC)
    assert table is not None
    o = Outcomes(records)
    raw = []
    for relation in o.relations:
        episodes = o.relation_episodes(relation)
        a = o.success("two_visit", STATIC, episodes)
        b = o.success("category_only", STATIC, episodes)
        raw.append(
            mcnemar_exact(
                sum(x and not y for x, y in zip(a, b, strict=True)), sum(y and not x for x, y in zip(a, b, strict=True))
            )
        )
    adjusted = holm(raw)
    rows = [r for r in table.rows if r[0] == "category_only"]
    assert [r[1] for r in rows] == o.relations
    assert [r[-1] for r in rows] == [f"{p:.3f}" for p in adjusted]


def test_pairwise_table_holds_wins_and_losses_of_every_pair():
    records = paired({"two_visit": TWO, "single_visit": SINGLE, "category_only": SINGLE})
    table = pairwise_table(records, EMBODIED)
    assert table is not None
    wins = sum(t and not s for t, s in zip(TWO, SINGLE, strict=True))
    losses = sum(s and not t for t, s in zip(TWO, SINGLE, strict=True))
    assert cell(table, "two_visit", "single_visit") == f"{wins}:{losses} (p {mcnemar_exact(wins, losses):.3f})"
    assert cell(table, "single_visit", "two_visit").startswith(f"{losses}:{wins} ")
    assert cell(table, "single_visit", "single_visit") == "–"


def test_breakdowns_bin_instances_two_three_four_plus_and_sort_scenes_naturally():
    records = [
        record("a", "two_visit", True, True, instances=2, scene="embedded-10"),
        record("b", "two_visit", False, False, instances=3, scene="embedded-2"),
        record("c", "two_visit", True, True, instances=7, scene="embedded-2"),
    ]
    bins = by_instances_table(records, STATIC)
    assert [r[0] for r in bins.rows] == ["2", "3", "4+"]
    assert [r[1] for r in bins.rows] == ["1", "1", "1"]
    scenes = per_scene_table(records, EMBODIED)
    assert [r[0] for r in scenes.rows] == ["embedded-2", "embedded-10"]
    assert cell(scenes, "embedded-2", "two_visit") == "0.500 (1/2)"


def test_anti_shortcut_table_shows_both_tests_of_every_arm():
    records = [
        record("a", "category_only", False, False, category_static=True),
        record("b", "category_only", False, False, category_static=True),
    ]
    table = anti_shortcut_table(records)
    assert cell(table, "category_only", "static: OVMAN") == "0.000 (0/2)"
    assert cell(table, "category_only", "static: any instance") == "1.000 (2/2)"


def test_static_only_records_give_no_embodied_tables():
    records = [record("a", "two_visit", True), record("b", "two_visit", False)]
    assert embodied_table(records) is None
    assert relation_comparisons_table(records, EMBODIED) is None
    assert "embodied success [95% CI]" not in headline_table(records).header
    assert all(t.key != "embodied" for t in all_tables(records))


def test_tables_refuse_arms_that_are_not_paired_on_the_same_episodes():
    records = [
        record("a", "two_visit", True, True),
        record("b", "two_visit", True, True),
        record("a", "category_only", False, False),
    ]
    with pytest.raises(TableError, match="category_only has results for 1 of 2"):
        static_table(records)


def test_paired_tables_use_one_seed_and_the_seeds_table_lists_each():
    records = paired({"two_visit": [True, False]}) + paired({"two_visit": [True, True]}, seed=1)
    assert cell(static_table(records), "two_visit (rung 1)", "overall [95% CI]").endswith("(1/2)")
    assert cell(static_table(records, seed=1), "two_visit (rung 1)", "overall [95% CI]").endswith("(2/2)")
    seeds = seeds_table(records)
    assert seeds is not None
    assert cell(seeds, "two_visit", "seed 0 (static)") == "0.500 (1/2)"
    assert cell(seeds, "two_visit", "seed 1 (embodied)") == "1.000 (2/2)"
    assert seeds_table(paired({"two_visit": [True]})) is None


def test_memory_table_pools_change_counts_and_map_table_counts_each_group_once():
    first = memory(0.8, predicted=4, correct=3, relevant=6)
    second = memory(0.6, predicted=6, correct=3, relevant=4)
    diagnostics = [
        {"visit1": map_summary(1.0), "visit2": map_summary(0.5), "memory": first},
        {"visit1": map_summary(0.0), "visit2": map_summary(0.5), "memory": second},
    ]
    records = [record(f"e{i}", "two_visit", True, True, diagnostics=d) for i, d in enumerate(diagnostics)]
    records += [record("e0", "single_visit", True, True, diagnostics={"visit2": map_summary(0.5)})]
    records += [record("e1", "single_visit", True, True, diagnostics={"visit2": map_summary(0.5)})]
    table = memory_table(records)
    assert table is not None
    assert [r[0] for r in table.rows] == ["two_visit"]
    assert cell(table, "two_visit", "SIR") == "0.700"
    assert cell(table, "two_visit", "moved P") == f"{6 / 10:.3f}"
    assert cell(table, "two_visit", "moved R") == f"{6 / 10:.3f}"
    assert cell(table, "two_visit", "removed P") == "–"
    maps = map_table(records)
    assert maps is not None
    assert cell(maps, "visit1", "AEC") == "0.500"


def test_markdown_escapes_pipes_and_html_escapes_markup():
    table = Table("t", "A <b> table", ("a|b", "c"), (("x|y", "<z>"),), ("note & more",))
    md = table.markdown()
    assert "| a\\|b | c |" in md and "|---|---|" in md and "x\\|y" in md
    page = table.html()
    assert "&lt;z&gt;" in page and "A &lt;b&gt; table" in page and "note &amp; more" in page
    with pytest.raises(TableError):
        Table("t", "bad", ("a", "b"), (("only one",),))


def test_headline_table_reports_spl_over_all_episodes_and_over_successes():
    records = [record("a", "two_visit", True, True, spl=0.5), record("b", "two_visit", False, False)]
    table = headline_table(records)
    assert cell(table, "two_visit", "SPL") == "0.250"
    assert cell(table, "two_visit", "SPL | success") == "0.500"


def test_seeds_table_gives_the_range_and_standard_deviation_over_seeds():
    records = paired({"two_visit": [True, False, False, False]})
    records += paired({"two_visit": [True, True, True, False]}, seed=1)
    records += paired({"two_visit": [True, True, False, False]}, seed=2)
    seeds = seeds_table(records)
    assert seeds is not None
    assert cell(seeds, "two_visit", "range (static)") == "0.500"
    assert cell(seeds, "two_visit", "sd (static)") == f"{statistics.stdev([0.25, 0.75, 0.5]):.3f}"


def test_margin_table_subtracts_the_single_visit_arm_per_seed_and_flags_a_sign_change():
    def run(two: list[bool], single: list[bool], probability: float, seed: int) -> list:
        out = paired({"two_visit": two}, seed=seed)
        out += [
            record(f"e{i}", "single_visit", s, s, seed=seed, probability=probability, relation=RELATIONS[i % 6])
            for i, s in enumerate(single)
        ]
        return out

    records = run([True, True, False, False], [True, False, False, False], 0.25, 0)
    records += run([False, True, False, False], [True, True, True, False], 0.25, 1)
    table = margin_table(records)
    assert table is not None
    assert cell(table, "0", "static margin").startswith("+0.250 (0.500 − 0.250)")
    assert cell(table, "1", "embodied margin").startswith("-0.500 (0.250 − 0.750)")
    assert cell(table, "range", "static margin") == "+0.000 … +0.250 (reaches zero)"
    assert cell(table, "range", "embodied margin") == "-0.500 … +0.250 (sign changes)"
    assert margin_table(paired({"two_visit": [True]})) is None


def test_text_query_table_pairs_supplied_and_inferred_relations_and_counts_parse_failures():
    supplied = [True, True, True, False, True, False]
    inferred = [True, False, False, False, True, True]
    records = paired({"two_visit": supplied, "two_visit_text": inferred})
    records = [
        dataclasses.replace(r, static=dataclasses.replace(r.static, explanation=f"{PARSE_FAILED}: no relation"))
        if r.arm == "two_visit_text" and r.episode_id in ("e1", "e2")
        else r
        for r in records
    ]
    table = text_query_table(records)
    assert table is not None
    assert cell(table, STATIC, "wins:losses") == "2:1"
    assert cell(table, STATIC, "p") == f"{mcnemar_exact(2, 1):.3f}"
    assert table.notes[0].startswith("2 of 6 query texts failed to parse")
    assert text_query_table(paired({"two_visit": supplied})) is None


def test_parser_table_reports_accuracy_and_the_held_out_confusion():
    config = load_config()
    held_out = held_out_report(QueryParser(config.query_node.parser))
    table = parser_table([("held-out phrasings", held_out)])
    assert cell(table, "held-out phrasings", "parse failures") == str(held_out.failures)
    assert cell(table, "held-out phrasings", "accuracy [95% CI]").endswith(f"({held_out.correct}/{held_out.total})")
    confusion = parser_confusion_table(held_out)
    assert confusion.header[0] == "asked" and confusion.header[-1] == "failed"
    assert sum(int(c) for row in confusion.rows for c in row[1:]) == held_out.total
    assert cell(confusion, "stable", "stable") == str(held_out.confusion["stable"].get("stable", 0))


def test_fig_4_pairs_the_maintained_map_with_the_two_visit_reading_per_relation_with_exact_mcnemar():
    records = paired({"oracle_grounding": ORACLE, "maintained_map": TWO})
    table = maintained_table(records)
    assert table is not None and table.key == "maintained"
    o = Outcomes(records)
    overall = table.rows[-1]
    assert overall[0] == "overall"
    wins = sum(g and not m for g, m in zip(ORACLE, TWO, strict=True))
    losses = sum(m and not g for g, m in zip(ORACLE, TWO, strict=True))
    assert cell(table, "overall", "wins:losses (static)") == f"{wins}:{losses}"
    assert cell(table, "overall", "p (static)") == fmt_p(mcnemar_exact(wins, losses))
    for relation in o.relations:
        episodes = o.relation_episodes(relation)
        k, n = o.count("maintained_map", STATIC, episodes)
        assert cell(table, relation, "maintained_map (static)") == fmt_rate(k, n)
    assert maintained_table(paired({"oracle_grounding": ORACLE, "two_visit": TWO})) is None
    assert "maintained" in [t.key for t in all_tables(records)]


def test_embodied_table_gives_actions_per_episode_over_every_run_and_over_successes():
    records = paired({"two_visit": [True, False, True, False]})
    steps = {"e0": 10, "e1": 0, "e2": 30, "e3": 40}
    records = [
        dataclasses.replace(r, embodied=dataclasses.replace(r.embodied, steps=steps[r.episode_id])) for r in records
    ]
    table = embodied_table(records)
    assert table is not None
    assert cell(table, "two_visit", "actions") == "20.0"
    assert cell(table, "two_visit", "actions | success") == "20.0"  # (10 + 30) / 2
    records = [
        dataclasses.replace(r, embodied=dataclasses.replace(r.embodied, steps=7)) if r.episode_id == "e0" else r
        for r in records
    ]
    assert cell(embodied_table(records), "two_visit", "actions | success") == "18.5"
