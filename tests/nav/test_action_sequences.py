"""Action sequences: a world that executes the predicted actions of a plan in one request gives
exactly the run that one action per request gives, whatever collides, fails or displaces the agent."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ovman_core.actions import Action, ActionResult
from ovman_core.world_state import AgentPose
from ovman_nav.executor import NavError, NavResult, NavTarget, SequenceWorld, navigate, predicted_pose

from .grid_world import RES, GridWorld, world_of
from .test_executor import ONE_DOOR, SETTINGS, TWO_ROOMS, target_of

SEQUENCES = dataclasses.replace(SETTINGS, sequence_actions=64)
TOLERANCE_M, TOLERANCE_DEG = 1e-6, 1e-6


class SequenceGridWorld(GridWorld):
    """A GridWorld that also executes action sequences, stopping as sim_node's act_sequence does."""

    def __init__(self, layout: list[str], yaw_deg: float = 0.0) -> None:
        super().__init__(layout, yaw_deg)
        self.requests = 0
        self.sequence_lengths: list[int] = []
        """Actions per sequence request."""
        self.executed_lengths: list[int] = []
        """Actions executed per sequence request."""
        self.displace: dict[int, tuple[int, int]] = {}
        """World step after which the agent finds itself at another cell (a push)."""

    def step(self, action: Action) -> ActionResult:
        self.requests += 1
        return self._step(action)

    def _step(self, action: Action) -> ActionResult:
        result = super().step(action)
        if self.steps in self.displace:
            self.agent = self.displace[self.steps]
        return result

    def step_sequence(
        self, actions: Sequence[Action], expected: Sequence[AgentPose]
    ) -> list[tuple[ActionResult, AgentPose]]:
        self.requests += 1
        self.sequence_lengths.append(len(actions))
        done = []
        for action, pose in zip(actions, expected, strict=True):
            result = self._step(action)
            done.append((result, self.agent_pose()))
            distance, turn = self.agent_pose().deviation(pose)
            if result.collided or not result.success or distance > TOLERANCE_M or turn > TOLERANCE_DEG:
                break
        self.executed_lengths.append(len(done))
        return done


class OneByOneGridWorld(SequenceGridWorld):
    """The same world, one action per request (not a SequenceWorld)."""

    step_sequence = None  # type: ignore[assignment]


def outcome(result: NavResult) -> tuple:
    return dataclasses.astuple(result)


def both_runs(layout: list[str], prepare=lambda world: None, **options) -> tuple[NavResult, NavResult, list, list]:
    """The same navigation with sequences and one action at a time; the results and the actions."""
    runs = []
    for kind, run_settings in ((SequenceGridWorld, SEQUENCES), (OneByOneGridWorld, SEQUENCES)):
        world = kind(layout)
        prepare(world)
        runs.append((navigate(world, target_of(world), run_settings, **options), world))
    (batched, world_b), (single, world_s) = runs
    return batched, single, world_b, world_s


def test_the_grid_world_with_sequences_is_a_sequence_world_and_the_one_by_one_world_is_not():
    assert isinstance(SequenceGridWorld(TWO_ROOMS), SequenceWorld)
    assert not isinstance(OneByOneGridWorld(TWO_ROOMS), SequenceWorld)


def test_a_clear_run_takes_few_requests_and_gives_the_same_result():
    batched, single, world_b, world_s = both_runs(TWO_ROOMS)
    assert batched.success and outcome(batched) == outcome(single)
    assert world_b.actions == world_s.actions
    assert world_s.requests == len(world_s.actions)
    # One sequence up to the first success pose, then the Stop.
    assert world_b.requests == 2 and world_b.sequence_lengths == [len(world_b.actions) - 1]


def test_a_hidden_obstacle_ends_the_sequence_at_the_collision_and_the_replan_goes_on():
    layout = list(TWO_ROOMS)
    layout[2] = "#.....o.....#"
    batched, single, world_b, world_s = both_runs(layout)
    assert batched.success and (batched.collisions, batched.replans) == (1, 1)
    assert outcome(batched) == outcome(single) and world_b.actions == world_s.actions
    assert world_b.requests < world_s.requests / 3


def test_a_push_off_the_plan_ends_the_sequence_where_the_pose_differs():
    def push(world):
        world.displace = {4: (3, 2)}

    batched, single, world_b, world_s = both_runs(TWO_ROOMS, push)
    assert batched.success and outcome(batched) == outcome(single) and world_b.actions == world_s.actions
    assert world_b.executed_lengths[0] == 4 < world_b.sequence_lengths[0], "it stops after the pushed action"


def test_a_failing_action_ends_the_run_as_a_sim_failure_either_way():
    def refuse_moves(world):
        world.failing_actions = {Action.MOVE_AHEAD}

    batched, single, world_b, world_s = both_runs(TWO_ROOMS, refuse_moves)
    assert batched.error is NavError.SIM_FAILURE and outcome(batched) == outcome(single)
    assert world_b.actions == world_s.actions


def test_the_step_budget_ends_a_sequence_where_one_action_at_a_time_ends():
    for budget in (2, 5, 9, 12):
        worlds = [SequenceGridWorld(TWO_ROOMS), OneByOneGridWorld(TWO_ROOMS)]
        short = dataclasses.replace(SEQUENCES, max_steps=budget)
        results = [navigate(w, target_of(w), short) for w in worlds]
        assert results[0].error is NavError.TIMEOUT
        assert outcome(results[0]) == outcome(results[1]) and worlds[0].actions == worlds[1].actions


def test_sequences_are_capped_by_sequence_actions():
    world = SequenceGridWorld(TWO_ROOMS)
    result = navigate(world, target_of(world), dataclasses.replace(SETTINGS, sequence_actions=3))
    assert result.success and max(world.sequence_lengths) == 3
    one = SequenceGridWorld(TWO_ROOMS)
    navigate(one, target_of(one), dataclasses.replace(SETTINGS, sequence_actions=1))
    assert one.sequence_lengths == [] and one.requests == len(one.actions)


def test_a_target_that_may_move_is_driven_one_action_at_a_time():
    world = SequenceGridWorld(ONE_DOOR)
    result = navigate(world, target_of(world), SEQUENCES, target_may_move=True, target_updates=lambda: target_of(world))
    assert result.success and world.sequence_lengths == [] and world.requests == len(world.actions)


def test_a_cancel_takes_effect_after_the_executed_sequence_is_accounted_for():
    world = SequenceGridWorld(TWO_ROOMS)
    result = navigate(world, target_of(world), SEQUENCES, should_cancel=lambda: len(world.actions) >= 3)
    assert result.error is NavError.CANCELED
    assert result.steps == len(world.actions) == world.executed_lengths[0] > 3
    assert world.agent_pose().floor == result.trajectory[-1]


def test_predicted_poses_move_one_cell_and_turn_one_step():
    pose = AgentPose(1.0, 2.0, 90.0, 0.0)
    assert predicted_pose(pose, Action.MOVE_AHEAD, (1, 0), SETTINGS) == AgentPose(1.0 + RES, 2.0, 90.0, 0.0)
    assert predicted_pose(pose, Action.ROTATE_LEFT, (0, 0), SETTINGS).yaw_deg == 0.0
    assert (
        predicted_pose(dataclasses.replace(pose, yaw_deg=270.0), Action.ROTATE_RIGHT, (0, 0), SETTINGS).yaw_deg == 0.0
    )


@st.composite
def rooms(draw):
    """A walled 8x10 room with random walls, hidden obstacles, start and target."""
    rows, cols = 8, 10
    inner = [(i, j) for i in range(1, rows - 1) for j in range(1, cols - 1)]
    start, target = draw(st.lists(st.sampled_from(inner), min_size=2, max_size=2, unique=True))
    others = [c for c in inner if c not in (start, target)]
    walls = set(draw(st.lists(st.sampled_from(others), max_size=14, unique=True)))
    hidden = set(draw(st.lists(st.sampled_from([c for c in others if c not in walls]), max_size=4, unique=True)))
    grid = [["#" if i in (0, rows - 1) or j in (0, cols - 1) else "." for j in range(cols)] for i in range(rows)]
    for i, j in walls:
        grid[i][j] = "#"
    for i, j in hidden:
        grid[i][j] = "o"
    grid[start[0]][start[1]], grid[target[0]][target[1]] = "S", "T"
    yaw = draw(st.sampled_from([0.0, 90.0, 180.0, 270.0]))
    return ["".join(row) for row in grid], yaw


@settings(max_examples=150, deadline=None)
@given(rooms(), st.integers(min_value=2, max_value=64), st.integers(min_value=3, max_value=60))
def test_sequences_never_change_a_run(room, sequence_actions, max_steps):
    layout, yaw = room
    run_settings = dataclasses.replace(SETTINGS, sequence_actions=sequence_actions, max_steps=max_steps)
    worlds = [SequenceGridWorld(layout, yaw), OneByOneGridWorld(layout, yaw)]
    results = [navigate(w, target_of(w), run_settings) for w in worlds]
    assert outcome(results[0]) == outcome(results[1])
    assert worlds[0].actions == worlds[1].actions
    assert worlds[0].requests <= worlds[1].requests


def test_a_target_region_reaches_success_before_the_plan_ends():
    """A wide region passes the test at its edge: the sequence stops at the first passing pose."""
    world = SequenceGridWorld(TWO_ROOMS)
    x, z = world_of((1, 11))
    target = NavTarget((x, z), dataclasses.replace(NavTarget.at_point((x, z)).region, z_min=z - 3 * RES))
    result = navigate(world, target, SEQUENCES)
    single = OneByOneGridWorld(TWO_ROOMS)
    assert outcome(result) == outcome(navigate(single, target, SEQUENCES)) and world.actions == single.actions
    assert result.success and world.requests == 2
