"""benchmark_node's moving-target followers without ROS: ground truth frame by frame, sightings."""

from __future__ import annotations

import dataclasses

import pytest
from ovman_ros.bundle import BundleFormatError, ground_truth_json

from ovman_core.boxes import Box3, Footprint
from ovman_core.config import load_config
from ovman_core.world_state import WorldState
from ovman_eval.graph.followers import SightFollower, TruthFollower, TruthMessage
from ovman_nav.executor import NavTarget
from ovman_sim.embedded import EmbeddedWorld


@pytest.fixture(scope="module")
def frames() -> tuple[list[TruthMessage], str]:
    """Three ground-truth records of one embedded scene: an object in place, moved 0.5 m in x, gone."""
    world = EmbeddedWorld(load_config().sim_node)
    world.reset("embedded-3")
    observation, objects = world.observe(), world.objects()
    instance = sorted(objects.objects)[0]
    moved = objects.objects[instance]
    lo, hi = moved.box.lo, moved.box.hi
    x, y, z = moved.position
    moved = dataclasses.replace(
        moved, position=(x + 0.5, y, z), box=Box3((lo[0] + 0.5, *lo[1:]), (hi[0] + 0.5, *hi[1:]))
    )
    states = [
        objects,
        WorldState({**objects.objects, instance: moved}),
        WorldState({k: v for k, v in objects.objects.items() if k != instance}),
    ]
    texts = [ground_truth_json(observation, state, 1_000 * (k + 1)) for k, state in enumerate(states)]
    world.close()
    return [TruthMessage.parse(t) for t in texts], instance


def test_truth_follower_gives_one_estimate_per_new_frame_and_keeps_the_last_known_while_absent(frames):
    messages, instance = frames
    start = NavTarget((0.0, 0.0), Footprint(-0.1, -0.1, 0.1, 0.1))
    follower = TruthFollower(instance, start, seen=1)  # the first frame came before the follower
    received = messages[:2]
    first = follower.follow(received)
    assert [stamp for stamp, _ in first] == [2_000]
    at_moved = messages[1].object_target(instance)
    assert at_moved is not None and first[0][1] == at_moved
    assert at_moved.point[0] == pytest.approx(messages[0].object_target(instance).point[0] + 0.5)
    assert follower.follow(received) == []  # nothing new
    gone = follower.follow(messages)
    assert gone == [(3_000, at_moved)]  # absent: the last known target again
    assert messages[2].object_target(instance) is None


def test_truth_message_refuses_what_is_not_a_ground_truth_record():
    with pytest.raises(BundleFormatError, match="not a ground-truth record"):
        TruthMessage.parse('{"hello": 1}')
    bad = TruthMessage(5, None, '{"stamp_ns": 5, "objects": [{"instance_id": "a"}]}')  # type: ignore[arg-type]
    with pytest.raises(BundleFormatError, match="bad objects"):
        bad.object_target("a")


class ScriptedTracker:
    """Stands in for LabelTracker: sightings given per frame (None: the label not seen near)."""

    def __init__(self, sightings: dict[str, NavTarget | None]) -> None:
        self.sightings = sightings
        self.updates = 0

    def observe(self, observation: str) -> NavTarget | None:
        seen = self.sightings[observation]
        self.updates += seen is not None
        return seen


def test_sight_follower_carries_the_estimate_between_sightings_and_counts_retargets():
    start = NavTarget((1.0, 1.0), Footprint(0.9, 0.9, 1.1, 1.1))
    near = NavTarget((1.2, 1.0), Footprint(1.1, 0.9, 1.3, 1.1))
    further = NavTarget((1.4, 1.0), Footprint(1.3, 0.9, 1.5, 1.1))
    tracker = ScriptedTracker({"start": None, "a": near, "b": None, "c": further})
    follower = SightFollower(tracker, start)  # type: ignore[arg-type]
    assert follower.look([(10, "start")]) == [(10, start)]
    assert follower.retargets == 0
    assert follower.look([(11, "a"), (12, "b"), (13, "c")]) == [(11, near), (12, near), (13, further)]
    assert follower.retargets == 2 and follower.estimate == further
    assert follower.look([]) == []
