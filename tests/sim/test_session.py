"""SimSession, what sim_node calls: loading visits, acting, playing and recording tours, and one
monotonic frame clock across visits. Pure Python on the embedded world (no ROS)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re

import numpy as np
import pytest

from ovman_core.config import load_config
from ovman_core.grid import from_occupancy_fields
from ovman_core.world_state import AgentPose
from ovman_sim.recording import read_visit, read_visit_raw
from ovman_sim.session import Mode, SessionError, SimSession
from ovman_sim.world import Condition

SCENE = "embedded-3"
BASE = load_config()
CONFIG = dataclasses.replace(
    BASE, sim_node=dataclasses.replace(BASE.sim_node, tour=dataclasses.replace(BASE.sim_node.tour, max_waypoints=2))
)
DT_NS = round(CONFIG.sim_node.node.step_dt * 1e9)


@pytest.fixture
def session():
    session = SimSession(CONFIG)
    try:
        yield session
    finally:
        session.close()


def test_a_loaded_scene_gives_its_first_frame_and_the_reachable_grid(session):
    frame = session.load_scene(SCENE)
    assert session.mode is Mode.LIVE and frame.observation.step == 0 and frame.stamp_ns == 0
    assert frame.objects == session.world.objects()
    fields = session.occupancy()
    assert fields is not None and fields.frame_id == CONFIG.frames.map
    grid = from_occupancy_fields(fields)
    assert np.allclose(sorted(grid.free_positions()), sorted(session.world.reachable_positions()))


def test_a_live_visit_renders_under_the_condition_and_seed_it_is_loaded_with(session):
    # The evaluated world of an episode is rendered as in its recording: the sensor model's noise
    # is seeded by the condition's seed, so the seed must travel with the load (LoadVisit).
    depth = {}
    for seed in (1, 2, 1):
        frame = session.load_scene(SCENE, condition=(Condition.BASELINE, seed))
        depth.setdefault(seed, []).append(frame.observation.depth)
    assert np.array_equal(depth[1][0], depth[1][1], equal_nan=True)
    assert not np.array_equal(depth[1][0], depth[2][0], equal_nan=True)
    dark = session.load_scene(SCENE, condition=(Condition.LOW_LIGHT, 1)).observation
    assert dark.rgb.mean() < session.load_scene(SCENE).observation.rgb.mean()


def test_actions_advance_the_stamp_by_one_step_dt_and_unknown_ones_are_refused(session):
    session.load_scene(SCENE)
    result, frame = session.act("RotateRight")
    assert result.success and frame.observation.step == 1 and frame.stamp_ns == DT_NS
    assert frame.observation.pose.yaw_deg == pytest.approx(CONFIG.sim_node.world.rotate_step_deg)
    with pytest.raises(SessionError, match="unknown action 'Fly'"):
        session.act("Fly")


def test_an_action_or_load_without_the_camera_is_not_rendered_but_keeps_pose_camera_and_step(session):
    loaded = session.load_scene(SCENE, camera=False)
    assert loaded.observation.rgb.size == 0 and loaded.observation.pose == session.world.agent_pose()
    _, bare = session.act("MoveAhead", camera=False)
    rendered = session.world.observe()
    assert bare.observation.rgb.size == bare.observation.depth.size == bare.observation.segments.size == 0
    assert not bare.observation.segment_instances and rendered.segment_instances
    kept = ("pose", "camera_position", "intrinsics", "step")
    assert [getattr(bare.observation, k) for k in kept] == [getattr(rendered, k) for k in kept]
    done, why = session.act_sequence(["RotateLeft", "RotateLeft"], [], 0.0, 0.0, camera=False)
    assert why == "" and [f.observation.rgb.size for _, f in done] == [0, 0]
    assert done[-1][1].observation.pose == session.world.agent_pose()


def test_an_action_sequence_runs_as_single_actions_until_a_pose_is_not_the_expected_one(session):
    session.load_scene(SCENE)
    start = session.world.agent_pose()
    turn = CONFIG.sim_node.world.rotate_step_deg
    right = dataclasses.replace(start, yaw_deg=(start.yaw_deg + turn) % 360.0)
    back = dataclasses.replace(start, yaw_deg=start.yaw_deg % 360.0)
    wrong = dataclasses.replace(start, yaw_deg=(start.yaw_deg + 2 * turn) % 360.0)
    done, why = session.act_sequence(["RotateRight", "RotateLeft"], [right, back], 1e-6, 1e-6)
    assert why == "" and [r.success for r, _ in done] == [True, True]
    assert [f.observation.step for _, f in done] == [1, 2] and [f.stamp_ns for _, f in done] == [DT_NS, 2 * DT_NS]
    assert [f.observation.pose.yaw_deg for _, f in done] == pytest.approx([right.yaw_deg, back.yaw_deg % 360.0])
    # The second action ends off its expected pose: the third is not executed.
    done, why = session.act_sequence(["RotateRight", "RotateRight", "RotateRight"], [right, right, wrong], 1e-6, 1e-6)
    assert (
        len(done) == 2 and "action 1 (RotateRight) ended" in why and session.world.agent_pose().yaw_deg != right.yaw_deg
    )
    # Without expected poses only failures and collisions stop a sequence.
    assert len(session.act_sequence(["RotateLeft"] * 3, [], 1e-6, 1e-6)[0]) == 3


def test_an_action_sequence_stops_at_a_collision_and_checks_its_request_first(session):
    session.load_scene(SCENE)
    done, why = session.act_sequence(["MoveAhead"] * 200, [], 1e-6, 1e-6)
    assert 1 <= len(done) < 200 and done[-1][0].collided and "collided" in why
    assert all(r.success for r, _ in done[:-1])
    steps = session.world.agent_pose(), done[-1][1].observation.step
    with pytest.raises(SessionError, match="unknown action 'Fly'"):
        session.act_sequence(["RotateLeft", "Fly"], [], 1e-6, 1e-6)
    with pytest.raises(SessionError, match="2 actions but 1 expected poses"):
        session.act_sequence(["RotateLeft", "RotateLeft"], [AgentPose(0.0, 0.0)], 1e-6, 1e-6)
    assert (session.world.agent_pose(), session.latest.observation.step) == steps, "nothing was executed"


def test_nothing_can_be_done_before_a_visit_is_loaded(session):
    with pytest.raises(SessionError, match="no live world is loaded"):
        session.act("MoveAhead")
    with pytest.raises(SessionError, match="nothing is loaded"):
        session.play()
    with pytest.raises(SessionError, match="no recording is loaded"):
        session.play_recorded()
    with pytest.raises(SessionError, match="cannot load scene 'kitchen'"):
        session.load_scene("kitchen")
    assert session.occupancy() is None


def test_a_start_pose_and_the_mover_are_applied_on_load(session):
    session.load_scene(SCENE)
    x, z = session.world.reachable_positions()[-1]
    carried = next(o.instance_id for o in session.world.objects() if o.movable)
    frame = session.load_scene(SCENE, pose=AgentPose(x, z, 180.0, 30.0), mover=(carried, 5))
    assert (frame.observation.pose.x, frame.observation.pose.z, frame.observation.pose.yaw_deg) == (x, z, 180.0)
    before = frame.objects[carried].position
    for _ in range(4 * CONFIG.sim_node.mover.steps_per_move):
        session.act("RotateRight")
    assert session.world.objects()[carried].position != before


def test_a_played_tour_is_recorded_and_the_recording_plays_back_the_same_frames(session, tmp_path):
    first = session.load_scene(SCENE)
    live = list(session.play(tmp_path / "visit", visit=1))
    assert len(live) == 2 * CONFIG.sim_node.tour.turns_per_waypoint
    stamps = [first.stamp_ns] + [f.stamp_ns for f in live]
    assert all(b > a for a, b in itertools.pairwise(stamps))
    assert session.load_recording(tmp_path / "visit") == len(live)
    assert session.mode is Mode.RECORDING and session.scene == SCENE and session.occupancy() is None
    replayed = list(session.play())
    assert replayed[0].stamp_ns > live[-1].stamp_ns, "the clock never goes back across visits"
    for a, b in zip(live, replayed, strict=True):
        assert np.array_equal(a.observation.rgb, b.observation.rgb)
        assert a.observation.pose == b.observation.pose and a.objects == b.objects
    recorded = list(read_visit(tmp_path / "visit"))
    assert [r.observation.step for r in recorded] == [f.observation.step for f in live]
    stored = list(session.play_recorded())
    assert [(f.stamp_ns, f.step) for f in stored] == [(f.stamp_ns, f.step) for f in read_visit_raw(tmp_path / "visit")]
    assert [f.step for f in stored] == [f.observation.step for f in live]


def test_a_tour_stopped_early_leaves_no_recording(session, tmp_path):
    session.load_scene(SCENE)
    frames = session.play(tmp_path / "visit")
    next(frames)
    frames.close()
    assert os.listdir(tmp_path) == []
    (tmp_path / "taken").mkdir()
    with pytest.raises(SessionError, match="already exists"):
        session.play(tmp_path / "taken")


def test_an_unknown_world_kind_is_rejected_naming_the_config_key():
    world = dataclasses.replace(BASE.sim_node.world, kind="unity")
    config = dataclasses.replace(BASE, sim_node=dataclasses.replace(BASE.sim_node, world=world))
    with pytest.raises(SessionError, match=r"sim_node\.world\.kind = 'unity'"):
        SimSession(config).load_scene(SCENE)


def test_playing_a_damaged_recording_fails_as_a_session_error_naming_the_file(session, tmp_path):
    session.load_scene(SCENE)
    list(session.play(tmp_path / "visit"))
    session.load_recording(tmp_path / "visit")
    storage = tmp_path / "visit" / "visit.mcap"
    data = bytearray(storage.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    storage.write_bytes(bytes(data))
    for play in (session.play, session.play_recorded):
        with pytest.raises(SessionError, match=re.escape(f"{tmp_path / 'visit'}: cannot read frame")):
            list(play())
