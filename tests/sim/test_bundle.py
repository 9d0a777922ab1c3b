"""The wire layout of a camera bundle: frame clock, REP 103/105 frame tree, CameraInfo, JSON tables."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ovman_core.boxes import Box3
from ovman_core.camera import Intrinsics
from ovman_core.config import load_config
from ovman_core.frames import THOR_TO_ROS, optical_axes_thor
from ovman_core.observation import Observation, pose_observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_ros import bundle

FRAMES = load_config().frames
INTRINSICS = Intrinsics.from_vertical_fov(8, 6, 90.0)


def observation(pose: AgentPose, camera_height: float = 1.576, step: int = 0) -> Observation:
    h, w = INTRINSICS.height, INTRINSICS.width
    return Observation(
        rgb=np.zeros((h, w, 3), np.uint8),
        depth=np.ones((h, w), np.float32),
        segments=np.zeros((h, w), np.int32),
        segment_labels={4: "Vase"},
        segment_instances={4: "Vase|2"},
        pose=pose,
        camera_position=(pose.x, camera_height, pose.z),
        intrinsics=INTRINSICS,
        step=step,
    )


def compose(transforms: list[bundle.Transform]) -> tuple[np.ndarray, Rotation]:
    """Chain parent→child transforms: the pose of the last child in the first parent."""
    t, r = np.zeros(3), Rotation.identity()
    for tf in transforms:
        t = t + r.apply(tf.translation)
        r = r * Rotation.from_quat(tf.rotation)
    return t, r


def test_frame_clock_gives_one_step_dt_per_world_step_and_never_repeats_a_stamp():
    clock = bundle.FrameClock(0.1)
    # 2, 3, 3 (teleport: no step), 6, then a world reset back to step 0 (next visit).
    stamps = [clock.stamp(s) for s in (2, 3, 3, 6, 0, 1)]
    assert stamps == [200_000_000, 300_000_000, 400_000_000, 700_000_000, 800_000_000, 900_000_000]
    assert clock.last_ns == 900_000_000
    with pytest.raises(ValueError, match="step_dt must be positive"):
        bundle.FrameClock(0.0)


@pytest.mark.parametrize("yaw", [0.0, 90.0, 180.0, 270.0, 33.0])
@pytest.mark.parametrize("horizon", [-30.0, 0.0, 30.0, 60.0])
def test_tf_chain_ends_at_the_optical_pose_of_the_simulator_camera(yaw, horizon):
    obs = observation(AgentPose(1.25, -2.5, yaw, horizon))
    chain = bundle.static_transforms(FRAMES)[:1] + bundle.dynamic_transforms(obs, FRAMES)
    chain += bundle.static_transforms(FRAMES)[1:]
    assert [(t.parent, t.child) for t in chain] == [
        (FRAMES.map, FRAMES.odom),
        (FRAMES.odom, FRAMES.base),
        (FRAMES.base, FRAMES.camera),
        (FRAMES.camera, FRAMES.optical),
    ]
    t, r = compose(chain)
    pose_t, pose_q = bundle.optical_pose(obs)
    assert np.allclose(t, pose_t) and np.allclose(t, THOR_TO_ROS @ np.array(obs.camera_position))
    assert np.allclose(r.as_matrix(), Rotation.from_quat(pose_q).as_matrix())
    # Optical axes (x right, y down, z forward) in map are the simulator's camera axes in REP 103.
    assert np.allclose(r.as_matrix(), THOR_TO_ROS @ optical_axes_thor(yaw, horizon), atol=1e-12)


def test_base_link_lies_on_the_floor_under_the_camera_with_the_agent_yaw():
    obs = observation(AgentPose(1.0, 2.0, 90.0, 30.0), camera_height=1.5)
    (base_t, base_q), (mount_t, mount_q) = bundle.base_pose(obs), bundle.camera_mount(obs)
    assert base_t == (2.0, -1.0, 0.0)  # map x = world z, map y = −world x, on the floor
    # AI2-THOR yaw 90 (clockwise from above, facing +x) is −90 degrees about map z.
    assert np.allclose(Rotation.from_quat(base_q).as_euler("ZYX", degrees=True), [-90.0, 0.0, 0.0])
    assert mount_t == (0.0, 0.0, 1.5)
    # Positive horizon looks down: camera_link's x axis tilts below the horizontal.
    forward = Rotation.from_quat(mount_q).apply([1.0, 0.0, 0.0])
    assert forward[2] == pytest.approx(-math.sin(math.radians(30.0)))


def test_camera_info_fields_carry_k_from_the_intrinsics_and_no_distortion():
    k = Intrinsics.from_vertical_fov(320, 240, 90.0)
    fields = bundle.camera_info_fields(k)
    assert (fields.width, fields.height, fields.distortion_model) == (320, 240, "plumb_bob")
    assert np.array_equal(np.reshape(fields.k, (3, 3)), k.matrix)
    assert fields.d == (0.0,) * 5
    assert np.array_equal(np.reshape(fields.p, (3, 4))[:, :3], k.matrix)
    assert bundle.intrinsics_from_camera_info(320, 240, fields.k) == k


def test_label_and_ground_truth_tables_round_trip_exactly():
    obs = observation(AgentPose(1.0 / 3.0, -0.1, 270.0, -30.0), step=12)
    objects = WorldState.of(
        [ObjectState("Vase|2", "Vase", (0.1, 0.2, 0.3), Box3((0.0, 0.1, 0.2), (0.2, 0.3, 0.4)), movable=True)]
    )
    assert bundle.parse_labels_json(bundle.labels_json(obs, 1_200_000_001)) == bundle.LabelTable(
        1_200_000_001, 12, {4: "Vase"}
    )
    truth = bundle.parse_ground_truth_json(bundle.ground_truth_json(obs, objects, 5))
    assert (truth.stamp_ns, truth.step, truth.pose, truth.camera_position) == (5, 12, obs.pose, obs.camera_position)
    assert truth.segment_instances == {4: "Vase|2"} and truth.objects == objects


def test_ground_truth_records_reuse_the_objects_only_while_they_are_equal():
    vase = ObjectState("Vase|2", "Vase", (0.1, 0.2, 0.3), Box3((0.0, 0.1, 0.2), (0.2, 0.3, 0.4)), movable=True)
    moved = dataclasses.replace(vase, position=(1.1, 0.2, 0.3), box=Box3((1.0, 0.1, 0.2), (1.2, 0.3, 0.4)))
    cup = ObjectState("Cup|1", "Cup", (2.0, 0.5, 0.0), Box3((1.9, 0.4, -0.1), (2.1, 0.6, 0.1)), movable=True)
    records = bundle.GroundTruthRecords()
    states = [[vase, cup], [cup, vase], [moved, cup], [moved], [moved]]  # equal, moved, removed, same
    for step, objects in enumerate(WorldState.of(o) for o in states):
        obs = observation(AgentPose(0.5 * step, -0.1, 90.0, 0.0), step=step)
        text = records.record(obs, objects, 10 + step)
        assert text == bundle.ground_truth_json(obs, objects, 10 + step)
        rest = ["camera_position", "objects", "segment_instances"]
        assert list(json.loads(text)) == [*bundle.GROUND_TRUTH_HEADER, *rest]
        assert bundle.parse_ground_truth_json(text).objects == objects


def test_a_ground_truth_parser_rebuilds_the_objects_only_when_their_record_changes():
    vase = ObjectState("Vase|2", "Vase", (0.1, 0.2, 0.3), Box3((0.0, 0.1, 0.2), (0.2, 0.3, 0.4)), movable=True)
    moved = dataclasses.replace(vase, position=(1.1, 0.2, 0.3), box=Box3((1.0, 0.1, 0.2), (1.2, 0.3, 0.4)))
    states = [WorldState.of(o) for o in ([vase], [vase], [moved], [moved], [vase], [])]
    texts = [
        bundle.ground_truth_json(observation(AgentPose(0.5 * k, 0.0, 90.0, 0.0), step=k), o, k)
        for k, o in enumerate(states)
    ]
    parser = bundle.GroundTruthParser()
    frames = [parser.parse(t) for t in texts]
    assert frames == [bundle.parse_ground_truth_json(t) for t in texts]
    assert [f.objects for f in frames] == states
    # The same WorldState while the objects are equal; a new one from the first change on.
    same = [frames[k].objects is frames[k - 1].objects for k in range(1, len(frames))]
    assert same == [True, False, True, False, False]
    with pytest.raises(bundle.BundleFormatError, match="objects"):
        parser.parse(texts[0].replace('"objects"', '"things"'))
    assert parser.parse(texts[1]).objects == states[1]  # a bad record leaves the parser usable


def reference_frame(text: str) -> bundle.GroundTruthFrame:
    """A record decoded whole with json, independently of the parser."""
    doc = json.loads(text)
    pose = doc["agent_pose"]
    return bundle.GroundTruthFrame(
        stamp_ns=doc["stamp_ns"],
        step=doc["step"],
        pose=AgentPose(pose["x"], pose["z"], pose["yaw_deg"], pose["horizon_deg"]),
        camera_position=tuple(doc["camera_position"]),
        segment_instances={int(k): v for k, v in doc["segment_instances"].items()},
        objects=WorldState.of([bundle.object_state_from_dict(o) for o in doc["objects"]]),
    )


@pytest.mark.parametrize("layout", ["written", "keys_sorted", "marker_in_an_id"])
def test_the_parser_reads_records_of_any_layout_as_json_does(layout):
    # The marker the parser splits at, inside a string value: it must not be fooled.
    odd = ', "segment_instances": {"1": "x"}' if layout == "marker_in_an_id" else ""
    vase = ObjectState("Vase|2" + odd, "Vase", (0.1, 0.2, 0.3), Box3((0.0, 0.1, 0.2), (0.2, 0.3, 0.4)), True)
    moved = dataclasses.replace(vase, position=(1.1, 0.2, 0.3), box=Box3((1.0, 0.1, 0.2), (1.2, 0.3, 0.4)))
    texts = []
    for k, objects in enumerate(WorldState.of(o) for o in ([vase], [vase], [moved])):
        obs = dataclasses.replace(observation(AgentPose(0.5 * k, 0.0, 90.0, 0.0), step=k), segment_instances={4: odd})
        text = bundle.ground_truth_json(obs, objects, 10 + k)
        texts.append(json.dumps(json.loads(text), sort_keys=True) if layout == "keys_sorted" else text)
    parser = bundle.GroundTruthParser()
    frames = [parser.parse(t) for t in texts]
    assert frames == [reference_frame(t) for t in texts]
    assert frames[1].objects is frames[0].objects and frames[2].objects is not frames[1].objects


def test_a_frame_observed_without_images_has_no_segments_in_its_ground_truth():
    rendered = observation(AgentPose(1.0, 2.0, 90.0, 30.0), step=3)
    bare = pose_observation(rendered.pose, rendered.camera_position, rendered.intrinsics, rendered.step)
    assert bare.rgb.shape == (0, 0, 3) and bare.depth.size == bare.segments.size == 0
    truth = bundle.parse_ground_truth_json(bundle.ground_truth_json(bare, WorldState.of([]), 7))
    assert (truth.step, truth.pose, truth.camera_position) == (3, rendered.pose, rendered.camera_position)
    assert truth.segment_instances == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"step": 1, "labels": {}}', "expected {'stamp_ns', 'step', 'labels'}"),
    ],
)
def test_malformed_label_tables_are_rejected_with_the_reason(text, message):
    with pytest.raises(bundle.BundleFormatError, match=message):
        bundle.parse_labels_json(text)


def test_a_ground_truth_record_missing_a_field_is_rejected_naming_it():
    with pytest.raises(bundle.BundleFormatError, match="agent_pose"):
        bundle.parse_ground_truth_json('{"step": 1}')


def test_ground_truth_header_reads_stamp_and_pose_with_or_without_the_leading_layout(monkeypatch):
    obs = observation(AgentPose(1.0 / 3.0, -0.1, 270.0, -30.0), step=12)
    objects = WorldState.of(
        [ObjectState("Vase|2", "Vase", (0.1, 0.2, 0.3), Box3((0.0, 0.1, 0.2), (0.2, 0.3, 0.4)), movable=True)]
    )
    text = bundle.ground_truth_json(obs, objects, 1_700_000_000_123_456_789)
    assert text.startswith('{"stamp_ns": 1700000000123456789, "step": 12, "agent_pose": {')
    expected = (1_700_000_000_123_456_789, obs.pose)
    # The leading fields are read without decoding the objects ...
    calls = []
    monkeypatch.setattr(bundle, "_load", lambda *args: calls.append(args) or {})
    assert bundle.ground_truth_header(text) == expected and not calls
    monkeypatch.undo()
    # ... and a record with sorted keys (recordings made before the layout) is decoded whole.
    assert bundle.ground_truth_header(json.dumps(json.loads(text), sort_keys=True)) == expected
    with pytest.raises(bundle.BundleFormatError, match="agent_pose"):
        bundle.ground_truth_header('{"stamp_ns": 5, "step": 1}')
    with pytest.raises(bundle.BundleFormatError, match="not valid JSON"):
        bundle.ground_truth_header('{"stamp_ns": 5, "step": 1, "agent_pose": {"x": 1')


def test_depth_goes_as_16uc1_millimetres_only_when_that_is_lossless():
    rng = np.random.default_rng(2)
    exact = rng.uniform(0.2, 7.0, (6, 9)).astype(np.float32)
    exact[0, :3] = np.nan
    readings = np.rint(exact * np.float32(1000.0)) / np.float32(1000.0)  # what the sensor model reports
    encoding, pixels = bundle.depth_image(readings)
    assert encoding == bundle.DEPTH_MM_ENCODING and pixels.dtype == np.dtype("<u2")
    assert (pixels[0, :3] == 0).all() and (pixels[1:] > 0).all()
    back = bundle.depth_metres(pixels)
    assert back.dtype == np.float32 and back.tobytes() == readings.tobytes()  # the same bits, NaN included
    assert bundle.depth_image(exact)[0] == bundle.DEPTH_ENCODING  # sub-millimetre depth stays float
    for beyond in (np.inf, 70.0, 0.0, -0.001):
        odd = readings.copy()
        odd[3, 3] = beyond
        encoding, pixels = bundle.depth_image(odd)
        assert encoding == bundle.DEPTH_ENCODING and pixels.tobytes() == odd.tobytes()
    assert bundle.depth_image(np.full((2, 2), np.nan, np.float32))[0] == bundle.DEPTH_MM_ENCODING
