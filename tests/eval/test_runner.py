"""The in-process benchmark runner on a small generated dataset: results files, resuming, workers,
the map cache, the embodied run against the certification oracle, moving targets."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ovman_ros.bundle import GroundTruthRecords

from ovman_core.boxes import Box3
from ovman_core.relations import Relation
from ovman_eval.analysis.report import write_report
from ovman_eval.benchmark import runner
from ovman_eval.benchmark.evaluator import GroupEvaluator
from ovman_eval.benchmark.map_cache import MapCache, PhraseByPhraseEncoder, lean_map
from ovman_eval.benchmark.request import TIMING_KEYS, BenchmarkRequest, dataset_hash, parse_arms, pick_seed
from ovman_eval.benchmark.runner import evaluate_episode, run_benchmark
from ovman_eval.benchmark.tracking import LabelTracker
from ovman_eval.cli.main import main
from ovman_eval.generation.dataset import read_episodes
from ovman_eval.graph.run import PlayedTruth
from ovman_eval.runs.results import (
    EMBODIED_ERROR,
    FINISHED,
    LOCK,
    PARTIAL_RESULTS,
    PARTIAL_SKETCHES,
    RESULTS,
    RUN_FILE,
    SKETCHES,
    TIMINGS,
    parse_seeds,
    read_results,
    read_sketches,
    to_json_line,
)
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_mapping.instances import Instance, InstanceMap, MapSnapshot, Sighting
from ovman_mapping.segmenter import SimulatorSegmenter
from ovman_query.arms import BUILT_IN_ARMS, Arm
from ovman_sim.recording import read_visit
from ovman_sim.session import SimSession

from .generation_setup import MoverKillingWorld, WorldWrapper, config_file, one_scene_dataset, small_config

RELATIONS = (Relation.MOVED, Relation.MOVING)
AGAIN = "; skipped, any result it held is computed again"


@pytest.fixture(scope="module")
def config():
    return small_config()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, config):
    return one_scene_dataset(tmp_path_factory, RELATIONS, config)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("maps")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, dataset, config, cache):
    """Every arm, one seed, static and embodied, one worker; maps built into the shared cache."""
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    return run_benchmark(req, config, out_root=tmp_path_factory.mktemp("runs"), workers=1, cache_dir=cache)


def lines(path):
    return path.read_text().splitlines()


class TurnedStartWorld(WorldWrapper):
    """Turns the agent by 45° when it is placed at ``turned`` (floor x, z), so the world refuses that start."""

    def __init__(self, sim, turned):
        super().__init__(sim)
        self.turned = turned

    def reset(self, scene, objects=None, pose=None):
        if pose is not None and pose.floor == self.turned:
            pose = dataclasses.replace(pose, yaw_deg=pose.yaw_deg + 45.0)
        return self.inner.reset(scene, objects, pose)


HOLD_LOCK = """
import sys, time
from pathlib import Path
from ovman_eval.runs.run_dir import run_dir_lock
with run_dir_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(600)
"""


def test_a_run_writes_one_line_per_episode_arm_and_seed_with_its_identity_and_marker(full_run, dataset):
    run_dir = full_run.run_dir
    episodes = read_episodes(dataset)
    records = read_results(run_dir)
    assert len(records) == len(episodes) * len(BUILT_IN_ARMS)
    expected = [(e.episode_id, a.value) for e in episodes for a in BUILT_IN_ARMS]
    assert [(r.episode_id, r.arm) for r in records] == expected
    assert (run_dir / FINISHED).is_file()
    assert not (run_dir / PARTIAL_RESULTS).exists() and not (run_dir / PARTIAL_SKETCHES).exists()
    identity = json.loads((run_dir / RUN_FILE).read_text())["identity"]
    assert identity["dataset_sha256"] and identity["code_revision"] and identity["config"]
    assert identity["request"]["arms"] == [a.value for a in BUILT_IN_ARMS]
    timings = json.loads((run_dir / TIMINGS).read_text())
    assert timings["complete"] and timings["work"]["maps_build_s"] > 0.0
    assert set(read_sketches(run_dir)) == {e.group_id for e in episodes}


def test_the_given_answer_arm_navigates_exactly_as_the_certification_oracle(full_run, dataset):
    certified = {e.episode_id: e.certification.runs[0] for e in read_episodes(dataset)}
    for record in full_run.records:
        if record.arm != Arm.GIVEN_ANSWER.value:
            continue
        oracle = certified[record.episode_id]
        assert record.static.success and record.static.distance == 0.0
        assert record.embodied.success
        assert record.embodied.stop == pytest.approx(oracle.stop)
        assert record.embodied.steps == oracle.steps
        assert record.embodied.path_length == pytest.approx(oracle.path_length)


def test_a_moving_answer_is_judged_where_the_target_is_at_stop(full_run, dataset):
    moving = next(e for e in read_episodes(dataset) if e.relation is Relation.MOVING)
    given = next(r for r in full_run.records if r.episode_id == moving.episode_id and r.arm == "given_answer")
    assert given.embodied.answer_point != given.answer_point  # the mover carried it on while the agent walked
    assert given.embodied.stop_distance <= small_config().task.success_radius
    still = next(r for r in full_run.records if r.relation == "moved" and r.arm == "given_answer")
    assert still.embodied.answer_point == still.answer_point


def test_oracle_positions_pass_the_static_gate_and_spl_uses_the_shortest_path_to_the_answer(full_run):
    for record in full_run.records:
        if record.arm == "oracle_positions":
            assert record.static.success, record.static.explanation
        embodied = record.embodied
        if embodied.success:
            expected = embodied.shortest_path / max(embodied.path_length, embodied.shortest_path)
            assert embodied.spl == pytest.approx(expected)
        else:
            assert embodied.spl == 0.0


def test_maps_arms_carry_their_diagnostics(full_run):
    by_arm = {r.arm: r for r in full_run.records if r.relation == "moved"}
    assert set(by_arm["two_visit"].diagnostics) == {"visit1", "visit2", "memory", "remember"}
    remembered = by_arm["two_visit"].diagnostics["remember"]["visit1"]  # from the mapper's snapshots
    assert remembered["tracks"] > 0 and sum(n for n, _, _ in remembered["serial"]) == remembered["tracks"]
    assert set(by_arm["single_visit"].diagnostics) == {"visit2"}
    assert by_arm["given_answer"].diagnostics is None
    assert 0.0 <= by_arm["two_visit"].diagnostics["visit1"]["aec"] <= 1.0


@pytest.mark.pool
def test_two_workers_write_the_same_bytes_and_read_the_maps_from_the_cache(full_run, dataset, config, cache, tmp_path):
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    again = run_benchmark(req, config, out_root=tmp_path, workers=2, cache_dir=cache)
    for name in (RESULTS, SKETCHES):
        assert (again.run_dir / name).read_bytes() == (full_run.run_dir / name).read_bytes()
    timings = json.loads((again.run_dir / TIMINGS).read_text())
    assert timings["workers"] == 2
    assert timings["work"]["maps_build_s"] == 0.0 and timings["work"]["maps_load_s"] > 0.0


def test_an_interrupted_run_resumes_and_does_only_the_missing_work(full_run, dataset, config, cache, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(full_run.run_dir, run_dir)
    finished = lines(run_dir / RESULTS)
    # As if interrupted: the first three lines appended, the fourth torn, no final files.
    (run_dir / PARTIAL_RESULTS).write_text("\n".join(finished[:3]) + "\n" + finished[3][:40])
    (run_dir / PARTIAL_SKETCHES).write_text(lines(run_dir / SKETCHES)[0] + "\n")
    for name in (RESULTS, SKETCHES, FINISHED):
        (run_dir / name).unlink()
    seen = []
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    resumed = run_benchmark(req, config, run_dir=run_dir, workers=1, cache_dir=cache, progress=seen.append)
    assert (run_dir / RESULTS).read_bytes() == (full_run.run_dir / RESULTS).read_bytes()
    assert (run_dir / SKETCHES).read_bytes() == (full_run.run_dir / SKETCHES).read_bytes()
    assert len(resumed.records) == len(finished)
    assert seen and seen[-1].done == seen[-1].total and seen[0].resumed == 0  # the first group was unfinished


def test_a_finished_run_given_again_is_refinished_without_new_work(full_run, dataset, config, cache, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(full_run.run_dir, run_dir)
    seen = []
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    again = run_benchmark(req, config, run_dir=run_dir, workers=1, cache_dir=cache, progress=seen.append)
    assert seen == []  # every group was finished already
    assert (run_dir / RESULTS).read_bytes() == (full_run.run_dir / RESULTS).read_bytes()
    assert (run_dir / FINISHED).is_file() and len(again.records) == len(full_run.records)


def test_a_damaged_line_in_the_middle_of_partial_results_is_reported_and_its_result_computed_again(
    full_run, dataset, config, cache, tmp_path
):
    run_dir = tmp_path / "run"
    shutil.copytree(full_run.run_dir, run_dir)
    finished = lines(run_dir / RESULTS)
    edited = finished[1].replace('"seed":0', '"seed":7')  # valid JSON, another result: not to be trusted
    # As if interrupted: five lines appended, the second edited, the third garbage, the sixth torn.
    partial = [finished[0], edited, "\x00garbage", *finished[3:5]]
    (run_dir / PARTIAL_RESULTS).write_text("\n".join(partial) + "\n" + finished[5][:40])
    (run_dir / PARTIAL_SKETCHES).write_text(lines(run_dir / SKETCHES)[0] + "\n")
    for name in (RESULTS, SKETCHES, FINISHED):
        (run_dir / name).unlink()
    warned = []
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    run_benchmark(req, config, run_dir=run_dir, workers=1, cache_dir=cache, warn=warned.append)
    path = run_dir / PARTIAL_RESULTS
    assert warned == [
        f"{path} line 2: checksum mismatch: the line was changed after it was written{AGAIN}",
        f"{path} line 3: not valid JSON (Expecting value: line 1 column 1 (char 0)){AGAIN}",
    ]  # the torn last line is dropped without a word, as before
    assert (run_dir / RESULTS).read_bytes() == (full_run.run_dir / RESULTS).read_bytes()
    assert (run_dir / SKETCHES).read_bytes() == (full_run.run_dir / SKETCHES).read_bytes()


def test_a_damaged_line_keeps_a_finished_run_finished_and_giving_it_again_computes_that_result_again(
    full_run, dataset, config, cache, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    shutil.copytree(full_run.run_dir, run_dir)
    finished = lines(run_dir / RESULTS)
    (run_dir / RESULTS).write_text("\n".join([*finished[:3], "", *finished[4:]]) + "\n")  # line 4 lost
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    assert run_benchmark(req, config, out_root=tmp_path, workers=1, cache_dir=cache).run_dir != run_dir
    assert (run_dir / FINISHED).is_file()  # not taken for an unfinished run to resume
    assert main(["report", str(run_dir), "--no-episode-figures"]) == 0
    assert f"skipped {run_dir / RESULTS} line 4: blank line" in capsys.readouterr().err
    warned = []
    run_benchmark(req, config, run_dir=run_dir, workers=1, cache_dir=cache, warn=warned.append)
    assert warned == [f"{run_dir / RESULTS} line 4: blank line{AGAIN}"]
    assert (run_dir / RESULTS).read_bytes() == (full_run.run_dir / RESULTS).read_bytes()
    assert (run_dir / FINISHED).is_file()


def test_a_second_benchmark_on_a_locked_run_directory_stops_at_once_and_a_killed_holder_leaves_no_lock(
    dataset, config, cache, tmp_path
):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        command = [sys.executable, "-m", "ovman_eval.cli.main", "benchmark", "--dataset", str(dataset), "--run-dir"]
        command += [str(run_dir), "--arms", "given_answer", "--seeds", "0,", "--cache", str(cache), "--no-report"]
        command += ["--config", str(config_file(config, tmp_path))]
        second = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert second.returncode == 1 and "Traceback" not in second.stderr
        assert second.stderr.splitlines()[-1] == (
            f"ovman benchmark: {run_dir}: another benchmark (PID {holder.pid}) is running in this run directory "
            f"(it holds {run_dir / LOCK}); wait for it to finish or stop it, then run this command again"
        )
        assert [p.name for p in run_dir.iterdir()] == [LOCK]  # nothing computed, nothing written
    finally:
        holder.kill()  # SIGKILL: the kernel releases its lock
        holder.wait()
    req = BenchmarkRequest(dataset, (Arm.GIVEN_ANSWER,), (0,), static_only=True)
    run_benchmark(req, config, run_dir=run_dir, workers=1, cache_dir=cache)
    assert (run_dir / FINISHED).is_file() and (run_dir / LOCK).read_text() == ""


@pytest.mark.pool
def test_a_dead_worker_is_named_with_its_unit_and_the_printed_command_resumes_the_run(
    full_run, dataset, config, cache, tmp_path, capfd, monkeypatch
):
    moving = next(e for e in read_episodes(dataset) if e.moving_id is not None)
    # The spawned workers unpickle MoverKillingWorld by its module name (eval.generation_setup under pytest).
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    monkeypatch.setattr(runner, "run_benchmark", functools.partial(run_benchmark, world_factory=MoverKillingWorld))
    out, configured = tmp_path / "runs", str(config_file(config, tmp_path))
    options = ["--cache", str(cache), "--config", configured, "--no-report", "--quiet"]
    request_options = ["--dataset", str(dataset), "--arms", "all", "--seeds", "0,", "--workers", "2"]
    assert main(["benchmark", *request_options, "--out", str(out), *options]) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    message, resume = err.splitlines()
    assert re.fullmatch(
        rf"ovman benchmark: {re.escape(str(run_dir))}: worker process \d+ died \(killed by SIGKILL\) while computing "
        rf"{moving.group_id}; the [01] of 2 units finished are kept, and the run resumes from them; resume with:",
        message,
    ), message
    request_options[3] = ",".join(a.value for a in BUILT_IN_ARMS)
    assert shlex.split(resume) == ["ovman", "benchmark", *request_options, "--run-dir", str(run_dir), *options]
    assert not (run_dir / FINISHED).exists()
    monkeypatch.undo()
    assert main(shlex.split(resume)[1:]) == 0
    assert (run_dir / RESULTS).read_bytes() == (full_run.run_dir / RESULTS).read_bytes()


def test_an_episode_the_world_cannot_place_gets_an_error_result_and_the_others_run(
    full_run, dataset, config, cache, tmp_path
):
    victim = read_episodes(dataset)[0]
    factory = functools.partial(TurnedStartWorld, turned=victim.start_pose.floor)
    req = BenchmarkRequest(dataset, BUILT_IN_ARMS, (0,))
    summary = run_benchmark(req, config, out_root=tmp_path, workers=1, cache_dir=cache, world_factory=factory)
    turned = dataclasses.replace(victim.start_pose, yaw_deg=victim.start_pose.yaw_deg + 45.0)
    step = config.sim_node.world.rotate_step_deg
    refused = (
        f"reset({victim.scene.name!r}): cannot place the agent at {turned}: yaw {turned.yaw_deg} is not a multiple "
        f"of world.rotate_step_deg = {step}"
    )
    full = {r.key: r for r in full_run.records}
    assert len(summary.records) == len(full)
    for record in summary.records:
        if record.episode_id != victim.episode_id:
            assert to_json_line(record) == to_json_line(full[record.key])  # the other episode ran as always
            continue
        embodied = record.embodied
        assert (embodied.failure, embodied.error, embodied.message) == (EMBODIED_ERROR, "SETUP", refused)
        assert not embodied.success and embodied.stop is None and embodied.spl == 0.0 and embodied.steps == 0
        assert record.static == full[record.key].static
    assert read_sketches(summary.run_dir)[victim.group_id].reachable == ()
    md_path, _ = write_report(summary.run_dir, episode_figures=False)
    errors = f"- **embodied errors**: {len(BUILT_IN_ARMS)} run(s) could not be made (counted as failures): "
    assert errors in md_path.read_text()
    assert f"{victim.episode_id}, {len(BUILT_IN_ARMS)} run(s): {refused}" in md_path.read_text()


def test_rerunning_a_finished_command_starts_a_new_run(full_run, dataset, config, cache):
    req = BenchmarkRequest(dataset, (Arm.GIVEN_ANSWER,), (0,), static_only=True)
    first = run_benchmark(req, config, out_root=full_run.run_dir.parent, workers=1, cache_dir=cache)
    second = run_benchmark(req, config, out_root=full_run.run_dir.parent, workers=1, cache_dir=cache)
    assert first.run_dir != second.run_dir != full_run.run_dir
    assert (first.run_dir / RESULTS).read_bytes() == (second.run_dir / RESULTS).read_bytes()


def test_a_directory_of_another_run_is_refused(full_run, dataset, config, cache):
    req = BenchmarkRequest(dataset, (Arm.TWO_VISIT,), (0, 1))
    with pytest.raises(BenchmarkError, match="holds a different run"):
        run_benchmark(req, config, run_dir=full_run.run_dir, workers=1, cache_dir=cache)


def test_static_only_runs_leave_embodied_empty_and_seed_only_the_single_visit_pick(dataset, config, cache, tmp_path):
    req = BenchmarkRequest(dataset, (Arm.TWO_VISIT, Arm.SINGLE_VISIT), (0, 1, 2), static_only=True)
    summary = run_benchmark(req, config, out_root=tmp_path, workers=1, cache_dir=cache)
    assert all(r.embodied is None for r in summary.records)
    assert all(s.reachable == () for s in read_sketches(summary.run_dir).values())
    for episode in {r.episode_id for r in summary.records}:
        two = {r.static for r in summary.records if r.episode_id == episode and r.arm == "two_visit"}
        assert len(two) == 1  # deterministic arm: identical under every seed
        single = [r.static for r in summary.records if r.episode_id == episode and r.arm == "single_visit"]
        assert len({s.success_probability for s in single}) == 1
    assert len({pick_seed(config, s, "moved-0000") for s in (0, 1, 2)}) == 3


def test_evaluate_episode_answers_one_episode_without_a_run_directory(full_run, dataset, config, cache):
    records, sketch = evaluate_episode(dataset, "moved-0000", config, (Arm.TWO_VISIT,), cache_dir=cache)
    expected = next(r for r in full_run.records if r.episode_id == "moved-0000" and r.arm == "two_visit")
    assert [to_json_line(r) for r in records] == [to_json_line(expected)]  # the same bytes as in the run
    assert to_json_line(sketch) == to_json_line(read_sketches(full_run.run_dir)["moved-0000"])
    with pytest.raises(BenchmarkError, match="no episode 'nope'"):
        evaluate_episode(dataset, "nope", config, cache_dir=cache)


def test_the_graph_collects_the_same_ground_truth_from_the_records_sim_node_publishes(dataset, config, cache):
    records = read_episodes(dataset)
    evaluator = GroupEvaluator(config, dataset, records, MapCache(cache), dataset_hash(dataset))
    moving = [r for r in records if r.moving_id is not None]
    assert moving, "the dataset needs a group with a mover"
    session = SimSession(config)
    for record in (records[0], moving[0]):
        truth = evaluator.group_maps([record], dict.fromkeys(TIMING_KEYS, 0.0)).truth
        played = PlayedTruth(dataset, record)
        published = GroundTruthRecords()  # as sim_node writes each frame's record (ovman_ros.messages)
        for visit in (1, 2):
            frames = session.load_recording(played.recordings[visit])
            for frame in session.play():
                played.add(visit, published.record(frame.observation, frame.objects, frame.stamp_ns))
            assert played.counts[visit] == frames
        assert played.truth() == truth
    assert truth.carried


def test_collected_ground_truth_names_the_recording_of_a_bad_or_missing_record(dataset):
    record = read_episodes(dataset)[0]
    played = PlayedTruth(dataset, record)
    with pytest.raises(BenchmarkError, match=r"/ovman/ground_truth while .*visit1 played \(frame 0\): .*agent_pose"):
        played.add(1, '{"step": 1}')
    with pytest.raises(BenchmarkError, match=r"visit1: episode .*: no frames recorded"):
        played.truth()


def test_arm_names_are_checked():
    assert parse_arms("all") == BUILT_IN_ARMS and Arm.EXTERNAL not in BUILT_IN_ARMS
    assert parse_arms("two_visit,external") == (Arm.TWO_VISIT, Arm.EXTERNAL)
    assert parse_arms("two_visit, given_answer") == (Arm.TWO_VISIT, Arm.GIVEN_ANSWER)
    with pytest.raises(BenchmarkError, match="unknown arm 'three_visit'"):
        parse_arms("three_visit")
    with pytest.raises(BenchmarkError, match="without repeats"):
        BenchmarkRequest(Path("ds"), (Arm.TWO_VISIT, Arm.TWO_VISIT), (0,))


def test_the_tracker_follows_the_nearest_sighting_of_its_label_within_the_gate(dataset, config):
    episode = read_episodes(dataset)[0]
    frames = list(read_visit(dataset / episode.recordings.visit2))
    # The frame where one object covers the most pixels: the tracker must find it there.
    best = max(
        ((frame, segment) for frame in frames for segment in frame.observation.segment_labels),
        key=lambda fs: int((fs[0].observation.segments == fs[1]).sum()),
    )
    frame, segment = best
    label = frame.observation.segment_labels[segment]
    truth = frame.objects[frame.observation.segment_instances[segment]]
    near = (truth.floor[0] + 0.3, truth.floor[1])
    sim = SimulatorSegmenter()
    tracker = LabelTracker(label, near, gate=1.0, mapping=config.mapping_node, segmenter=sim)
    target = tracker.observe(frame.observation)
    assert target is not None and tracker.updates == 1
    assert math.dist(target.point, truth.floor) < 0.5
    assert target.region.distance_to(truth.floor) < 0.3
    far = LabelTracker(label, (truth.floor[0] + 3.0, truth.floor[1]), 1.0, config.mapping_node, sim)
    assert far.observe(frame.observation) is None and far.updates == 0
    other = LabelTracker("NoSuchLabel", near, gate=1.0, mapping=config.mapping_node, segmenter=sim)
    assert other.observe(frame.observation) is None
    with pytest.raises(ValueError, match="track_gate"):
        LabelTracker(label, near, gate=0.0, mapping=config.mapping_node, segmenter=sim)


def test_ovman_benchmark_runs_writes_the_report_and_ovman_show_draws_from_it(dataset, cache, config, tmp_path, capsys):
    out = tmp_path / "runs"
    arguments = ["--dataset", str(dataset), "--arms", "two_visit,single_visit,given_answer", "--seeds", "2"]
    arguments += ["--static-only", "--out", str(out), "--cache", str(cache), "--no-episode-figures", "--quiet"]
    arguments += ["--config", str(config_file(config, tmp_path))]
    assert main(["benchmark", *arguments, "--sweep"]) == 0
    printed = capsys.readouterr().out
    assert "Headline: every arm" in printed and "given_answer" in printed
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert sorted({r.seed for r in read_results(run_dir)}) == [0, 1]
    report = (run_dir / "report.md").read_text()
    assert (run_dir / "report.html").is_file()
    for title in ("Success per run seed", "Memory margin per run seed", "Static memory margin over the admissibility"):
        assert f"### {title}" in report
    figure = tmp_path / "moved.png"
    show = ["show", "moved-0000", "--dataset", str(dataset), "--run", str(run_dir), "--out", str(figure)]
    assert main(show) == 0
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert main(["show", "nope", "--dataset", str(dataset), "--run", str(run_dir)]) == 1
    assert "no results for episode 'nope'" in capsys.readouterr().err
    assert main(["benchmark", "--dataset", str(tmp_path / "missing"), "--out", str(out)]) == 1


def test_seeds_are_a_count_or_a_list():
    assert parse_seeds("3") == (0, 1, 2)
    assert parse_seeds("4,7") == (4, 7) and parse_seeds("5,") == (5,)
    for bad in ("0", "-2", "a", "1,1", ",", "1,-1"):
        with pytest.raises(ValueError, match="seeds"):
            parse_seeds(bad)


def test_phrase_embeddings_do_not_depend_on_what_was_embedded_before(config):
    warm = PhraseByPhraseEncoder(config)
    warm.embed_text(["a long phrase about a coffee table by the window", "tv stand"])
    cold = PhraseByPhraseEncoder(config)
    assert (warm.embed_text(["vase"]) == cold.embed_text(["vase"])).all()  # bit for bit
    preloaded = PhraseByPhraseEncoder(config)
    preloaded.known["vase"] = cold.embed_text(["vase"])[0]
    assert (preloaded.embed_text(["vase"]) == cold.embed_text(["vase"])).all()
    assert not preloaded.made  # answered from the preloaded vectors: no model was started


def test_lean_maps_keep_what_the_arms_read_and_drop_the_rest():
    sightings = tuple(Sighting(k, 10 * k, (float(k), 0.5, 0.0), 100 + k) for k in range(5))
    instance = Instance(
        uid="v2:0",
        position=(4.0, 0.5, 0.0),
        box=Box3((3.9, 0.4, -0.1), (4.1, 0.6, 0.1)),
        points=np.ones((50, 3)),
        feature=np.ones(4) / 2.0,
        colour=np.ones(4) / 4.0,
        labels={"Vase": 1.0},
        sightings=sightings,
        moving=True,
    )
    full = InstanceMap(2, (instance,), "test", frames=5, history=(MapSnapshot(0, 0, {"v2:0": (0.0, 0.5, 0.0)}),))
    lean = lean_map(full)
    (kept,) = lean.instances
    assert len(kept.sightings) == 5 and kept.first_step == 0 and kept.last_step == 40
    assert kept.latest_position == instance.latest_position and kept.moving
    assert kept.points.shape == (0, 3) and lean.history == () and lean.frames == 5
    assert (kept.feature == instance.feature).all() and kept.box == instance.box and kept.labels == instance.labels


def test_the_in_process_runner_refuses_the_external_arm(tmp_path: Path, config):
    # An agent outside OVMAN answers through the ROS graph only: refused before anything runs.
    request = BenchmarkRequest(tmp_path / "absent", (Arm.TWO_VISIT, Arm.EXTERNAL), (0,))
    with pytest.raises(BenchmarkError, match=r"arm external .* only through the ROS graph.*--agent-namespace"):
        run_benchmark(request, config, run_dir=tmp_path / "run")
    with pytest.raises(BenchmarkError, match="arm external"):
        evaluate_episode(tmp_path / "absent", "e0", config, (Arm.EXTERNAL,))
