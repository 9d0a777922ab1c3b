"""Executing navigation with world primitives: replanning, blocked edges, moving targets, errors."""

import dataclasses
import math

import pytest

from ovman_core.actions import Action
from ovman_core.boxes import Footprint
from ovman_core.config import load_config
from ovman_nav.executor import NavError, NavSettings, NavTarget, TargetLostError, navigate

from .grid_world import RES, GridWorld, cell_of, world_of

# One-cell success radius keeps the geometry crisp: only the 4 neighbours of T (and T) pass.
SETTINGS = dataclasses.replace(
    NavSettings.from_config(load_config()), resolution=RES, success_radius=RES, approach_margin=0.0
)

# Two rooms joined by a doorway D at (2, 6) and, the long way round, by the open bottom row 5.
TWO_ROOMS = [
    "#############",
    "#S....#....T#",
    "#...........#",
    "#.....#.....#",
    "#.....#.....#",
    "#...........#",
    "#############",
]
DOOR = (2, 6)
SHORT_WAY = 11  # moves from S (1, 1) through the door to (1, 10), next to T
LONG_WAY = 17  # moves from S round by row 5 to a neighbour of T


def target_of(world: GridWorld) -> NavTarget:
    return NavTarget.at_point(world_of(world.target_cell()))


def visited_cells(result) -> list:
    return [cell_of(p) for p in result.trajectory]


def test_reaches_the_target_through_the_door_with_spl_inputs_recorded():
    world = GridWorld(TWO_ROOMS)
    result = navigate(world, target_of(world), SETTINGS)
    assert result.error is NavError.NONE and result.success
    assert DOOR in visited_cells(result)
    assert result.path_length == pytest.approx(SHORT_WAY * RES)
    assert result.shortest_path_length == pytest.approx(SHORT_WAY * RES)
    assert (result.collisions, result.replans) == (0, 0)
    assert world.actions[-1] is Action.STOP and world.actions.count(Action.STOP) == 1
    assert result.steps == len(world.actions)


def test_doorway_blocked_after_the_change_forces_the_long_way_round():
    world = GridWorld(TWO_ROOMS)
    world.add_walls({DOOR})  # the change: furniture now fills the doorway; the grid is recomputed
    result = navigate(world, target_of(world), SETTINGS)
    assert result.success
    assert DOOR not in visited_cells(result)
    assert result.path_length == pytest.approx(LONG_WAY * RES)
    assert result.collisions == 0, "the recomputed grid already knows the doorway is closed"


def test_collision_blocks_the_edge_and_the_replan_succeeds():
    layout = list(TWO_ROOMS)
    layout[2] = "#.....o.....#"  # an obstacle in the doorway that the reachable grid does not show
    world = GridWorld(layout)
    result = navigate(world, target_of(world), SETTINGS)
    assert result.success
    assert (result.collisions, result.replans) == (1, 1)
    assert DOOR not in visited_cells(result)
    assert world.agent in {(1, 10), (2, 11), (1, 11)}


def test_collision_limit_ends_navigation_with_its_error_code():
    layout = list(TWO_ROOMS)
    layout[2] = "#.....o.....#"
    world = GridWorld(layout)
    result = navigate(world, target_of(world), dataclasses.replace(SETTINGS, max_collisions=0))
    assert result.error is NavError.COLLISION_LIMIT
    assert not result.success and Action.STOP not in world.actions


# The only route between the rooms is the doorway; the bottom row is walled.
ONE_DOOR = [*TWO_ROOMS[:5], "#.....#.....#", TWO_ROOMS[6]]


def mover_in_doorway_until(step_leaves: int):
    return lambda step: DOOR if step < step_leaves else None


def test_expiring_block_lets_the_agent_through_after_the_mover_leaves():
    world = GridWorld(ONE_DOOR)
    world.mover = mover_in_doorway_until(20)
    result = navigate(world, target_of(world), SETTINGS, target_may_move=True)
    assert result.success
    assert result.collisions >= 1
    assert DOOR in visited_cells(result)


def test_without_expiry_the_mover_in_the_only_doorway_makes_the_target_unreachable():
    world = GridWorld(ONE_DOOR)
    world.mover = mover_in_doorway_until(20)
    result = navigate(world, target_of(world), SETTINGS, target_may_move=False)
    assert result.error is NavError.UNREACHABLE
    assert result.collisions == 1


OPEN_ROOM = [
    "################",
    "#S.............#",
    "#..............#",
    "#..............#",
    "#..............#",
    "#..............#",
    "#..............#",
    "#.............T#",
    "################",
]


def test_a_target_that_moves_is_followed_and_reached():
    world = GridWorld(OPEN_ROOM)
    # The target walks from (7, 14) to (1, 14) then along row 1 back towards column 6, one cell
    # every 3 steps, and stays there.
    route = [(i, 14) for i in range(7, 0, -1)] + [(1, j) for j in range(13, 5, -1)]
    world.target_schedule = lambda step: route[min(step // 3, len(route) - 1)]
    result = navigate(world, target_of(world), SETTINGS, target_may_move=True, target_updates=lambda: target_of(world))
    assert result.success
    assert result.replans >= 1
    final = world.target_cell()
    assert abs(world.agent[0] - final[0]) + abs(world.agent[1] - final[1]) <= 1


def test_without_target_updates_the_agent_stops_at_the_stale_estimate():
    world = GridWorld(OPEN_ROOM)
    route = [(i, 14) for i in range(7, 0, -1)]
    world.target_schedule = lambda step: route[min(step // 3, len(route) - 1)]
    result = navigate(world, target_of(world), SETTINGS, target_may_move=True)
    assert result.success  # judged against the estimate it was given
    final = world.target_cell()
    assert abs(world.agent[0] - final[0]) + abs(world.agent[1] - final[1]) > 1


ENCLOSED = [
    "##########",
    "#S...#...#",
    "#....#.T.#",
    "#....#...#",
    "##########",
]


def test_unreachable_goal_returns_its_error_code_before_any_action():
    world = GridWorld(ENCLOSED)
    result = navigate(world, target_of(world), SETTINGS)
    assert result.error is NavError.UNREACHABLE
    assert "no collision-free path" in result.message
    assert result.steps == 0 and world.actions == []
    assert result.shortest_path_length is None


def test_target_far_from_every_reachable_cell_is_unreachable():
    world = GridWorld(ENCLOSED)
    result = navigate(world, NavTarget.at_point((40.0, 40.0)), SETTINGS)
    assert result.error is NavError.UNREACHABLE
    assert "no reachable position" in result.message
    assert world.actions == []


def test_missing_or_nan_target_is_no_target():
    world = GridWorld(TWO_ROOMS)
    assert navigate(world, None, SETTINGS).error is NavError.NO_TARGET
    nan_point = NavTarget(point=(math.nan, 1.0), region=Footprint(0.0, 1.0, 0.5, 1.5))
    assert navigate(world, nan_point, SETTINGS).error is NavError.NO_TARGET
    assert world.actions == []


def test_step_budget_runs_out_with_timeout():
    world = GridWorld(TWO_ROOMS)
    result = navigate(world, target_of(world), dataclasses.replace(SETTINGS, max_steps=5))
    assert result.error is NavError.TIMEOUT
    assert result.steps == 4, "the last action of the budget is kept for Stop"
    assert Action.STOP not in world.actions


def test_cancel_stops_navigation_with_canceled():
    world = GridWorld(TWO_ROOMS)
    result = navigate(world, target_of(world), SETTINGS, should_cancel=lambda: len(world.actions) >= 3)
    assert result.error is NavError.CANCELED
    assert result.steps == 3 and not result.success


def test_failed_action_is_a_sim_failure():
    world = GridWorld(TWO_ROOMS)
    world.failing_actions = {Action.MOVE_AHEAD}
    result = navigate(world, target_of(world), SETTINGS)
    assert result.error is NavError.SIM_FAILURE
    assert "MoveAhead failed" in result.message


def test_progress_and_plans_are_reported():
    world = GridWorld(TWO_ROOMS)
    progress, plans = [], []
    navigate(world, target_of(world), SETTINGS, on_progress=progress.append, on_plan=plans.append)
    assert [p.steps for p in progress] == list(range(1, len(progress) + 1))
    assert progress[-1].distance_remaining == 0.0
    assert len(plans) == 1 and plans[0][0] == world_of((1, 1)) and len(plans[0]) == SHORT_WAY + 1


def test_settings_reject_a_rotation_step_that_does_not_divide_ninety_degrees():
    with pytest.raises(ValueError, match="rotate_step_deg"):
        dataclasses.replace(SETTINGS, rotate_step_deg=40.0)


def test_target_estimates_may_come_from_an_iterator():
    world = GridWorld(OPEN_ROOM)
    moved = NavTarget.at_point(world_of((1, 8)))
    # The estimate jumps after three polls; afterwards the iterator is exhausted.
    result = navigate(
        world, target_of(world), SETTINGS, target_may_move=True, target_updates=iter([None] * 3 + [moved])
    )
    assert result.success and result.replans == 1
    assert abs(world.agent[0] - 1) + abs(world.agent[1] - 8) <= 1


class RoundingWorld(GridWorld):
    """Reports every position 0.1 µm towards −z, as simulators report 1.2499999 for 1.25."""

    def agent_pose(self):
        pose = super().agent_pose()
        return dataclasses.replace(pose, z=pose.z - 1e-7)


def test_goal_cell_that_passes_only_by_rounding_is_abandoned_for_the_next_one():
    world = RoundingWorld(OPEN_ROOM)
    # The cell (1, 9) is exactly R = 0.25 m before the target point; the reported pose is 0.1 µm
    # farther, so stopping there would fail the test. The agent must go one cell on.
    result = navigate(world, NavTarget.at_point(world_of((1, 10))), SETTINGS)
    assert result.success
    assert world.agent == (1, 10)
    assert result.replans == 1


def test_a_lost_target_ends_the_run_with_no_target_and_keeps_its_counters():
    world = GridWorld(TWO_ROOMS)

    def updates():
        if len(world.actions) >= 3:
            raise TargetLostError("the estimate stopped coming")
        return None

    result = navigate(world, target_of(world), SETTINGS, target_may_move=True, target_updates=updates)
    assert result.error is NavError.NO_TARGET and "stopped coming" in result.message
    assert result.steps == 3 == len(world.actions) and len(result.trajectory) >= 2


# R of two cells with a one-cell approach margin: the run aims at the 4 neighbours of T.
MARGIN_SETTINGS = dataclasses.replace(SETTINGS, success_radius=2 * RES, approach_margin=RES)


def test_the_run_aims_inside_r_by_the_approach_margin_while_spl_counts_to_r():
    world = GridWorld(TWO_ROOMS)
    result = navigate(world, target_of(world), MARGIN_SETTINGS)
    assert result.success
    assert math.dist(world.agent, world.target_cell()) <= 1.0  # one cell, not the two R allows
    assert result.path_length == pytest.approx(SHORT_WAY * RES)
    assert result.shortest_path_length == pytest.approx((SHORT_WAY - 1) * RES)  # SPL's l: to R


def test_without_a_reachable_cell_inside_the_margin_the_run_aims_at_r():
    walled_in = [
        "#########",
        "#S......#",
        "#.......#",
        "#...###.#",
        "#...###.#",
        "#...###.#",
        "#.......#",
        "#########",
    ]
    world = GridWorld(walled_in)
    result = navigate(world, NavTarget.at_point(world_of((4, 5))), MARGIN_SETTINGS)
    assert result.error is NavError.NONE and result.success
    assert 1.0 < math.dist(world.agent, (4, 5)) <= 2.0
    assert result.path_length == pytest.approx(result.shortest_path_length)
