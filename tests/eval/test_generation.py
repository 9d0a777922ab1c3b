"""Episode generation (Algorithm 1): answers of every relation, the anti-shortcut rule, drift and
oracle rejections, the multi-change split, determinism of the plan."""

from __future__ import annotations

import dataclasses
import math

import pytest

from ovman_core.boxes import floor_distance
from ovman_core.relations import Relation
from ovman_eval.generation.dataset import read_episodes, read_manifest, recorded_states
from ovman_eval.generation.plan import REASONS, GenerationRequest, plan_slots
from ovman_eval.generation.validate import validate_dataset
from ovman_query.surface_forms import PHRASINGS, surface_names

from .generation_setup import (
    BlockedAfterFeasibilityWorld,
    BlockedWorld,
    DriftingWorld,
    SlightlyDriftingWorld,
    fake_thor_config,
    generate,
    request,
    small_config,
)

CONFIG = small_config()
TASK = CONFIG.task


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("single") / "ds"
    summary = generate(out, request())
    episodes = read_episodes(out)
    return out, summary.manifest, episodes, {e.episode_id: recorded_states(out, e) for e in episodes}


def test_every_relation_is_emitted_with_the_answer_its_definition_gives(dataset):
    _, manifest, episodes, states = dataset
    assert manifest["complete"] and manifest["counts"]["per_relation"] == {r.value: 1 for r in Relation}
    assert sorted(e.query.relation for e in episodes) == sorted(Relation)
    for episode in episodes:
        s = states[episode.episode_id]
        w1, w2, end = s.visit1, s.visit2_start, s.visit2_end
        relation, answer = episode.query.relation, episode.answer
        obj_id = answer.instance_id
        if relation is Relation.MOVED:
            assert floor_distance(w1[obj_id].position, w2[obj_id].position) >= TASK.min_displacement
            assert answer.point == pytest.approx(w2[obj_id].floor, abs=1e-6)
        elif relation is Relation.FORMER:
            assert floor_distance(w1[obj_id].position, w2[obj_id].position) >= TASK.min_displacement
            assert answer.point == pytest.approx(w1[obj_id].floor, abs=1e-6)
        elif relation is Relation.REMOVED:
            assert obj_id in w1 and obj_id not in w2
            assert answer.point == pytest.approx(w1[obj_id].floor, abs=1e-6)
        elif relation is Relation.APPEARED:
            assert obj_id not in w1 and obj_id in w2
            assert answer.point == pytest.approx(w2[obj_id].floor, abs=1e-6)
        elif relation is Relation.STABLE:
            assert floor_distance(w1[obj_id].position, w2[obj_id].position) <= TASK.stable_tolerance
            assert any(c.instance_id != obj_id and c.category == episode.query.category for c in episode.changes)
        else:  # MOVING: the carried instance, where the visit-2 recording ends
            assert obj_id == episode.moving_id
            assert len({o.floor for o in s.carried}) > 1, "the mover carried it during visit 2"
            assert answer.point == pytest.approx(end[obj_id].floor, abs=1e-6)
        region = (
            end[obj_id].box.footprint
            if relation is Relation.MOVING
            else (w1 if answer.vacated else w2)[obj_id].box.footprint
        )
        assert (answer.region.x_min, answer.region.z_max) == pytest.approx((region.x_min, region.z_max), abs=1e-6)
        assert answer.vacated == (relation in (Relation.FORMER, Relation.REMOVED))


def test_former_and_removed_answers_are_vacated_places(dataset):
    _, _, episodes, states = dataset
    for episode in (e for e in episodes if e.query.relation in (Relation.FORMER, Relation.REMOVED)):
        end = states[episode.episode_id].visit2_end
        same = end.of_category(episode.query.category)
        # Nothing of the category is left at the answer: the instance is gone from there, and every
        # instance of the category lies beyond R_sep.
        assert all(o.box.footprint.distance_to_footprint(episode.answer.region) > TASK.separation_radius for o in same)


def test_the_anti_shortcut_rule_holds_on_every_emitted_episode(dataset):
    _, _, episodes, states = dataset
    for episode in episodes:
        s = states[episode.episode_id]
        category, answer = episode.query.category, episode.answer
        assert len({o.instance_id for o in s.visit1.of_category(category)} | set(episode.instances.visit2)) >= 2
        regions = [answer.region]
        if episode.query.relation is Relation.MOVING:
            regions += [o.box.footprint for o in s.carried]
        for other in s.visit2_start.of_category(category):
            if other.instance_id == answer.instance_id and not answer.vacated:
                continue
            gap = min(other.box.footprint.distance_to_footprint(r) for r in regions)
            assert gap > TASK.separation_radius, (episode.episode_id, other.instance_id, gap)


def test_every_episode_is_certified_by_a_feasibility_and_three_fresh_oracle_runs(dataset):
    _, _, episodes, _ = dataset
    for episode in episodes:
        runs = episode.certification.runs
        assert [r.kind for r in runs] == ["feasibility"] + ["certification"] * TASK.certification_runs
        assert all(r.success and r.error == "NONE" and r.stop_distance <= TASK.success_radius for r in runs)
        if episode.moving_id is None:
            assert all(r.mover_seed is None for r in runs)
        else:  # each fresh reset reseeds the mover
            assert len({r.mover_seed for r in runs}) == len(runs)
            assert runs[0].mover_seed == episode.seeds.navigation_mover


def test_start_poses_are_far_from_the_answer_and_phrases_come_from_the_vocabulary(dataset):
    _, _, episodes, _ = dataset
    for episode in episodes:
        assert (
            episode.answer.region.distance_to(episode.start_pose.floor)
            >= CONFIG.benchmark_node.generation.min_start_distance
        )
        query = episode.query
        forms = PHRASINGS[query.relation]
        assert query.template in (forms.train if query.phrase_split == "train" else forms.held_out)
        assert query.noun_phrase in surface_names(query.category)
        assert query.phrase == query.template.replace("{x}", query.noun_phrase)


def test_rejections_are_counted_per_relation_and_reason(dataset):
    _, manifest, _, _ = dataset
    table = manifest["rejections"]
    assert set(table) == {r.value for r in Relation}
    for relation, reasons in table.items():
        assert set(reasons) <= set(REASONS)
        assert sum(reasons.values()) == manifest["counts"]["attempts_per_relation"][relation] - 1


def _rejected_instead(tmp_path, relation, world_factory, reason):
    """Run the slot on a normal world, then on ``world_factory`` with as many attempts as the normal
    run needed: the candidate the normal run emitted must be rejected for ``reason``."""
    free = generate(tmp_path / "free", request([relation]))
    attempts = free.manifest["counts"]["attempts"]
    config = small_config(max_attempts_per_episode=attempts)
    bad = generate(tmp_path / "bad", request([relation]), config, world_factory=world_factory)
    assert free.episodes == 1 and bad.episodes == 0
    expected = dict(free.manifest["rejections"][relation.value])
    expected[reason] = expected.get(reason, 0) + 1
    assert bad.manifest["rejections"][relation.value] == dict(sorted(expected.items()))
    assert bad.manifest["shortfall"][relation.value] == 1


def test_a_drifted_object_is_rejected(tmp_path):
    _rejected_instead(tmp_path, Relation.MOVED, DriftingWorld, "drift")


def test_drift_within_the_tolerance_is_recorded_and_accepted(tmp_path):
    summary = generate(tmp_path / "ds", request([Relation.REMOVED]), world_factory=SlightlyDriftingWorld)
    (episode,) = read_episodes(summary.directory)
    assert episode.drift.visit2 == pytest.approx(SlightlyDriftingWorld.drift, abs=1e-6)
    assert episode.drift.reread == pytest.approx(0.0) and episode.drift.tolerance == TASK.drift_tolerance


def _with_physics(config, **physics):
    sim = config.sim_node
    return dataclasses.replace(
        config, sim_node=dataclasses.replace(sim, physics=dataclasses.replace(sim.physics, **physics))
    )


def test_a_knocked_neighbour_settling_beyond_the_tolerance_is_rejected_for_drift(tmp_path):
    # Every movable neighbour within 1 m of a change is knocked and slides ~0.3 m: candidates
    # whose neighbours settle while visit 2 is recorded are rejected, counted per relation.
    config = _with_physics(small_config(), knock_radius=1.0, knock_probability=1.0, slide_mean=0.3)
    summary = generate(tmp_path / "ds", request([Relation.MOVED, Relation.REMOVED], per_relation=1), config)
    drifted = {r: t.get("drift", 0) for r, t in summary.manifest["rejections"].items()}
    assert drifted["moved"] + drifted["removed"] >= 2
    for episode in read_episodes(summary.directory):
        assert max(episode.drift.visit1, episode.drift.visit2, episode.drift.reread) <= TASK.drift_tolerance
    # Without physics nothing settles, so nothing is rejected for drift.
    calm = generate(
        tmp_path / "calm",
        request([Relation.MOVED, Relation.REMOVED], per_relation=2),
        _with_physics(config, enabled=False),
    )
    assert not any(t.get("drift") for t in calm.manifest["rejections"].values())


def test_an_unsolvable_candidate_is_rejected_by_the_oracle(tmp_path):
    _rejected_instead(tmp_path, Relation.REMOVED, BlockedWorld, "oracle_feasibility")


def test_a_candidate_failing_one_certification_run_is_rejected(tmp_path):
    _rejected_instead(tmp_path, Relation.REMOVED, BlockedAfterFeasibilityWorld, "oracle_certification")


def test_multi_change_episodes_change_two_or_three_instances_and_ask_one_query_per_relation(tmp_path):
    relations = [Relation.REMOVED, Relation.MOVED]
    summary = generate(tmp_path / "ds", request(relations, scenes=("embedded-3",), multi_change=True))
    episodes = read_episodes(summary.directory)
    groups: dict[str, list] = {}
    for episode in episodes:
        groups.setdefault(episode.group_id, []).append(episode)
    assert {e.group_id for e in episodes} == {"mc-removed-0000", "mc-moved-0000"}
    for group in groups.values():
        changes = group[0].changes
        assert 2 <= len(changes) <= 3 and len({c.kind for c in changes}) == len(changes)
        assert len({c.category for c in changes}) == 1 and len({c.instance_id for c in changes}) == len(changes)
        relations_asked = [e.query.relation for e in group]
        assert len(relations_asked) == len(set(relations_asked)), "one query per (category, relation)"
        for episode in group:
            assert episode.split == "multi_change" and episode.changes == changes
            assert episode.recordings == group[0].recordings
            assert episode.certification.passed
            changed = {c.instance_id for c in changes}
            assert episode.answer.instance_id in changed or episode.query.relation is Relation.STABLE


def test_generation_runs_on_the_ai2thor_adapter(tmp_path, monkeypatch):
    """The real ai2thor Controller and ThorWorld, driving the fake Unity player of the adapter tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ai2thor writes ~/.ai2thor
    config = fake_thor_config(tmp_path / "player")
    relations = (Relation.FORMER, Relation.APPEARED, Relation.MOVING)  # a vacated answer, a copied instance, the mover
    req = GenerationRequest("ai2thor", ("FloorPlan1",), 1, 0, relations=relations)
    summary = generate(tmp_path / "ds", req, config)
    assert summary.manifest["counts"]["per_relation"] == {r.value: 1 for r in relations}
    episodes = read_episodes(summary.directory)
    assert {e.scene.world for e in episodes} == {"ai2thor"} and {e.scene.name for e in episodes} == {"FloorPlan1"}
    report = validate_dataset(summary.directory)
    assert report.ok, [str(p) for p in report.problems]


def test_the_plan_spreads_every_relation_over_every_scene():
    req = GenerationRequest("embedded", tuple(f"embedded-{k}" for k in range(20)), 36, 0)
    slots = plan_slots(req)
    assert len(slots) == 6 * 36 and [s.index for s in slots] == list(range(len(slots)))
    for relation in Relation:
        scenes = [s.scene_index for s in slots if s.relation is relation]
        counts = [scenes.count(k) for k in range(20)]
        assert min(counts) >= 1 and max(counts) - min(counts) <= 1
    assert len({s.key for s in slots}) == len(slots)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scenes": ()}, "at least one scene"),
        ({"per_relation": 0}, "per-relation"),
        ({"seed": -1}, "seed"),
        ({"condition": "fog"}, "unknown condition 'fog'"),
        ({"scenes": ("embedded-1", "embedded-1")}, "listed twice"),
    ],
)
def test_bad_requests_are_refused_with_a_clear_message(kwargs, message):
    args = {"world": "embedded", "scenes": ("embedded-0",), "per_relation": 1, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        GenerationRequest(**args)


def test_stored_floats_are_finite_and_rounded(dataset):
    out, _, _, _ = dataset
    text = (out / "episodes.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    manifest = read_manifest(out)
    assert math.isfinite(manifest["timings"]["wall_s"])
