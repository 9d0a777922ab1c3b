"""``ovman validate``: a generated dataset passes; corrupt or truncated datasets fail with every
problem reported, each naming the episode and the field."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from ovman_core.relations import Relation
from ovman_eval.cli.main import main
from ovman_eval.generation.validate import validate_dataset

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


def _blocked_cell(scene: str):
    """A point of the scene's grid that the walls alone block (the agent would stand in a wall)."""
    from ovman_core.config import load_config
    from ovman_core.world_state import AgentPose, WorldState
    from ovman_sim.embedded import EmbeddedWorld

    world = EmbeddedWorld(load_config().sim_node)
    world.reset(scene)
    grid = world.home.grid(0.25)
    for x in grid.xs():
        for z in grid.zs():
            try:
                world.reset(scene, WorldState.of([]), AgentPose(float(x), float(z), 0.0, 0.0))
            except ValueError as err:
                if "blocked" in str(err):
                    return float(x), float(z)
    raise AssertionError("no wall cell found")


def _with_start(dataset, episode, **pose):
    def edit(doc):
        if doc["episode_id"] == episode:
            doc["start_pose"].update(pose)

    _rewrite(dataset, edit)
    manifest = json.loads((dataset / "manifest.json").read_text())
    manifest["episodes_sha256"] = hashlib.sha256((dataset / "episodes.jsonl").read_bytes()).hexdigest()
    (dataset / "manifest.json").write_text(json.dumps(manifest))  # a consistent edit: only the pose is wrong


@pytest.mark.parametrize(
    ("pose", "expected"),
    [
        ({"x": 1000.25}, "not a point of the 0.25 m grid inside the home"),
        ({"x": 1.8}, "not a point of the 0.25 m grid"),
        ({"yaw_deg": 45.0}, "yaw 45.0 is not a multiple of world.rotate_step_deg = 90.0"),
        ({"horizon_deg": 80.0}, "horizon 80.0 is outside [-30.0, 60.0]"),
    ],
)
def test_a_start_pose_the_agent_cannot_take_is_reported_by_the_cheap_checks(dataset, pose, expected):
    _with_start(dataset, "former-0000", **pose)
    for full in (False, True):
        problems = [p for p in validate_dataset(dataset, full=full).problems if p.episode == "former-0000"]
        assert [p.field for p in problems] == ["start_pose"] and expected in problems[0].message


def test_a_start_pose_inside_a_wall_is_reported(dataset):
    x, z = _blocked_cell("embedded-0")
    _with_start(dataset, "moving-0000", x=x, z=z)
    (problem,) = validate_dataset(dataset, full=False).problems
    assert problem.episode == "moving-0000" and "not placeable in the scene's walls" in problem.message
    assert "blocked" in problem.message


def test_a_start_pose_on_an_object_of_the_evaluated_world_is_reported_by_the_full_checks(dataset):
    from ovman_core.config import load_config
    from ovman_core.world_state import AgentPose, WorldState
    from ovman_eval.generation.dataset import read_episodes, recorded_states
    from ovman_sim.embedded import EmbeddedWorld

    record = next(r for r in read_episodes(dataset) if r.episode_id == "former-0000")
    end = recorded_states(dataset, record).visit2_end
    world = EmbeddedWorld(load_config().sim_node)
    world.reset(record.scene.name)
    grid = world.home.grid(0.25)

    def problem(objects, x, z):
        try:
            world.reset(record.scene.name, objects, AgentPose(float(x), float(z), 0.0, 0.0))
        except ValueError as err:
            return str(err)
        return ""

    x, z = next(
        (x, z)
        for x in grid.xs()
        for z in grid.zs()
        if not problem(WorldState.of([]), x, z) and "blocked" in problem(end, x, z)
    )  # clear of the walls, under an object
    _with_start(dataset, "former-0000", x=float(x), z=float(z))
    assert not [p for p in validate_dataset(dataset, full=False).problems if p.episode == "former-0000"]
    (found,) = [p for p in validate_dataset(dataset, full=True).problems if p.episode == "former-0000"]
    assert found.field == "start_pose" and "not placeable in the evaluated world" in found.message


def test_checked_episodes_refuses_a_dataset_that_fails_the_cheap_checks_listing_its_problems(dataset):
    from ovman_eval.generation.dataset import DatasetError
    from ovman_eval.generation.validate import checked_episodes

    assert [r.episode_id for r in checked_episodes(dataset)] == ["former-0000", "moving-0000"]
    manifest = json.loads((dataset / "manifest.json").read_text())
    manifest["complete"] = False
    (dataset / "manifest.json").write_text(json.dumps(manifest))
    lines = _lines(dataset)
    (dataset / "episodes.jsonl").write_text("\n".join([*lines, lines[0]]) + "\n")  # a duplicate id
    with pytest.raises(DatasetError) as caught:
        checked_episodes(dataset)
    text = str(caught.value)
    assert "fails validation" in text and "manifest.json: complete" in text and "duplicate of line 1" in text
    assert "episodes_sha256" in text


def test_a_manifest_from_before_a_config_key_was_added_validates_with_a_note(dataset, capsys):
    """Keys added to the configuration after generation are taken from the current one and named;
    what the manifest records is still checked."""
    from ovman_eval.generation.validate import OlderConfigWarning, checked_episodes

    path = dataset / "manifest.json"
    manifest = json.loads(path.read_text())
    params = manifest["config"]["mapping_node"]["ros__parameters"]
    del params["segmenter"]["precision"]
    del params["markers"]
    path.write_text(json.dumps(manifest))
    report = validate_dataset(dataset)
    assert report.ok, [str(p) for p in report.problems]
    (note,) = report.notes
    assert "2 key(s) added" in note and "mapping_node.ros__parameters.markers" in note
    assert "mapping_node.ros__parameters.segmenter.precision" in note
    assert main(["validate", str(dataset)]) == 0
    assert "note: manifest.json: config: 2 key(s)" in capsys.readouterr().out
    with pytest.warns(OlderConfigWarning, match="segmenter.precision"):
        assert len(checked_episodes(dataset)) == 2
    params["segmenter"]["threads"] = 0  # a recorded value out of range is still a problem
    path.write_text(json.dumps(manifest))
    assert "segmenter.threads" in _problems(dataset)[("(dataset)", "manifest.json: config")]


def test_swapped_visits_are_found_by_the_cheap_checks(dataset):
    group = dataset / "recordings" / "former-0000"
    (group / "visit1").rename(group / "swap")
    (group / "visit2").rename(group / "visit1")
    (group / "swap").rename(group / "visit2")
    problems = {(p.episode, p.field) for p in validate_dataset(dataset, full=False).problems}
    assert {("former-0000", "recordings.visit1"), ("former-0000", "recordings.visit2")} <= problems


@pytest.mark.parametrize("flags", [[], ["--validate", "full"]])
def test_the_benchmark_refuses_a_dataset_that_fails_validation_before_running_anything(
    dataset, tmp_path, capsys, flags
):
    def swap(doc):
        if doc["episode_id"] == "former-0000":
            doc["start_pose"]["yaw_deg"] = 45.0

    _rewrite(dataset, swap)  # an edited episode: the manifest's checksum no longer matches
    out = tmp_path / "runs"
    assert main(["benchmark", "--dataset", str(dataset), "--out", str(out), "--static-only", "--quiet", *flags]) == 1
    err = capsys.readouterr().err
    assert "fails validation" in err and "episodes_sha256" in err and "yaw 45.0 is not a multiple" in err
    assert not out.exists() or not any(out.iterdir())


def test_the_full_validation_of_the_benchmark_finds_a_recording_the_cheap_one_does_not_read(dataset, tmp_path, capsys):
    visit2 = next((dataset / "recordings" / "moving-0000" / "visit2").glob("*.mcap"))
    data = bytearray(visit2.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # damage inside a chunk: metadata and summary stay readable
    visit2.write_bytes(bytes(data))
    assert validate_dataset(dataset, full=False).ok
    out = tmp_path / "runs"
    command = ["benchmark", "--dataset", str(dataset), "--out", str(out), "--static-only", "--quiet"]
    assert main([*command, "--validate", "full"]) == 1
    assert "recordings.visit2" in capsys.readouterr().err
