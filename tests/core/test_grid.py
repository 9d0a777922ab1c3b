"""The occupancy grid from reachable positions and its nav_msgs/OccupancyGrid fields (REP 103)."""

import math

import numpy as np
import pytest

from ovman_core.frames import thor_to_ros_point
from ovman_core.grid import (
    FREE,
    OCCUPIED,
    GridError,
    OccupancyGridFields,
    from_occupancy_fields,
    grid_from_reachable,
    to_occupancy_fields,
)

RES = 0.25
# An L-shaped set of positions on a lattice offset from the origin, with simulator rounding noise.
POSITIONS = [(-1.25 + i * RES + 1e-7, 3.0 + j * RES - 1e-7) for i in range(6) for j in range(4) if i < 2 or j < 2]


def test_free_cells_are_exactly_the_reachable_positions():
    grid = grid_from_reachable(POSITIONS, RES)
    assert grid.shape == (6, 4)
    assert int(grid.free.sum()) == len(POSITIONS)
    np.testing.assert_allclose(sorted(grid.free_positions()), sorted(POSITIONS), atol=1e-6)
    assert grid.cell_of((-1.25, 3.0)) == (0, 0)
    assert not grid.is_free(grid.cell_of((-1.25 + 5 * RES, 3.0 + 3 * RES)))


def test_position_off_the_lattice_is_rejected_naming_the_config_key():
    with pytest.raises(GridError, match="grid_size"):
        grid_from_reachable([(0.0, 0.0), (0.1, 0.0)], RES)
    with pytest.raises(GridError, match="no reachable positions"):
        grid_from_reachable([], RES)
    grid = grid_from_reachable(POSITIONS, RES)
    with pytest.raises(GridError, match="not on the grid lattice"):
        grid.cell_of((-1.1, 3.0))
    with pytest.raises(GridError, match="outside the grid"):
        grid.cell_of((-1.25 - RES, 3.0))


def test_occupancy_grid_places_every_cell_at_its_rep103_position():
    grid = grid_from_reachable(POSITIONS, RES)
    fields = to_occupancy_fields(grid, "map")
    assert (fields.width, fields.height, fields.resolution, fields.frame_id) == (4, 6, RES, "map")
    assert fields.data.dtype == np.int8
    data = fields.data.reshape(fields.height, fields.width)
    ox, oy, _ = fields.origin_position
    for i in range(6):
        for j in range(4):
            x, z = grid.world_of((i, j))
            mx, my, _ = thor_to_ros_point((x, 0.0, z))
            column = math.floor((mx - ox) / RES)
            row = math.floor((my - oy) / RES)
            assert data[row, column] == (FREE if grid.free[i, j] else OCCUPIED)


def test_occupancy_fields_round_trip_to_the_same_grid():
    grid = grid_from_reachable(POSITIONS, RES)
    back = from_occupancy_fields(to_occupancy_fields(grid, "map"))
    assert np.array_equal(back.free, grid.free)
    assert grid == grid_from_reachable(POSITIONS, RES)
    assert grid != grid_from_reachable(POSITIONS[1:], RES)
    assert (back.x0, back.z0, back.resolution) == pytest.approx((grid.x0, grid.z0, grid.resolution))


def test_unknown_and_occupied_values_are_not_traversable_and_bad_fields_are_rejected():
    base = dict(frame_id="map", resolution=RES, width=3, height=1, origin_position=(0.0, 0.0, 0.0))
    fields = OccupancyGridFields(**base, origin_orientation=(0.0, 0.0, 0.0, 1.0), data=np.array([0, -1, 60]))
    assert from_occupancy_fields(fields).free.ravel().tolist() == [True, False, False]
    rotated = OccupancyGridFields(**base, origin_orientation=(0.0, 0.0, 0.7071, 0.7071), data=np.zeros(3))
    with pytest.raises(GridError, match="rotated"):
        from_occupancy_fields(rotated)
    short = OccupancyGridFields(**base, origin_orientation=(0.0, 0.0, 0.0, 1.0), data=np.zeros(2))
    with pytest.raises(GridError, match="width·height"):
        from_occupancy_fields(short)
