"""ThorWorld against the real ai2thor 5.0.0 Controller, driving a fake Unity player over its FIFOs.

The fake player (fake_thor_player.py) answers the Controller's actions with metadata and ray-cast
images of a small room and logs every action it receives, so these tests pin both what the
adapter makes of AI2-THOR's events and which actions, in which order, it sends.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import os
import shlex
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ovman_core.actions import Action
from ovman_core.config import SimConfig, load_config
from ovman_core.frames import CAMERA_LINK_TO_OPTICAL, ros_to_thor_points, thor_to_ros_point, thor_yaw_to_ros
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, WorldState
from ovman_sim import thor
from ovman_sim.conditions import degrade_low_light
from ovman_sim.thor import (
    ThorBuildMissingError,
    ThorStartTimeoutError,
    ThorUnavailableError,
    ThorWorld,
    check_thor_config,
    controller_arguments,
    planar_depth,
    segments_from_instance_frame,
)
from ovman_sim.world import AddObject, Condition, MoveObject, RemoveObject, World

PLAYER_SCRIPT = Path(__file__).with_name("fake_thor_player.py")
_spec = importlib.util.spec_from_file_location("fake_thor_player", PLAYER_SCRIPT)
assert _spec is not None and _spec.loader is not None
fake = importlib.util.module_from_spec(_spec)
sys.modules.setdefault(_spec.name, fake)  # dataclasses look their module up while the class is made
_spec.loader.exec_module(fake)

SCENE = "FloorPlan1"
SOFA = fake.object_id_for("Sofa", (-1.45, 0.0, 0.75))
CHAIR = fake.object_id_for("Chair", (0.5, 0.0, -1.4))
MUG = fake.object_id_for("Mug", (1.5, 0.9, -0.6))
APPLE = fake.object_id_for("Apple", (1.5, 0.9, 0.6))
FLOOR_VASE = fake.object_id_for("Vase", (-0.75, 0.0, -1.25))
COUNTER = fake.object_id_for("CounterTop", (1.55, 0.0, 0.0))
BOX = fake.object_id_for("Box", (0.75, 0.0, 1.5))
BOOK = fake.object_id_for("Book", (-1.4, 0.8, 0.4))
SETTLE_FRAMES = 3


class FakePlayer:
    """An executable wrapper that starts the fake player with ``flags``, and its action log."""

    def __init__(self, directory: Path, *flags: str, name: str = "player.sh") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / "actions.jsonl"
        self.pid_file = directory / "player.pid"
        self.script = directory / name
        command = [sys.executable, str(PLAYER_SCRIPT), "--log", str(self.log), "--pid-file", str(self.pid_file)]
        command += ["--settle-frames", str(SETTLE_FRAMES), *flags]
        self.script.write_text("#!/bin/sh\nexec " + " ".join(map(shlex.quote, command)) + ' "$@"\n')
        self.script.chmod(0o755)

    def actions(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def mark(self) -> int:
        return len(self.actions())

    def since(self, mark: int) -> list[dict[str, Any]]:
        return self.actions()[mark:]

    def names_since(self, mark: int) -> list[str]:
        return [action["action"] for action in self.since(mark)]


def sim_config(**ai2thor: Any) -> SimConfig:
    sim = load_config().sim_node
    return dataclasses.replace(sim, ai2thor=dataclasses.replace(sim.ai2thor, **ai2thor))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private $HOME: ai2thor writes ~/.ai2thor there and prunes its releases directory."""
    path = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def player(home: Path, tmp_path_factory: pytest.TempPathFactory) -> FakePlayer:
    return FakePlayer(tmp_path_factory.mktemp("player"))


@pytest.fixture(scope="module")
def started(player: FakePlayer) -> Iterator[ThorWorld]:
    world = ThorWorld(sim_config(local_executable_path=str(player.script), start_timeout_s=60.0))
    yield world
    world.close()


@pytest.fixture
def world(started: ThorWorld) -> ThorWorld:
    started.set_condition(Condition.BASELINE)
    started.stop_mover()
    started.reset(SCENE)
    return started


def world_points(obs: Observation, mask: np.ndarray) -> np.ndarray:
    """AI2-THOR world points of the masked pixels, through ovman_core.frames (REP 103 camera chain)."""
    v, u = np.nonzero(mask & np.isfinite(obs.depth))
    optical = obs.intrinsics.back_project(u, v, obs.depth[v, u])
    link = Rotation.from_quat(CAMERA_LINK_TO_OPTICAL).apply(optical)
    pitch = math.radians(obs.pose.horizon_deg)
    body = Rotation.from_euler("ZY", [thor_yaw_to_ros(obs.pose.yaw_deg), pitch]).apply(link)
    return ros_to_thor_points(body + np.array(thor_to_ros_point(obs.camera_position)))


# ------------------------------------------------------------------ installation and start-up


def test_missing_ai2thor_points_to_the_thor_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ai2thor.controller", None)
    with pytest.raises(ThorUnavailableError, match=r"pip install -e \.\[thor\]"):
        ThorWorld(sim_config())


def test_missing_build_is_reported_with_provisioning_steps_before_any_controller_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ai2thor.controller

    def no_controller(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the build pre-check must fail before a Controller is constructed")

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(ai2thor.controller.Controller, "__init__", no_controller)
    sim = sim_config(local_executable_path="")
    with pytest.raises(ThorBuildMissingError) as caught:
        ThorWorld(sim)
    message = str(caught.value)
    build = f"thor-{sim.ai2thor.platform}-{sim.ai2thor.commit_id}"
    assert str(tmp_path / ".ai2thor" / "releases" / build / "metadata.json") in message
    assert "download_only=True" in message
    assert f"ai2-thor-public/builds/{build}.zip" in message
    assert "local_executable_path" in message


def test_release_dir_without_metadata_json_counts_as_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sim = sim_config(local_executable_path="")
    build = thor.release_dir(sim.ai2thor.commit_id, sim.ai2thor.platform, tmp_path)
    FakePlayer(build, name=build.name)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ThorBuildMissingError, match=r"metadata\.json"):
        ThorWorld(sim)


def test_local_executable_that_does_not_exist_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ThorBuildMissingError, match="local_executable_path"):
        ThorWorld(sim_config(local_executable_path=str(tmp_path / "nothing")))


def test_linux64_and_external_launches_require_an_x_display() -> None:
    with pytest.raises(ValueError, match="x_display"):
        check_thor_config(sim_config(platform="Linux64", x_display=""))
    with pytest.raises(ValueError, match="x_display"):
        check_thor_config(sim_config(local_executable_path="/opt/thor", x_display=""))
    with pytest.raises(ValueError, match="platform"):
        check_thor_config(sim_config(platform="CloudRender"))


def test_controller_arguments_pin_the_build_and_always_pass_the_x_display() -> None:
    import ai2thor.platform

    sim = sim_config(local_executable_path="")
    release = controller_arguments(sim, SCENE, ai2thor.platform.CloudRendering)
    assert release["commit_id"] == sim.ai2thor.commit_id
    assert release["platform"] is ai2thor.platform.CloudRendering
    assert "branch" not in release and "local_executable_path" not in release
    assert release["x_display"] == sim.ai2thor.x_display
    assert release["fieldOfView"] == sim.camera.vertical_fov_deg
    assert release["renderDepthImage"] and release["renderInstanceSegmentation"]
    external = controller_arguments(sim_config(local_executable_path="/opt/thor"), SCENE, None)
    assert external["local_executable_path"] == "/opt/thor"
    assert external["x_display"] == sim.ai2thor.x_display


def test_provisioned_release_dir_starts_through_the_controller_with_cloud_rendering(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ai2thor.platform

    sim = sim_config(local_executable_path="", platform="CloudRendering", start_timeout_s=60.0)
    build = thor.release_dir(sim.ai2thor.commit_id, sim.ai2thor.platform, tmp_path)
    player = FakePlayer(build, "--rgba", name=build.name)
    (build / "metadata.json").write_text(json.dumps({"server_types": ["FIFO", "WSGI"]}))
    monkeypatch.setenv("HOME", str(tmp_path))
    # No Vulkan loader on CI machines: CloudRendering's only Python-side check is for libvulkan.
    monkeypatch.setattr(ai2thor.platform.CloudRendering, "validate", classmethod(lambda cls, request: []))
    world = ThorWorld(sim)
    try:
        world.reset(SCENE)
        obs = world.observe()
    finally:
        world.close()
    assert obs.rgb.shape == (sim.camera.height, sim.camera.width, 3)
    names = [action["action"] for action in player.actions()]
    assert "ChangeQuality" in names  # the Controller's CloudRendering path ran
    assert names.index("Reset") < names.index("Initialize")


def test_watchdog_kills_a_player_that_never_opens_its_fifo(home: Path, tmp_path: Path) -> None:
    player = FakePlayer(tmp_path / "hung", "--hang")
    world = ThorWorld(sim_config(local_executable_path=str(player.script), start_timeout_s=3.0))
    with pytest.raises(ThorStartTimeoutError, match="start_timeout_s") as caught:
        world.reset(SCENE)
    assert caught.value.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(caught.value.pid, 0)
    assert not any(t.name == thor.START_THREAD_NAME for t in threading.enumerate())
    assert player.actions() == []


# ------------------------------------------------------------------ observations


def test_thor_world_satisfies_the_world_protocol(world: ThorWorld) -> None:
    assert isinstance(world, World)


def test_observation_has_the_documented_shapes_and_dtypes(world: ThorWorld) -> None:
    obs = world.observe()
    height, width = world.config.camera.height, world.config.camera.width
    assert obs.rgb.shape == (height, width, 3) and obs.rgb.dtype == np.uint8
    assert obs.depth.shape == (height, width) and obs.depth.dtype == np.float32
    assert obs.segments.shape == (height, width) and obs.segments.dtype == np.int32
    assert obs.step == 0
    assert obs.camera_position == pytest.approx((0.0, fake.AGENT_Y + fake.CAMERA_OFFSET, 0.0))


def test_observe_pose_is_the_observation_without_its_images(world: ThorWorld) -> None:
    world.step(Action.ROTATE_RIGHT)
    bare, full = world.observe_pose(), world.observe()
    assert bare.rgb.size == bare.depth.size == bare.segments.size == 0 and not bare.segment_instances
    kept = ("pose", "camera_position", "intrinsics", "step")
    assert [getattr(bare, k) for k in kept] == [getattr(full, k) for k in kept]


def test_intrinsics_come_from_the_vertical_fov(world: ThorWorld) -> None:
    intrinsics = world.observe().intrinsics
    # 320 x 240 at a vertical FOV of 90 deg: f = 120 px, principal point at the pixel-centre convention.
    assert (intrinsics.fx, intrinsics.fy) == pytest.approx((120.0, 120.0))
    assert (intrinsics.cx, intrinsics.cy) == pytest.approx((159.5, 119.5))


def test_depth_is_planar_metres_and_nan_where_nothing_is_in_range(world: ThorWorld) -> None:
    obs = world.observe()
    # Facing the wall at z = 2 from (0, 0): planar depth is 2.0 across the row (a ray length would not be).
    np.testing.assert_allclose(obs.depth[119, 40:280], 2.0, atol=1e-4)
    # The top row looks over the walls: the saturated value (far - near) is invalid, and no segment.
    assert np.isnan(obs.depth[0]).all()
    assert (obs.segments[0] == 0).all()


def test_segments_are_consecutive_per_frame_ids_labelled_with_object_types(world: ThorWorld) -> None:
    obs = world.observe()
    objects = world.objects()
    ids = sorted(set(np.unique(obs.segments).tolist()) - {0})
    assert ids == list(range(1, len(ids) + 1)) and len(ids) >= 3
    assert set(obs.segment_labels) == set(ids) == set(obs.segment_instances)
    for segment, instance in obs.segment_instances.items():
        assert obs.segment_labels[segment] == objects[instance].category
    # The floor (a structural type) and the walls (not sim objects) read 0.
    assert obs.segments[-1, 160] == 0 and np.isfinite(obs.depth[-1, 160])


@pytest.mark.parametrize("actions", [[], [Action.ROTATE_RIGHT, Action.LOOK_DOWN], [Action.ROTATE_LEFT]])
def test_segment_pixels_back_project_into_their_object_boxes(world: ThorWorld, actions: list[Action]) -> None:
    for action in actions:
        assert world.step(action).success
    obs = world.observe()
    objects = world.objects()
    assert obs.segment_instances
    for segment, instance in obs.segment_instances.items():
        points = world_points(obs, obs.segments == segment)
        box = objects[instance].box
        inside = np.all((points >= np.array(box.lo) - 1e-3) & (points <= np.array(box.hi) + 1e-3), axis=1)
        assert inside.all(), f"{instance}: {np.count_nonzero(~inside)} of {len(points)} pixels outside its box"


def test_rotate_right_gives_yaw_90_rotate_left_270_and_look_down_horizon_30(world: ThorWorld) -> None:
    world.step(Action.ROTATE_RIGHT)
    assert world.agent_pose().yaw_deg == pytest.approx(90.0)
    world.step(Action.LOOK_DOWN)
    assert world.agent_pose().horizon_deg == pytest.approx(30.0)
    world.step(Action.ROTATE_LEFT)
    world.step(Action.ROTATE_LEFT)
    pose = world.observe().pose
    assert (pose.yaw_deg, pose.horizon_deg) == pytest.approx((270.0, 30.0))


def test_move_ahead_moves_one_grid_cell_and_reports_a_blocked_move_as_collided(world: ThorWorld) -> None:
    assert world.step(Action.MOVE_AHEAD).success
    assert (world.agent_pose().x, world.agent_pose().z) == pytest.approx((0.0, 0.25))
    world.step(Action.ROTATE_RIGHT)  # face +x, towards the counter at x >= 1.2
    results = [world.step(Action.MOVE_AHEAD) for _ in range(5)]
    assert [r.success for r in results] == [True, True, True, True, False]
    assert results[-1].collided and not results[0].collided
    assert (world.agent_pose().x, world.agent_pose().z) == pytest.approx((1.0, 0.25))
    assert world.observe().step == 7


def test_stop_sends_done_and_does_not_advance_time(world: ThorWorld, player: FakePlayer) -> None:
    mark = player.mark()
    assert world.step(Action.STOP).success
    assert player.names_since(mark) == ["Done"]
    assert world.observe().step == 0


def test_look_beyond_the_configured_horizon_fails_without_reaching_unity(world: ThorWorld, player: FakePlayer) -> None:
    mark = player.mark()
    assert world.step(Action.LOOK_UP).success
    blocked = world.step(Action.LOOK_UP)
    assert not blocked.success and "horizon" in blocked.message
    assert player.names_since(mark) == ["LookUp"]
    assert world.agent_pose().horizon_deg == pytest.approx(-30.0)


# ------------------------------------------------------------------ objects and reachability


def test_objects_are_parsed_from_the_aabb_with_movable_from_pickupable_or_moveable(world: ThorWorld) -> None:
    objects = world.objects()
    expected = {o.object_id: o for o in fake.scene_objects() if o.object_type not in ("Floor",)}
    assert set(objects.objects) == set(expected)
    for instance_id, source in expected.items():
        obj = objects[instance_id]
        assert obj.category == source.object_type
        assert obj.position == pytest.approx(source.center)
        assert obj.box.size == pytest.approx(source.size)
        assert obj.movable == (source.pickupable or source.moveable)
    assert objects[MUG].position == pytest.approx((1.5, 0.95, -0.6))
    assert not objects[COUNTER].movable and objects[SOFA].movable and objects[MUG].movable


def test_reachable_positions_are_the_sorted_get_reachable_positions_cells(world: ThorWorld) -> None:
    cells = world.reachable_positions()
    assert cells == sorted(cells) and (0.0, 0.0) in cells
    sofa = world.objects()[SOFA].box
    assert not any(sofa.lo[0] <= x <= sofa.hi[0] and sofa.lo[2] <= z <= sofa.hi[2] for x, z in cells)


def test_teleport_places_the_agent_on_reachable_cells_only(world: ThorWorld, player: FakePlayer) -> None:
    assert world.teleport(AgentPose(-0.5, 0.25, 180.0, 30.0)).success
    assert world.agent_pose() == AgentPose(-0.5, 0.25, 180.0, 30.0)
    mark = player.mark()
    assert not world.teleport(AgentPose(-1.5, 0.75, 0.0, 0.0)).success  # under the sofa
    assert not world.teleport(AgentPose(0.1, 0.0, 0.0, 0.0)).success  # off the grid
    assert player.names_since(mark) == []


def test_candidate_placements_rest_on_floors_and_tops_without_overlap(world: ThorWorld) -> None:
    objects = world.objects()
    mug = objects[MUG]
    half = np.array(mug.box.size) / 2.0
    candidates = world.candidate_placements(MUG)
    heights = {round(c[1], 4) for c in candidates}
    assert round(half[1], 4) in heights  # on the floor
    assert round(0.9 + half[1], 4) in heights  # on the counter top
    for centre in candidates:
        for other in objects:
            if other.instance_id == MUG:
                continue
            lo, hi = np.array(other.box.lo), np.array(other.box.hi)
            assert not np.all((np.array(centre) - half < hi) & (np.array(centre) + half > lo)), (centre, other)
    assert world.candidate_placements(COUNTER) == []  # static
    template = world.new_instance("Mug", "Mug|template")
    assert template is not None and world.candidate_placements("Mug|template")
    with pytest.raises(ValueError, match="unknown instance"):
        world.candidate_placements("Mug|nowhere")


# ------------------------------------------------------------------ changes


def test_move_teleports_the_object_then_settles_requeries_reachability_and_passes(
    world: ThorWorld, player: FakePlayer
) -> None:
    assert (0.0, 1.0) in world.reachable_positions()
    target = (0.0, 0.4, 1.0)
    mark = player.mark()
    result = world.apply_change(MoveObject(SOFA, target))
    assert result.success and "settled after 3" in result.message
    actions = player.since(mark)
    assert [a["action"] for a in actions] == ["TeleportObject"] + ["Pass"] * SETTLE_FRAMES + [
        "GetReachablePositions",
        "Pass",
    ]
    teleport = actions[0]
    assert teleport["objectId"] == SOFA and teleport["forceKinematic"] is False
    assert teleport["position"] == pytest.approx({"x": 0.0, "y": 0.0, "z": 1.0})  # the pivot, not the centre
    assert world.objects()[SOFA].position == pytest.approx(target)
    assert (0.0, 1.0) not in world.reachable_positions()


def test_remove_disables_the_object_and_hides_it_from_objects_and_segments(
    world: ThorWorld, player: FakePlayer
) -> None:
    seen_before = set(world.observe().segment_instances.values())
    assert BOX in seen_before
    mark = player.mark()
    assert world.apply_change(RemoveObject(BOX)).success
    assert player.names_since(mark) == ["DisableObject"] + ["Pass"] * SETTLE_FRAMES + ["GetReachablePositions", "Pass"]
    assert BOX not in world.objects()
    assert BOX not in world.observe().segment_instances.values()
    assert not world.apply_change(RemoveObject(BOX)).success


def test_add_copies_a_template_object_with_set_object_poses(world: ThorWorld, player: FakePlayer) -> None:
    template = world.new_instance("Mug", "Mug|added")
    assert template is not None and template.category == "Mug"
    assert world.new_instance("Piano", "Piano|added") is None
    target = (0.0, template.box.size[1] / 2.0, 1.75)
    placed = dataclasses.replace(
        template,
        position=target,
        box=template.box.translated(tuple(t - c for t, c in zip(target, template.position, strict=True))),
    )
    movable_names = sorted(o.name for o in fake.scene_objects() if o.pickupable or o.moveable)
    mark = player.mark()
    assert world.apply_change(AddObject(placed)).success
    actions = player.since(mark)
    assert actions[0]["action"] == "SetObjectPoses"
    listed = [entry["objectName"] for entry in actions[0]["objectPoses"]]
    mug_name = next(o.name for o in fake.scene_objects() if o.object_id == MUG)
    assert sorted(listed) == sorted([*movable_names, mug_name])
    assert actions[0]["placeStationary"] is False
    added = world.objects()["Mug|added"]
    assert added.category == "Mug" and added.position == pytest.approx(target)
    assert "Mug|added" in world.observe().segment_instances.values()
    assert not world.apply_change(AddObject(placed)).success  # already present


def test_reset_with_objects_lists_every_kept_movable_and_disables_removed_static_objects(
    world: ThorWorld, player: FakePlayer
) -> None:
    template = world.new_instance("Vase", "Vase|extra")
    assert template is not None
    initial = world.objects()
    chair = initial[CHAIR]
    moved_chair = dataclasses.replace(chair, position=(chair.position[0] - 0.5, chair.position[1], chair.position[2]))
    extra_centre = (-0.25, template.box.size[1] / 2.0, 1.5)
    extra = dataclasses.replace(template, position=extra_centre)
    book = initial[BOOK]
    second_book_centre = (0.5, book.box.size[1] / 2.0, 0.75)
    second_book = dataclasses.replace(book, instance_id="Book|second", position=second_book_centre)  # no template
    kept = [o for o in initial if o.instance_id not in (APPLE, COUNTER, CHAIR)]
    visit = WorldState.of([*kept, moved_chair, extra, second_book])
    mark = player.mark()
    world.reset(SCENE, visit, AgentPose(0.0, -0.25, 90.0, 0.0))
    names = player.names_since(mark)
    start = names.index("SetObjectPoses")
    assert names[start:] == [
        "SetObjectPoses",
        "DisableObject",
        *["Pass"] * SETTLE_FRAMES,
        "GetReachablePositions",
        "Teleport",
        "Pass",
    ]
    set_poses = player.since(mark)[start]
    listed = [entry["objectName"] for entry in set_poses["objectPoses"]]
    apple_name = next(o.name for o in fake.scene_objects() if o.object_id == APPLE)
    assert apple_name not in listed
    assert player.since(mark)[start + 1]["objectId"] == COUNTER
    state = world.objects()
    assert set(state.objects) == set(visit.objects)
    assert state[CHAIR].position == pytest.approx(moved_chair.position)
    assert state["Vase|extra"].position == pytest.approx(extra_centre)
    assert state["Book|second"].position == pytest.approx(second_book_centre)
    listed_books = [name for name in listed if name.startswith("Book")]
    assert len(listed_books) == 2  # the kept book and its copy
    assert world.agent_pose() == AgentPose(0.0, -0.25, 90.0, 0.0)


def test_reset_refuses_an_added_object_with_nothing_of_its_category_to_copy(world: ThorWorld) -> None:
    initial = world.objects()
    apple = initial[APPLE]
    second = dataclasses.replace(apple, instance_id="Apple|second", position=(0.5, 0.04, 0.75))
    visit = WorldState.of([o for o in initial if o.instance_id != APPLE] + [second])
    with pytest.raises(ValueError, match="copy"):
        world.reset(SCENE, visit)


def test_reset_refuses_to_move_a_static_object(world: ThorWorld) -> None:
    objects = world.objects()
    counter = objects[COUNTER]
    moved = dataclasses.replace(counter, position=(counter.position[0], counter.position[1], 0.5))
    visit = WorldState.of([o for o in objects if o.instance_id != COUNTER] + [moved])
    with pytest.raises(ValueError, match="static"):
        world.reset(SCENE, visit)


def test_settle_loop_gives_up_after_settle_max_steps(home: Path, tmp_path: Path) -> None:
    player = FakePlayer(tmp_path / "slow")
    world = ThorWorld(sim_config(local_executable_path=str(player.script), settle_max_steps=2, start_timeout_s=60.0))
    try:
        world.reset(SCENE)
        mark = player.mark()
        result = world.apply_change(MoveObject(CHAIR, (0.0, 0.45, -1.0)))
    finally:
        world.close()
    assert result.success and "not at rest after 2" in result.message
    assert player.names_since(mark) == ["TeleportObject", "Pass", "Pass", "GetReachablePositions", "Pass"]


# ------------------------------------------------------------------ the mover


def mover_track(world: ThorWorld, seed: int, ticks: int) -> list[tuple[float, float]]:
    world.reset(SCENE)
    world.start_mover(FLOOR_VASE, seed)
    track = []
    for _ in range(ticks):
        world.step(Action.ROTATE_LEFT)
        position = world.objects()[FLOOR_VASE].position
        track.append((round(position[0], 4), round(position[2], 4)))
    world.stop_mover()
    return track


def test_mover_sets_the_object_down_then_hops_kinematically_along_reachable_cells(
    world: ThorWorld, player: FakePlayer
) -> None:
    steps_per_move = world.config.mover.steps_per_move
    # The cells the agent reaches once the vase is out of the way (the player's own search).
    room = fake.FakeWorld(8, 6, 0)
    room.find(FLOOR_VASE).disabled = True
    cells = room.reachable()
    mark = player.mark()
    world.start_mover(FLOOR_VASE, seed=7)
    start = player.since(mark)
    assert [a["action"] for a in start] == [
        "DisableObject",
        "GetReachablePositions",
        "EnableObject",
        "TeleportObject",
        "Pass",
    ]
    first = world.objects()[FLOOR_VASE]
    assert (first.position[0], first.position[2]) == pytest.approx((-0.75, -1.25))  # the cell under it
    assert first.position[1] == pytest.approx(first.box.size[1] / 2.0, abs=1e-4)
    mark = player.mark()
    positions = []
    for _ in range(4 * steps_per_move):
        world.step(Action.ROTATE_LEFT)
        centre = world.objects()[FLOOR_VASE].position
        positions.append((centre[0], centre[2]))
    actions = player.since(mark)
    teleports = [a for a in actions if a["action"] == "TeleportObject"]
    assert len(teleports) == 4
    assert all(a["forceKinematic"] is True and a["objectId"] == FLOOR_VASE for a in teleports)
    names = [a["action"] for a in actions]
    assert names[: steps_per_move + 2] == ["RotateLeft"] * steps_per_move + ["TeleportObject", "Pass"]
    hops = positions[steps_per_move - 1 :: steps_per_move]
    for before, after in itertools.pairwise(hops):
        assert math.dist(before, after) == pytest.approx(world.config.mover.hop_length)
    assert all(any(math.dist(p, c) < 1e-6 for c in cells) for p in hops)


def test_mover_trajectory_is_reproducible_from_its_seed(world: ThorWorld) -> None:
    first = mover_track(world, seed=11, ticks=16)
    assert mover_track(world, seed=11, ticks=16) == first
    assert mover_track(world, seed=12, ticks=16) != first


def test_stopped_mover_leaves_the_object_in_place(world: ThorWorld, player: FakePlayer) -> None:
    world.start_mover(FLOOR_VASE, seed=3)
    world.stop_mover()
    mark = player.mark()
    for _ in range(4):
        world.step(Action.ROTATE_LEFT)
    assert "TeleportObject" not in player.names_since(mark)


# ------------------------------------------------------------------ conditions


def test_low_light_dims_unity_lights_adds_seeded_noise_and_limits_visibility(
    world: ThorWorld, player: FakePlayer
) -> None:
    assert world.teleport(AgentPose(1.0, -1.75, 315.0, 0.0)).success  # look across the room's diagonal
    baseline = world.observe()
    assert np.nanmax(baseline.depth) > world.config.conditions.low_light_visibility
    mark = player.mark()
    world.set_condition(Condition.LOW_LIGHT, seed=3)
    randomize = next(a for a in player.since(mark) if a["action"] == "RandomizeLighting")
    gain = world.config.conditions.low_light_gain
    assert randomize["brightness"] == [gain, gain] and randomize["randomizeColor"] is False
    dark = world.observe()
    assert dark.rgb.mean() < 0.6 * baseline.rgb.mean()
    assert np.array_equal(world.observe().rgb, dark.rgb)  # same seed and step: same noise
    finite = dark.depth[np.isfinite(dark.depth)]
    assert finite.max() <= world.config.conditions.low_light_visibility
    assert np.isnan(dark.depth).sum() > np.isnan(baseline.depth).sum()
    assert (dark.segments[np.isnan(dark.depth)] == 0).all()  # nothing is segmented beyond the visibility
    assert sorted(dark.segment_labels) == list(range(1, len(dark.segment_labels) + 1))
    mark = player.mark()
    world.set_condition(Condition.BASELINE)
    assert player.names_since(mark) == ["ResetLighting", "ResetMaterials", "Pass"]
    assert np.array_equal(world.observe().rgb, baseline.rgb)


def test_texture_condition_randomizes_materials_and_survives_a_reset(world: ThorWorld, player: FakePlayer) -> None:
    baseline = world.observe().rgb
    world.set_condition(Condition.TEXTURE, seed=1)
    assert not np.array_equal(world.observe().rgb, baseline)
    mark = player.mark()
    world.reset(SCENE)
    assert "RandomizeMaterials" in player.names_since(mark)


def test_degrade_low_light_dims_blacks_out_beyond_visibility_and_is_seeded() -> None:
    rgb = np.full((40, 5, 3), 200, dtype=np.uint8)
    depth = np.array([[1.0, 3.0, 5.0, np.nan, 9.0]] * 40, dtype=np.float32)
    a_rgb, a_depth, visible = degrade_low_light(rgb, depth, 0.5, 2.0, 4.0, np.random.default_rng(1))
    b_rgb, _, _ = degrade_low_light(rgb, depth, 0.5, 2.0, 4.0, np.random.default_rng(1))
    c_rgb, _, _ = degrade_low_light(rgb, depth, 0.5, 2.0, 4.0, np.random.default_rng(2))
    assert np.array_equal(a_rgb, b_rgb) and not np.array_equal(a_rgb, c_rgb)
    assert abs(float(a_rgb[:, :2].mean()) - 100.0) < 2.0 and float(a_rgb[:, 2:].mean()) < 4.0
    assert visible[0].tolist() == [True, True, False, False, False]
    assert np.isnan(a_depth[:, 2:]).all() and np.array_equal(a_depth[:, :2], depth[:, :2])
    assert (rgb == 200).all() and depth[0, 2] == 5.0  # inputs untouched


# ------------------------------------------------------------------ pure conversions


def test_planar_depth_marks_near_far_and_saturated_pixels_invalid() -> None:
    depth = np.array([[0.05, 0.5, 19.89, 19.9, 25.0, np.inf]], dtype=np.float32)
    out = planar_depth(depth, near=0.1, far=20.0, saturation=19.9, tolerance=0.01)
    assert out.dtype == np.float32
    assert np.isfinite(out).tolist() == [[False, True, False, False, False, False]]
    assert out[0, 1] == pytest.approx(0.5)


def test_segments_map_colours_to_sorted_instance_ids_and_drop_unknown_or_invalid_pixels() -> None:
    frame = np.zeros((2, 4, 3), dtype=np.uint8)
    frame[0, 0] = frame[0, 1] = (1, 2, 3)  # "b|1": its colour sorts before a's, its id after
    frame[1, 2] = (200, 0, 0)  # "a|1"
    frame[1, 0] = (7, 7, 7)  # a wall colour: not an object
    frame[0, 3] = (9, 9, 9)  # "c|1", hidden by the validity mask below
    colours = {(1, 2, 3): "b|1", (200, 0, 0): "a|1", (7, 7, 7): "Wall", (9, 9, 9): "c|1"}
    instances = {"a|1": ("a", "A"), "b|1": ("b", "B"), "c|1": ("c", "C")}
    valid = np.ones((2, 4), dtype=bool)
    valid[0, 3] = False
    segments, labels, owners = segments_from_instance_frame(frame, colours, instances, valid)
    assert segments.tolist() == [[2, 2, 0, 0], [0, 0, 1, 0]]
    assert labels == {1: "A", 2: "B"} and owners == {1: "a", 2: "b"}
    assert segments_from_instance_frame(frame, colours, instances)[2] == {1: "a", 2: "b", 3: "c"}
