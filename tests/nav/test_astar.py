"""A* on the 4-connected grid and goal selection by the success test (TASK.md §3, §5.5)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

from ovman_core.boxes import Footprint
from ovman_core.grid import grid_from_reachable
from ovman_core.success import embodied_success
from ovman_nav.astar import (
    edge_between,
    plan_to_region,
    shortest_path,
    shortest_success_path_length,
    success_cells,
)


def oracle_distances(free: np.ndarray, start, blocked) -> np.ndarray:
    """Independent shortest path lengths (in edges) from ``start`` with scipy's Dijkstra."""
    n_x, n_z = free.shape
    rows, cols = [], []
    for i in range(n_x):
        for j in range(n_z):
            for di, dj in ((1, 0), (0, 1)):
                a, b = (i, j), (i + di, j + dj)
                if b[0] >= n_x or b[1] >= n_z or (a, b) in blocked:
                    continue
                # An edge is usable when its far end is free; the start cell may be occupied.
                if free[b] or b == start:
                    rows.append(a[0] * n_z + a[1])
                    cols.append(b[0] * n_z + b[1])
                if free[a] or a == start:
                    rows.append(b[0] * n_z + b[1])
                    cols.append(a[0] * n_z + a[1])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_x * n_z, n_x * n_z)).tocsr()
    return dijkstra(graph, directed=True, indices=start[0] * n_z + start[1]).reshape(n_x, n_z)


@st.composite
def planning_problems(draw):
    n_x = draw(st.integers(1, 12))
    n_z = draw(st.integers(1, 12))
    cells = [(i, j) for i in range(n_x) for j in range(n_z)]
    # Mostly free, so that paths exist and detours around obstacles are common.
    free_cell = st.sampled_from([True, True, True, False])
    free = np.array(draw(st.lists(free_cell, min_size=n_x * n_z, max_size=n_x * n_z))).reshape(n_x, n_z)
    start = draw(st.sampled_from(cells))
    goals = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=4, unique=True))
    edges = [edge_between(a, (a[0] + d[0], a[1] + d[1])) for a in cells for d in ((1, 0), (0, 1))]
    edges = [e for e in edges if e[1][0] < n_x and e[1][1] < n_z]
    blocked = draw(st.sets(st.sampled_from(edges), max_size=12)) if edges else set()
    return free, start, goals, blocked


@settings(max_examples=400, deadline=None)
@given(planning_problems())
def test_astar_length_equals_the_csgraph_oracle_and_the_path_is_valid(problem):
    free, start, goals, blocked = problem
    path = shortest_path(free, start, goals, blocked)
    distances = oracle_distances(free, start, blocked)
    best = min(distances[g] for g in goals)
    if not np.isfinite(best):
        assert path is None
        return
    assert path is not None
    assert len(path) - 1 == best
    assert path[0] == start
    assert path[-1] in goals
    for a, b in itertools.pairwise(path):
        assert abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1, "consecutive cells must be 4-adjacent"
        assert free[b], "the path enters only free cells"
        assert edge_between(a, b) not in blocked, "the path crosses no blocked edge"


def test_path_does_not_depend_on_the_order_of_the_goals():
    free = np.ones((7, 7), dtype=bool)
    goals = [(6, 0), (0, 6), (6, 6)]
    assert shortest_path(free, (3, 3), goals) == shortest_path(free, (3, 3), goals[::-1])


def test_blocked_edge_forces_a_detour():
    free = np.ones((3, 3), dtype=bool)
    assert len(shortest_path(free, (0, 0), [(0, 1)])) == 2
    detour = shortest_path(free, (0, 0), [(0, 1)], {edge_between((0, 0), (0, 1))})
    assert detour == [(0, 0), (1, 0), (1, 1), (0, 1)]


def test_no_goals_and_walled_off_goals_give_no_path():
    free = np.array([[True, False, True]])
    assert shortest_path(free, (0, 0), []) is None
    assert shortest_path(free, (0, 0), [(0, 2)]) is None


def test_start_outside_the_grid_is_rejected():
    with pytest.raises(ValueError, match="outside the grid"):
        shortest_path(np.ones((2, 2), dtype=bool), (2, 0), [(0, 0)])


def lattice(n_x: int, n_z: int, x0: float = -1.0, z0: float = 0.5, res: float = 0.25):
    return grid_from_reachable([(x0 + i * res, z0 + j * res) for i in range(n_x) for j in range(n_z)], res)


def test_success_cells_are_exactly_the_free_cells_passing_the_embodied_success_test():
    grid = lattice(20, 16)
    region = Footprint(0.6, 1.3, 1.1, 1.9)
    expected = [(i, j) for i in range(20) for j in range(16) if embodied_success(grid.world_of((i, j)), region, 1.0)]
    assert success_cells(grid, region, 1.0) == expected
    assert expected, "the region lies inside the grid, so some cells pass"


def test_plan_to_region_reaches_the_nearest_success_cell():
    grid = lattice(1, 30)
    region = Footprint(-1.0, 5.0, -1.0, 5.0)  # the point (x=-1, z=5): cell j = 18
    plan = plan_to_region(grid, (0, 0), region, 1.0)
    assert plan.path is not None
    assert plan.path[-1] == (0, 14)  # 1 m before the point: the first cell that passes
    assert plan.length(0.25) == pytest.approx(3.5)
    assert shortest_success_path_length(grid, (0, 0), region, 1.0) == pytest.approx(3.5)


def test_region_far_from_any_free_cell_has_no_goals():
    grid = lattice(3, 3)
    plan = plan_to_region(grid, (0, 0), Footprint(20.0, 20.0, 21.0, 21.0), 1.0)
    assert plan.goals == ()
    assert not plan.reachable
    assert shortest_success_path_length(grid, (0, 0), Footprint(20.0, 20.0, 21.0, 21.0), 1.0) is None


def test_ties_break_by_h_then_by_the_smaller_flat_index_on_a_tie_heavy_grid():
    # On an open grid every monotone path ties on f; the smaller h, then the smaller flat index
    # (i · n_z + j) decides: from (0, 0) the path runs along j first, from (4, 4) along i first.
    # Pinned from the pure-Python heapq implementation that the compiled search replaced.
    free = np.ones((5, 5), dtype=bool)
    along_j_first = [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert shortest_path(free, (0, 0), [(4, 4)]) == along_j_first
    back_along_i_first = [(4, 4), (3, 4), (2, 4), (1, 4), (0, 4), (0, 3), (0, 2), (0, 1), (0, 0)]
    assert shortest_path(free, (4, 4), [(0, 0)]) == back_along_i_first
    assert shortest_path(free, (2, 2), [(0, 0), (4, 4), (0, 4), (4, 0)]) == [(2, 2), (1, 2), (0, 2), (0, 1), (0, 0)]
    free[2, 1:4] = False
    detour = [(0, 2), (1, 2), (1, 1), (1, 0), (2, 0), (3, 0), (3, 1), (3, 2), (4, 2)]
    assert shortest_path(free, (0, 2), [(4, 2)], {edge_between((0, 1), (1, 1))}) == detour


def test_occupied_start_is_left_but_never_re_entered():
    free = np.array([[False, True, True]])
    assert shortest_path(free, (0, 0), [(0, 2)]) == [(0, 0), (0, 1), (0, 2)]
    assert shortest_path(np.array([[True, False]]), (0, 0), [(0, 1)]) is None


def test_blocked_edges_that_are_not_grid_edges_are_rejected():
    free = np.ones((3, 3), dtype=bool)
    with pytest.raises(ValueError, match="not 4-adjacent"):
        shortest_path(free, (0, 0), [(2, 2)], {((0, 0), (1, 1))})
    with pytest.raises(ValueError, match="outside the grid"):
        shortest_path(free, (0, 0), [(2, 2)], {((2, 2), (3, 2))})
