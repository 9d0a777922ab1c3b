"""benchmark_node's own steps against a real sim_node over DDS (the whole graph runs in
test_benchmark_graph): a target followed by sight starts from the start view, as in process.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import math
import threading
import time

import pytest

from .processes import NodeProcess

try:
    import rclpy
    from ovman_ros.messages import floor_pose_msg
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    from ovman_eval.graph.benchmark_node import LOAD_VISIT_SERVICE, BenchmarkNode, GraphCallError
    from ovman_interfaces.srv import LoadVisit
    from ovman_ros import names
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.config import load_config
from ovman_core.world_state import AgentPose, ObjectState
from ovman_eval.benchmark.navigation import Follow, NavigationPlan
from ovman_eval.benchmark.tracking import LabelTracker
from ovman_eval.graph.description import MAPPING_NODE, PLAYER_NODE, RUN_AGENT_NAMESPACE
from ovman_mapping.segmenter import SimulatorSegmenter
from ovman_nav.executor import NavTarget
from ovman_sim.embedded import EmbeddedWorld

pytestmark = pytest.mark.ros

CONFIG = load_config()
SCENE = "embedded-3"
START_TIMEOUT_S = 60.0
"""(s): sim_node compiles its renderer and discovery has multi-second tails (notes)."""
OFFSET_M = 0.4
"""(m): how far the followed target's first estimate lies from the instance (within the gate)."""


def in_view(world: EmbeddedWorld) -> tuple[AgentPose, ObjectState, str]:
    """A pose from which the camera sees one instance best (most pixels), the instance and the
    segmenter label of its segment."""
    world.reset(SCENE)
    horizon = world.agent_pose().horizon_deg
    best: tuple[int, AgentPose, ObjectState, str] | None = None
    for x, z in world.reachable_positions()[::5]:
        for yaw in (0.0, 90.0, 180.0, 270.0):
            pose = AgentPose(x, z, yaw, horizon)
            world.reset(SCENE, None, pose)
            observation = world.observe()
            for segment, label in observation.segment_labels.items():
                pixels = int((observation.segments == segment).sum())
                if best is None or pixels > best[0]:
                    instance = world.objects()[observation.segment_instances[segment]]
                    best = (pixels, pose, instance, label)
    assert best is not None, f"{SCENE}: no pose sees any instance"
    _, pose, instance, label = best
    return pose, instance, label


@pytest.mark.parametrize("sim_parameters", [[], ["node.camera_output:=bundle"]], ids=["topics", "bundle"])
def test_a_target_followed_by_sight_starts_from_the_start_view(
    sim_node: NodeProcess, rclpy_context, sim_parameters: list[str]
) -> None:
    # sim_node as configured: nothing loaded, the camera published after every Act, on the six
    # standard topics or as one CameraBundle.
    world = EmbeddedWorld(CONFIG.sim_node)
    pose, instance, label = in_view(world)
    guess = (instance.floor[0] + OFFSET_M, instance.floor[1])
    plan = NavigationPlan(NavTarget.at_point(guess), Follow.SIGHTINGS, label=label, segmenter="simulator")
    # In process: the tracker's first look, before the first action, is the start view.
    world.reset(SCENE, None, pose)
    gate = CONFIG.benchmark_node.benchmark.track_gate
    expected = LabelTracker(label, guess, gate, CONFIG.mapping_node, SimulatorSegmenter()).observe(world.observe())
    assert expected is not None and math.dist(expected.point, guess) > 0.0  # the start view moves the estimate

    node = BenchmarkNode(CONFIG, context=rclpy_context)
    node.sim_camera_bundle = bool(sim_parameters)  # what wait_for_graph reads from sim_node
    try:
        for name in (names.SIM_LOAD_VISIT, names.SIM_ACT):
            assert node.clients_by_name[name].wait_for_service(timeout_sec=START_TIMEOUT_S), sim_node.diagnosis()
        request = LoadVisit.Request(
            scene=SCENE, use_start_pose=True, start_pose=floor_pose_msg(pose), start_horizon_deg=pose.horizon_deg
        )
        assert node.call(LOAD_VISIT_SERVICE, request).success, sim_node.diagnosis()
        target, _, first = node.start_following_by_sight(plan, CONFIG, SimulatorSegmenter())
    finally:
        node.destroy_node()
    assert target == expected  # the goal is sent to the sighting's point and footprint
    assert (first.pose.x, first.pose.z) == (pose.x, pose.z)  # seen through a Stop at the start


def test_the_start_up_handshake_sends_again_until_answered_and_names_a_node_that_never_answers(rclpy_context) -> None:
    node = BenchmarkNode(CONFIG, context=rclpy_context)
    server = rclpy.create_node("late_server", context=rclpy_context)
    node.executor.add_node(server)
    try:
        # The service appears after the first requests went out: only a request sent again is answered.
        retry = CONFIG.benchmark_node.node.handshake_retry_s
        appear = threading.Timer(
            1.5 * retry, server.create_service, (GetParameters, "/late_server/probe", lambda _, reply: reply)
        )
        client = node.create_client(GetParameters, "/late_server/probe")
        start = time.monotonic()
        appear.start()
        node.handshake("/late_server", client, start + 30.0)
        assert 1.5 * retry <= time.monotonic() - start < 30.0

        absent = node.create_client(GetParameters, "/absent_node/get_parameters")
        start = time.monotonic()
        with pytest.raises(GraphCallError, match="/absent_node did not answer /absent_node/get_parameters"):
            node.handshake("/absent_node", absent, start + 2.5 * retry)
        assert time.monotonic() - start >= 2.5 * retry
    finally:
        appear.cancel()
        node.executor.remove_node(server)
        server.destroy_node()
        node.destroy_node()


def test_benchmark_node_serves_its_parameters_and_refuses_changes(rclpy_context) -> None:
    from rcl_interfaces.srv import GetParameters, SetParameters
    from rclpy.parameter import Parameter

    node = BenchmarkNode(CONFIG, context=rclpy_context)
    probe = rclpy.create_node("param_probe", context=rclpy_context)
    node.executor.add_node(probe)
    try:
        get = probe.create_client(GetParameters, "/benchmark_node/get_parameters")
        put = probe.create_client(SetParameters, "/benchmark_node/set_parameters")
        assert get.wait_for_service(timeout_sec=START_TIMEOUT_S) and put.wait_for_service(timeout_sec=START_TIMEOUT_S)
        future = get.call_async(GetParameters.Request(names=["benchmark.workers"]))
        node.executor.spin_until_future_complete(future, timeout_sec=START_TIMEOUT_S)
        assert future.result().values[0].integer_value == CONFIG.benchmark_node.benchmark.workers
        change = Parameter("benchmark.workers", value=7).to_parameter_msg()
        future = put.call_async(SetParameters.Request(parameters=[change]))
        node.executor.spin_until_future_complete(future, timeout_sec=START_TIMEOUT_S)
        (result,) = future.result().results
        assert not result.successful and "start a new run" in result.reason
    finally:
        probe.destroy_node()
        node.destroy_node()


def test_the_start_up_wait_names_the_frame_readers_still_missing_at_its_deadline(rclpy_context) -> None:
    """benchmark_node waits at start-up until mapping_node and the external agent subscribe to the
    player's frames; an agent that subscribes to nothing stops the run at the deadline with an error
    naming it, and only it (mapping_node's subscription came during the wait)."""
    node = BenchmarkNode(
        CONFIG,
        context=rclpy_context,
        parameter_overrides=[
            Parameter(RUN_AGENT_NAMESPACE, value="lab_agent"),
            Parameter("benchmark.arms", value=["two_visit", "external"]),  # no sim_perception mapping_node
        ],
    )
    player = rclpy.create_node(PLAYER_NODE, namespace=f"/{names.PLAYER_NAMESPACE}", context=rclpy_context)
    mapper = rclpy.create_node(MAPPING_NODE, context=rclpy_context)
    agent = rclpy.create_node("agent_mapper", namespace="/lab_agent", context=rclpy_context)
    topic = f"/{names.PLAYER_NAMESPACE}/camera/color/image_raw"
    player.create_publisher(Image, topic, 10)
    late = threading.Timer(1.0, mapper.create_subscription, (Image, topic, lambda _: None, 10))
    try:
        start = time.monotonic()
        late.start()
        with pytest.raises(GraphCallError, match="by the external agent in /lab_agent: nothing within") as caught:
            node.wait_for_frame_readers(start + 4.0)
        assert time.monotonic() - start >= 4.0 and MAPPING_NODE not in str(caught.value)
        agent.create_subscription(Image, topic, lambda _: None, 10)
        node.wait_for_frame_readers(time.monotonic() + START_TIMEOUT_S)  # both seen: returns
    finally:
        late.cancel()
        for other in (player, mapper, agent):
            other.destroy_node()
        node.destroy_node()
