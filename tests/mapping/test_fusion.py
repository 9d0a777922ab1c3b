"""Per-visit fusion of segments into 3D instances, by geometry and features only."""

import dataclasses
import pickle
from collections.abc import Mapping

import numpy as np
import pytest

from ovman_core.config import load_config
from ovman_core.world_state import AgentPose
from ovman_mapping.backprojection import FrameFormatError
from ovman_mapping.fusion import MapBuilder, build_map
from ovman_mapping.instances import Positions
from ovman_mapping.segmenter import SimulatorSegmenter, with_segmenter

from .scenes import OneHotEncoder, look_around, on_floor, render, tour

# The box scenes test fusion and decisions on exact segments: the simulator's (the segmenter has its own tests).
CONFIG = with_segmenter(load_config().mapping_node, "simulator")
ENCODER = OneHotEncoder(["Chair", "Vase", "Box", "Sofa"])

CHAIR = on_floor("Chair_1", "Chair", 2.0, 0.0, colour=(200, 40, 40))
CHAIR_2 = on_floor("Chair_2", "Chair", -2.0, 1.0, colour=(40, 200, 40))
SOFA = on_floor("Sofa_1", "Sofa", 0.0, 3.0, size=(1.8, 0.8, 0.8), colour=(40, 40, 200))
VASE = on_floor("Vase_1", "Vase", 0.0, -3.0, size=(0.3, 0.5, 0.3), colour=(200, 200, 40))
BOX = on_floor("Box_1", "Box", -3.0, -3.0, size=(0.4, 0.4, 0.4), colour=(20, 200, 200))
STATIC = [CHAIR, CHAIR_2, SOFA, VASE]
AROUND = look_around(0.0, 0.0) + look_around(1.0, 1.0) + look_around(-1.0, -1.0)


class Forbidden(Mapping):
    """A segment → instance table that fails the test if anything reads it."""

    def __getitem__(self, key):
        raise AssertionError("mapping read a ground-truth instance id")

    def __iter__(self):
        raise AssertionError("mapping read a ground-truth instance id")

    def __len__(self):
        raise AssertionError("mapping read a ground-truth instance id")


def blind(observations):
    return [dataclasses.replace(o, segment_instances=Forbidden()) for o in observations]


def nearest(instance_map, obj):
    return min(instance_map, key=lambda i: np.hypot(i.floor[0] - obj.centre[0], i.floor[1] - obj.centre[2]))


def test_static_scene_gives_one_instance_per_object_at_its_place():
    instance_map = build_map(blind(tour(STATIC, AROUND)), CONFIG, ENCODER, visit=1)
    assert sorted(i.label for i in instance_map) == ["Chair", "Chair", "Sofa", "Vase"]
    for obj in STATIC:
        instance = nearest(instance_map, obj)
        assert instance.label == obj.label
        assert np.hypot(instance.floor[0] - obj.centre[0], instance.floor[1] - obj.centre[2]) < 0.25
        assert not instance.moving
    assert all(i.uid.startswith("v1:") for i in instance_map)
    assert instance_map.encoder == ENCODER.description


def test_instance_features_are_unit_vectors_of_the_encoder_and_labels_a_distribution():
    instance_map = build_map(tour(STATIC, AROUND), CONFIG, ENCODER, visit=1)
    features = instance_map.features()
    assert features.shape == (4, len(ENCODER.words) + 1)
    assert np.allclose(np.linalg.norm(features, axis=1), 1.0)
    for instance in instance_map:
        assert sum(instance.labels.values()) == 1.0
        assert instance.first_step <= instance.last_step
        assert [s.step for s in instance.sightings] == sorted(s.step for s in instance.sightings)


def test_two_same_label_objects_close_together_seen_in_separate_frames_stay_two():
    # Two identical tall boxes 0.2 m apart on one line: seen from the left, the left box hides the
    # right one; seen from the right, the reverse. Each frame shows one box, never both.
    left = on_floor("Box_1", "Box", -0.25, 3.0, size=(0.3, 2.0, 0.3), colour=(20, 200, 200))
    right = on_floor("Box_2", "Box", 0.25, 3.0, size=(0.3, 2.0, 0.3), colour=(20, 200, 200))
    frames = [render([left, right], AgentPose(-1.75, 3.0, 90.0, 0.0), 0)]
    frames.append(render([left, right], AgentPose(1.75, 3.0, 270.0, 0.0), 1))
    assert all(len(f.segment_labels) == 1 for f in frames)
    instance_map = build_map(blind(frames), CONFIG, ENCODER, visit=1)
    # Each box is seen from one side only, so its instance sits on the face that was seen.
    assert sorted(round(i.position[0], 1) for i in instance_map) == [-0.4, 0.4]
    assert not any(i.moving for i in instance_map)


def test_partial_views_of_one_large_object_fuse_into_one_instance():
    sofa = on_floor("Sofa_1", "Sofa", 0.0, 2.0, size=(3.0, 0.8, 0.8), colour=(40, 40, 200))
    poses = [AgentPose(x, 0.0, 0.0, 30.0) for x in (-1.5, 0.0, 1.5)]
    instance_map = build_map(blind(tour([sofa], poses)), CONFIG, ENCODER, visit=1)
    assert len(instance_map) == 1
    assert instance_map.instances[0].box.size[0] > 2.5


def test_moving_object_fragments_merge_into_one_moving_track_at_its_latest_place():
    # The vase is seen at (0, 3), then that place is seen empty and the vase appears at (-3, 0),
    # then at (-3, -1.5); the box and the chair never move.
    frames = []
    for place in ((0.0, 3.0), (-3.0, 0.0), (-3.0, -1.5)):
        frames += [render([CHAIR, VASE.moved_to(*place), BOX], p, len(frames) + n) for n, p in enumerate(AROUND[:4])]
    instance_map = build_map(blind(frames), CONFIG, ENCODER, visit=2)
    vases = [i for i in instance_map if i.label == "Vase"]
    assert len(vases) == 1
    (vase,) = vases
    assert vase.moving and "fragments" in vase.motion_evidence
    assert np.allclose(vase.floor, (-3.0, -1.5), atol=0.15)
    assert len({(round(s.position[0]), round(s.position[2])) for s in vase.sightings}) == 3
    assert not any(i.moving for i in instance_map if i.label != "Vase")


def test_object_seen_gone_without_a_continuation_is_marked_moving():
    frames = tour([CHAIR, VASE], look_around(0.0, 0.0)) + tour([CHAIR], look_around(0.0, 0.0), first_step=4)
    instance_map = build_map(blind(frames), CONFIG, ENCODER, visit=2)
    vase = next(i for i in instance_map if i.label == "Vase")
    assert vase.moving and "seen gone" in vase.motion_evidence
    assert not next(i for i in instance_map if i.label == "Chair").moving


def test_object_seen_once_is_mapped():
    instance_map = build_map([render([VASE], AgentPose(0.0, 0.0, 180.0, 30.0), 0)], CONFIG, ENCODER, visit=1)
    (vase,) = instance_map
    assert vase.label == "Vase" and len(vase.sightings) == 1


def test_empty_depthless_and_nan_frames_in_a_stream_are_harmless():
    good = tour([CHAIR], look_around(0.0, 0.0))
    nan_depth = dataclasses.replace(good[0], depth=np.full_like(good[0].depth, np.nan), step=10)
    no_depth = dataclasses.replace(good[1], depth=None, step=11)
    empty = render([], AgentPose(0.0, 0.0, 0.0, 30.0), 12)
    instance_map = build_map([empty, no_depth, *good, nan_depth], CONFIG, ENCODER, visit=1)
    assert [i.label for i in instance_map] == ["Chair"]
    assert not instance_map.instances[0].moving
    assert len(build_map([], CONFIG, ENCODER, visit=1)) == 0


def test_history_keeps_every_frame_and_its_working_ids_resolve_to_final_instances():
    frames = tour(STATIC, AROUND)
    builder = MapBuilder(CONFIG, ENCODER, visit=1)
    for frame in frames:
        builder.add(frame)
    instance_map = builder.build()
    assert len(instance_map.history) == len(frames) == instance_map.frames
    final = {i.uid for i in instance_map}
    working = {uid for snapshot in instance_map.history for uid in snapshot.positions}
    assert {instance_map.aliases[uid] for uid in working} == final
    last = instance_map.history[-1].positions
    for instance in instance_map:
        uids = [u for u in last if instance_map.aliases[u] == instance.uid]
        assert any(np.allclose(last[u], instance.position, atol=0.2) for u in uids)
    # Each snapshot names the working tracks its frame's segments were fused into: held ones, and
    # every track is sighted in the frame it appears.
    for before, snapshot in zip((None, *instance_map.history), instance_map.history, strict=False):
        assert snapshot.seen <= set(snapshot.positions)
        assert set(snapshot.positions) - (set(before.positions) if before else set()) <= snapshot.seen
    assert any(snapshot.seen for snapshot in instance_map.history)


def test_a_snapshots_positions_are_a_mapping_of_its_own_uids_however_the_visit_goes_on():
    """Positions: the first len(centres) uids of a list the visit's snapshots share; uids the visit
    adds later are not in an earlier snapshot, and the mapping compares, copies and pickles as
    the dict it stands for."""
    uids = ["w0", "w1"]
    centres = np.array([[0.5, 1.0, -2.0], [3.0, 0.25, 4.0]])
    first = Positions(uids, centres[:1])
    uids.append("w2")
    both = Positions(uids, centres)
    assert list(first) == ["w0"] and len(first) == 1 and "w1" not in first
    assert dict(both) == {"w0": (0.5, 1.0, -2.0), "w1": (3.0, 0.25, 4.0)} == both
    assert all(type(v) is float for v in both["w1"])
    assert pickle.loads(pickle.dumps(both)) == both and list(pickle.loads(pickle.dumps(first))) == ["w0"]
    with pytest.raises(KeyError):
        first["w1"]
    with pytest.raises(ValueError, match="3 uids for centres of shape"):
        Positions(uids, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="centres of shape"):
        Positions(uids, np.zeros((2, 2)))


def test_a_room_of_many_objects_gives_one_instance_each_beyond_the_first_row_blocks():
    # 72 small boxes a metre apart: more working tracks than the fusion's first block of rows (64),
    # each matched to its own track in every later frame (no duplicates, none merged).
    boxes = [
        on_floor(f"Box_{n}", "Box", x, z, size=(0.3, 0.4, 0.3), colour=(60 + 20 * (n % 9), 80, 200 - 15 * (n % 8)))
        for n, (x, z) in enumerate((x, z) for x in np.arange(-4.5, 4.6, 1.0) for z in np.arange(-4.0, 4.1, 1.15))
    ]
    assert len(boxes) == 80
    frames = tour(boxes, look_around(-2.0, 0.0) + look_around(2.0, 0.0))  # most boxes seen from both places
    instance_map = build_map(blind(frames), CONFIG, ENCODER, visit=1)
    assert len(instance_map) > 64
    assert sum(len(i.sightings) > 1 for i in instance_map) > 40
    owners = [nearest_box(boxes, i) for i in instance_map]
    assert len(set(owners)) == len(owners), "a box got two instances"
    last = instance_map.history[-1].positions  # the working tracks' box centres after the last frame
    for instance, box in zip(instance_map, owners, strict=True):
        assert np.hypot(instance.floor[0] - box.centre[0], instance.floor[1] - box.centre[2]) < 0.25
        uids = [u for u in last if instance_map.aliases[u] == instance.uid]
        assert uids and all(np.allclose(last[u], instance.position, atol=0.2) for u in uids)


def nearest_box(boxes, instance):
    return min(boxes, key=lambda b: np.hypot(instance.floor[0] - b.centre[0], instance.floor[1] - b.centre[2]))


def test_segment_ids_shuffled_per_frame_do_not_change_the_map():
    # scenes.render draws fresh per-frame ids from the step; re-stepping the same views changes
    # every id but nothing else.
    a = build_map(tour(STATIC, AROUND, first_step=0), CONFIG, ENCODER, visit=1)
    b = build_map(tour(STATIC, AROUND, first_step=1000), CONFIG, ENCODER, visit=1)
    assert [(i.label, np.round(i.position, 3).tolist()) for i in a] == [
        (i.label, np.round(i.position, 3).tolist()) for i in b
    ]


class InexactLabels(SimulatorSegmenter):
    """The simulator's masks, declared as a learned segmenter's: labels that may change."""

    exact_labels = False


def test_an_object_a_learned_segmenter_calls_otherwise_for_a_while_is_not_seen_gone():
    # After a few frames the vase is called a box. The place is not empty (depth meets the vase):
    # with labels that may change from frame to frame, the vase is not "gone"; with exact labels
    # (the simulator's), another label there is evidence that it is.
    frames = tour([CHAIR, VASE], AROUND[:4]) + tour([CHAIR, VASE], AROUND[4:8], first_step=4)
    relabelled = [
        dataclasses.replace(f, segment_labels={k: ("Box" if v == "Vase" else v) for k, v in f.segment_labels.items()})
        for f in frames[4:]
    ]
    stream = blind(frames[:4] + relabelled)
    inexact = build_map(stream, CONFIG, ENCODER, visit=2, segmenter=InexactLabels())
    assert not any(i.moving for i in inexact), [(i.label, i.motion_evidence) for i in inexact]
    exact = build_map(stream, CONFIG, ENCODER, visit=2)
    assert [i.label for i in exact if i.moving] == ["Vase"]


def test_a_malformed_frame_is_refused_when_added_naming_its_index_even_while_frames_wait_for_their_batch():
    frames = tour([CHAIR], look_around(0.0, 0.0))
    builder = MapBuilder(CONFIG, ENCODER, 1, batch_frames=8)
    for frame in frames[:3]:
        builder.add(frame)
    truncated = dataclasses.replace(frames[3], rgb=frames[3].rgb[:-4])
    with pytest.raises(FrameFormatError, match=r"frame 3: rgb must be uint8 \(240, 320, 3\)"):
        builder.add(truncated)
    with pytest.raises(FrameFormatError, match="frame 3: depth must have shape"):
        builder.add(dataclasses.replace(frames[3], depth=frames[3].depth[:, :-1]))
    for frame in frames[3:]:
        builder.add(frame)
    assert [i.label for i in builder.build()] == ["Chair"]
