"""sim_node over a real DDS graph: it runs in a subprocess (``python -m ovman_sim.sim_node``) and
this process subscribes to its bundle, its latched /map and /tf_static, and calls its services.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from .processes import NodeProcess

try:
    import rclpy
    from nav_msgs.msg import OccupancyGrid, Odometry
    from ovman_ros.messages import (
        CAMERA_MESSAGES,
        depth_array,
        floor_pose_msg,
        image_array,
        stamp_of,
        start_pose_from_msg,
    )
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    from ovman_interfaces.msg import CameraBundle
    from ovman_interfaces.srv import Act, ActSequence, LoadVisit, PlayTour
    from ovman_ros import bundle_cdr
    from ovman_sim.sim_node import SimNode
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.camera import Intrinsics
from ovman_core.config import ConfigError, load_config
from ovman_ros import bundle, names
from ovman_sim.recording import read_visit, read_visit_raw

pytestmark = pytest.mark.ros

CONFIG = load_config()
SCENE = "embedded-3"
# The node starts a numba-compiled renderer and discovery has multi-second tails (notes): be generous.
START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 30.0
SERVICES = {
    "load_visit": (LoadVisit, "sim/load_visit"),
    "act": (Act, "sim/act"),
    "act_sequence": (ActSequence, "sim/act_sequence"),
    "play_tour": (PlayTour, "sim/play_tour"),
    "set_parameters": (SetParameters, "sim_node/set_parameters"),
}
"""Each service: its type and relative name."""
BUNDLE_TOPICS = {
    **CAMERA_MESSAGES,
    names.ODOM: Odometry,
    bundle.GROUND_TRUTH_TOPIC: String,
    bundle.TF_TOPIC: TFMessage,
    names.CLOCK: Clock,
}
EVERY_FRAME = {bundle.GROUND_TRUTH_TOPIC, names.ODOM, bundle.TF_TOPIC, names.CLOCK}
"""What every frame publishes, whatever ``node.act_camera`` and ``node.camera_output`` say."""
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
FRAMES_QOS = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)


SIM_PARAMETERS = [f"node.scene:={SCENE}", "tour.max_waypoints:=2", "node.play_period_s:=0.0"]
"""The embedded scene loaded, short tours, no playback pauses."""


@pytest.fixture
def sim_parameters() -> list[str]:
    return SIM_PARAMETERS


class Probe:
    """A node in this process that records every message of the bundle topics by stamp."""

    def __init__(self, context: Any, server: NodeProcess) -> None:
        self.server = server
        self.node = rclpy.create_node("sim_node_probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.by_stamp: dict[int, dict[str, Any]] = defaultdict(dict)
        self.latched: dict[str, Any] = {}
        self.count: dict[str, int] = defaultdict(int)
        self.floor = 0
        """Stamps below it are not recorded (see :meth:`reload_matched`)."""
        for topic, kind in BUNDLE_TOPICS.items():
            self.node.create_subscription(kind, topic, self._recorder(topic), FRAMES_QOS)
        for topic, kind in ((names.MAP, OccupancyGrid), (bundle.TF_STATIC_TOPIC, TFMessage)):
            self.node.create_subscription(kind, topic, self._latch(topic), LATCHED)
        self.clients = {name: self.node.create_client(kind, service) for name, (kind, service) in SERVICES.items()}

    def _recorder(self, topic: str) -> Callable[[Any], None]:
        def record(message: Any) -> None:
            stamp = message_stamp(topic, message)
            if stamp < self.floor:  # the start-up frame's, arriving after the reload's on another topic
                return
            self.count[topic] += 1
            self.by_stamp[stamp][topic] = message

        return record

    def _latch(self, topic: str) -> Callable[[Any], None]:
        def keep(message: Any) -> None:
            self.latched[topic] = message

        return keep

    def reload_matched(self) -> None:
        """The frames are volatile: the scene's first frame, published at start-up, reaches this
        probe only if it had matched by then. Once sim_node's publishers of the topics every frame
        has match this probe, ask for a frame with a Stop (nothing moves) and keep only that frame
        onwards, as if it were the scene's first (its camera part too while ``node.act_camera`` is on)."""
        self.spin_until(
            lambda: all(self.node.get_publishers_info_by_topic(t) for t in EVERY_FRAME),
            "sim_node's frame publishers",
            START_TIMEOUT_S,
        )
        stopped = self.call("act", Act.Request(action="Stop"))
        assert stopped.success, stopped.message
        stamp = stamp_of(stopped.pose.header)
        self.spin_until(lambda: set(self.by_stamp[stamp]) >= EVERY_FRAME, "the frame of a Stop", START_TIMEOUT_S)
        self.floor = stamp
        for earlier in [s for s in self.by_stamp if s < stamp]:
            for topic in self.by_stamp.pop(earlier):
                self.count[topic] -= 1

    def forget(self) -> None:
        """Drop every frame so far and record any stamp again (a replay brings its recorded stamps)."""
        self.by_stamp.clear()
        self.floor = 0

    def complete_stamps(self) -> list[int]:
        """Stamps for which every bundle topic has arrived, oldest first."""
        return sorted(s for s, got in self.by_stamp.items() if len(got) == len(BUNDLE_TOPICS))

    def spin_until(self, condition: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"{what} within {timeout} s; {self.server.diagnosis()}"
            assert self.server.process.poll() is None, f"{what}: {self.server.diagnosis()}"
            self.executor.spin_once(timeout_sec=0.1)

    def call(self, name: str, request: Any) -> Any:
        future = self.clients[name].call_async(request)
        self.spin_until(future.done, f"{name} answered", CALL_TIMEOUT_S)
        return future.result()

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown()
        self.node.destroy_node()


def message_stamp(topic: str, message: Any) -> int:
    if topic == bundle.TF_TOPIC:
        (stamp,) = {stamp_of(t.header) for t in message.transforms}
        return stamp
    if topic == names.CLOCK:
        return message.clock.sec * 1_000_000_000 + message.clock.nanosec
    if isinstance(message, String):  # the JSON tables carry the stamp of their frame
        return int(json.loads(message.data)["stamp_ns"])
    return stamp_of(message.header)


@pytest.fixture
def probe(rclpy_context: Any, sim_node: NodeProcess) -> Iterator[Probe]:
    probe = Probe(rclpy_context, sim_node)
    try:
        probe.spin_until(
            lambda: all(c.service_is_ready() for c in probe.clients.values()), "sim_node services", START_TIMEOUT_S
        )
        probe.reload_matched()
        yield probe
    finally:
        probe.close()


def test_sim_node_publishes_a_full_bundle_with_one_stamp_and_the_latched_map_and_acts(probe: Probe, sim_node):
    # The frame of the (re)loaded scene, /map and /tf_static (latched).
    probe.spin_until(
        lambda: probe.complete_stamps() and {names.MAP, bundle.TF_STATIC_TOPIC} <= set(probe.latched),
        "a complete bundle, /map and /tf_static",
        START_TIMEOUT_S,
    )
    (stamp,) = probe.complete_stamps()
    got = probe.by_stamp[stamp]
    camera = CONFIG.sim_node.camera
    intrinsics = Intrinsics.from_vertical_fov(camera.width, camera.height, camera.vertical_fov_deg)
    rgb, ids = (image_array(got[t]) for t in (bundle.RGB_TOPIC, bundle.INSTANCES_TOPIC))
    depth = depth_array(got[bundle.DEPTH_TOPIC])
    assert rgb.shape == (camera.height, camera.width, 3) and rgb.dtype == np.uint8 and rgb.any()
    assert got[bundle.DEPTH_TOPIC].encoding == "16UC1"  # the sensor model's millimetre readings
    assert depth.dtype == np.float32 and np.nanmin(depth) > 0.0
    assert ids.dtype == np.int32
    labels = json.loads(got[bundle.INSTANCE_LABELS_TOPIC].data)["labels"]
    assert set(np.unique(ids)) - {0} <= {int(k) for k in labels}
    assert list(got[bundle.CAMERA_INFO_TOPIC].k) == list(intrinsics.matrix.ravel())
    frames = CONFIG.frames
    assert {t.child_frame_id: t.header.frame_id for t in got[bundle.TF_TOPIC].transforms} == {
        frames.base: frames.odom,
        frames.camera: frames.base,
    }
    assert {t.child_frame_id: t.header.frame_id for t in probe.latched[bundle.TF_STATIC_TOPIC].transforms} == {
        frames.odom: frames.map,
        frames.optical: frames.camera,
    }
    assert got[names.ODOM].child_frame_id == frames.base
    grid = probe.latched[names.MAP]
    assert grid.header.frame_id == frames.map and grid.info.resolution == CONFIG.sim_node.world.grid_size
    cells = np.asarray(grid.data, dtype=np.int8)
    assert cells.size == grid.info.width * grid.info.height and (cells == 0).any() and (cells == 100).any()

    # The action service moves the agent one grid step and publishes a newer bundle.
    start = got[names.ODOM].pose.pose.position
    for _ in range(4):
        moved = probe.call("act", Act.Request(action="MoveAhead"))
        if moved.success:
            break
        assert moved.collided, moved.message
        assert probe.call("act", Act.Request(action="RotateRight")).success
    assert moved.success, "MoveAhead was blocked in all four directions"
    end = moved.pose.pose.position
    assert np.hypot(end.x - start.x, end.y - start.y) == pytest.approx(CONFIG.sim_node.world.grid_size)
    after = stamp_of(moved.pose.header)
    probe.spin_until(lambda: after in probe.complete_stamps(), "the bundle after MoveAhead", CALL_TIMEOUT_S)
    assert after > stamp
    assert probe.by_stamp[after][names.ODOM].pose.pose.position.x == pytest.approx(end.x)

    refused = probe.call("act", Act.Request(action="Jump"))
    assert not refused.success and "unknown action 'Jump'" in refused.message
    assert sim_node.stop() == 0, sim_node.diagnosis()


DEPTH_TOPIC = bundle.DEPTH_TOPIC
"""sim_node's depth publisher, fully qualified as PlayTour.srv names topics (the node runs in /)."""


@pytest.mark.parametrize("sim_parameters", [[*SIM_PARAMETERS, "node.play_match_timeout_s:=1.0"]])
def test_play_tour_refuses_to_play_before_the_subscriptions_it_is_asked_to_match(probe: Probe, sim_node) -> None:
    before = probe.count[bundle.DEPTH_TOPIC]
    unknown = probe.call("play_tour", PlayTour.Request(topics=["/nowhere"], min_subscriptions=[1]))
    assert not unknown.success and "publishes no /nowhere" in unknown.message and unknown.frames == 0
    uneven = probe.call("play_tour", PlayTour.Request(topics=[DEPTH_TOPIC], min_subscriptions=[]))
    assert not uneven.success and "1 topics but 0 subscription counts" in uneven.message
    # The probe is the only subscriber: a second one never comes.
    unmatched = probe.call("play_tour", PlayTour.Request(topics=[DEPTH_TOPIC], min_subscriptions=[2]))
    assert not unmatched.success and unmatched.frames == 0, unmatched.message
    assert f"{DEPTH_TOPIC} has 1 matched subscriptions of the 2" in unmatched.message
    assert "node.play_match_timeout_s" in unmatched.message
    probe.executor.spin_once(timeout_sec=0.5)
    assert probe.count[bundle.DEPTH_TOPIC] == before, "nothing is played when the wait fails"


@pytest.mark.parametrize("sim_parameters", [[*SIM_PARAMETERS, "node.play_match_timeout_s:=30.0"]])
def test_a_subscriber_that_joins_while_play_tour_waits_for_it_gets_every_frame(probe: Probe, sim_node) -> None:
    late: list[Any] = []
    future = probe.clients["play_tour"].call_async(PlayTour.Request(topics=[DEPTH_TOPIC], min_subscriptions=[2]))
    # Long enough for the whole tour to be played, had sim_node not waited for a second subscription.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        probe.executor.spin_once(timeout_sec=0.1)
    assert not future.done(), future.result().message
    probe.node.create_subscription(CAMERA_MESSAGES[bundle.DEPTH_TOPIC], bundle.DEPTH_TOPIC, late.append, FRAMES_QOS)
    probe.spin_until(future.done, "play_tour answered", CALL_TIMEOUT_S + 30.0)
    played = future.result()
    assert played.success and played.frames == 2 * CONFIG.sim_node.tour.turns_per_waypoint, played.message
    probe.spin_until(lambda: len(late) >= played.frames, "every frame on the late subscription", CALL_TIMEOUT_S)
    assert len(late) == played.frames


def test_play_tour_publishes_every_frame_records_it_and_replays_the_recording(probe: Probe, sim_node, tmp_path):
    probe.spin_until(lambda: probe.complete_stamps(), "the first bundle", START_TIMEOUT_S)
    (loaded,) = probe.complete_stamps()
    record = tmp_path / "visit1"
    toured = probe.call("play_tour", PlayTour.Request(record_path=str(record), visit=1))
    assert toured.success, toured.message
    turns = CONFIG.sim_node.tour.turns_per_waypoint
    assert toured.frames == 2 * turns  # tour.max_waypoints:=2
    probe.spin_until(
        lambda: len(probe.complete_stamps()) == 1 + toured.frames, "every bundle of the tour", CALL_TIMEOUT_S
    )
    live = probe.complete_stamps()[1:]
    assert live[0] > loaded
    recorded = list(read_visit(record))
    assert len(recorded) == toured.frames
    # What was recorded is what was published: same pixels, same labels, frame by frame.
    for stamp, frame in zip(live, recorded, strict=True):
        got = probe.by_stamp[stamp]
        assert np.array_equal(image_array(got[bundle.RGB_TOPIC]), frame.observation.rgb)
        assert np.array_equal(depth_array(got[bundle.DEPTH_TOPIC]), frame.observation.depth, equal_nan=True)
        assert json.loads(got[bundle.INSTANCE_LABELS_TOPIC].data)["step"] == frame.observation.step

    loaded_recording = probe.call("load_visit", LoadVisit.Request(recording=str(record)))
    assert loaded_recording.success and loaded_recording.frame_count == toured.frames, loaded_recording.message
    refused = probe.call("act", Act.Request(action="MoveAhead"))
    assert not refused.success and "no live world" in refused.message
    # A recording plays as stored (ros2 bag play): its messages and stamps, with /clock; no /odom.
    live_messages = {stamp: probe.by_stamp[stamp] for stamp in live}
    probe.forget()  # a replay's stamps are the recording's
    odom_before = probe.count[names.ODOM]
    replayed = probe.call("play_tour", PlayTour.Request())
    assert replayed.success and replayed.frames == toured.frames, replayed.message
    assert replayed.step == recorded[-1].observation.step
    stored = [frame.stamp_ns for frame in read_visit_raw(record)]
    played = set(BUNDLE_TOPICS) - {names.ODOM}
    probe.spin_until(
        lambda: all(played <= set(probe.by_stamp.get(s, ())) for s in stored),
        "every bundle of the replay",
        CALL_TIMEOUT_S,
    )
    assert sorted(probe.by_stamp) == stored and probe.count[names.ODOM] == odom_before
    for stamp, first in zip(stored, live_messages.values(), strict=True):
        again = probe.by_stamp[stamp]
        assert np.array_equal(image_array(again[bundle.RGB_TOPIC]), image_array(first[bundle.RGB_TOPIC]))
        truth, first_truth = (bundle.parse_ground_truth_json(m[bundle.GROUND_TRUTH_TOPIC].data) for m in (again, first))
        assert truth.stamp_ns == stamp and truth == dataclasses.replace(first_truth, stamp_ns=stamp)

    missing = probe.call("load_visit", LoadVisit.Request(recording=str(tmp_path / "nowhere")))
    assert not missing.success and "nowhere: no recording there" in missing.message


def test_act_sequence_publishes_a_bundle_per_action_and_stops_at_an_unexpected_pose(probe: Probe, sim_node):
    probe.spin_until(lambda: probe.complete_stamps(), "the bundle of the loaded scene", START_TIMEOUT_S)
    (loaded,) = probe.complete_stamps()
    start = start_pose_from_msg(probe.by_stamp[loaded][names.ODOM].pose.pose, 0.0)
    turn = CONFIG.sim_node.world.rotate_step_deg
    right = dataclasses.replace(start, yaw_deg=(start.yaw_deg + turn) % 360.0)
    twice = dataclasses.replace(start, yaw_deg=(start.yaw_deg + 2 * turn) % 360.0)
    request = ActSequence.Request(
        actions=["RotateRight", "RotateRight", "RotateRight"],
        expected=[floor_pose_msg(p) for p in (right, twice, right)],  # the third cannot end where expected
        position_tolerance=1e-6,
        yaw_tolerance_deg=1e-6,
    )
    reply = probe.call("act_sequence", request)
    assert list(reply.success) == [True, True, True] and list(reply.collided) == [False] * 3
    assert "action 2 (RotateRight) ended" in reply.message
    stamps = [stamp_of(p.header) for p in reply.poses]
    assert loaded < stamps[0] < stamps[1] < stamps[2]
    assert [start_pose_from_msg(p.pose, 0.0).yaw_deg for p in reply.poses[:2]] == pytest.approx(
        [right.yaw_deg, twice.yaw_deg]
    )
    probe.spin_until(lambda: set(stamps) <= set(probe.complete_stamps()), "a bundle per action", CALL_TIMEOUT_S)

    refused = probe.call("act_sequence", ActSequence.Request(actions=["RotateLeft", "Jump"]))
    assert list(refused.success) == [] and "unknown action 'Jump'" in refused.message
    assert sim_node.stop() == 0, sim_node.diagnosis()


def set_parameter(probe: Probe, name: str, value: ParameterValue) -> Any:
    request = SetParameters.Request(parameters=[Parameter(name=name, value=value)])
    (result,) = probe.call("set_parameters", request).results
    return result


@pytest.mark.parametrize(
    "sim_parameters", [[*SIM_PARAMETERS, "node.act_camera:=false", "node.qos_depth:=3"]], ids=["camera_off"]
)
def test_act_publishes_the_camera_only_while_act_camera_is_on_and_unpaced_play_loses_no_frame(probe: Probe, sim_node):
    quiet = probe.call("act", Act.Request(action="RotateRight"))
    assert quiet.success, quiet.message
    quiet_stamp = stamp_of(quiet.pose.header)
    without_camera = {bundle.GROUND_TRUTH_TOPIC, names.ODOM, bundle.TF_TOPIC, names.CLOCK}
    probe.spin_until(
        lambda: without_camera <= set(probe.by_stamp[quiet_stamp]), "ground truth, odom, tf and clock", CALL_TIMEOUT_S
    )
    reloaded = probe.call("load_visit", LoadVisit.Request(scene=SCENE))
    assert reloaded.success, reloaded.message
    probe.spin_until(
        lambda: any(s > quiet_stamp and without_camera <= set(t) for s, t in probe.by_stamp.items()),
        "the reloaded scene's ground truth, odom, tf and clock",
        CALL_TIMEOUT_S,
    )
    (load_stamp,) = [s for s in probe.by_stamp if s > quiet_stamp]

    on = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=True)
    assert set_parameter(probe, "node.act_camera", on).successful
    refused = set_parameter(
        probe, "node.qos_depth", ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=5)
    )
    assert not refused.successful and "node.qos_depth" in refused.reason
    loud = probe.call("act", Act.Request(action="RotateRight"))
    loud_stamp = stamp_of(loud.pose.header)
    probe.spin_until(lambda: loud_stamp in probe.complete_stamps(), "the full bundle after the action", CALL_TIMEOUT_S)
    # Each topic is one reliable, ordered stream: a camera message of the first action (or of the
    # reload) would have come first.
    assert set(probe.by_stamp[quiet_stamp]) == set(probe.by_stamp[load_stamp]) == without_camera

    # Unpaced playback with a history of 3 frames: the acknowledgement window keeps every frame.
    toured = probe.call("play_tour", PlayTour.Request())
    assert toured.success and toured.frames > 3, toured.message
    probe.spin_until(
        lambda: len([s for s in probe.complete_stamps() if s > loud_stamp]) == toured.frames,
        "every bundle of the unpaced tour",
        CALL_TIMEOUT_S,
    )
    assert probe.count[bundle.RGB_TOPIC] == 1 + toured.frames  # the second action and the tour


@pytest.mark.parametrize("sim_parameters", [[*SIM_PARAMETERS, "node.camera_output:=both"]], ids=["both"])
def test_the_camera_bundle_holds_the_six_camera_messages_live_and_replayed(probe: Probe, sim_node, tmp_path):
    bundles: dict[int, CameraBundle] = {}
    probe.node.create_subscription(
        CameraBundle,
        names.CAMERA_BUNDLE,
        lambda message: bundles.__setitem__(stamp_of(message.rgb.header), message),
        FRAMES_QOS,
    )
    # Volatile: the bundle subscription gets the tour's frames (not the loaded scene's, published before).
    probe.spin_until(
        lambda: probe.node.get_publishers_info_by_topic(names.CAMERA_BUNDLE), "the bundle", START_TIMEOUT_S
    )

    def same_as_topics(stamps: list[int]) -> None:
        for stamp in stamps:
            got = probe.by_stamp[stamp]
            for member, topic, _ in bundle_cdr.MEMBERS:
                assert getattr(bundles[stamp], member) == got[topic], (stamp, member)

    record = tmp_path / "visit1"
    toured = probe.call("play_tour", PlayTour.Request(record_path=str(record), visit=1))
    assert toured.success, toured.message
    probe.spin_until(
        lambda: len(probe.complete_stamps()) == 1 + toured.frames and len(bundles) == toured.frames,
        "every frame of the tour on the six topics and as a bundle",
        CALL_TIMEOUT_S,
    )
    assert sorted(bundles) == probe.complete_stamps()[1:]
    same_as_topics(sorted(bundles))

    # Replayed as stored: the bundle is composed of the recorded bytes of the six messages.
    assert probe.call("load_visit", LoadVisit.Request(recording=str(record))).success
    probe.forget()  # a replay's stamps are the recording's
    bundles.clear()
    replayed = probe.call("play_tour", PlayTour.Request())
    assert replayed.success and replayed.frames == toured.frames, replayed.message
    stored = [frame.stamp_ns for frame in read_visit_raw(record)]
    camera = set(bundle.CAMERA_TOPICS)
    probe.spin_until(
        lambda: all(camera <= set(probe.by_stamp.get(s, ())) for s in stored) and sorted(bundles) == stored,
        "every replayed frame on the six topics and as a bundle",
        CALL_TIMEOUT_S,
    )
    same_as_topics(stored)


@pytest.mark.parametrize("sim_parameters", [[*SIM_PARAMETERS, "node.camera_output:=bundle"]], ids=["bundle"])
def test_with_the_bundle_output_the_standard_camera_topics_have_no_publisher(probe: Probe, sim_node):
    probe.spin_until(
        lambda: probe.node.count_publishers(names.CAMERA_BUNDLE) == 1 and probe.node.count_publishers(names.ODOM) == 1,
        "sim_node's /camera/bundle and /odom publishers",
        START_TIMEOUT_S,
    )
    assert {topic: probe.node.count_publishers(topic) for topic in bundle.CAMERA_TOPICS} == dict.fromkeys(
        bundle.CAMERA_TOPICS, 0
    )


def test_an_unknown_camera_output_is_refused_naming_the_key(rclpy_context):
    config = dataclasses.replace(
        CONFIG,
        sim_node=dataclasses.replace(
            CONFIG.sim_node, node=dataclasses.replace(CONFIG.sim_node.node, camera_output="images")
        ),
    )
    expected = r"sim_node.node.camera_output must be one of topics, bundle, both, got 'images'"
    with pytest.raises(ConfigError, match=expected):
        SimNode(config, context=rclpy_context)
