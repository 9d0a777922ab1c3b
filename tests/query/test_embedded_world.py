"""The reference agent on real embedded-world tours (ovman_sim.embedded), with the offline label
encoder: a multi-change episode (one move, one removal, one addition) and a moving episode.

The harness picks the changed instances with the ground truth (as episode generation does) and
checks every answer with the static gate; the agent itself sees only the recorded frames.
"""

import dataclasses
import math

import numpy as np
import pytest

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_core.success import static_success
from ovman_core.world_state import ObjectState
from ovman_eval.benchmark.request import segmented_by
from ovman_eval.task.admissibility import admissibility_violations
from ovman_eval.task.answers import NoAnswerError, compute_answer
from ovman_mapping.encoders import LabelEncoder, label_text
from ovman_query.agent import ReferenceAgent, query_of
from ovman_query.arms import oracle_positions
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.tours import tour_observations
from ovman_sim.world import AddObject, MoveObject, RemoveObject

# These test fusion and decisions on exact segments: the simulator's (the segmenter has its own tests).
CONFIG = segmented_by(load_config(), "simulator")
TASK = CONFIG.task
SCENE = "embedded-0"


@pytest.fixture(scope="module")
def world():
    # The ideal camera: these scenes pin the agent's logic; the sensor model's effect is measured
    # by the benchmark (README, "The embedded world").
    sim = CONFIG.sim_node
    w = EmbeddedWorld(dataclasses.replace(sim, sensor=dataclasses.replace(sim.sensor, enabled=False)))
    yield w
    w.close()


@pytest.fixture(scope="module")
def agent():
    return ReferenceAgent(CONFIG, LabelEncoder(CONFIG.mapping_node.encoder))


def record(world, objects, start, mover=None):
    """The tour's frames, the world at its end, and every object's position at each frame's step."""
    world.reset(SCENE, objects, start)
    if mover is not None:
        world.start_mover(mover, seed=0)
    frames, positions = [], {}
    for frame in tour_observations(world, CONFIG.sim_node.tour, CONFIG.sim_node.world):
        frames.append(frame)
        positions[frame.step] = {o.instance_id: o.floor for o in world.objects()}
    return frames, world.objects(), positions


@pytest.fixture(scope="module")
def visit_1(world, agent):
    world.reset(SCENE)
    w1, start = world.objects(), world.agent_pose()
    frames, _, _ = record(world, w1, start)
    return w1, start, agent.build_map(frames, 1)


def admissible(w1, w2, category, relation, moving_id=None):
    try:
        answer = compute_answer(w1, w2, category, relation, TASK, moving_id=moving_id)
    except NoAnswerError:
        return None
    return None if admissibility_violations(w1, w2, answer, TASK) else answer


def multi_change(world, w1, start):
    """Move one instance, remove another and add a third, each of a different category with at
    least two instances, such that moved, former, removed and appeared queries are admissible: as
    episode generation does, candidate moves are tried until the moved and former answers pass the
    admissibility rules (a look-alike of the category near the former place rejects a candidate)."""
    rng = np.random.default_rng(0)
    categories = sorted({o.category for o in w1 if len(w1.of_category(o.category)) >= 2})
    moved_cat, removed_cat, added_cat = (categories[i] for i in rng.permutation(len(categories))[:3])

    def removed_and_added():
        world.reset(SCENE, w1, start)
        for o in w1.of_category(removed_cat):
            if world.apply_change(RemoveObject(o.instance_id)).success:
                break
        template = world.new_instance(added_cat, f"{added_cat}_new")
        for p in world.candidate_placements(template.instance_id)[::7]:
            shift = tuple(p[k] - template.position[k] for k in range(3))
            added = ObjectState(template.instance_id, added_cat, p, template.box.translated(shift), template.movable)
            if world.apply_change(AddObject(added)).success:
                break

    removed_and_added()
    for o in w1.of_category(moved_cat):
        far = [
            p
            for p in world.candidate_placements(o.instance_id)
            if math.hypot(p[0] - o.position[0], p[2] - o.position[2]) >= TASK.min_displacement + 1.0
        ]
        for p in far[:: max(len(far) // 10, 1)]:
            if not world.apply_change(MoveObject(o.instance_id, p)).success:
                continue
            w2 = world.objects()
            if all(admissible(w1, w2, moved_cat, r) is not None for r in (Relation.MOVED, Relation.FORMER)):
                return w2, moved_cat, removed_cat, added_cat
            removed_and_added()
    pytest.fail(f"no move of a {moved_cat} makes both its moved and former queries admissible")


def test_multi_change_episode_answers_every_relation_within_the_gate(world, agent, visit_1):
    w1, start, map1 = visit_1
    w2, moved_cat, removed_cat, added_cat = multi_change(world, w1, start)
    frames, _, _ = record(world, w2, start)
    map2 = agent.build_map(frames, 2)
    queries = [
        (moved_cat, Relation.MOVED),
        (moved_cat, Relation.FORMER),
        (removed_cat, Relation.REMOVED),
        (added_cat, Relation.APPEARED),
        (moved_cat, Relation.STABLE),
    ]
    judged = 0
    for category, relation in queries:
        answer = admissible(w1, w2, category, relation)
        if answer is None:
            continue
        judged += 1
        query = query_of(label_text(category), relation, category)
        prediction = agent.answer(map1, map2, query)
        assert static_success(prediction.point, answer.point, TASK.static_gate_radius), prediction.explanation
        oracle = oracle_positions(agent, w1, w2, query)
        assert static_success(oracle.point, answer.point, TASK.static_gate_radius), oracle.explanation
    assert judged >= 4
    # No static instance of either visit is taken for a moving one.
    assert not any(i.moving for i in map1) and not any(i.moving for i in map2)


def test_moving_object_is_tracked_to_its_latest_sighting(world, agent, visit_1):
    w1, start, map1 = visit_1
    candidates = [o for o in w1 if o.movable and len(w1.of_category(o.category)) >= 2]
    large = 4 * CONFIG.mapping_node.mapping.min_segment_pixels
    # Pick, with the ground truth, a carried instance that the tour sees large in three frames.
    for obj in candidates[:: max(len(candidates) // 12, 1)]:
        frames, _, positions = record(world, w1, start, mover=obj.instance_id)
        sighted = [
            frame.step
            for frame in frames
            for segment, instance in frame.segment_instances.items()
            if instance == obj.instance_id and (frame.segments == segment).sum() >= large
        ]
        if len(sighted) >= 3:
            break
    else:
        pytest.fail("no carried instance was seen large in three frames of the tour")
    map2 = agent.build_map(frames, 2)
    prediction = agent.answer(map1, map2, query_of(label_text(obj.category), Relation.MOVING, obj.category))
    assert not prediction.abstained, prediction.explanation
    moving = map2[prediction.instance_ids[0]]
    # The track follows the carried object: at its latest sighting it is where the object was.
    assert moving.moving and len({s.step for s in moving.sightings}) >= 2
    truth = positions[moving.last_step][obj.instance_id]
    assert static_success(prediction.point, truth, TASK.static_gate_radius), prediction.explanation
