"""Coverage tours: the deterministic route a visit is recorded on (TASK.md §4, Algorithm 1 lines 2 and 4).

A tour is planned on the visit's reachable positions through the World protocol only, so it runs
on any world. Waypoints are chosen by farthest-point sampling under walking distance (which does not
pass through walls, so rooms are covered before any gets a second look) until every cell lies within
``tour.waypoint_spacing`` or ``tour.max_waypoints`` are chosen. At each waypoint the agent is
teleported facing yaw 0 at ``tour.horizon_deg`` and observes a full turn in ``world.rotate_step_deg``
steps; turns are world steps (the mover advances), teleports are not. Floor: AI2-THOR world (x, z), metres.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import shortest_path

from ovman_core.actions import Action
from ovman_core.boxes import Vec2
from ovman_core.config import TourConfig, WorldConfig
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose
from ovman_sim.world import World


@dataclasses.dataclass(frozen=True)
class TourPlan:
    """The waypoints of a tour in visiting order, and how the camera looks at each."""

    waypoints: tuple[Vec2, ...]
    horizon_deg: float
    turns: int

    def poses(self, rotate_step_deg: float) -> list[AgentPose]:
        """Every pose an observation is taken from, in order."""
        return [
            AgentPose(x, z, (k * rotate_step_deg) % 360.0, self.horizon_deg)
            for x, z in self.waypoints
            for k in range(self.turns)
        ]


def _lattice_graph(cells: Sequence[Vec2], grid_size: float):
    """Sparse adjacency of the 4-neighbour moves between ``cells`` (unit weights)."""
    index = {(round(x / grid_size), round(z / grid_size)): k for k, (x, z) in enumerate(cells)}
    rows, cols = [], []
    for (i, j), k in index.items():
        for key in ((i + 1, j), (i, j + 1)):
            other = index.get(key)
            if other is not None:
                rows.append(k)
                cols.append(other)
    n = len(cells)
    data = np.ones(len(rows))
    return coo_matrix((data, (rows, cols)), shape=(n, n)).tocsr()


def plan_tour(reachable: Sequence[Vec2], start: Vec2, grid_size: float, tour: TourConfig) -> TourPlan:
    """Waypoints covering ``reachable`` (sorted or not; the result depends only on the set)."""
    if tour.max_waypoints < 1:
        raise ValueError("config sim_node.tour.max_waypoints must be at least 1")
    if tour.turns_per_waypoint < 1:
        raise ValueError("config sim_node.tour.turns_per_waypoint must be at least 1")
    cells = sorted((round(x, 6), round(z, 6)) for x, z in set(reachable))
    if not cells:
        return TourPlan((), tour.horizon_deg, tour.turns_per_waypoint)
    graph = _lattice_graph(cells, grid_size)
    points = np.array(cells)
    first = int(np.argmin((points[:, 0] - start[0]) ** 2 + (points[:, 1] - start[1]) ** 2))
    # Cells the walk cannot reach count as infinitely far, so they are visited (by teleport) too.
    big = float(len(cells) + 1)
    chosen = [first]
    nearest = _steps_from(graph, first, big)
    rows = [nearest]
    limit = tour.waypoint_spacing / grid_size + 1e-9
    while len(chosen) < tour.max_waypoints and float(nearest.max()) > limit:
        nxt = int(np.argmax(nearest))
        chosen.append(nxt)
        row = _steps_from(graph, nxt, big)
        rows.append(row)
        nearest = np.minimum(nearest, row)
    # Recentre each waypoint on the 1-centre (least largest walking distance) of the cells nearest to it:
    # no cell gets farther from its waypoint, and waypoints leave the walls and corners where
    # farthest-point sampling puts them, so the full turn sees the room rather than a wall.
    owner = np.argmin(np.array(rows), axis=0)
    centres = []
    for k in range(len(chosen)):
        members = np.flatnonzero(owner == k)
        within = shortest_path(graph, directed=False, unweighted=True, indices=members)[:, members]
        within = np.where(np.isfinite(within), within, big)
        best = np.lexsort((members, within.sum(axis=1), within.max(axis=1)))[0]
        centres.append(int(members[best]))
    chosen = centres
    rows = [_steps_from(graph, c, big) for c in chosen]
    # Nearest-neighbour route from the first waypoint under walking distance.
    between = np.array([[row[c] for c in chosen] for row in rows])
    order = [0]
    left = set(range(1, len(chosen)))
    while left:
        here = order[-1]
        nxt = min(left, key=lambda k: (between[here, k], k))
        order.append(nxt)
        left.remove(nxt)
    return TourPlan(tuple(cells[chosen[k]] for k in order), tour.horizon_deg, tour.turns_per_waypoint)


def _steps_from(graph, source: int, unreachable: float) -> np.ndarray:
    steps = shortest_path(graph, directed=False, unweighted=True, indices=source)
    return np.where(np.isfinite(steps), steps, unreachable)


def check_full_turn(tour: TourConfig, world: WorldConfig) -> None:
    """Reject a tour config whose turns at a waypoint do not add up to one full turn."""
    total = tour.turns_per_waypoint * world.rotate_step_deg
    if abs(total - 360.0) > 1e-6:
        raise ValueError(
            f"config sim_node.tour.turns_per_waypoint ({tour.turns_per_waypoint}) x world.rotate_step_deg "
            f"({world.rotate_step_deg}) = {total} degrees; a tour needs exactly one full turn (360) per waypoint"
        )


def tour_observations(world: World, tour: TourConfig, world_config: WorldConfig) -> Iterator[Observation]:
    """Plan a tour on ``world``'s current reachable positions and yield its observations in order.

    A waypoint the agent cannot be teleported to (e.g. the mover stands there) is skipped.
    """
    check_full_turn(tour, world_config)
    start = world.agent_pose().floor
    plan = plan_tour(world.reachable_positions(), start, world_config.grid_size, tour)
    for x, z in plan.waypoints:
        if not world.teleport(AgentPose(x, z, 0.0, plan.horizon_deg)).success:
            continue
        yield world.observe()
        for _ in range(plan.turns - 1):
            world.step(Action.ROTATE_RIGHT)
            yield world.observe()
