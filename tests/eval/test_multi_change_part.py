"""A run's multi-change part (issue 25): the multi-change split run beside the single-change
episodes into RUN/multi_change, its refusals, resuming it, and its section of the report."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ovman_core.relations import Relation
from ovman_eval.analysis.appearance_fit import FIT_FILE
from ovman_eval.analysis.report import write_report
from ovman_eval.analysis.tables import multi_change_tables
from ovman_eval.benchmark.request import BenchmarkRequest
from ovman_eval.benchmark.runner import run_benchmark
from ovman_eval.cli.benchmark import default_dataset
from ovman_eval.cli.main import main
from ovman_eval.generation.dataset import read_episodes
from ovman_eval.runs.results import FINISHED, MULTI_CHANGE_PART, RESULTS, read_results
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_query.arms import Arm

from .generation_setup import config_file, generate, one_scene_dataset, request, small_config

ARMS = (Arm.TWO_VISIT, Arm.ORACLE_GROUNDING, Arm.GIVEN_ANSWER)


@pytest.fixture(scope="module")
def config():
    return small_config()


@pytest.fixture(scope="module")
def single(tmp_path_factory, config):
    return one_scene_dataset(tmp_path_factory, (Relation.MOVED,), config)


@pytest.fixture(scope="module")
def multi(tmp_path_factory, config):
    out = tmp_path_factory.mktemp("multi") / "ds"
    generate(
        out, request((Relation.MOVED, Relation.FORMER, Relation.REMOVED), ("embedded-3",), multi_change=True), config
    )
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory, single, multi, config):
    req = BenchmarkRequest(single, ARMS, (0,), static_only=True, multi_change=multi)
    cache = tmp_path_factory.mktemp("maps")
    return run_benchmark(req, config, out_root=tmp_path_factory.mktemp("runs"), cache_dir=cache), cache


def test_the_part_runs_every_arm_on_every_multi_change_episode_inside_the_run(run, single, multi):
    summary, _ = run
    part = summary.run_dir / MULTI_CHANGE_PART
    episodes = read_episodes(multi)
    assert len(episodes) >= 2 and all(e.split == "multi_change" for e in episodes)
    records = read_results(part)
    assert sorted((r.episode_id, r.arm) for r in records) == sorted(
        (e.episode_id, a.value) for e in episodes for a in ARMS
    )
    assert (part / FINISHED).is_file() and (summary.run_dir / FINISHED).is_file()
    # The run's own results are the single-change episodes only.
    assert {r.episode_id for r in summary.records} == {e.episode_id for e in read_episodes(single)}


def test_the_report_has_the_multi_change_tables_and_names_the_part(run):
    summary, _ = run
    md, _ = write_report(summary.run_dir, episode_figures=False)
    text = md.read_text()
    assert "## Multi-change split" in text
    assert "### Multi-change split: every arm" in text
    assert "grounding handed over (the oracle_grounding rung)" in text
    assert "**multi-change part**" in text
    # given_answer is certified on every multi-change episode: its row is all successes.
    section = text.split("### Multi-change split: every arm", 1)[1]
    row = next(line for line in section.splitlines() if line.startswith("| given_answer |"))
    n = len(read_results(summary.run_dir / MULTI_CHANGE_PART)) // len(ARMS)
    assert f"({n}/{n})" in row.split("|")[-2]


def test_an_unfinished_part_is_said_in_the_report_and_the_same_command_resumes_it(tmp_path, run, single, multi, config):
    summary, cache = run
    copy = tmp_path / "run"
    shutil.copytree(summary.run_dir, copy)
    (copy / FINISHED).unlink()
    part = copy / MULTI_CHANGE_PART
    (part / RESULTS).unlink()
    (part / FINISHED).unlink()
    md, _ = write_report(copy, episode_figures=False)
    assert "**multi-change part**: unfinished" in md.read_text()
    req = BenchmarkRequest(single, ARMS, (0,), static_only=True, multi_change=multi)
    resumed = run_benchmark(req, config, run_dir=copy, cache_dir=cache)
    assert (part / FINISHED).is_file() and (copy / FINISHED).is_file()
    assert (part / RESULTS).read_bytes() == (summary.run_dir / MULTI_CHANGE_PART / RESULTS).read_bytes()
    assert [r.key for r in resumed.records] == [r.key for r in summary.records]


def test_a_single_change_dataset_is_refused_as_the_part_before_anything_runs(tmp_path, single, config):
    req = BenchmarkRequest(single, ARMS, (0,), static_only=True, multi_change=single)
    with pytest.raises(BenchmarkError, match=r"multi-change part must hold the multi-change split only.*'single'"):
        run_benchmark(req, config, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_part_is_part_of_the_run_identity(tmp_path, run, single, config):
    """The same run without its part is another run: it does not resume the one with the part."""
    summary, cache = run
    req = BenchmarkRequest(single, ARMS, (0,), static_only=True)
    with pytest.raises(BenchmarkError, match="another"):
        run_benchmark(req, config, run_dir=summary.run_dir, cache_dir=cache)


def test_the_cli_flag_runs_the_part_and_prints_its_headline(tmp_path, single, multi, config, capsys):
    code = main(
        [
            "benchmark",
            "--dataset",
            str(single),
            "--multi-change",
            str(multi),
            "--arms",
            "given_answer",
            "--static-only",
            "--run-dir",
            str(tmp_path / "run"),
            "--cache",
            str(tmp_path / "maps"),
            "--no-report",
            "--quiet",
            "--config",
            str(config_file(config, tmp_path)),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Multi-change part" in out
    assert (tmp_path / "run" / MULTI_CHANGE_PART / FINISHED).is_file()


def test_multi_change_tables_pair_the_rungs_per_relation(run):
    summary, _ = run
    records = read_results(summary.run_dir / MULTI_CHANGE_PART)
    every_arm, rung = multi_change_tables(records)
    assert [row[0] for row in every_arm.rows] == [a.value for a in ARMS]
    assert rung.rows[-1][0] == "overall"
    relations = {r.relation for r in records}
    assert {row[0] for row in rung.rows[:-1]} == relations
    without_oracle = [r for r in records if r.arm != Arm.ORACLE_GROUNDING.value]
    assert len(multi_change_tables(without_oracle)) == 1


def test_the_default_dataset_has_a_multi_change_part_generated_once(tmp_path, config, capsys):

    bench = config.benchmark_node
    sizes = dict(default_scenes=1, default_per_relation=1, default_multi_change_per_relation=1)
    small = dataclasses.replace(
        config, benchmark_node=dataclasses.replace(bench, benchmark=dataclasses.replace(bench.benchmark, **sizes))
    )
    single = default_dataset(tmp_path, small, 1, True)
    multi = default_dataset(tmp_path, small, 1, True, multi_change=True)
    assert single != multi and multi.name.startswith("embedded-1x1-multi-")
    assert {e.split for e in read_episodes(single)} == {"single"}
    assert {e.split for e in read_episodes(multi)} == {"multi_change"}
    capsys.readouterr()
    assert default_dataset(tmp_path, small, 1, True, multi_change=True) == multi
    assert "using the cached default dataset" in capsys.readouterr().err


def test_fit_appearance_fits_the_run_scores_its_part_and_measures_the_variants(run, capsys):
    summary, cache = run
    code = main(["fit-appearance", str(summary.run_dir), "--cache", str(cache), "--json"])
    out = capsys.readouterr()
    if code == 1:  # too few same-category pairs in this tiny run to fit: said, not a crash
        assert "ovman fit-appearance:" in out.err and "pairs" in out.err
        return
    assert code == 0, out.err
    document = json.loads(out.out)
    assert json.loads((summary.run_dir / FIT_FILE).read_text()) == document
    episodes = len(read_episodes(Path(document["held_out_dataset"])))
    assert set(document["variants"]) == {"configured", "embedding", "colour", "extent", "fitted"}
    for variant in document["variants"].values():
        assert {arm: n for arm, (_, n) in variant["success"].items()} == {
            "two_visit": episodes,
            "oracle_grounding": episodes,
        }
    # The configured variant re-associates exactly as the run did: the same static successes.
    part = read_results(summary.run_dir / MULTI_CHANGE_PART)
    for arm in ("two_visit", "oracle_grounding"):
        assert document["variants"]["configured"]["success"][arm][0] == sum(
            r.static.success for r in part if r.arm == arm
        )
    md, _ = write_report(summary.run_dir, episode_figures=False)
    assert "Appearance variants of the association" in md.read_text()
