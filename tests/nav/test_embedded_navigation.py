"""Navigation in real embedded homes (ovman_sim.embedded) with the configured constants."""

import math

import pytest

from ovman_core.actions import Action
from ovman_core.config import load_config
from ovman_core.grid import grid_from_reachable
from ovman_core.success import embodied_success
from ovman_nav.astar import shortest_success_path_length
from ovman_nav.executor import NavError, NavSettings, NavTarget, navigate
from ovman_sim.embedded import EmbeddedWorld

CONFIG = load_config()
SETTINGS = NavSettings.from_config(CONFIG)


class RecordingWorld:
    """Passes the executor's calls to an EmbeddedWorld and records the actions."""

    def __init__(self, world: EmbeddedWorld) -> None:
        self.world = world
        self.actions: list[Action] = []

    def agent_pose(self):
        return self.world.agent_pose()

    def reachable_positions(self):
        return self.world.reachable_positions()

    def step(self, action):
        self.actions.append(action)
        return self.world.step(action)


def farthest_object(world: EmbeddedWorld, movable_only: bool):
    pose = world.agent_pose()
    candidates = [o for o in world.objects() if o.movable or not movable_only]
    return sorted(candidates, key=lambda o: (-math.hypot(o.floor[0] - pose.x, o.floor[1] - pose.z), o.instance_id))


@pytest.mark.parametrize("seed", [0, 3])
def test_reaches_the_farthest_object_of_an_embedded_home_on_a_shortest_path(seed):
    world = EmbeddedWorld(CONFIG.sim_node)
    world.reset(f"embedded-{seed}")
    recording = RecordingWorld(world)
    target_object = farthest_object(world, movable_only=False)[0]
    target = NavTarget(target_object.floor, target_object.box.footprint)
    grid = grid_from_reachable(world.reachable_positions(), SETTINGS.resolution)
    start = grid.cell_of(world.agent_pose().floor)
    aim = SETTINGS.success_radius - SETTINGS.approach_margin
    result = navigate(recording, target, SETTINGS)
    assert result.error is NavError.NONE, result.message
    final = world.agent_pose().floor
    assert embodied_success(final, target_object.box.footprint, aim)  # the run aims inside R by the margin
    # A static home: the grid is exact, so nothing collides and the walk is the shortest one to
    # the aim radius, while SPL's l is the shortest to R.
    assert result.collisions == 0 and result.replans == 0
    region = target_object.box.footprint
    assert result.path_length == pytest.approx(shortest_success_path_length(grid, start, region, aim))
    shortest = shortest_success_path_length(grid, start, region, SETTINGS.success_radius)
    assert result.shortest_path_length == pytest.approx(shortest)
    assert shortest < result.path_length <= shortest + 2 * SETTINGS.approach_margin
    assert result.path_length > 3.0, "the farthest object is not next to the start"
    assert recording.actions[-1] is Action.STOP and result.steps == len(recording.actions)


def test_follows_an_object_the_mover_carries_in_an_embedded_home():
    world = EmbeddedWorld(CONFIG.sim_node)
    world.reset("embedded-0")
    carried = next(
        o.instance_id for o in farthest_object(world, movable_only=True) if _starts_moving(world, o.instance_id, seed=0)
    )
    estimates: list[NavTarget] = []

    def latest() -> NavTarget:
        state = world.objects()[carried]
        estimates.append(NavTarget(state.floor, state.box.footprint))
        return estimates[-1]

    start = world.objects()[carried].floor
    result = navigate(world, latest(), SETTINGS, target_may_move=True, target_updates=latest)
    assert result.error is NavError.NONE, result.message
    assert estimates[-1].point != start, "the object moved while the agent walked"
    assert result.replans >= 1, "a newer estimate farther than retarget_distance triggered a replan"
    # Judged against the last estimate the agent had when it stopped.
    assert embodied_success(result.final_pose.floor, estimates[-1].region, CONFIG.task.success_radius)


def _starts_moving(world: EmbeddedWorld, instance_id: str, seed: int) -> bool:
    try:
        world.start_mover(instance_id, seed)
    except ValueError:
        return False
    return True
