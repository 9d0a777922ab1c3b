"""Stress conditions: records per condition, the comparison tables, re-rendered tours and a run
with ``conditions=("low_light",)`` on a tiny embedded dataset."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil

import numpy as np
import pytest

from ovman_core.relations import Relation
from ovman_eval.analysis.stats import mcnemar_exact
from ovman_eval.analysis.stress import condition_map_table, condition_success_table, stress_tables
from ovman_eval.analysis.tables import all_tables, headline_table
from ovman_eval.benchmark.condition_frames import (
    ConditionSensor,
    StressCondition,
    recording_sim_config,
    stress_condition,
)
from ovman_eval.benchmark.request import BenchmarkRequest, parse_conditions
from ovman_eval.benchmark.runner import run_benchmark
from ovman_eval.cli.main import main
from ovman_eval.generation.dataset import EPISODES, MANIFEST, read_episodes
from ovman_eval.runs.results import (
    BASELINE,
    RESULTS,
    ResultsError,
    baseline_records,
    read_results,
    record_from_dict,
    sort_key,
    to_json_line,
)
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_query.arms import Arm
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.recording import read_visit

from .benchmark_records import map_summary, memory, record
from .generation_setup import config_file, one_scene_dataset, small_config

LOW = "low_light"
ARMS = (Arm.TWO_VISIT, Arm.GIVEN_ANSWER)


def under(records, condition):
    return [dataclasses.replace(r, condition=condition) for r in records]


def outcomes(arm, base, low, embodied=True):
    """Records of ``arm`` on episodes e0, e1, … with baseline successes ``base`` and low-light ``low``."""
    made = [record(f"e{i}", arm, s, s if embodied else None) for i, s in enumerate(base)]
    made += under([record(f"e{i}", arm, s, s if embodied else None) for i, s in enumerate(low)], LOW)
    return made


def row_of(table, *cells):
    (row,) = [r for r in table.rows if r[: len(cells)] == cells]
    return row


# ---- records ---------------------------------------------------------------------------------------


def test_a_baseline_record_is_written_without_a_condition_and_old_lines_load_as_baseline():
    baseline = record("e0", "two_visit", True, True)
    line = to_json_line(baseline)
    assert "condition" not in json.loads(line)  # a baseline run writes the lines it wrote before conditions
    assert record_from_dict(json.loads(line)) == baseline
    assert record_from_dict(json.loads(line)).condition == BASELINE


def test_a_condition_record_round_trips_and_sorts_after_the_baseline():
    low = dataclasses.replace(record("e0", "two_visit", True, True), condition=LOW)
    document = json.loads(to_json_line(low))
    assert document["condition"] == LOW and record_from_dict(document) == low
    assert low.key == ("e0", "two_visit", 0, LOW) != record("e0", "two_visit", True).key
    order = {"e0": 0, "e1": 1}
    base_e1 = record("e1", "given_answer", True)
    assert sort_key(base_e1, order, ("two_visit", "given_answer")) < sort_key(low, order, ("two_visit",))
    document["condition"] = "fog"
    with pytest.raises(ResultsError, match="condition 'fog'"):
        record_from_dict(document)


def test_baseline_records_keep_the_baseline_or_the_only_condition_present():
    base = [record("e0", "two_visit", True)]
    low = under([record("e0", "two_visit", False)], LOW)
    assert baseline_records(base + low) == base
    assert baseline_records(low) == low  # a dataset recorded under one condition
    assert baseline_records([]) == []


def test_conditions_are_parsed_in_order_and_unknown_ones_are_refused():
    assert parse_conditions("texture, low_light") == ("low_light", "texture")
    assert parse_conditions(["low_light", "baseline", "low_light"]) == ("low_light",)
    with pytest.raises(BenchmarkError, match="unknown condition 'fog'"):
        parse_conditions("fog")
    plain = BenchmarkRequest("ds", ARMS, (0,))  # type: ignore[arg-type]
    assert "conditions" not in plain.to_dict()  # a baseline run's identity is unchanged
    assert BenchmarkRequest("ds", ARMS, (0,), conditions=("low_light",)).to_dict()["conditions"] == [LOW]  # type: ignore[arg-type]


def test_condition_seeds_depend_on_the_episode_seed_and_the_condition():
    assert stress_condition(LOW, 7) == stress_condition(LOW, 7)
    assert len({stress_condition(LOW, 7).seed, stress_condition(LOW, 8).seed, stress_condition("texture", 7).seed}) == 3
    with pytest.raises(ValueError, match="unknown stress condition 'baseline'"):
        StressCondition("baseline", 0)


# ---- tables ----------------------------------------------------------------------------------------


def test_the_success_table_counts_lost_and_gained_episodes_per_arm_and_gate():
    records = outcomes("two_visit", [True, True, True, False, False], [True, False, False, False, True])
    records += outcomes("given_answer", [True] * 5, [True] * 5)
    table = condition_success_table(records)
    assert table is not None and table.key == "stress_success"
    two = row_of(table, LOW, "two_visit", "static")
    assert two[3:] == ("0.600 (3/5)", "0.400 (2/5)", "2:1", f"{mcnemar_exact(2, 1):.3f}")
    assert row_of(table, LOW, "two_visit", "embodied")[5] == "2:1"
    assert row_of(table, LOW, "given_answer", "static")[5:] == ("0:0", "1.000")
    assert "5 paired episodes" in table.notes[-1]


def test_a_discordant_majority_gives_the_exact_mcnemar_p():
    records = outcomes("two_visit", [True] * 9 + [False], [False] * 9 + [True], embodied=False)
    table = condition_success_table(records)
    assert [r[2] for r in table.rows] == ["static"]  # static-only records: no embodied row
    assert row_of(table, LOW, "two_visit", "static")[5:] == ("9:1", f"{mcnemar_exact(9, 1):.3f}")
    assert mcnemar_exact(9, 1) == pytest.approx(0.021484375)


def test_the_map_table_gives_condition_minus_baseline_over_groups():
    def diagnosed(episode, aec, sir, condition, pa=0.9):
        visit1 = {**map_summary(aec), "pa": pa}
        diagnostics = {"visit1": visit1, "visit2": map_summary(aec), "memory": memory(sir, 2, 1, 2)}
        made = record(episode, "two_visit", True, True, diagnostics=diagnostics)
        return dataclasses.replace(made, condition=condition)

    records = [diagnosed("e0", 0.8, 0.9, BASELINE), diagnosed("e1", 0.6, 0.5, BASELINE)]
    records += [diagnosed("e0", 0.5, 0.6, LOW, pa=0.8999), diagnosed("e1", 0.7, 0.5, LOW)]
    records.append(record("e0", "given_answer", True, True))  # no diagnostics: ignored
    table = condition_map_table(records)
    aec = row_of(table, LOW, "visit 1 AEC")
    assert aec[2:] == ("0.700", "0.600", "-0.100", "2", "1:1", "1.000")
    sir = row_of(table, LOW, "SIR")
    assert sir[4] == f"{(-0.3 + 0.0) / 2:+.3f}" and sir[6] == "1:0"
    assert row_of(table, LOW, "visit 2 PA")[4] == "+0.000"
    assert row_of(table, LOW, "visit 1 PA")[4:7] == ("-5.0e-05", "2", "1:0")  # a difference below 0.0005 still shows


def test_without_a_condition_there_is_no_stress_table_and_baseline_tables_ignore_conditions():
    base = outcomes("two_visit", [True, False, True], [])
    assert condition_success_table(base) is None and condition_map_table(base) is None and stress_tables(base) == []
    mixed = outcomes("two_visit", [True, False, True], [False, False, False])
    assert headline_table(mixed).rows == headline_table(base).rows  # the low-light records do not leak in
    keys = [t.key for t in all_tables(mixed)]
    assert keys[-1] == "stress_success" and keys[:-1] == [t.key for t in all_tables(base)]


# ---- re-rendered tours and a run -------------------------------------------------------------------


@pytest.fixture(scope="module")
def config():
    return small_config()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, config):
    return one_scene_dataset(tmp_path_factory, (Relation.MOVED, Relation.MOVING), config)


def test_texture_re_renders_colours_only_and_low_light_blinds_beyond_visibility(dataset, config):
    episode = next(e for e in read_episodes(dataset) if e.relation is Relation.MOVING)  # the mover moves objects
    world = EmbeddedWorld(recording_sim_config(dataset, config))
    frames = list(read_visit(dataset / episode.recordings.visit2))
    texture = ConditionSensor(world, episode.scene.name, stress_condition("texture", episode.seeds.episode), "v2")
    low = ConditionSensor(world, episode.scene.name, stress_condition(LOW, episode.seeds.episode), "v2")
    visibility = config.sim_node.conditions.low_light_visibility
    recoloured = 0
    for frame in frames:
        recorded, textured = frame.observation, texture(frame)
        assert np.array_equal(textured.depth, recorded.depth, equal_nan=True)
        assert np.array_equal(textured.segments, recorded.segments)
        assert textured.pose == recorded.pose and textured.step == recorded.step
        recoloured += not np.array_equal(textured.rgb, recorded.rgb)
    assert recoloured == len(frames)
    margin = 0.2  # (m): the recorded depth is the noisy sensor's; visibility applies to the true depth
    blinded = 0
    for frame in frames:
        dark, recorded = low(frame), frame.observation
        seen = np.isfinite(dark.depth)
        assert np.array_equal(dark.depth[seen], recorded.depth[seen])
        assert not seen[np.isnan(recorded.depth)].any()
        with np.errstate(invalid="ignore"):
            assert not seen[recorded.depth > visibility + margin].any()
            lost = ~seen & (recorded.depth < visibility - margin)
        assert not lost.any() and (dark.segments[~seen & np.isfinite(recorded.depth)] == 0).all()
        blinded += int((~seen & np.isfinite(recorded.depth)).sum())
        assert dark.rgb.mean() < recorded.rgb.mean()
    assert blinded > 0


@pytest.fixture(scope="module")
def stress_run(tmp_path_factory, dataset, config):
    cache = tmp_path_factory.mktemp("stress_maps")
    req = BenchmarkRequest(dataset, ARMS, (0,), conditions=(LOW,))
    summary = run_benchmark(req, config, out_root=tmp_path_factory.mktemp("stress_runs"), cache_dir=cache)
    return summary, cache


def test_a_low_light_run_evaluates_the_same_episodes_under_both_conditions(stress_run, dataset):
    summary, cache = stress_run
    episodes = [e.episode_id for e in read_episodes(dataset)]
    records = read_results(summary.run_dir)
    assert [(r.condition, r.episode_id, r.arm) for r in records] == [
        (c, e, a.value) for c in (BASELINE, LOW) for e in episodes for a in ARMS
    ]
    assert all(r.embodied is not None for r in records)
    low = [r for r in records if r.condition == LOW and r.arm == "two_visit"]
    base = [r for r in records if r.condition == BASELINE and r.arm == "two_visit"]
    assert [r.diagnostics for r in low] != [r.diagnostics for r in base]  # the maps were built from dark frames
    given = [r for r in records if r.arm == "given_answer"]
    assert all(r.embodied.success for r in given)  # the oracle navigates in the dark as well
    entries = sorted(p.name for p in cache.iterdir())
    assert len(entries) == 2 * len({e.group_id for e in read_episodes(dataset)})
    assert sum(f"-{LOW}-" in name for name in entries) == len(entries) // 2  # one map entry per condition


def test_the_baseline_lines_of_a_stress_run_are_those_of_a_baseline_run(stress_run, dataset, config, tmp_path):
    summary, cache = stress_run
    plain = run_benchmark(BenchmarkRequest(dataset, ARMS, (0,)), config, out_root=tmp_path, cache_dir=cache)
    stress_lines = (summary.run_dir / RESULTS).read_text().splitlines()
    baseline_lines = (plain.run_dir / RESULTS).read_text().splitlines()
    assert stress_lines[: len(baseline_lines)] == baseline_lines
    assert all('"condition":"low_light"' in line for line in stress_lines[len(baseline_lines) :])


def test_an_interrupted_stress_run_resumes_the_missing_condition_units(stress_run, dataset, config, tmp_path):
    summary, cache = stress_run
    run_dir = tmp_path / "run"
    shutil.copytree(summary.run_dir, run_dir)
    lines = (run_dir / RESULTS).read_text().splitlines()
    (run_dir / "results.partial.jsonl").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    (run_dir / "sketches.partial.jsonl").write_text((run_dir / "sketches.jsonl").read_text())
    for name in (RESULTS, "sketches.jsonl", "finished.json"):
        (run_dir / name).unlink()
    seen = []
    req = BenchmarkRequest(dataset, ARMS, (0,), conditions=(LOW,))
    run_benchmark(req, config, run_dir=run_dir, cache_dir=cache, progress=seen.append)
    assert (run_dir / RESULTS).read_bytes() == (summary.run_dir / RESULTS).read_bytes()
    assert [p.last for p in seen] == [f"{g} ({LOW})" for g in dict.fromkeys(r.group_id for r in read_episodes(dataset))]
    assert seen[-1].done == seen[-1].total == 4


def test_a_dataset_recorded_under_a_condition_is_refused(dataset, config, tmp_path):
    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    episodes = (copy / EPISODES).read_text().replace('"condition":"baseline"', '"condition":"texture"')
    (copy / EPISODES).write_text(episodes)
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["episodes_sha256"] = hashlib.sha256(episodes.encode("utf-8")).hexdigest()  # as generated so
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BenchmarkError, match="recorded under texture"):
        run_benchmark(BenchmarkRequest(copy, ARMS, (0,), conditions=(LOW,)), config, out_root=tmp_path / "runs")


def test_ovman_benchmark_condition_prints_the_comparison_and_reports_it(stress_run, dataset, config, tmp_path, capsys):
    _, cache = stress_run
    out = tmp_path / "runs"
    arguments = ["--dataset", str(dataset), "--arms", "two_visit,given_answer", "--seeds", "1", "--static-only"]
    arguments += ["--condition", LOW, "--out", str(out), "--cache", str(cache), "--no-episode-figures", "--quiet"]
    arguments += ["--config", str(config_file(config, tmp_path))]
    assert main(["benchmark", *arguments]) == 0
    printed = capsys.readouterr().out
    assert "Headline: every arm" in printed and "Stress conditions: success against the baseline" in printed
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    report = (run_dir / "report.md").read_text()
    assert "### Stress conditions: success against the baseline (same episodes)" in report
    assert "### Stress conditions: map and memory against the baseline" in report
    assert "**stress conditions**: low_light" in report
    assert main(["benchmark", "--dataset", str(dataset), "--condition", "fog", "--out", str(out)]) == 2
    assert "unknown condition 'fog'" in capsys.readouterr().err
