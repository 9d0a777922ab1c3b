"""mapping_node and query_node over a real DDS graph, fed a recorded episode by sim_node (on the
six standard camera topics, and as one CameraBundle per frame).

Two visits of an embedded home are recorded here (a vase moved 4+ m, a chair removed between
them). sim_node, mapping_node and query_node run as processes; this process opens each visit on
mapping_node, has sim_node replay its recording, finishes the visit, and queries /ovman/query.
Every answer must equal the pure reference agent's on the same recordings, in this process: same
status, same point, same instance ids.

Needs rclpy and the interface packages built into the running venv (scripts/build_interfaces.sh)
and the label encoder's MiniLM package.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import rclpy
    from ovman_ros.qos import LATCHED
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from visualization_msgs.msg import Marker, MarkerArray

    from ovman_interfaces.msg import ChangeSet, InstanceChange
    from ovman_interfaces.msg import InstanceMap as InstanceMapMsg
    from ovman_interfaces.srv import LoadVisit, LoadVisits, MapVisit, PlayTour, Query
    from ovman_mapping.map_messages import BOX_NAMESPACE, LABEL_NAMESPACE
    from ovman_ros import names
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh VENV BUILD_DIR"
    ) from error

from ovman_core.config import load_config
from ovman_core.frames import thor_to_ros_point
from ovman_core.relations import Relation
from ovman_eval.benchmark.map_cache import mapper_input
from ovman_eval.benchmark.request import segmented_by
from ovman_mapping.fusion import build_visits
from ovman_mapping.instances import InstanceMap
from ovman_query.agent import ReferenceAgent, query_of
from ovman_query.arms import category_only, single_visit
from ovman_query.decisions import Prediction
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.recording import VisitInfo, VisitWriter, read_visit
from ovman_sim.tours import tour_observations
from ovman_sim.world import MoveObject, RemoveObject

from .conftest import ros_environment
from .processes import NodeProcess

pytestmark = pytest.mark.ros

# The nodes' plumbing and the agent on exact segments: the simulator's (the learned segmenter's
# graph is tests/ros/test_mapping_node_plain.py and tests/ros/test_benchmark_graph.py).
CONFIG = segmented_by(load_config(), "simulator")
SCENE = "embedded-11"  # two rooms, 30 objects: a full coverage tour is ~55 frames
MOVED_ID = "Vase_1"  # moved to its valid placement farthest from where it stood in visit 1
REMOVED_ID = "Chair_1"


def moved_to() -> tuple[float, float, float]:
    """The valid placement of MOVED_ID in SCENE farthest from its visit-1 position (floor distance)."""
    world = EmbeddedWorld(CONFIG.sim_node)
    world.reset(SCENE)
    here = world.objects()[MOVED_ID].position
    far = max(world.candidate_placements(MOVED_ID), key=lambda c: (math.hypot(c[0] - here[0], c[2] - here[2]), c))
    world.close()
    return far


MOVED_TO = moved_to()
# Node start-up loads MiniLM (~10 s alone, more with three processes on two cores) and discovery
# has multi-second tails (notes/ros2-from-pypi.md): be generous.
START_TIMEOUT_S = 90.0
CALL_TIMEOUT_S = 60.0
ASK_ATTEMPTS = 6


# ---- the recorded episode and the in-process reference ----------------------------------------


@dataclasses.dataclass(frozen=True)
class Episode:
    recordings: tuple[Path, Path]
    frames: tuple[int, int]
    agent: ReferenceAgent
    maps: tuple[InstanceMap, InstanceMap]


def record_episode(directory: Path) -> tuple[tuple[Path, Path], tuple[int, int]]:
    sim = CONFIG.sim_node
    world = EmbeddedWorld(sim)
    world.reset(SCENE)
    paths, counts = [], []
    for visit in (1, 2):
        if visit == 2:
            assert world.apply_change(MoveObject(MOVED_ID, MOVED_TO)).success
            assert world.apply_change(RemoveObject(REMOVED_ID)).success
        path = directory / f"visit{visit}"
        with VisitWriter(path, VisitInfo(SCENE, visit, sim.node.step_dt, CONFIG.frames)) as writer:
            for observation in tour_observations(world, sim.tour, sim.world):
                writer.write(observation, world.objects())
            counts.append(writer.frame_count)
        paths.append(path)
    world.close()
    return (paths[0], paths[1]), (counts[0], counts[1])


# ---- processes and the probe ------------------------------------------------------------------


def node_process(name: str, module: str, parameters: list[str], log_dir: Path) -> NodeProcess:
    """A node subprocess (``python -m module``) with its parameters and its log in ``log_dir``."""
    command = [sys.executable, "-m", module, "--ros-args"]
    for parameter in parameters:
        command += ["-p", parameter]
    return NodeProcess(command, log_dir / f"{name}.log", name)


class Probe:
    """A node in this process: service clients and latched subscriptions of the graph."""

    def __init__(self, context: Context, processes: list[NodeProcess]) -> None:
        self.processes = processes
        self.node = rclpy.create_node("mapping_query_probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.clients = {
            "load_visit": self.node.create_client(LoadVisit, names.SIM_LOAD_VISIT),
            "play_tour": self.node.create_client(PlayTour, names.SIM_PLAY_TOUR),
            "start_visit": self.node.create_client(MapVisit, names.MAPPING_START_VISIT),
            "finish_visit": self.node.create_client(MapVisit, names.MAPPING_FINISH_VISIT),
            "query": self.node.create_client(Query, names.QUERY),
        }
        self.latched: dict[str, Any] = {}

    def subscribe_latched(self, topic: str, kind: type) -> None:
        def keep(message: Any) -> None:
            self.latched[topic] = message

        self.node.create_subscription(kind, topic, keep, LATCHED)

    def diagnosis(self) -> str:
        return "\n".join(p.diagnosis() for p in self.processes)

    def spin_until(self, condition: Callable[[], Any], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"{what} within {timeout} s; {self.diagnosis()}"
            for process in self.processes:
                assert process.process.poll() is None, f"{what}: {process.diagnosis()}"
            self.executor.spin_once(timeout_sec=0.1)

    def call(self, name: str, request: Any) -> Any:
        future = self.clients[name].call_async(request)
        self.spin_until(future.done, f"{name} answered", CALL_TIMEOUT_S)
        return future.result()

    def query(self, **fields: Any) -> Query.Response:
        return self.call("query", Query.Request(**fields))

    def query_until(self, accept: Callable[[Query.Response], bool], what: str) -> Query.Response:
        """Ask (Vase, moved) until ``accept`` holds for the answer; returns that answer."""
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while not accept(response := self.query(category="Vase", relation="moved")):
            assert time.monotonic() < deadline, f"query_node holding {what}: {response.explanation}"
            self.executor.spin_once(timeout_sec=0.05)  # paces the polling; the condition is the answer itself
        return response

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown()
        self.node.destroy_node()


@dataclasses.dataclass
class Graph:
    probe: Probe
    episode: Episode
    before_maps: Query.Response
    after_visit1: Query.Response
    finished: tuple[MapVisit.Response, MapVisit.Response]


@pytest.fixture(scope="module", params=["topics", "bundle"])
def graph(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graph]:
    """The three nodes with the recorded episode mapped; queries taken before and between visits.
    The frames travel on the six standard camera topics, or as one CameraBundle each (the param:
    sim_node's node.camera_output and mapping_node's node.camera_input)."""
    camera = request.param
    directory = tmp_path_factory.mktemp("mapping_query")
    log_dir = directory / "ros_log"
    log_dir.mkdir()
    with pytest.MonkeyPatch.context() as env:
        for name, value in ros_environment(log_dir).items():
            env.setenv(name, value)
        env.setenv("HF_HUB_OFFLINE", "1")
        # Three processes load torch on a small machine: one math thread each keeps them from thrashing
        # (multi-threaded BLAS spin-waits make small matrix products ~100x slower under load).
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.setenv(name, "1")
        env.delenv("ROS_STATIC_PEERS", raising=False)
        processes = [
            # Unpaced playback: sim_node publishes as fast as its acknowledgement window lets it.
            node_process(
                "sim_node",
                "ovman_sim.sim_node",
                ["node.play_period_s:=0.0", "node.qos_depth:=4", f"node.camera_output:={camera}"],
                directory,
            ),
            # A history of one bundle that keeps every bundle until fused: nothing of a tour is lost
            # although it arrives faster than it is fused (acknowledged on arrival, not on fusion).
            node_process(
                "mapping_node",
                "ovman_mapping.mapping_node",
                [
                    "node.qos_depth:=1",
                    "node.qos_keep_all:=true",
                    "node.frame_policy:=keep_all",
                    f"node.camera_input:={camera}",
                    "segmenter.kind:=simulator",
                ],
                directory,
            ),
            node_process("query_node", "ovman_query.query_node", [], directory),
        ]
        context = Context()
        rclpy.init(context=context)
        probe = None
        try:
            # While the nodes start: the recordings, and the reference agent's maps of them.
            recordings, frames = record_episode(directory)
            agent = ReferenceAgent(CONFIG)
            maps = build_visits(
                *((mapper_input(f, blind=False) for f in read_visit(recordings[v])) for v in (0, 1)),
                CONFIG.mapping_node,
                agent.encoder,
            )
            episode = Episode(recordings, frames, agent, maps)  # type: ignore[arg-type]

            probe = Probe(context, processes)
            probe.spin_until(
                lambda: all(c.service_is_ready() for c in probe.clients.values()), "every service", START_TIMEOUT_S
            )
            before_maps = probe.query(category="Vase", relation="moved")
            finished = []
            for visit, (recording, count) in enumerate(zip(recordings, frames, strict=True), start=1):
                started = probe.call("start_visit", MapVisit.Request(visit=visit))
                assert started.success, started.message
                loaded = probe.call("load_visit", LoadVisit.Request(recording=str(recording)))
                assert loaded.success and loaded.frame_count == count, loaded.message
                played = probe.call("play_tour", PlayTour.Request())
                assert played.success and played.frames == count, played.message
                done = probe.call("finish_visit", MapVisit.Request(visit=visit, expected_frames=count))
                assert done.success, f"{done.message}\n{probe.diagnosis()}"
                finished.append(done)
                # The map reaches query_node shortly after finish_visit returns: ask until it holds it.
                if visit == 1:
                    after_visit1 = probe.query_until(lambda r: "visit-2 map" in r.explanation, "the visit-1 map")
                else:
                    probe.query_until(lambda r: r.status != Query.Response.NO_MAP, "the visit-2 map")
            yield Graph(probe, episode, before_maps, after_visit1, (finished[0], finished[1]))
        finally:
            if probe is not None:
                probe.close()
            for process in processes:
                process.stop()
            context.try_shutdown()


# ---- helpers ----------------------------------------------------------------------------------


Outcome = tuple[int, tuple[float, float, float] | None, int, int]
"""(status, goal point in map, visit-1 id, visit-2 id) of a query."""


def expected_response(episode: Episode, prediction: Prediction) -> Outcome:
    """(status, goal point in map, visit-1 id, visit-2 id) the service must return for ``prediction``."""
    map1, map2 = episode.maps
    index1 = {i.uid: n for n, i in enumerate(map1)}
    index2 = {i.uid: n for n, i in enumerate(map2)}
    id1 = next((index1[u] for u in prediction.instance_ids if u in index1), -1)
    id2 = next((index2[u] for u in prediction.instance_ids if u in index2), -1)
    if prediction.abstained:
        return Query.Response.ABSTAINED, None, id1, id2
    x, z = prediction.point
    return Query.Response.ANSWERED, thor_to_ros_point((x, 0.0, z)), id1, id2


def observed_response(response: Query.Response) -> Outcome:
    goal = response.goal.point
    point = (goal.x, goal.y, goal.z) if response.answered else None
    return response.status, point, response.instance_visit1, response.instance_visit2


def latched(probe: Probe, topic: str, kind: type) -> Any:
    probe.subscribe_latched(topic, kind)
    probe.spin_until(lambda: topic in probe.latched, f"latched {topic}", CALL_TIMEOUT_S)
    return probe.latched[topic]


# ---- tests ------------------------------------------------------------------------------------


def test_queries_before_the_maps_needed_have_arrived_are_no_map(graph: Graph):
    assert graph.before_maps.status == Query.Response.NO_MAP and not graph.before_maps.answered
    assert "visit-1 map" in graph.before_maps.explanation
    assert graph.after_visit1.status == Query.Response.NO_MAP
    assert "visit-2 map" in graph.after_visit1.explanation
    assert (graph.after_visit1.relation, graph.after_visit1.noun_phrase) == ("moved", "vase")


def test_finish_visit_fuses_every_played_frame_into_a_map_like_the_in_process_one(graph: Graph):
    for visit, done in enumerate(graph.finished, start=1):
        assert done.frames == graph.episode.frames[visit - 1]
        assert done.instances == len(graph.episode.maps[visit - 1]) > 0
        message = latched(graph.probe, names.VISIT_MAP.format(visit=visit), InstanceMapMsg)
        reference = graph.episode.maps[visit - 1]
        assert message.visit == visit and message.header.frame_id == CONFIG.frames.map
        assert message.encoder == reference.encoder
        assert [i.id for i in message.instances] == list(range(len(reference)))
        for item, instance in zip(message.instances, reference, strict=True):
            assert item.label == instance.label
            assert (item.centroid.x, item.centroid.y, item.centroid.z) == thor_to_ros_point(instance.position)
            assert item.num_observations == len(instance.sightings) and item.moving == instance.moving
        # The visit-2 map was made with the visit-1 map at hand: it says which places changed.
        evidence = reference.prior
        assert message.cross_visit == (visit == 2) == (evidence is not None)
        if evidence is not None:
            assert evidence.gone and evidence.new, "the episode's vase moved: its two places were seen"
            assert {f"v1:{i}" for i in message.gone_ids} == evidence.gone
            assert {f"v2:{i}" for i in message.new_ids} == evidence.new


def test_map_markers_arrive_latched_with_deleteall_first_and_stable_ids(graph: Graph):
    for visit in (1, 2):
        markers = latched(graph.probe, names.VISIT_MARKERS.format(visit=visit), MarkerArray).markers
        count = len(graph.episode.maps[visit - 1])
        assert markers[0].action == Marker.DELETEALL
        boxes = [m for m in markers[1:] if m.ns == BOX_NAMESPACE.format(visit=visit)]
        labels = [m for m in markers[1:] if m.ns == LABEL_NAMESPACE.format(visit=visit)]
        assert len(markers) == 1 + 2 * count
        assert [m.id for m in boxes] == [m.id for m in labels] == list(range(count))
        assert all(m.type == Marker.CUBE and m.scale.x > 0.0 for m in boxes)
        assert all(m.type == Marker.TEXT_VIEW_FACING and m.text for m in labels)


CATEGORY_QUERIES = [("Vase", relation) for relation in Relation] + [
    ("Chair", Relation.REMOVED),
    ("Chair", Relation.STABLE),
]


@pytest.mark.parametrize(("category", "relation"), CATEGORY_QUERIES, ids=lambda v: getattr(v, "value", v))
def test_service_answers_equal_the_in_process_agent(graph: Graph, category: str, relation: Relation):
    agent, (map1, map2) = graph.episode.agent, graph.episode.maps
    expected = agent.answer(map1, map2, query_of(category.lower(), relation, category))
    response = graph.probe.query(category=category, relation=relation.value)
    assert observed_response(response) == expected_response(graph.episode, expected), response.explanation
    assert response.answered == (not expected.abstained)
    assert (response.relation, response.noun_phrase) == (relation.value, category.lower())


def test_the_moved_vase_is_answered_at_its_new_place(graph: Graph):
    response = graph.probe.query(category="Vase", relation="moved")
    assert response.status == Query.Response.ANSWERED and response.goal.header.frame_id == CONFIG.frames.map
    x, y, _ = thor_to_ros_point(MOVED_TO)
    assert math.hypot(response.goal.point.x - x, response.goal.point.y - y) < CONFIG.task.static_gate_radius


def test_free_text_and_other_arms_equal_the_in_process_agent(graph: Graph):
    agent, (map1, map2) = graph.episode.agent, graph.episode.maps
    text = "go to where the vase used to be"
    cases = [
        ({"text": text}, agent.answer(map1, map2, text)),
        ({"text": "find the chair that is gone"}, agent.answer(map1, map2, "find the chair that is gone")),
    ]
    query = query_of("vase", Relation.MOVED, "Vase")
    cases += [
        ({"category": "Vase", "relation": "moved", "arm": "category_only"}, category_only(agent, map2, query)),
        (
            {"category": "Vase", "relation": "moved", "arm": "single_visit"},
            single_visit(agent, map2, query, CONFIG.query_node.seed),
        ),
    ]
    for fields, expected in cases:
        response = graph.probe.query(**fields)
        assert observed_response(response) == expected_response(graph.episode, expected), (fields, response.explanation)


def test_unparseable_text_is_parse_failed_and_bad_fields_are_invalid(graph: Graph):
    failed = graph.probe.query(text="flibber the jabberwock")
    assert failed.status == Query.Response.PARSE_FAILED and not failed.answered and failed.explanation
    for fields in (
        {"category": "Vase", "relation": "teleported"},
        {"category": "Vase", "relation": "moved", "arm": "psychic"},
        {"text": "where was the vase", "category": "Vase", "relation": "moved"},
        {"category": "Vase"},
        {"category": "Vase", "relation": "moved", "arm": "given_answer"},
        {"category": "Vase", "relation": "moved", "arm": "oracle_grounding"},
        {"category": "Vase", "relation": "moved", "exclude_ids": [10_000]},
    ):
        response = graph.probe.query(**fields)
        assert response.status == Query.Response.INVALID_REQUEST and not response.answered, fields


def test_excluding_the_answer_makes_the_agent_look_elsewhere(graph: Graph):
    first = graph.probe.query(category="Vase", relation="moved")
    again = graph.probe.query(category="Vase", relation="moved", exclude_ids=[first.instance_visit2])
    assert first.answered and again.instance_visit2 != first.instance_visit2


def test_change_set_and_answer_marker_are_latched(graph: Graph):
    agent, (map1, map2) = graph.episode.agent, graph.episode.maps
    association = agent.associate(map1, map2)
    changes = latched(graph.probe, names.CHANGES, ChangeSet).changes
    index1 = {i.uid: n for n, i in enumerate(map1)}
    index2 = {i.uid: n for n, i in enumerate(map2)}
    pairs = {(c.id_visit1, c.id_visit2) for c in changes if c.id_visit1 >= 0 and c.id_visit2 >= 0}
    assert pairs == {(index1[p.uid1], index2[p.uid2]) for p in association.pairs}
    assert sorted(c.id_visit1 for c in changes if c.kind == InstanceChange.REMOVED) == sorted(
        index1[u] for u in association.removed
    )
    moved = agent.answer(map1, map2, query_of("vase", Relation.MOVED, "Vase"))
    kinds = {(c.id_visit1, c.id_visit2): c.kind for c in changes}
    assert kinds[(index1[moved.instance_ids[0]], index2[moved.instance_ids[1]])] == InstanceChange.MOVED

    answer = graph.probe.query(category="Vase", relation="moved")
    markers = latched(graph.probe, names.ANSWER_MARKERS, MarkerArray).markers
    assert markers[0].action == Marker.DELETEALL
    disc = markers[1]
    assert (disc.pose.position.x, disc.pose.position.y) == (answer.goal.point.x, answer.goal.point.y)
    assert disc.scale.x == pytest.approx(2.0 * CONFIG.task.static_gate_radius)


def test_finish_visit_times_out_while_bundles_keep_being_served_and_the_visit_stays_open(graph: Graph):
    """finish_visit waits without holding mapping_node's only thread: its timeout fires, and the
    node answers other requests meanwhile and after (runs last: it leaves visit 1 open)."""
    probe = graph.probe
    assert probe.call("start_visit", MapVisit.Request(visit=1)).success
    pending = probe.clients["finish_visit"].call_async(MapVisit.Request(visit=1, expected_frames=5, timeout_s=1.0))
    wrong = probe.call("start_visit", MapVisit.Request(visit=3))  # answered while the finish waits
    assert not wrong.success and not pending.done()
    # A client opening the next visit while the finish waits gets a refusal; the node lives on.
    racing = probe.call("start_visit", MapVisit.Request(visit=2))
    assert not racing.success and "finish_visit of visit 1 is waiting for 5 bundles" in racing.message
    probe.spin_until(pending.done, "finish_visit timed out", CALL_TIMEOUT_S)
    timed_out = pending.result()
    assert not timed_out.success and timed_out.frames == 0
    assert "visit 1 stays open: timed out after 1.0 s waiting for 5 bundles" in timed_out.message
    other = probe.call("finish_visit", MapVisit.Request(visit=2, expected_frames=1))
    assert not other.success and "cannot finish visit 2: visit 1 is open" in other.message


def test_an_unknown_camera_input_is_refused_naming_the_key_before_a_model_loads(rclpy_context):
    from ovman_core.config import ConfigError
    from ovman_mapping.mapping_node import MappingNode

    mapping = CONFIG.mapping_node
    config = dataclasses.replace(
        CONFIG, mapping_node=dataclasses.replace(mapping, node=dataclasses.replace(mapping.node, camera_input="both"))
    )
    with pytest.raises(ConfigError, match=r"mapping_node node.camera_input must be one of topics, bundle, got 'both'"):
        MappingNode(config, context=rclpy_context)


def test_a_missing_segmenter_model_stops_mapping_node_at_start_up_naming_the_file_and_the_key(rclpy_context, tmp_path):
    from ovman_core.config import ConfigError
    from ovman_mapping.mapping_node import MappingNode

    mapping = CONFIG.mapping_node
    segmenter = dataclasses.replace(mapping.segmenter, kind="learned", model=str(tmp_path / "no-model"))
    config = dataclasses.replace(CONFIG, mapping_node=dataclasses.replace(mapping, segmenter=segmenter))
    with pytest.raises(ConfigError, match=r"no-model/segmenter\.json \(config mapping_node\.segmenter\.model\)"):
        MappingNode(config, context=rclpy_context)


def test_mapping_node_starts_with_the_packaged_learned_segmenter(rclpy_context):
    from ovman_mapping.mapping_node import MappingNode

    mapping = CONFIG.mapping_node
    segmenter = dataclasses.replace(mapping.segmenter, kind="learned", model="")
    node = MappingNode(
        dataclasses.replace(CONFIG, mapping_node=dataclasses.replace(mapping, segmenter=segmenter)),
        context=rclpy_context,
    )
    try:
        assert node.mapper.segmenter.kind == "learned" and not node.mapper.segmenter.reads_simulator_segments
    finally:
        node.destroy_node()


def test_a_query_node_started_later_answers_from_the_stored_visits_as_the_running_one_does(
    graph: Graph, tmp_path: Path
):
    """mapping_node stored both visits (the graph's XDG_DATA_HOME); a second query_node, in a
    namespace of its own so that no map reaches it on a topic, loads the latest pair at start-up and
    answers every query as the running query_node does, explanation included."""
    probe = graph.probe
    first, second = graph.finished
    assert first.map_id.endswith("-v1") and second.map_id.endswith("-v2")
    assert f"stored as {second.map_id}" in second.message
    later = NodeProcess(
        [sys.executable, "-m", "ovman_query.query_node", "--ros-args", "-r", "__ns:=/later"],
        tmp_path / "later_query_node.log",
        "query_node",
    )
    probe.processes.append(later)
    query = probe.node.create_client(Query, "/later/" + names.QUERY)
    load = probe.node.create_client(LoadVisits, "/later/" + names.QUERY_LOAD_VISITS)
    try:
        probe.spin_until(lambda: query.service_is_ready() and load.service_is_ready(), "/later", START_TIMEOUT_S)

        def ask(client: Any, request: Any) -> Any:
            # A service that answers before it has matched the new client's response reader drops the
            # response ("failed to send response (timeout)"): these requests are idempotent, ask again.
            for _ in range(ASK_ATTEMPTS):
                future = client.call_async(request)
                deadline = time.monotonic() + CALL_TIMEOUT_S / ASK_ATTEMPTS
                while not future.done() and time.monotonic() < deadline:
                    assert later.process.poll() is None, later.diagnosis()
                    probe.executor.spin_once(timeout_sec=0.1)
                if future.done():
                    return future.result()
                client.remove_pending_request(future)
            raise AssertionError(f"/later did not answer within {CALL_TIMEOUT_S} s; {probe.diagnosis()}")

        requests = [Query.Request(category=c, relation=r.value) for c, r in CATEGORY_QUERIES]
        requests += [Query.Request(text=t) for t in ("the vase that was moved", "where was the chair")]
        for request in requests:
            running, restarted = probe.call("query", request), ask(query, request)
            assert observed_response(restarted) == observed_response(running), restarted.explanation
            assert (restarted.relation, restarted.explanation) == (running.relation, running.explanation)
        loaded = ask(load, LoadVisits.Request(visit2=""))
        assert loaded.success and (loaded.visit1, loaded.visit2) == (first.map_id, second.map_id), loaded.message
        missing = ask(load, LoadVisits.Request(visit2="20200101T000000000Z-v2"))
        assert not missing.success and "20200101T000000000Z-v2.ovmap: no such stored map" in missing.message
        assert ask(query, requests[0]).status != Query.Response.NO_MAP  # the loaded pair stays
    finally:
        probe.node.destroy_client(query)
        probe.node.destroy_client(load)
        probe.processes.remove(later)
        later.stop()


def test_a_change_set_pairs_a_visit_2_map_with_the_visit_1_map_it_follows_not_the_newer_stamp(graph: Graph):
    """mapping_node names its maps and says which visit-1 map a visit-2 map follows; query_node pairs
    by that, so equal stamps (a simulated clock standing still) or a next visit-1 map older by stamp
    change nothing. The original maps are republished at the end."""
    probe = graph.probe
    topics = {visit: names.VISIT_MAP.format(visit=visit) for visit in (1, 2)}
    first, second = (latched(probe, topics[v], InstanceMapMsg) for v in (1, 2))
    assert first.map_id and second.map_id not in ("", first.map_id) and second.follows == first.map_id
    sets: list[ChangeSet] = []
    probe.node.create_subscription(ChangeSet, names.CHANGES, sets.append, LATCHED)
    probe.spin_until(lambda: sets, "the latched change set", CALL_TIMEOUT_S)
    original = sets[-1].changes
    publishers = {v: probe.node.create_publisher(InstanceMapMsg, topics[v], LATCHED) for v in (1, 2)}
    try:
        # The next group's visit-1 map, older by stamp than the held visit-2 map (which a pairing by
        # stamps would take as its second visit), then its own visit 2 (the same objects) at the same stamp.
        nxt = copy.deepcopy(first)
        nxt.map_id, nxt.header.stamp.sec = "next-1", second.header.stamp.sec - 1
        again = copy.deepcopy(first)
        again.visit, again.map_id, again.follows, again.header.stamp = 2, "next-2", "next-1", nxt.header.stamp
        count = len(sets)
        publishers[1].publish(nxt)
        publishers[2].publish(again)
        probe.spin_until(lambda: len(sets) > count, "the change set of the next pair", CALL_TIMEOUT_S)
        assert sets[-1].changes != original
        assert all(c.kind == InstanceChange.STAYED for c in sets[-1].changes)  # visit 2 = visit 1: nothing changed
        count = len(sets)
        publishers[1].publish(first)
        publishers[2].publish(second)
        probe.spin_until(
            lambda: len(sets) > count and sets[-1].changes == original, "the restored pair", CALL_TIMEOUT_S
        )
    finally:
        for publisher in publishers.values():
            probe.node.destroy_publisher(publisher)


def test_a_refused_map_replaces_the_held_one_and_queries_say_why(graph: Graph):
    """A visit-2 map with a NaN centroid: query_node refuses it and no longer pairs the older
    visit-2 map with visit 1 (runs last of the graph's tests: it leaves query_node without a map)."""
    probe = graph.probe
    message = probe.latched.get(names.VISIT_MAP.format(visit=2)) or latched(
        probe, names.VISIT_MAP.format(visit=2), InstanceMapMsg
    )
    message.instances[0].centroid.x = float("nan")
    message.header.stamp.sec += 1
    publisher = probe.node.create_publisher(InstanceMapMsg, names.VISIT_MAP.format(visit=2), LATCHED)
    publisher.publish(message)
    response = probe.query_until(lambda r: r.status == Query.Response.NO_MAP, "the refusal of the new visit-2 map")
    assert not response.answered and "refused" in response.explanation and "position holds nan" in response.explanation
    assert probe.query(category="Vase", relation="moved", arm="category_only").status == Query.Response.NO_MAP
    probe.node.destroy_publisher(publisher)
