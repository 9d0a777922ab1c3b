"""A* on the 4-connected occupancy grid, and goal selection by the success test (TASK.md §3, §5.5).

Cells are grid indices (ovman_core.grid: ``i`` along world x, ``j`` along world z); every edge
costs one cell (``resolution`` metres). The heuristic, the Manhattan distance to the nearest goal
cell, is admissible and consistent, so A* returns a shortest path to the nearest goal; ties on f go
to the smaller h, then the smaller flat index, so a plan depends only on its inputs. The search loop
is compiled with numba (``cache=True``); validation and conversion stay in Python.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Collection, Iterable

import numba
import numpy as np
from scipy.ndimage import distance_transform_cdt

from ovman_core.boxes import Footprint
from ovman_core.grid import Cell, NavGrid
from ovman_core.success import embodied_success

Edge = tuple[Cell, Cell]
"""An undirected grid edge between 4-adjacent cells, stored with the smaller cell first."""


def edge_between(a: Cell, b: Cell) -> Edge:
    """The undirected edge between two 4-adjacent cells (ValueError otherwise)."""
    if abs(a[0] - b[0]) + abs(a[1] - b[1]) != 1:
        raise ValueError(f"cells {a} and {b} are not 4-adjacent")
    return (a, b) if a <= b else (b, a)


def shortest_path(
    free: np.ndarray, start: Cell, goals: Iterable[Cell], blocked: Collection[Edge] = ()
) -> list[Cell] | None:
    """A shortest 4-connected path from ``start`` to the nearest of ``goals``, or None.

    ``free``: bool (n_x, n_z); the path enters only free cells (``start`` itself may be occupied:
    the agent stands there). ``blocked``: edges between 4-adjacent cells of the grid that may not
    be crossed (ValueError for any other pair). Returns the cells from ``start`` to the reached
    goal inclusive (``[start]`` when ``start`` is a goal). The search runs in :func:`_astar`
    (numba-compiled, cached on disk like ovman_sim.render, so only the very first call of a
    fresh checkout pays the compilation).
    """
    free = np.asarray(free)
    if free.ndim != 2:
        raise ValueError(f"free must be a 2-D (n_x, n_z) bool grid, got shape {free.shape}")
    n_x, n_z = free.shape
    if not (0 <= start[0] < n_x and 0 <= start[1] < n_z):
        raise ValueError(f"start cell {start} is outside the grid of shape {free.shape}")
    goal_cells = np.array(list(goals), dtype=np.int64).reshape(-1, 2)
    if len(goal_cells) == 0:
        return None
    if np.any(goal_cells < 0) or np.any(goal_cells >= (n_x, n_z)):
        raise ValueError(f"goal cells {goal_cells.tolist()} reach outside the grid of shape {free.shape}")
    # Work on a copy padded with one blocked cell on every side and flattened row-major, so a
    # neighbour is k ± 1 or k ± width and needs no bounds test.
    width = n_z + 2
    padded = np.zeros((n_x + 2, width), dtype=np.uint8)
    padded[1:-1, 1:-1] = free.astype(bool, copy=False)
    # Not a bounding-box bound (admissible too): for the disc of cells around a target it ties on f over
    # the whole rectangle between start and goals, and A* would expand all of it.
    heuristic = _manhattan_to_nearest(goal_cells + 1, padded.shape).astype(np.int64, copy=False).ravel()
    is_goal = np.zeros(padded.size, dtype=np.uint8)
    is_goal[(goal_cells[:, 0] + 1) * width + goal_cells[:, 1] + 1] = 1
    source = (start[0] + 1) * width + start[1] + 1
    path = _astar(padded.ravel(), heuristic, is_goal, _blocked_directions(blocked, free.shape), source, width)
    if len(path) == 0:
        return None
    return list(zip((path // width - 1).tolist(), (path % width - 1).tolist(), strict=True))


_OFFSET_OF_STEP = {(-1, 0): 0, (1, 0): 1, (0, -1): 2, (0, 1): 3}
"""Direction index of a step (di, dj): the order in which :func:`_astar` tries the neighbours
(−width, +width, −1, +1 on the padded flat grid); bit d of a blocked mask closes direction d."""


def _blocked_directions(blocked: Collection[Edge], shape: tuple[int, int]) -> np.ndarray:
    """uint8 (n_x + 2) · (n_z + 2), the padded flat grid: bit d set when the edge in direction d is blocked."""
    n_x, n_z = shape
    width = n_z + 2
    mask = np.zeros((n_x + 2) * width, dtype=np.uint8)
    for a, b in blocked:
        if not (0 <= a[0] < n_x and 0 <= a[1] < n_z and 0 <= b[0] < n_x and 0 <= b[1] < n_z):
            raise ValueError(f"blocked edge {(a, b)} reaches outside the grid of shape {shape}")
        step = _OFFSET_OF_STEP.get((b[0] - a[0], b[1] - a[1]))
        if step is None:
            raise ValueError(f"blocked edge {(a, b)}: cells {a} and {b} are not 4-adjacent")
        # Opposite directions are 0 ↔ 1 and 2 ↔ 3: the edge is closed both ways.
        mask[(a[0] + 1) * width + a[1] + 1] |= 1 << step
        mask[(b[0] + 1) * width + b[1] + 1] |= 1 << (step ^ 1)
    return mask


@numba.njit(cache=True)
def _astar(passable, heuristic, is_goal, blocked, source, width):  # pragma: no cover - compiled
    """A* over the padded flat grid; the flat cells of the path from ``source`` to a goal, or empty.

    ``passable``, ``is_goal``: uint8 per cell; ``heuristic``: int64 per cell; ``blocked``: uint8 bit
    masks of :func:`_blocked_directions`. The open list is :mod:`heapq` (numba-compiled) over single
    int64 keys (f·span + h)·size + cell, which order by f, then h, then the flat index; integer
    comparisons are much cheaper than tuple ones. The heuristic is consistent, so a cell's first
    pop carries its shortest distance and later pops are stale.
    """
    size = passable.size
    span = size + 1
    # Best known cost per cell: ``size`` (more than any path) while unreached, −1 for cells that
    # may not be entered, so one comparison tests both "passable" and "improved".
    best_g = np.empty(size, dtype=np.int64)
    for k in range(size):
        best_g[k] = size if passable[k] else -1
    parent = np.empty(size, dtype=np.int64)
    closed = np.zeros(size, dtype=np.uint8)
    best_g[source] = 0  # the start may be an occupied cell: the agent stands there
    heap = [(heuristic[source] * span + heuristic[source]) * size + source]
    offsets = (-width, width, -1, 1)
    while len(heap) > 0:
        k = heapq.heappop(heap) % size
        if closed[k]:
            continue
        closed[k] = 1
        if is_goal[k]:
            length = 1
            c = k
            while c != source:
                c = parent[c]
                length += 1
            path = np.empty(length, dtype=np.int64)
            c = k
            for m in range(length - 1, -1, -1):
                path[m] = c
                c = parent[c]
            return path
        g = best_g[k] + 1
        closed_directions = blocked[k]
        for d in range(4):
            n = k + offsets[d]
            if g < best_g[n] and not (closed_directions >> d) & 1:
                best_g[n] = g
                parent[n] = k
                h_next = heuristic[n]
                heapq.heappush(heap, ((g + h_next) * span + h_next) * size + n)
    return np.empty(0, dtype=np.int64)


def _manhattan_to_nearest(goals: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(shape) int array: Manhattan distance from every cell to the nearest of ``goals`` (K, 2)."""
    if len(goals) == 1:
        rows = np.abs(np.arange(shape[0]) - goals[0, 0])
        cols = np.abs(np.arange(shape[1]) - goals[0, 1])
        return rows[:, None] + cols[None, :]
    not_goal = np.ones(shape, dtype=bool)
    not_goal[goals[:, 0], goals[:, 1]] = False
    # The two-pass chamfer transform with the city-block mask is exact for the L1 distance.
    return distance_transform_cdt(not_goal, metric="taxicab")


def success_cells(grid: NavGrid, region: Footprint, success_radius: float) -> list[Cell]:
    """Free cells from which a Stop passes the success test (Eq. 4) for ``region``, sorted.

    The test is ovman_core.success.embodied_success itself, applied to the cell centre; a
    vectorised pre-filter only skips cells clearly out of reach.
    """
    if not success_radius > 0.0:
        raise ValueError(f"success radius must be positive metres (task.success_radius), got {success_radius}")
    n_x, n_z = grid.shape
    xs = grid.x0 + np.arange(n_x) * grid.resolution
    zs = grid.z0 + np.arange(n_z) * grid.resolution
    dx = np.maximum.reduce([region.x_min - xs, np.zeros(n_x), xs - region.x_max])
    dz = np.maximum.reduce([region.z_min - zs, np.zeros(n_z), zs - region.z_max])
    near = np.hypot(dx[:, None], dz[None, :]) <= success_radius + grid.resolution
    cells = []
    for i, j in np.argwhere(near & grid.free):
        cell = (int(i), int(j))
        if embodied_success(grid.world_of(cell), region, success_radius):
            cells.append(cell)
    return cells


@dataclasses.dataclass(frozen=True)
class RegionPlan:
    """Outcome of planning to a region: the success cells and a shortest path to the nearest.

    ``path`` is None when no success cell is reachable; ``goals`` is empty when no free cell
    passes the success test at all.
    """

    goals: tuple[Cell, ...]
    path: tuple[Cell, ...] | None

    @property
    def reachable(self) -> bool:
        return self.path is not None

    def length(self, resolution: float) -> float:
        """Path length in metres (``resolution`` per edge); ValueError when unreachable."""
        if self.path is None:
            raise ValueError("no path: the region is unreachable")
        return (len(self.path) - 1) * resolution


def plan_to_region(
    grid: NavGrid,
    start: Cell,
    region: Footprint,
    success_radius: float,
    blocked: Collection[Edge] = (),
    exclude: Collection[Cell] = (),
) -> RegionPlan:
    """Plan from ``start`` to the nearest cell passing the success test for ``region``, leaving
    out the goal cells in ``exclude``."""
    goals = tuple(cell for cell in success_cells(grid, region, success_radius) if cell not in exclude)
    path = shortest_path(grid.free, start, goals, blocked)
    return RegionPlan(goals=goals, path=tuple(path) if path is not None else None)


def shortest_success_path_length(grid: NavGrid, start: Cell, region: Footprint, success_radius: float) -> float | None:
    """SPL's l: metres from ``start`` to the nearest position that passes the test, or None."""
    plan = plan_to_region(grid, start, region, success_radius)
    return plan.length(grid.resolution) if plan.reachable else None
