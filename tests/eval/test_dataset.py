"""The dataset on disk: determinism, atomic commits, resuming an interrupted run, the manifest, and
the episode record's JSON form."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from ovman_core.config import config_from_document, to_document
from ovman_core.relations import Relation
from ovman_eval.cli.main import main
from ovman_eval.generation.dataset import DatasetError, read_episodes, read_manifest
from ovman_eval.task.episodes import (
    FORMAT_VERSION,
    EpisodeFormatError,
    episode_from_dict,
    episode_from_json,
    episode_to_dict,
    episode_to_json,
)
from ovman_sim.recording import read_visit_info

from .generation_setup import InterruptingWorld, MoverKillingWorld, generate, request, small_config

RELATIONS = (Relation.MOVED, Relation.REMOVED, Relation.APPEARED)
SCENE = ("embedded-0",)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run: seed 0, one scene, three relations."""
    out = tmp_path_factory.mktemp("reference") / "ds"
    generate(out, request(RELATIONS, scenes=SCENE))
    return out


def test_the_same_seed_gives_a_byte_identical_episodes_file(reference, tmp_path):
    generate(tmp_path / "again", request(RELATIONS, scenes=SCENE))
    assert (tmp_path / "again" / "episodes.jsonl").read_bytes() == (reference / "episodes.jsonl").read_bytes()


def test_different_seeds_give_different_episodes(reference, tmp_path):
    generate(tmp_path / "other", request(RELATIONS, scenes=SCENE, seed=1))
    mine, theirs = read_episodes(reference), read_episodes(tmp_path / "other")
    assert len(mine) == len(theirs) == len(RELATIONS)
    assert [(e.query.category, e.answer.instance_id, e.start_pose) for e in mine] != [
        (e.query.category, e.answer.instance_id, e.start_pose) for e in theirs
    ]


def test_an_interrupted_run_leaves_no_half_episode_and_resumes_to_the_same_bytes(reference, tmp_path):
    out = tmp_path / "ds"
    # 64x48 frames on 3 waypoints: 12 frames a visit, so frame 40 is inside the second slot's recordings.
    with pytest.raises(KeyboardInterrupt):
        generate(out, request(RELATIONS, scenes=SCENE), world_factory=InterruptingWorld)
    committed = read_episodes(out)
    assert [e.episode_id for e in committed] == ["moved-0000"]
    assert sorted(p.name for p in (out / "recordings").iterdir()) == ["moved-0000"]
    assert read_visit_info(out / committed[0].recordings.visit2)[1] == committed[0].recordings.visit2_frames
    manifest = read_manifest(out)
    assert manifest["complete"] is False and manifest["counts"]["episodes"] == 1
    # Resume with a well-behaved world: the same bytes as the uninterrupted run.
    summary = generate(out, request(RELATIONS, scenes=SCENE))
    assert summary.manifest["complete"] is True
    assert (out / "episodes.jsonl").read_bytes() == (reference / "episodes.jsonl").read_bytes()
    assert not (out / ".generation" / "staging").exists()


def test_resume_removes_recordings_whose_slot_never_committed(reference, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(reference, out)
    # A crash after the recordings were renamed into place but before the slot record was written.
    (out / ".generation" / "slots" / "appeared-0000.json").unlink()
    (out / ".generation" / "staging" / "removed-0000" / "attempt-0000").mkdir(parents=True)
    (out / "episodes.jsonl").write_text("".join((reference / "episodes.jsonl").read_text().splitlines(True)[:1]))
    summary = generate(out, request(RELATIONS, scenes=SCENE))
    assert summary.manifest["complete"]
    assert (out / "episodes.jsonl").read_bytes() == (reference / "episodes.jsonl").read_bytes()
    assert sorted(p.name for p in (out / "recordings").iterdir()) == ["appeared-0000", "moved-0000", "removed-0000"]


@pytest.mark.pool
def test_two_workers_give_the_same_bytes_as_one(reference, tmp_path):
    generate(tmp_path / "pool", request(RELATIONS, scenes=SCENE), workers=2)
    assert (tmp_path / "pool" / "episodes.jsonl").read_bytes() == (reference / "episodes.jsonl").read_bytes()


@pytest.mark.pool
def test_a_dead_worker_is_named_with_its_slot_and_the_run_resumes(reference, tmp_path, monkeypatch):
    # The spawned workers unpickle MoverKillingWorld by its module name (eval.generation_setup under pytest).
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    out, req = tmp_path / "ds", request((Relation.MOVING, Relation.MOVED), scenes=SCENE)
    dead = r"worker process \d+ died \(killed by SIGKILL\) while computing moving-0000; the finished slots are kept"
    with pytest.raises(DatasetError, match=dead):
        generate(out, req, workers=2, world_factory=MoverKillingWorld)
    summary = generate(out, req)
    assert summary.manifest["complete"]
    assert {e.query.relation for e in read_episodes(out)} == {Relation.MOVING, Relation.MOVED}


def test_resuming_with_other_arguments_is_refused(reference, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(reference, out)
    with pytest.raises(DatasetError, match=r"request.seed: 0 there, 5 now"):
        generate(out, request(RELATIONS, scenes=SCENE, seed=5))
    with pytest.raises(DatasetError, match="configuration differs"):
        generate(out, request(RELATIONS, scenes=SCENE), small_config(max_attempts_per_episode=7))


def test_a_directory_holding_other_files_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not empty and holds no generation state"):
        generate(tmp_path, request(RELATIONS, scenes=SCENE))


def test_the_manifest_records_config_revision_counts_rejections_and_timings(reference):
    manifest = read_manifest(reference)
    assert manifest["complete"] is True and manifest["kind"] == "ovman-episodes"
    assert to_document(config_from_document(manifest["config"], "manifest")) == to_document(small_config())
    assert manifest["code_revision"]
    assert manifest["request"]["relations"] == [r.value for r in RELATIONS]
    assert manifest["counts"]["episodes"] == 3 and manifest["counts"]["slots_given_up"] == 0
    assert set(manifest["rejections"]) == {r.value for r in RELATIONS}
    assert set(manifest["timings"]) >= {"sampling_s", "render_s", "recording_s", "oracle_s", "wall_s"}
    assert all(v >= 0.0 for v in manifest["timings"].values())


def test_episode_records_round_trip_through_json(reference):
    for line in (reference / "episodes.jsonl").read_text().splitlines():
        record = episode_from_json(line)
        assert episode_to_json(record) == line
        assert episode_from_dict(json.loads(line)) == record
        assert record.format_version == FORMAT_VERSION


def _document(reference):
    return json.loads((reference / "episodes.jsonl").read_text().splitlines()[0])


def test_a_record_with_bad_fields_names_the_episode_and_every_field(reference):
    doc = _document(reference)
    doc["start_pose"]["x"] = "left"
    doc["answer"]["point"] = [1.0]
    del doc["seeds"]
    doc["colour"] = "red"
    with pytest.raises(EpisodeFormatError) as err:
        episode_from_dict(doc)
    fields = {field for field, _ in err.value.problems}
    assert fields == {"start_pose.x", "answer.point", "seeds", "colour"}
    assert str(err.value).startswith("episode moved-0000: ")


def test_an_inconsistent_record_names_the_field(reference):
    doc = _document(reference)
    doc["query"]["phrase"] = "go somewhere"
    doc["answer"]["vacated"] = True
    doc["certification"]["runs"][1]["success"] = False
    with pytest.raises(EpisodeFormatError) as err:
        episode_from_dict(doc)
    fields = {field for field, _ in err.value.problems}
    assert fields == {"query.phrase", "answer.vacated", "certification.runs[1].success"}


def test_an_episode_in_a_perception_home_is_refused(reference):
    doc = _document(reference)
    doc["scene"]["name"] = "perception-train-3"  # the learned segmenter's training homes
    with pytest.raises(EpisodeFormatError, match="is a perception home") as err:
        episode_from_dict(doc)
    assert {field for field, _ in err.value.problems} == {"scene.name"}


def test_an_episode_record_of_another_version_is_refused(reference):
    doc = _document(reference)
    doc["format_version"] = 99
    with pytest.raises(EpisodeFormatError, match="format_version: 99"):
        episode_from_dict(doc)


def test_reading_a_record_back_gives_the_same_dict(reference):
    record = read_episodes(reference)[0]
    assert episode_from_dict(episode_to_dict(record)) == record


def test_the_generate_command_shows_progress_and_prints_the_rejection_table(tmp_path, capsys):
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(to_document(small_config()), sort_keys=False))
    out = tmp_path / "ds"
    args = ["generate", "--scenes", "1", "--per-relation", "1", "--relations", "removed,moved", "--seed", "0"]
    args += ["--out", str(out), "--config", str(config_file)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "2/2 slots  2 episodes  0 given up" in captured.err and "ETA" in captured.err
    table = captured.out.splitlines()
    assert table[0].split()[:4] == ["relation", "episodes", "candidates", "shortfall"]
    assert table[1].split()[:2] == ["removed", "1"] and table[2].split()[:2] == ["moved", "1"]
    assert "2 episodes (complete)" in captured.out and "episodes/min" in captured.out
    # Running it again finds nothing left to do and leaves the episodes as they were.
    before = (out / "episodes.jsonl").read_bytes()
    assert main([*args, "--quiet"]) == 0
    assert (out / "episodes.jsonl").read_bytes() == before
    assert main(["validate", str(out)]) == 0


def test_the_paper_preset_writes_both_splits_at_the_configured_scale_and_refuses_its_own_flags(tmp_path, capsys):
    config = small_config()
    bench = config.benchmark_node
    sizes = dict(paper_scenes=1, paper_per_relation=1, paper_multi_change_per_relation=1)
    config = dataclasses.replace(
        config, benchmark_node=dataclasses.replace(bench, benchmark=dataclasses.replace(bench.benchmark, **sizes))
    )
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(to_document(config), sort_keys=False))
    out = tmp_path / "paper"
    args = ["generate", "--preset", "paper", "--relations", "removed,moved", "--out", str(out)]
    args += ["--config", str(config_file), "--quiet"]
    assert main(args) in (0, 3)  # 3: a slot given up (a shortfall) is not an error
    single, multi = read_episodes(out / "single"), read_episodes(out / "multi_change")
    assert single and {e.split for e in single} == {"single"} and {e.scene.name for e in single} == {"embedded-0"}
    assert multi and {e.split for e in multi} == {"multi_change"}
    capsys.readouterr()
    assert main([*args, "--scenes", "3"]) == 2
    err = capsys.readouterr().err
    assert "--preset paper sets" in err and "drop --scenes" in err
    assert main(["generate", "--per-relation", "1", "--out", str(tmp_path / "x")]) == 2
    assert "--scenes required" in capsys.readouterr().err
