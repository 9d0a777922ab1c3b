"""``ovman validate``: a generated dataset passes; corrupt or truncated datasets fail with every
problem reported, each naming the episode and the field."""

from __future__ import annotations

import json
import shutil

import pytest

from ovman_core.relations import Relation
from ovman_eval.cli import main
from ovman_eval.validate import validate_dataset

from .generation_setup import generate, request

RELATIONS = (Relation.FORMER, Relation.MOVING)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("pristine") / "ds"
    generate(out, request(RELATIONS, scenes=("embedded-0",)))
    return out


@pytest.fixture
def dataset(pristine, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(pristine, out)
    return out


def _lines(out):
    return (out / "episodes.jsonl").read_text().splitlines()


def _rewrite(out, edit):
    """Apply ``edit`` to the JSON of every line (edit returns nothing)."""
    docs = [json.loads(line) for line in _lines(out)]
    for doc in docs:
        edit(doc)
    (out / "episodes.jsonl").write_text("".join(json.dumps(d, sort_keys=True) + "\n" for d in docs))


def _problems(out):
    return {(p.episode, p.field.split(" (")[0]): p.message for p in validate_dataset(out).problems}


def test_a_generated_dataset_validates(pristine, capsys):
    report = validate_dataset(pristine)
    assert report.ok, [str(p) for p in report.problems]
    assert report.episodes == 2 and report.recordings == 2
    assert main(["validate", str(pristine)]) == 0
    assert "OK (2 episodes" in capsys.readouterr().out


def test_a_truncated_episodes_file_names_the_cut_episode(dataset, capsys):
    text = (dataset / "episodes.jsonl").read_text()
    (dataset / "episodes.jsonl").write_text(text[: len(text) - 200])
    problems = _problems(dataset)
    assert ("moving-0000", "episodes.jsonl line 2") in problems
    assert "truncated" in problems[("moving-0000", "episodes.jsonl line 2")]
    assert ("moving-0000", "(line)") in problems  # the cut line is not JSON
    assert ("(dataset)", "manifest.json: episodes_sha256") in problems
    assert main(["validate", str(dataset)]) == 1
    out = capsys.readouterr().out
    assert "episode moving-0000: episodes.jsonl line 2: truncated" in out


def test_an_answer_differing_from_the_recorded_ground_truth_is_reported(dataset):
    def shift(doc):
        if doc["episode_id"] == "former-0000":
            doc["answer"]["point"][0] += 0.5
            doc["instances"]["visit2"] = []

    _rewrite(dataset, shift)
    problems = _problems(dataset)
    assert "recorded ground truth gives" in problems[("former-0000", "answer.point")]
    assert ("former-0000", "instances.visit2") in problems
    assert ("moving-0000", "answer.point") not in problems


def test_schema_errors_name_the_episode_and_every_field(dataset):
    def damage(doc):
        if doc["episode_id"] == "moving-0000":
            doc["start_pose"]["yaw_deg"] = "north"
            del doc["certification"]["runs"][0]["steps"]
            doc["query"]["relation"] = "teleported"

    _rewrite(dataset, damage)
    problems = _problems(dataset)
    assert {
        ("moving-0000", "start_pose.yaw_deg"),
        ("moving-0000", "certification.runs[0].steps"),
        ("moving-0000", "query.relation"),
    } <= set(problems)
    assert "teleported" in problems[("moving-0000", "query.relation")]


def test_missing_or_failed_certification_is_reported(dataset):
    def uncertify(doc):
        if doc["episode_id"] == "former-0000":
            doc["certification"]["runs"] = doc["certification"]["runs"][:2]

    _rewrite(dataset, uncertify)
    problems = _problems(dataset)
    assert "expected 1 feasibility + 3 certification runs" in problems[("former-0000", "certification.runs")]


def test_a_truncated_recording_is_reported_with_its_field(dataset):
    visit2 = next((dataset / "recordings" / "moving-0000" / "visit2").glob("*.mcap"))
    data = visit2.read_bytes()
    visit2.write_bytes(data[: len(data) // 2])
    problems = _problems(dataset)
    assert ("moving-0000", "recordings.visit2") in problems
    assert not any(who == "former-0000" for who, _ in problems)


def test_a_missing_recording_is_reported_with_its_field(dataset):
    shutil.rmtree(dataset / "recordings" / "former-0000" / "visit1")
    problems = _problems(dataset)
    assert "does not exist" in problems[("former-0000", "recordings.visit1")]


def test_every_problem_is_reported_at_once(dataset):
    shutil.rmtree(dataset / "recordings" / "former-0000" / "visit1")
    manifest = json.loads((dataset / "manifest.json").read_text())
    manifest["complete"] = False
    (dataset / "manifest.json").write_text(json.dumps(manifest))

    def damage(doc):
        if doc["episode_id"] == "moving-0000":
            doc["answer"]["instance_id"] = "Nothing_1"

    _rewrite(dataset, damage)
    problems = _problems(dataset)
    assert {
        ("(dataset)", "manifest.json: complete"),
        ("(dataset)", "manifest.json: episodes_sha256"),
        ("former-0000", "recordings.visit1"),
        ("moving-0000", "answer.instance_id"),
    } <= set(problems)


def test_a_directory_without_a_dataset_fails(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "dataset: manifest.json:" in out and "dataset: episodes.jsonl: missing" in out
