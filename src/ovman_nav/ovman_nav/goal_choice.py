"""Where a navigator that takes one goal pose (Nav2) is sent for a target region: pure, no ROS.

The builtin executor stops ``navigation.approach_margin`` inside ``task.success_radius`` of its
estimate of the target; a goal-pose navigator is given the reachable cell its own planner would
stop at, so both backends aim at the same place.
"""

from __future__ import annotations

from ovman_core.boxes import Vec2
from ovman_core.grid import grid_from_reachable
from ovman_nav.astar import plan_to_region
from ovman_nav.executor import NavigableWorld, NavSettings, NavTarget
from ovman_nav.nav2_backend import GoalChooser


def nearest_success_cell(world: NavigableWorld, settings: NavSettings) -> GoalChooser:
    """A chooser: for a target, the end of the shortest plan from the agent's cell into the target's
    region grown by ``success_radius - approach_margin`` (m), else by ``success_radius``, else the
    target's point (world frame, metres) when no reachable cell is within either."""

    def choose(target: NavTarget) -> Vec2:
        grid = grid_from_reachable(world.reachable_positions(), settings.resolution)
        start = grid.cell_of(world.agent_pose().floor)
        plan = plan_to_region(grid, start, target.region, settings.success_radius - settings.approach_margin)
        if not plan.path:
            plan = plan_to_region(grid, start, target.region, settings.success_radius)
        return grid.world_of(plan.path[-1]) if plan.path else target.point

    return choose
