"""benchmark_node: drives the benchmark's episodes through the real graph and writes the run directory.

Per recorded group: both visits mapped as the player plays them by mapping_node (and, for
sim_perception, by the ``sim_perception`` mapping_node fusing segmenter_node's simulator segments),
the static gate through query_node, then every embodied run on sim_node and nav_node, up to
``node.groups_ahead`` groups prepared ahead; scores and files are the runner's (:mod:`ovman_eval.graph.run`).
Frames: REP 103 ``map`` on the wire, AI2-THOR world in the core. Why one module: each method is one call
sequence or callback of its wiring to the other nodes; what they compute lives in ROS-free modules
(``graph.run``, ``graph.followers``, ``graph.group_pipeline``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from geometry_msgs.msg import Point, PointStamped
from nav_msgs.msg import OccupancyGrid
from ovman_ros.bundle import (
    BundleFormatError,
    camera_outputs,
    object_state_to_dict,
)
from ovman_ros.messages import CAMERA_MESSAGES, floor_pose_msg, stamp_of, time_msg
from ovman_ros.pose_gate import PoseGate
from ovman_ros.spinning import GraphNode, config_from_parameters, run_node
from ovman_ros.tf_listener import transform_source
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters, SetParameters
from rclpy.client import Client
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import NodeNameNonExistentError
from rclpy.parameter import Parameter
from std_msgs.msg import String

from ovman_core.actions import Action
from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import ConfigError, OvmanConfig, load_config
from ovman_core.frames import ros_to_thor_point, thor_to_ros_point
from ovman_core.grid import from_occupancy_fields
from ovman_core.observation import Observation
from ovman_core.relations import Relation
from ovman_core.world_state import WorldState
from ovman_eval.benchmark.evaluator import GroupEvaluator
from ovman_eval.benchmark.map_cache import MapCache
from ovman_eval.benchmark.map_entry import GroupMaps
from ovman_eval.benchmark.navigation import Follow, NavigationPlan
from ovman_eval.benchmark.request import (
    TIMING_KEYS,
    BenchmarkRequest,
    WorkUnit,
    configured_for,
    dataset_hash,
    parse_arms,
)
from ovman_eval.benchmark.tracking import LabelTracker
from ovman_eval.generation.dataset import DatasetError
from ovman_eval.generation.validate import checked_episodes
from ovman_eval.graph.description import (
    BENCHMARK_NODE,
    MAPPING_NODE,
    NAV_NODE,
    PLAYER_NODE,
    QUERY_NODE,
    RUN_AGENT_NAMESPACE,
    RUN_DATASET,
    RUN_DIR,
    RUN_OUTPUT,
    RUN_STATIC_ONLY,
    SEGMENTER_NODE,
    SIM_PERCEPTION_NAMESPACE,
    USE_SIM_TIME,
    builds_simulator_maps,
)
from ovman_eval.graph.followers import SightFollower, TruthFollower, TruthMessage
from ovman_eval.graph.group_pipeline import GraphCallError, GroupPipeline
from ovman_eval.graph.run import (
    QUERY_ARMS,
    GraphRun,
    NavigationOutcome,
    PlayedTruth,
    graph_group_maps,
    score_embodied,
    trajectory_of,
    without_diagnostics,
)
from ovman_eval.graph.stepwise import StepsT, Wait
from ovman_eval.runs.results import EmbodiedResult, ResultRecord, StaticResult
from ovman_eval.runs.run_dir import BenchmarkError
from ovman_eval.task.episodes import EpisodeRecord
from ovman_interfaces.msg import CameraBundle, ChangeSet
from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
from ovman_interfaces.srv import Act, LoadVisit, MapVisit, PlayTour, Query
from ovman_mapping.bundle_sync import StampSynchronizer
from ovman_mapping.instances import InstanceMap
from ovman_mapping.map_messages import (
    camera_bundle_frame,
    instance_map_from_msg,
    map_uid,
    observation_from_topics,
)
from ovman_mapping.segmenter import Segmenter
from ovman_nav.commander import OvmanCommander, TaskResult
from ovman_nav.executor import NavError, NavTarget
from ovman_nav.nav_messages import occupancy_fields
from ovman_query.arms import PARSE_FAILED, Arm
from ovman_query.decisions import Prediction
from ovman_query.query_messages import floor_point_msg
from ovman_ros import bundle, bundle_cdr, names, qos

NODE_NAME = BENCHMARK_NODE
LOAD_VISIT_SERVICE = names.SIM_LOAD_VISIT
ACT_SERVICE = names.SIM_ACT
PLAYER_LOAD_SERVICE = f"{names.PLAYER_NAMESPACE}/{names.SIM_LOAD_VISIT}"
PLAYER_PLAY_SERVICE = f"{names.PLAYER_NAMESPACE}/{names.SIM_PLAY_TOUR}"
PLAYED_TRUTH_TOPIC = f"{names.PLAYER_NAMESPACE}/{names.GROUND_TRUTH}"
"""The player's (:data:`ovman_ros.names.PLAYER_NAMESPACE`) services and ground truth, relative names."""
SIM_NODE = "sim_node"
SIM_GET_PARAMETERS = f"{SIM_NODE}/get_parameters"
SIM_SET_PARAMETERS = f"{SIM_NODE}/set_parameters"
HANDSHAKE_NODES = (f"{names.PLAYER_NAMESPACE}/{PLAYER_NODE}", MAPPING_NODE, QUERY_NODE, NAV_NODE)
"""The other server nodes (relative names: the graph's namespace) whose parameter service answers the handshake."""
SIM_ACT_CAMERA = "node.act_camera"
SIM_CAMERA_OUTPUT = "node.camera_output"
"""Where sim_node's camera frames go (:func:`ovman_ros.bundle.camera_outputs`)."""
"""sim_node's run-time switch of the camera bundle after each Act (see :mod:`ovman_sim.sim_node`)."""
RUN_PARAMETERS: dict[str, Any] = {
    RUN_DATASET: "",
    RUN_OUTPUT: "runs",
    RUN_DIR: "",
    RUN_STATIC_ONLY: False,
    RUN_AGENT_NAMESPACE: "",
}
SPIN_PERIOD_S = 0.02
"""(s): longest a wait blocks in one spin before it checks its condition and deadline again."""
FRAME_QOS = qos.frames(1000)
"""sim_node's frames (ground truth, camera) as they come, none lost while the node is busy elsewhere."""
CAMERA_SYNC_PENDING = 30
"""Most stamps with an incomplete camera bundle held while following a moving target."""


@dataclasses.dataclass(frozen=True)
class Mapper:
    """A mapping_node of the graph by its namespace relative to the graph's: the agent's (""), or
    the one of the simulator's segments (:data:`SIM_PERCEPTION_NAMESPACE`); its names, relative."""

    namespace: str

    def name(self, relative: str) -> str:
        return f"{self.namespace}/{relative}" if self.namespace else relative

    @property
    def start_visit(self) -> str:
        return self.name(names.MAPPING_START_VISIT)

    @property
    def finish_visit(self) -> str:
        return self.name(names.MAPPING_FINISH_VISIT)

    def map_topic(self, visit: int) -> str:
        return self.name(names.VISIT_MAP.format(visit=visit))


AGENT_MAPPER = Mapper("")
SIMULATOR_MAPPER = Mapper(SIM_PERCEPTION_NAMESPACE)


def world_floor(point: Point) -> Vec2:
    """Floor point (x, z), AI2-THOR world, of a ``map`` point."""
    x, _, z = ros_to_thor_point((point.x, point.y, point.z))
    return (x, z)


def region_corners(footprint: Footprint) -> tuple[Point, Point]:
    """``map`` corners (min, max) of a floor footprint, for Navigate.region_min/max."""
    a = thor_to_ros_point((footprint.x_min, 0.0, footprint.z_min))
    b = thor_to_ros_point((footprint.x_max, 0.0, footprint.z_max))
    lo, hi = (min(u, v) for u, v in zip(a, b, strict=True)), (max(u, v) for u, v in zip(a, b, strict=True))
    return Point(**dict(zip("xyz", lo, strict=True))), Point(**dict(zip("xyz", hi, strict=True)))


@dataclasses.dataclass(frozen=True)
class AgentServices:
    """An external agent's services (docs/external-agent.md), relative names under the graph's
    namespace: ``<namespace>/mapping/start_visit``, ``.../mapping/finish_visit``, ``.../ovman/query``."""

    namespace: str

    @property
    def start_visit(self) -> str:
        return f"{self.namespace}/{names.MAPPING_START_VISIT}"

    @property
    def finish_visit(self) -> str:
        return f"{self.namespace}/{names.MAPPING_FINISH_VISIT}"

    @property
    def query(self) -> str:
        return f"{self.namespace}/{names.QUERY}"


@dataclasses.dataclass(frozen=True)
class StaticWork:
    """One (episode, arm, seed) after the static gate: its prediction and static result, and the
    maps the arm read (:meth:`ovman_eval.benchmark.evaluator.GroupEvaluator.arm_maps`)."""

    record: EpisodeRecord
    arm: Arm
    seed: int
    prediction: Prediction
    result: StaticResult
    maps: GroupMaps


@dataclasses.dataclass(frozen=True)
class PreparedGroup:
    """A recorded group ready for its embodied runs: its maps, its static results in the order of
    its pending work, and the seconds of this thread they took (not the waits for query_node)."""

    maps: GroupMaps
    static: tuple[StaticWork, ...]
    static_s: float


class BenchmarkNode(GraphNode):
    """The benchmark's driver. Parameters: every key of ``node_parameters(config, "benchmark_node")``
    and the run inputs ``run.dataset``, ``run.output``, ``run.run_dir`` (wins over ``run.output``),
    ``run.static_only`` and ``run.agent_namespace`` (the ``external`` arm, docs/external-agent.md),
    read once at start-up; a set is refused. Its configuration file must be the other nodes'.
    Single-threaded: :meth:`run` spins the node while it waits."""

    def __init__(self, config: OvmanConfig | None = None, **kwargs: Any) -> None:
        # Its parameters are read once, here; the parameter services answer (ros2 param list, get,
        # dump) while the run spins the node, and refuse changes.
        super().__init__(NODE_NAME, **kwargs)
        self.config, self.run_inputs = self._declare_parameters(config if config is not None else load_config())
        self.refuse_parameter_changes("start a new run")
        self.qos_event_warnings = self.config.shared.ros.qos_event_warnings
        self.waits = self.config.benchmark_node.node
        self._step_ns = round(self.config.mapping_node.node.step_dt * 1e9)
        """The step length the tracker's camera frames are counted in (as mapping_node counts them)."""
        if self.waits.groups_ahead < 1:
            raise ConfigError(f"benchmark_node.node.groups_ahead must be at least 1, got {self.waits.groups_ahead}")
        if not self.waits.handshake_retry_s > 0.0:
            raise ConfigError(
                f"benchmark_node.node.handshake_retry_s must be positive seconds, got {self.waits.handshake_retry_s}"
            )
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self)
        # The process's --ros-args (node name remap, params file) are this node's, not the commander's.
        # One executor for both: a frame is handled while the commander waits for the result.
        self.commander = OvmanCommander(
            node_name=f"{NODE_NAME}_commander",
            namespace=self.get_namespace(),  # its relative names resolve in the graph's namespace
            executor=self._executor,
            context=self.context,
            use_global_arguments=False,
            start_parameter_services=False,
            # On this node's clock: it tells nav_node's plans of the current goal by their stamps.
            cli_args=["--ros-args", "-r", f"/clock:={names.CLOCK}"],
            parameter_overrides=[self.get_parameter(USE_SIM_TIME)],
        )
        self.mappers: tuple[Mapper, ...] = (AGENT_MAPPER,)
        """The graph's mapping_nodes: the agent's, and the simulator's segments' when the run builds
        those maps (the arm sim_perception)."""
        arms = self.config.benchmark_node.benchmark.arms
        if builds_simulator_maps(arms, self.config.mapping_node.segmenter.kind):
            self.mappers += (SIMULATOR_MAPPER,)
        self.clients_by_name: dict[str, Client] = {
            LOAD_VISIT_SERVICE: self.create_client(LoadVisit, LOAD_VISIT_SERVICE),
            ACT_SERVICE: self.create_client(Act, ACT_SERVICE),
            PLAYER_LOAD_SERVICE: self.create_client(LoadVisit, PLAYER_LOAD_SERVICE),
            PLAYER_PLAY_SERVICE: self.create_client(PlayTour, PLAYER_PLAY_SERVICE),
            names.QUERY: self.create_client(Query, names.QUERY),
            SIM_GET_PARAMETERS: self.create_client(GetParameters, SIM_GET_PARAMETERS),
            SIM_SET_PARAMETERS: self.create_client(SetParameters, SIM_SET_PARAMETERS),
        }
        for mapper in self.mappers:
            self.clients_by_name[mapper.start_visit] = self.create_client(MapVisit, mapper.start_visit)
            self.clients_by_name[mapper.finish_visit] = self.create_client(MapVisit, mapper.finish_visit)
        namespace = str(self.run_inputs[RUN_AGENT_NAMESPACE]).strip("/")
        self.agent = AgentServices(namespace) if namespace else None
        """The external agent's services (the arm external), or None."""
        if self.agent is not None:
            self.clients_by_name[self.agent.start_visit] = self.create_client(MapVisit, self.agent.start_visit)
            self.clients_by_name[self.agent.finish_visit] = self.create_client(MapVisit, self.agent.finish_visit)
            self.clients_by_name[self.agent.query] = self.create_client(Query, self.agent.query)
        handshake = HANDSHAKE_NODES
        if SIMULATOR_MAPPER in self.mappers:
            handshake += tuple(SIMULATOR_MAPPER.name(node) for node in (SEGMENTER_NODE, MAPPING_NODE))
        self._handshake_clients = {SIM_NODE: self.clients_by_name[SIM_GET_PARAMETERS]} | {
            node: self.create_client(GetParameters, f"{node}/get_parameters") for node in handshake
        }
        """Each server node's parameter service: what :meth:`wait_for_graph` shakes hands with."""
        self.maps: dict[tuple[Mapper, int], InstanceMapMsg] = {}
        """The latest map of each mapping_node and visit."""
        self.map_counts = {(mapper, visit): 0 for mapper in self.mappers for visit in (1, 2)}
        for mapper, visit in self.map_counts:
            self.create_subscription(
                InstanceMapMsg,
                mapper.map_topic(visit),
                functools.partial(self._keep_map, mapper, visit),
                qos.LATCHED,
            )
        self.grid_count, self.grid = 0, OccupancyGrid()
        self.create_subscription(OccupancyGrid, names.MAP, self._keep_grid, qos.LATCHED)
        self.change_sets = 0
        self.create_subscription(ChangeSet, names.CHANGES, self._count_change_set, qos.LATCHED)
        self.truth_frames: list[TruthMessage] = []
        """sim_node's ground-truth frames since the last load (the embodied runs)."""
        self.create_subscription(String, names.GROUND_TRUTH, self._keep_truth, FRAME_QOS)
        self._played: tuple[PlayedTruth, int] | None = None
        """While the player plays a recording: where its ground-truth records go, and the visit."""
        self.create_subscription(String, PLAYED_TRUTH_TOPIC, self._keep_played_truth, FRAME_QOS)
        self.pipeline: GroupPipeline[PreparedGroup] | None = None
        """The recorded groups being prepared (:meth:`prepare_groups`)."""
        self._camera_sync: StampSynchronizer[Any] | None = None
        """While a target is followed by sight (None otherwise): the synchroniser of sim_node's six
        camera topics (idle when the camera arrives as one CameraBundle)."""
        self._camera_observations: list[tuple[int, Observation]] = []
        self._camera_subscribed = False
        # sim_node's camera pose, looked up as mapping_node looks it up (its tree, in the graph's namespace).
        tf_source, _ = transform_source(
            self, self.config.shared.ros.tf_backend, self.config.shared.ros.tf_cache_s, self._release_camera
        )
        mapping = self.config.mapping_node.node
        self._camera_poses: PoseGate[dict[str, Any]] = PoseGate(
            tf_source, mapping.map_frame, mapping.tf_timeout_s, mapping.tf_max_pending
        )
        self._follow: Callable[[], None] | None = None
        """While a moving target is followed: what to do after each frame (see :meth:`navigate`)."""
        self._retargets = 0
        self.sim_act_camera = True
        """sim_node's node.act_camera as it started (read in :meth:`wait_for_graph`)."""
        self.sim_camera_bundle = False
        """Whether sim_node publishes its camera as one CameraBundle (node.camera_output, read in
        :meth:`wait_for_graph`): followed by sight through that, else through the six topics."""

    # ---------------------------------------------------------------- parameters

    def _declare_parameters(self, config: OvmanConfig) -> tuple[OvmanConfig, dict[str, Any]]:
        updated = config_from_parameters(self, config, [(NODE_NAME, "")], RUN_PARAMETERS)
        return updated, {name: self.get_parameter(name).value for name in RUN_PARAMETERS}

    # ---------------------------------------------------------------- callbacks

    def _keep_map(self, mapper: Mapper, visit: int, message: InstanceMapMsg) -> None:
        self.maps[(mapper, visit)] = message
        self.map_counts[(mapper, visit)] += 1
        self._step_preparation()

    def _keep_grid(self, message: OccupancyGrid) -> None:
        self.grid_count, self.grid = self.grid_count + 1, message

    def _count_change_set(self, message: ChangeSet) -> None:
        self.change_sets += 1
        self._step_preparation()

    def _keep_played_truth(self, message: String) -> None:
        if self._played is None:
            return  # not a recording benchmark_node asked the player for
        truth, visit = self._played
        truth.add(visit, message.data)
        self._step_preparation()

    def _keep_truth(self, message: String) -> None:
        self.truth_frames.append(TruthMessage.parse(message.data))
        if self._follow is not None:
            self._follow()

    def _on_camera(self, topic: str, message: Any) -> None:
        if self._camera_sync is None:
            return
        if topic == bundle.INSTANCE_LABELS_TOPIC:
            item: Any = bundle.parse_labels_json(message.data)
            stamp = item.stamp_ns
        else:
            item, stamp = message, stamp_of(message.header)
        complete = self._camera_sync.add(topic, stamp, item)
        if complete is not None:
            frame = complete.items[bundle.RGB_TOPIC].header.frame_id
            self._camera_poses.add(complete.stamp_ns, frame, dict(complete.items), time.monotonic())
            self._release_camera()

    def _on_camera_bundle(self, data: bytes) -> None:
        if self._camera_sync is None:
            return
        stamp, frame, items = camera_bundle_frame(bundle_cdr.decode(data))
        self._camera_poses.add(stamp, frame, items, time.monotonic())
        self._release_camera()

    def _release_camera(self) -> None:
        """The camera frames whose pose is now known, in order, become the follower's observations
        (a frame given up for want of a pose is lost as a lost message would be)."""
        if not self._camera_poses.pending:
            return
        ready, _ = self._camera_poses.poll(time.monotonic())
        for items, pose in ready:
            stamp = stamp_of(items[bundle.RGB_TOPIC].header)
            self._add_camera_observation(
                stamp, observation_from_topics(items, pose, self._camera_poses.target, self._step_ns)
            )

    def _add_camera_observation(self, stamp_ns: int, observation: Observation) -> None:
        self._camera_observations.append((stamp_ns, observation))
        if self._follow is not None:
            self._follow()

    # ---------------------------------------------------------------- waiting on the graph

    def spin_until(self, condition: Callable[[], Any], what: str | Callable[[], str], timeout_s: float) -> None:
        """Spin this node until ``condition()`` holds; GraphCallError after ``timeout_s`` saying
        ``what`` was awaited (a callable: asked at that moment). Groups being prepared meanwhile go
        on (:meth:`prepare_groups`)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                awaited = what() if callable(what) else what
                raise GraphCallError(f"{awaited}: nothing within {timeout_s:.0f} s (benchmark_node.node timeouts)")
            self._executor.spin_once(timeout_sec=SPIN_PERIOD_S)
            self._check_preparation()

    def call(self, service: str, request: Any) -> Any:
        future = self.clients_by_name[service].call_async(request)
        self.spin_until(future.done, f"{service} answer", self.waits.call_timeout_s)
        return future.result()

    def wait_for_graph(self) -> None:
        """Every service and the Navigate action, within ``node.start_timeout_s`` (nodes load models), then a
        handshake with every node (:meth:`handshake`) before the first real call."""
        deadline = time.monotonic() + self.waits.start_timeout_s
        for name, client in self.clients_by_name.items():
            if not client.wait_for_service(timeout_sec=max(deadline - time.monotonic(), 0.0)):
                raise GraphCallError(f"service {name} is not available; is its node running?")
        if not self.commander.nav_client.wait_for_server(timeout_sec=max(deadline - time.monotonic(), 0.0)):
            raise GraphCallError(f"action {names.NAVIGATE} is not available; is nav_node running?")
        answers = {node: self.handshake(node, client, deadline) for node, client in self._handshake_clients.items()}
        if self.agent is not None:
            # The agent's node names are its own: its first answer to a start of visit 1 (which its
            # contract makes idempotent; the first group starts visit 1 again) is the handshake.
            who = f"the external agent in {self.agent.namespace}"
            client = self.clients_by_name[self.agent.start_visit]
            self.first_answer(who, client, lambda: MapVisit.Request(visit=1), deadline)
        self.wait_for_frame_readers(deadline)
        values = answers[SIM_NODE].values
        if len(values) != 2 or values[0].type != ParameterType.PARAMETER_BOOL:
            raise GraphCallError(f"{SIM_NODE} did not report its parameter {SIM_ACT_CAMERA} (a bool)")
        self.sim_act_camera = bool(values[0].bool_value)
        try:
            outputs = camera_outputs(values[1].string_value, f"{SIM_NODE}'s parameter {SIM_CAMERA_OUTPUT}")
        except ValueError as err:
            raise GraphCallError(str(err)) from None
        self.sim_camera_bundle = bundle.CAMERA_BUNDLE_OUTPUT in outputs

    def wait_for_frame_readers(self, deadline: float) -> None:
        """Until this node's view of the graph shows the subscription to the player's frames of
        every node that reads them (:meth:`_frame_readers`), and the external agent's (a node in its
        namespace) when there is one, until ``deadline`` (monotonic s). Each play then asks the
        player to match every subscription seen (:meth:`frame_subscriptions`), so that no reader
        misses the first frames of a visit."""
        graph = self.get_namespace()
        agent = self.resolve_topic_name(self.agent.namespace) if self.agent is not None else None
        readers = {
            f"{node} in {space}": lambda ns, name, space=space, node=node: ns == space and name == node
            for space, node in self._frame_readers(graph)
        }
        if agent is not None:
            readers[f"the external agent in {agent}"] = lambda ns, node: ns == agent or ns.startswith(f"{agent}/")

        def missing() -> list[str]:
            seen = [
                (info.node_namespace, info.node_name)
                for topic in self.player_topics()
                for info in self.get_subscriptions_info_by_topic(topic)
            ]
            return [who for who, matches in readers.items() if not any(matches(ns, node) for ns, node in seen)]

        self.spin_until(
            lambda: not missing(),
            lambda: (
                f"a subscription to the player's frames ({names.PLAYER_NAMESPACE}/camera/...) by "
                + ", ".join(missing())
            ),  # the readers still missing at the deadline
            max(deadline - time.monotonic(), 0.0),
        )

    def _frame_readers(self, graph: str) -> list[tuple[str, str]]:
        """(namespace, node) of each of the graph's nodes that reads the player's frames: the
        mapping_nodes, and segmenter_node (subscribed once its segments have a reader)."""
        readers = []
        for mapper in self.mappers:
            space = f"{graph.rstrip('/')}/{mapper.namespace}" if mapper.namespace else graph
            readers.append((space, MAPPING_NODE))
            if mapper.namespace:
                readers.append((space, SEGMENTER_NODE))
        return readers

    def player_topics(self) -> list[str]:
        """The topics the player publishes under its namespace (fully qualified), as this node sees them."""
        player = self.resolve_topic_name(names.PLAYER_NAMESPACE)
        try:
            published = self.get_publisher_names_and_types_by_node(PLAYER_NODE, player)
        except NodeNameNonExistentError:
            return []
        return sorted(topic for topic, _ in published if topic.startswith(f"{player}/"))

    def frame_subscriptions(self) -> PlayTour.Request:
        """A play request that has the player wait for every subscription to its topics that this
        node sees (PlayTour.srv ``topics``, ``min_subscriptions``)."""
        request = PlayTour.Request()
        for topic in self.player_topics():
            count = self.count_subscribers(topic)
            if count:
                request.topics.append(topic)
                request.min_subscriptions.append(count)
        return request

    def handshake(self, node: str, client: Client, deadline: float) -> GetParameters.Response:
        """``node``'s answer to a request that changes nothing (its parameters: sim_node's
        ``node.act_camera`` and ``node.camera_output``, none of the others), sent again every
        ``node.handshake_retry_s`` until ``deadline`` (monotonic s).

        A discovered service can still lose its first answers: rmw_fastrtps drops a reply when the
        server's reply writer has not matched this client's reply reader within ~100 ms, and
        ``wait_for_service`` only sees this side's match. An answer shows that ``node``'s process
        has matched this node's endpoints, whose discovery it learns at once."""
        wanted = [SIM_ACT_CAMERA, SIM_CAMERA_OUTPUT] if node == SIM_NODE else []
        return self.first_answer(node, client, lambda: GetParameters.Request(names=wanted), deadline)

    def first_answer(self, who: str, client: Client, request: Callable[[], Any], deadline: float) -> Any:
        """The first answer of ``client``'s server (``who``, for the error) to ``request()``, sent
        again every ``node.handshake_retry_s`` until ``deadline`` (monotonic s; see :meth:`handshake`)."""
        while True:
            future = client.call_async(request())
            wait = min(self.waits.handshake_retry_s, max(deadline - time.monotonic(), 0.0))
            self._executor.spin_until_future_complete(future, timeout_sec=wait)
            if future.done():
                return future.result()
            client.remove_pending_request(future)
            if time.monotonic() >= deadline:
                raise GraphCallError(
                    f"{who} did not answer {client.srv_name} within node.start_timeout_s; is it running?"
                )

    def set_sim_act_camera(self, on: bool) -> None:
        """Turn sim_node's camera bundle after each Act on or off (and wait until it is)."""
        request = SetParameters.Request(parameters=[Parameter(SIM_ACT_CAMERA, value=on).to_parameter_msg()])
        results = self.call(SIM_SET_PARAMETERS, request).results
        if len(results) != 1 or not results[0].successful:
            reason = results[0].reason if results else "no answer"
            raise GraphCallError(f"{SIM_NODE} refused {SIM_ACT_CAMERA} = {on}: {reason}")

    def act_stop(self) -> tuple[WorldState, TruthMessage]:
        """Stop through sim_node's act (time and the mover stay) and the ground truth of its frame."""
        reply = self.call(ACT_SERVICE, Act.Request(action=Action.STOP.value))
        if not reply.success:
            raise GraphCallError(f"{ACT_SERVICE} Stop failed: {reply.message}")
        stamp = stamp_of(reply.pose.header)
        self.spin_until(
            lambda: any(f.stamp_ns == stamp for f in self.truth_frames),
            f"the ground truth of the frame stamped {stamp} ns",
            self.waits.message_timeout_s,
        )
        message = next(f for f in self.truth_frames if f.stamp_ns == stamp)
        try:
            return message.frame().objects, message
        except BundleFormatError as err:
            raise GraphCallError(f"the ground truth of the frame stamped {stamp} ns: {err}") from err

    # ---------------------------------------------------------------- maps

    def prepare_groups(self, units: Sequence[WorkUnit], evaluator: GroupEvaluator, ahead: int) -> None:
        """Prepare ``units`` in order, each group's maps and static gate (:meth:`_group_steps`), at
        most ``ahead`` groups beyond the one :meth:`prepared` last returned; the work goes on while
        this node waits for anything else (:class:`ovman_eval.graph.group_pipeline.GroupPipeline`)."""
        self.pipeline = GroupPipeline(units, lambda unit: self._group_steps(unit, evaluator), ahead)
        self.pipeline.step()

    def prepared(self, unit: WorkUnit) -> PreparedGroup:
        """``unit``'s maps and static results, once prepared (units are taken in order)."""
        if self.pipeline is None:
            raise RuntimeError("prepare_groups first")
        return self.pipeline.take(unit, lambda: self._executor.spin_once(timeout_sec=SPIN_PERIOD_S))

    def _step_preparation(self) -> None:
        """Run the preparation on (called when something it may wait for has happened)."""
        if self.pipeline is not None:
            self.pipeline.step()

    def _check_preparation(self) -> None:
        """Run the preparation on and raise what it failed with."""
        if self.pipeline is not None:
            self.pipeline.check()

    def _group_steps(self, unit: WorkUnit, evaluator: GroupEvaluator) -> StepsT[PreparedGroup]:
        """``unit``'s maps (:meth:`_map_steps`), then the static result of each of its pending
        (episode, arm, seed), in order (query_node answers from this group's maps)."""
        records = [evaluator.records[e] for e in unit.episode_ids]
        maps, simulator_maps = yield from self._map_steps(unit, records[0], evaluator.dataset)
        if simulator_maps is not None:
            evaluator.given_simulator_maps(records, simulator_maps)
        static: list[StaticWork] = []
        static_s = 0.0
        for episode_id, arm_name, seed in unit.pending:
            record, arm = evaluator.records[episode_id], Arm(arm_name)
            prediction = None
            if arm is Arm.EXTERNAL:
                prediction = yield from self._external_steps(record)
            elif arm in QUERY_ARMS:
                prediction = yield from self._query_steps(arm, record)
            clock = time.perf_counter()
            read = evaluator.arm_maps(arm, records, maps, dict.fromkeys(TIMING_KEYS, 0.0))
            if prediction is None:
                prediction = evaluator.predict(arm, record, read, seed)
            result = evaluator.static_result(record, read, prediction)
            static.append(StaticWork(record, arm, seed, prediction, result, read))
            static_s += time.perf_counter() - clock
        return PreparedGroup(maps, tuple(static), static_s)

    def _map_steps(
        self, unit: WorkUnit, record: EpisodeRecord, dataset: Path
    ) -> StepsT[tuple[GroupMaps, GroupMaps | None]]:
        """Both visits of ``unit`` through the player and the mapping_nodes, then query_node's change
        set: the agent's maps, and the simulator's segments' (None when the run builds none)."""
        changes = self.change_sets
        truth = PlayedTruth(dataset, record)
        visit1 = yield from self._visit_steps(1, truth)
        visit2 = yield from self._visit_steps(2, truth)
        yield Wait.within(
            lambda: self.change_sets > changes, "query_node's change set of the new maps", self.waits.message_timeout_s
        )
        margin, group_truth = self.config.benchmark_node.diagnostics.truth_margin, truth.truth()
        built = [
            graph_group_maps(unit.group_id, map1, map2, group_truth, margin)
            for map1, map2 in zip(visit1, visit2, strict=True)
        ]
        return built[0], (built[1] if len(built) > 1 else None)

    def _visit_steps(self, visit: int, truth: PlayedTruth) -> StepsT[list[InstanceMap]]:
        """Every mapping_node maps the recording of ``visit`` as the player plays it; the received
        maps, in :attr:`mappers` order. The ground-truth records of the played frames go to ``truth``."""
        recording = truth.recordings[visit]
        for mapper in self.mappers:
            started = yield from self._call_steps(mapper.start_visit, MapVisit.Request(visit=visit))
            if not started.success:
                raise GraphCallError(f"{mapper.start_visit} visit {visit}: {started.message}")
        if self.agent is not None:
            yield from self._agent_visit_steps(self.agent.start_visit, MapVisit.Request(visit=visit))
        loaded = yield from self._call_steps(PLAYER_LOAD_SERVICE, LoadVisit.Request(recording=str(recording)))
        if not loaded.success:
            raise GraphCallError(f"{PLAYER_LOAD_SERVICE} {recording}: {loaded.message}")
        self._played = (truth, visit)
        try:
            played = yield from self._call_steps(PLAYER_PLAY_SERVICE, self.frame_subscriptions())
            if not played.success:
                raise GraphCallError(f"{PLAYER_PLAY_SERVICE} {recording}: {played.message}")
            # The records travel apart from the reply: wait for every one.
            yield Wait.within(
                lambda: truth.counts[visit] >= played.frames,
                f"the ground truth of the {played.frames} frames of {recording}",
                self.waits.message_timeout_s,
            )
        finally:
            self._played = None
        if truth.counts[visit] != played.frames:
            raise GraphCallError(
                f"{PLAYED_TRUTH_TOPIC}: {truth.counts[visit]} records while {recording} played {played.frames} frames"
            )
        received = {mapper: self.map_counts[(mapper, visit)] for mapper in self.mappers}
        request = MapVisit.Request(visit=visit, expected_frames=played.frames)
        for mapper in self.mappers:
            finished = yield from self._call_steps(mapper.finish_visit, request)
            if not finished.success:
                raise GraphCallError(f"{mapper.finish_visit} visit {visit}: {finished.message}")
        if self.agent is not None:
            yield from self._agent_visit_steps(self.agent.finish_visit, request)
        maps = []
        for mapper in self.mappers:
            yield Wait.within(
                lambda mapper=mapper: self.map_counts[(mapper, visit)] > received[mapper],
                f"the visit-{visit} map on {mapper.map_topic(visit)}",
                self.waits.message_timeout_s,
            )
            map_, _ = instance_map_from_msg(self.maps[(mapper, visit)], self.config.shared.limits)
            maps.append(map_)
        return maps

    def _agent_visit_steps(self, service: str, request: MapVisit.Request) -> StepsT[None]:
        """The external agent's start or finish of ``request.visit``; a finish must report every
        played frame (``request.expected_frames``) as received."""
        reply = yield from self._call_steps(service, request)
        if not reply.success:
            raise GraphCallError(f"the external agent's {service} visit {request.visit}: {reply.message}")
        if request.expected_frames and reply.frames != request.expected_frames:
            raise GraphCallError(
                f"the external agent's {service} visit {request.visit} reports {reply.frames} frames received of "
                f"the {request.expected_frames} played (docs/external-agent.md: subscribe reliable, deep enough)"
            )

    def _call_steps(self, service: str, request: Any) -> StepsT[Any]:
        """``service``'s reply to ``request``; the preparation goes on as soon as it arrives."""
        future = self.clients_by_name[service].call_async(request)
        future.add_done_callback(lambda _: self._step_preparation())
        yield Wait.within(future.done, f"{service} answer", self.waits.call_timeout_s)
        return future.result()

    # ---------------------------------------------------------------- static gate

    def _query_steps(self, arm: Arm, record: EpisodeRecord) -> StepsT[Prediction]:
        """``arm``'s answer from query_node, given the episode's noun phrase and relation, or for
        two_visit_text the query's text (a parse failure abstains, as in the in-process runner)."""
        text_arm = arm is Arm.TWO_VISIT_TEXT
        if text_arm:
            request = Query.Request(text=record.query.phrase, arm=arm.value)
        else:
            request = Query.Request(
                category=record.query.noun_phrase, relation=record.query.relation.value, arm=arm.value
            )
        response = yield from self._call_steps(names.QUERY, request)
        if text_arm and response.status == Query.Response.PARSE_FAILED:
            explanation = f"{PARSE_FAILED}: {response.explanation}"
            return Prediction(None, record.query.relation, "", (), 0.0, explanation, arm.value)
        if response.status not in (Query.Response.ANSWERED, Query.Response.ABSTAINED):
            raise GraphCallError(
                f"{names.QUERY} {arm.value} for episode {record.episode_id} (status {response.status}): "
                f"{response.explanation}"
            )
        if not text_arm and response.noun_phrase != record.query.noun_phrase:
            raise BenchmarkError(
                f"episode {record.episode_id}: query_node read the noun phrase {record.query.noun_phrase!r} as "
                f"{response.noun_phrase!r}; it must be a surface name of the vocabulary (ovman_query.surface_forms)"
            )
        ids = []
        if response.instance_visit1 >= 0:
            ids.append(map_uid(1, response.instance_visit1))
        if response.instance_visit2 >= 0:
            ids.append(map_uid(2, response.instance_visit2))
        return Prediction(
            point=world_floor(response.goal.point) if response.answered else None,
            relation=Relation.parse(response.relation),
            noun_phrase=response.noun_phrase,
            instance_ids=tuple(ids),
            confidence=float(response.confidence),
            explanation=response.explanation,
            arm=arm.value,
        )

    def _external_steps(self, record: EpisodeRecord) -> StepsT[Prediction]:
        """The external agent's answer (its ``ovman/query``, given the episode's noun phrase and
        relation, as two_visit is): a finite goal in the ``map`` frame when answered. Its instance
        ids name its own maps, not OVMAN's, so the answer rests on its point alone (a moving target
        is not followed: the point is navigated to). A reply outside the contract stops the run."""
        assert self.agent is not None
        request = Query.Request(category=record.query.noun_phrase, relation=record.query.relation.value)
        response = yield from self._call_steps(self.agent.query, request)
        where = f"the external agent's {self.agent.query} for episode {record.episode_id}"
        if response.status not in (Query.Response.ANSWERED, Query.Response.ABSTAINED):
            raise GraphCallError(f"{where}: status {response.status} ({response.explanation})")
        confidence = float(response.confidence)
        if not math.isfinite(confidence):
            raise GraphCallError(f"{where}: confidence {confidence} is not finite")
        point = None
        if response.status == Query.Response.ANSWERED:
            goal = response.goal
            if goal.header.frame_id != self.config.frames.map:
                raise GraphCallError(
                    f"{where}: goal in frame {goal.header.frame_id!r}; expected {self.config.frames.map!r}"
                )
            if not all(math.isfinite(v) for v in (goal.point.x, goal.point.y, goal.point.z)):
                raise GraphCallError(f"{where}: goal {goal.point.x}, {goal.point.y}, {goal.point.z} is not finite")
            point = world_floor(goal.point)
        phrase = response.noun_phrase or record.query.noun_phrase
        return Prediction(
            point, record.query.relation, phrase, (), confidence, response.explanation, Arm.EXTERNAL.value
        )

    # ---------------------------------------------------------------- embodied run

    def load_evaluated_world(
        self, record: EpisodeRecord, maps: GroupMaps
    ) -> tuple[list[Vec2], WorldState, TruthMessage]:
        """Load the evaluated world into sim_node; its free positions, objects and first frame."""
        pose = record.start_pose
        objects = sorted(maps.truth.visit2_end, key=lambda o: o.instance_id)
        mover = record.moving_id
        request = LoadVisit.Request(
            scene=record.scene.name,
            objects_json=json.dumps([object_state_to_dict(o) for o in objects]),
            use_start_pose=True,
            start_pose=floor_pose_msg(pose),
            start_horizon_deg=float(pose.horizon_deg),
            mover_instance_id=mover or "",
            mover_seed=int(record.seeds.navigation_mover or 0) if mover else 0,
            condition=record.scene.condition,
            condition_seed=int(record.scene.condition_seed),
        )
        received = self.grid_count
        self.truth_frames.clear()  # frames of earlier loads are not needed
        loaded = self.call(LOAD_VISIT_SERVICE, request)
        if not loaded.success:
            raise GraphCallError(f"{LOAD_VISIT_SERVICE} episode {record.episode_id}: {loaded.message}")
        self.spin_until(
            lambda: self.grid_count > received,
            f"{names.MAP} of episode {record.episode_id}",
            self.waits.message_timeout_s,
        )
        reachable = from_occupancy_fields(occupancy_fields(self.grid)).free_positions()
        objects_now, frame = self.act_stop()
        return [(float(x), float(z)) for x, z in reachable], objects_now, frame

    def navigate(
        self,
        record: EpisodeRecord,
        plan: NavigationPlan,
        config: OvmanConfig,
        first: TruthMessage,
        segmenter: Callable[[str], Segmenter],
    ) -> NavigationOutcome:
        """Run one Navigate goal to its end, following a moving target; what the graph reported.
        ``first``: the frame at the start (the trajectory starts there); ``segmenter``: the
        segmenter of a ``mapping_node.segmenter.kind`` (a map arm following by sight)."""
        camera_switched = plan.follow is Follow.SIGHTINGS and not self.sim_act_camera
        if camera_switched:
            self.set_sim_act_camera(True)
        self._retargets = 0
        target, follow = plan.target, None
        try:
            if plan.follow is Follow.SIGHTINGS:
                target, follow, first = self.start_following_by_sight(plan, config, segmenter(plan.segmenter))
            self.truth_frames = [f for f in self.truth_frames if f.stamp_ns >= first.stamp_ns]
            if plan.follow is Follow.TRUTH:
                follow = self._truth_follower(plan.instance, target)
            self._drive(record, target, follow)
        finally:
            self._follow = None
            self._stop_following_by_sight()
        if camera_switched:
            self.set_sim_act_camera(False)
        result = self.commander.getNavResult()
        if result is None:
            raise GraphCallError(f"episode {record.episode_id}: nav_node returned no Navigate result")
        if NavError(result.error_code) is NavError.NONE and self.commander.getResult() is not TaskResult.SUCCEEDED:
            # A Navigate whose server failed to answer ends with the default result (error NONE).
            raise GraphCallError(
                f"episode {record.episode_id}: nav_node's Navigate ended {self.commander.getResult().name} with no "
                f"error code: see nav_node's log"
            )
        final_state, last = self.act_stop()
        frames = sorted(
            (f for f in self.truth_frames if first.stamp_ns <= f.stamp_ns <= last.stamp_ns), key=lambda f: f.stamp_ns
        )
        error = NavError(result.error_code)
        return NavigationOutcome(
            error=error.name,
            stop=world_floor(result.final_pose.pose.position) if error is NavError.NONE else None,
            path_length=float(result.path_length),
            steps=int(result.steps),
            collisions=int(result.collisions),
            trajectory=trajectory_of([record.start_pose.floor, *(f.pose.floor for f in frames)]),
            final_state=final_state,
            retargets=self._retargets,
        )

    def _drive(self, record: EpisodeRecord, target: NavTarget, follow: Callable[[], None] | None) -> None:
        """Send the goal and wait for its end; ``follow``: what to do after each frame while a moving
        target is followed (None: a fixed target)."""
        goal = PointStamped(point=floor_point_msg(target.point))
        goal.header.frame_id = self.config.frames.map
        # A followed target is re-estimated in the frame callbacks, as soon as each frame arrives
        # (nav_node waits for that update before its next action); the commander's waits spin them.
        self._follow = follow
        accepted = self.commander.goToPoint(
            goal,
            record.moving_id is not None,
            region_corners(target.region),
            timeout_sec=self.waits.call_timeout_s,
            update_every_step=follow is not None,
        )
        if not accepted:
            raise GraphCallError(f"nav_node did not accept the goal of episode {record.episode_id}")
        deadline = time.monotonic() + self.waits.navigate_timeout_s
        while not self.commander.isTaskComplete(spin_sec=SPIN_PERIOD_S):
            self._check_preparation()
            if time.monotonic() > deadline:
                self.commander.cancelTask()
                raise GraphCallError(
                    f"episode {record.episode_id}: navigation did not end within {self.waits.navigate_timeout_s} s"
                )

    def _publish_estimate(self, target: NavTarget, stamp_ns: int) -> None:
        """The target estimate (point and footprint) after the frame stamped ``stamp_ns`` (one per
        frame: update_every_step)."""
        update = PointStamped(point=floor_point_msg(target.point))
        update.header.frame_id = self.config.frames.map
        update.header.stamp = time_msg(stamp_ns)
        self.commander.updateTarget(update, region_corners(target.region))

    def _truth_follower(self, instance: str, start: NavTarget) -> Callable[[], None]:
        """What to do after each ground-truth frame while the oracle arms follow ``instance``: publish
        its estimate in every new frame (:class:`ovman_eval.graph.followers.TruthFollower`)."""
        follower = TruthFollower(instance, start, len(self.truth_frames))

        def follow_truth() -> None:
            for stamp_ns, target in follower.follow(self.truth_frames):
                self._publish_estimate(target, stamp_ns)

        return follow_truth

    def start_following_by_sight(
        self, plan: NavigationPlan, config: OvmanConfig, segmenter: Segmenter
    ) -> tuple[NavTarget, Callable[[], None], TruthMessage]:
        """Start following ``plan.label`` by sight (the camera is on; ``segmenter``: the one the arm's
        maps were built with, :meth:`ovman_eval.benchmark.evaluator.GroupEvaluator.segmenter`): the
        follower looks at the start view first, through a Stop, as the in-process run's tracker
        does before the first action. Returns the target carried to that estimate, what to do
        after each camera bundle, and the Stop's frame."""
        tracker = LabelTracker(
            plan.label,
            plan.target.point,
            config.benchmark_node.benchmark.track_gate,
            config.mapping_node,
            segmenter,
        )
        follower = SightFollower(tracker, plan.target)
        self._camera_sync = StampSynchronizer(CAMERA_MESSAGES, CAMERA_SYNC_PENDING)
        self._camera_observations = []
        first = self._camera_frame()
        follower.look(self._take_observations(first.stamp_ns - 1))
        self._retargets = follower.retargets

        def follow_sightings() -> None:
            for stamp_ns, target in follower.look(self._take_observations(first.stamp_ns)):
                self._publish_estimate(target, stamp_ns)
            self._retargets = follower.retargets

        return follower.estimate, follow_sightings, first

    def _take_observations(self, after_ns: int) -> list[tuple[int, Observation]]:
        """The camera observations received since the last call, of frames stamped after ``after_ns``
        (bundles of earlier frames, e.g. while RViz keeps the camera on, are dropped)."""
        observations, self._camera_observations = self._camera_observations, []
        return [(stamp, observation) for stamp, observation in observations if stamp > after_ns]

    def _camera_frame(self) -> TruthMessage:
        """The frame of a Stop whose camera bundle arrived, subscribing to the bundle first (for the
        rest of the run: only sim_node's live camera travels there). New subscriptions take a
        moment to be matched by sim_node's publishers, and a bundle published before then never
        arrives: Stop (nothing moves, no time passes) every ``node.camera_retry_s`` until one does,
        within ``node.message_timeout_s``."""
        if not self._camera_subscribed:
            if self.sim_camera_bundle:
                self.create_subscription(CameraBundle, names.CAMERA_BUNDLE, self._on_camera_bundle, FRAME_QOS, raw=True)
            else:
                for topic, kind in CAMERA_MESSAGES.items():
                    self.create_subscription(
                        kind, names.relative(topic), functools.partial(self._on_camera, topic), FRAME_QOS
                    )
            self._camera_subscribed = True
        deadline = time.monotonic() + self.waits.message_timeout_s
        wait = min(self.waits.camera_retry_s, self.waits.message_timeout_s)
        while True:
            _, frame = self.act_stop()
            try:
                self.spin_until(functools.partial(self._has_camera_frame, frame.stamp_ns), "a camera bundle", wait)
                return frame
            except GraphCallError:
                if time.monotonic() > deadline:
                    raise GraphCallError(
                        f"no camera bundle of a Stop within {self.waits.message_timeout_s} s (benchmark_node.node "
                        "message_timeout_s): does sim_node publish the camera after an Act (node.act_camera)?"
                    ) from None

    def _has_camera_frame(self, stamp_ns: int) -> bool:
        return any(stamp == stamp_ns for stamp, _ in self._camera_observations)

    def _stop_following_by_sight(self) -> None:
        self._camera_sync = None
        self._camera_observations = []
        self._camera_poses.reset()

    # ---------------------------------------------------------------- the run

    def evaluate_unit(
        self, unit: WorkUnit, prepared: PreparedGroup, evaluator: GroupEvaluator, static_only: bool
    ) -> tuple[list[ResultRecord], Any, dict[str, float]]:
        """One recorded group through the graph, its maps and static gate prepared: its result
        records, its sketch (or None) and timings."""
        timings = dict.fromkeys(TIMING_KEYS, 0.0)
        records = [evaluator.records[e] for e in unit.episode_ids]
        config, maps = evaluator.config, prepared.maps
        timings["static_s"] += prepared.static_s
        out: list[ResultRecord] = []
        reachable: dict[str, list[Vec2]] = {}
        for work in prepared.static:
            record, arm, prediction = work.record, work.arm, work.prediction
            embodied: EmbodiedResult | None = None
            if not static_only:
                clock = time.perf_counter()
                cells, objects_now, first = self.load_evaluated_world(record, maps)
                reachable[record.episode_id] = cells
                outcome = None
                if prediction.point is not None:
                    plan = evaluator.navigation_plan(arm, record, work.maps, prediction, objects_now)
                    outcome = self.navigate(record, plan, config, first, evaluator.segmenter)
                embodied = score_embodied(config, record, cells, outcome, objects_now)
                timings["embodied_s"] += time.perf_counter() - clock
            result = evaluator.result_record(record, arm, work.seed, work.result, embodied, work.maps)
            out.append(without_diagnostics(result))
        sketch = None
        if unit.need_sketch:
            clock = time.perf_counter()
            cells = []
            if not static_only:
                first_id = records[0].episode_id
                cells = reachable[first_id] if first_id in reachable else self.load_evaluated_world(records[0], maps)[0]
            sketch = evaluator.sketch(records[0], maps, cells)
            timings["sketch_s"] += time.perf_counter() - clock
        return out, sketch, timings

    def run(self) -> int:
        """Run (or resume) the benchmark; the exit code: 0 when finished, 1 when the graph failed (a
        service missing or failing, a timeout), 2 for bad parameters."""
        inputs = self.run_inputs
        dataset = Path(str(inputs[RUN_DATASET]))
        try:
            if not str(inputs[RUN_DATASET]):
                raise BenchmarkError(f"parameter {RUN_DATASET} is empty: give the episode dataset directory")
            params = self.config.benchmark_node.benchmark
            request = BenchmarkRequest(
                dataset, parse_arms(params.arms), tuple(params.seeds), bool(inputs[RUN_STATIC_ONLY])
            )
            if (Arm.EXTERNAL in request.arms) != (self.agent is not None):
                raise BenchmarkError(
                    f"parameter {RUN_AGENT_NAMESPACE} must name the external agent's namespace exactly when "
                    f"benchmark.arms includes external (docs/external-agent.md)"
                )
            records = checked_episodes(dataset)
            if not records:
                raise BenchmarkError(f"{dataset}: the dataset holds no episodes")
            config = configured_for(self.config, records)
            evaluator = GroupEvaluator(config, dataset, records, MapCache(None), dataset_hash(dataset))
            run_dir = Path(str(inputs[RUN_DIR])) if inputs[RUN_DIR] else None
            run = GraphRun(
                request,
                config,
                records,
                evaluator.encoder.description,
                out_root=None if run_dir else Path(str(inputs[RUN_OUTPUT])),
                run_dir=run_dir,
                external_agent=self.agent.namespace if self.agent is not None else "",
            )
        except (BenchmarkError, DatasetError, ConfigError, ValueError) as err:
            self.get_logger().error(str(err))
            return 2
        self.get_logger().info(
            f"run {run.run_dir}: {len(run.units)} of {run.total_groups} recorded groups to do "
            f"({', '.join(a.value for a in request.arms)}; seeds {list(request.seeds)})"
        )
        if Arm.SINGLE_VISIT in request.arms:
            # The arm grounds here: load the language model now, while the other nodes start too.
            evaluator.encoder.embed_text([records[0].query.noun_phrase])
        units = run.units
        try:
            self.wait_for_graph()
            self.prepare_groups(units, evaluator, self.waits.groups_ahead)
            for unit in units:
                clock = time.perf_counter()
                prepared = self.prepared(unit)
                waited = time.perf_counter() - clock
                records_done, sketch, timings = self.evaluate_unit(unit, prepared, evaluator, request.static_only)
                timings["maps_build_s"] += waited
                run.commit(records_done, sketch, timings)
                self.get_logger().info(
                    f"group {unit.group_id} done ({run.done}/{run.total_groups}, {run.wall_s:.1f} s)"
                )
            summary = run.complete()
        except (GraphCallError, BenchmarkError) as err:
            self.get_logger().error(f"the run stopped: {err}; rerun the same command to resume {run.run_dir}")
            run.close()
            return 1
        finally:
            evaluator.close()
        self.get_logger().info(f"finished: {len(summary.records)} results in {summary.run_dir}")
        return 0

    def destroy_node(self) -> None:
        # The commander and the executor are absent when the constructor failed (a bad parameter).
        commander, executor = getattr(self, "commander", None), getattr(self, "_executor", None)
        if commander is not None:
            commander.destroy_node()
        if executor is not None:
            executor.remove_node(self)
            executor.shutdown()
        super().destroy_node()


def main(args: Sequence[str] | None = None) -> int:
    """Console script ``benchmark_node``: run the benchmark through the graph, then exit with its
    code (2 when it cannot start; 0 when Ctrl-C stops it: the partial results stay for a resume)."""
    return run_node(NODE_NAME, BenchmarkNode, args, cannot_start=2, run=lambda node: node.run())


if __name__ == "__main__":
    sys.exit(main())
