"""EMRD's Remember metrics of a mapper (ovman_eval.analysis.remember)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from ovman_eval.analysis.remember import (
    forgetting_curve,
    memory_items,
    remember_table,
    serial_position,
    visit_memory,
    working_memory,
)
from ovman_mapping.instances import MapSnapshot

P = (0.0, 0.0, 0.0)


def snapshot(step: int, held: str, seen: str) -> MapSnapshot:
    return MapSnapshot(step, step, dict.fromkeys(held, P), frozenset(seen))


# a and b found at step 0; c at 1; b leaves the working map at step 3; the map built after the
# last frame keeps a (through an alias) but nothing of c.
HISTORY = (snapshot(0, "ab", "ab"), snapshot(1, "abc", "ac"), snapshot(3, "ac", "c"))
ALIASES = {"a": "v1:0"}


def test_a_track_is_forgotten_when_it_leaves_the_map_or_the_built_map_keeps_nothing_of_it():
    items = {i.uid: i for i in memory_items(HISTORY, ALIASES)}
    assert [i.uid for i in memory_items(HISTORY, ALIASES)] == ["a", "b", "c"]  # discovery order
    assert (items["a"].forgotten, items["a"].last_seen, items["a"].ttf) == (False, 1, 2)  # censored at the end
    assert (items["b"].forgotten, items["b"].last_seen, items["b"].ttf) == (True, 0, 3)
    assert (items["c"].forgotten, items["c"].last_seen, items["c"].ttf) == (True, 3, 0)
    merged = {i.uid: i for i in memory_items(HISTORY, {"a": "v1:0", "c": "v1:0"})}
    assert not merged["c"].forgotten  # remembered through the instance it merged into
    assert memory_items((), {}) == []


def test_a_visit_reduces_to_durations_serial_bins_and_load_bins():
    summary = visit_memory(HISTORY, ALIASES, load_bin=2)
    assert (summary["tracks"], summary["forgotten"]) == (3, 2)
    assert summary["durations"] == [[0, 1, 0], [2, 0, 1], [3, 1, 0]]
    assert summary["serial"] == [[1, 0, 2], [1, 1, 3], [1, 1, 0]]
    # frame 0→1 holds 2 (nothing lost), 1→3 holds 3 (b lost), the build holds 2 (c lost): one bin [2, 3]
    assert summary["load"] == [[2, 3, 2]] and summary["load_bin"] == 2
    assert visit_memory(HISTORY, ALIASES, load_bin=1)["load"] == [[2, 2, 1], [3, 1, 1]]
    with pytest.raises(ValueError, match="memory_load_bin"):
        visit_memory(HISTORY, ALIASES, load_bin=0)


def test_the_forgetting_curve_is_kaplan_meier_with_the_censored_exponential_mle():
    curve = forgetting_curve([[1, 1, 0], [2, 0, 1], [3, 1, 0]])
    assert (curve.tracks, curve.events) == (3, 2)
    assert [t for t, _ in curve.retention] == [1, 2, 3]
    assert [r for _, r in curve.retention] == pytest.approx([2 / 3, 2 / 3, 0.0])
    assert curve.strength == pytest.approx((1 + 2 + 3) / 2)
    observed = np.array([2 / 3, 2 / 3, 0.0])
    fitted = np.exp(-np.array([1.0, 2.0, 3.0]) / 3.0)
    expected = 1 - ((observed - fitted) ** 2).sum() / ((observed - observed.mean()) ** 2).sum()
    assert curve.r2 == pytest.approx(expected)
    nothing = forgetting_curve([[5, 0, 4]])
    assert (nothing.events, nothing.strength, nothing.r2, nothing.retention) == (0, None, None, ((5, 1.0),))


def test_exponential_forgetting_is_recovered_and_fits():
    rng = np.random.default_rng(7)
    ttf = np.round(rng.exponential(20.0, 4000)).astype(int)
    rows = [[min(t, 60), int(t < 60), int(t >= 60)] for t in ttf]  # censored at 60 steps
    curve = forgetting_curve(rows)
    assert curve.strength == pytest.approx(20.0, rel=0.05)
    assert curve.r2 > 0.95


def test_serial_position_averages_each_visits_bin_mean_and_pools_the_share_forgotten():
    one = {"serial": [[2, 1, 10], [2, 0, 4], [1, 1, 0]]}
    two = {"serial": [[1, 0, 6], [0, 0, 0], [1, 0, 2]]}
    assert serial_position([one, two]) == [
        ("early", pytest.approx((5 + 6) / 2), pytest.approx(1 / 3)),
        ("middle", pytest.approx(2.0), pytest.approx(0.0)),
        ("late", pytest.approx((0 + 2) / 2), pytest.approx(1 / 2)),
    ]
    assert working_memory([{"load": [[0, 3, 0], [10, 2, 1]]}, {"load": [[10, 1, 1]]}]) == [(0, 3, 0), (10, 3, 2)]


def test_the_report_table_pools_each_group_once_per_kind_of_map():
    remember = {"visit1": visit_memory(HISTORY, ALIASES, 2), "visit2": visit_memory(HISTORY, {"a": "x", "c": "y"}, 2)}

    def record(arm: str, group: str, diagnostics: dict | None) -> types.SimpleNamespace:
        return types.SimpleNamespace(arm=arm, group_id=group, diagnostics=diagnostics)

    records = [
        record("two_visit", "g0", {"remember": remember}),
        record("oracle_grounding", "g0", {"remember": remember}),
        record("two_visit", "g0", {"remember": remember}),  # another episode of the group: counted once
        record("given_answer", "g0", None),
    ]
    table = remember_table(records)  # type: ignore[arg-type]
    assert table is not None and [row[0] for row in table.rows] == ["the agent's maps"]
    row = dict(zip(table.header, table.rows[0], strict=True))
    assert (row["tracks"], row["forgotten"]) == ("6", "3")
    assert "6 transitions, 3 with a forgetting event; P(forget | load) 2–3: 3/6" in table.notes[1]
    assert remember_table([record("given_answer", "g0", None)]) is None  # type: ignore[list-item]
