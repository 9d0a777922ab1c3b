"""The occupancy grid of one visit, built from the world's reachable positions after the change.

Core frame: AI2-THOR world (metres, y up; floor (x, z)); cell ``(i, j)`` is centred at
``(x0 + i·resolution, z0 + j·resolution)``, ``i`` along world x, ``j`` along world z.
On the wire (nav_msgs/OccupancyGrid in ``map``, REP 103, through ovman_core.frames): map column
``c = j``, row ``r = n_x − 1 − i``, origin at the outer corner of cell ``(n_x − 1, 0)``.
This module produces and reads the message's plain fields; it never builds the message (the node does).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ovman_core.boxes import Vec2
from ovman_core.frames import Quaternion, ros_to_thor_point, thor_to_ros_point

Cell = tuple[int, int]
"""Grid index (i along world x, j along world z)."""

FREE = 0
"""nav_msgs/OccupancyGrid value of a traversable cell."""

OCCUPIED = 100
"""nav_msgs/OccupancyGrid value of a cell the agent cannot stand on."""

LATTICE_TOLERANCE = 0.01
"""Largest offset of a position from the grid lattice, as a fraction of the resolution, still
taken as on the lattice: simulators report positions such as 1.2500001."""

ORIENTATION_TOLERANCE = 1e-6
"""Largest deviation of an OccupancyGrid origin quaternion from the identity that is accepted."""


class GridError(ValueError):
    """Positions or occupancy-grid fields that do not describe a grid on the configured lattice."""


@dataclasses.dataclass(frozen=True, eq=False)
class NavGrid:
    """Traversable cells of one visit on a square lattice.

    ``free``: bool array of shape (n_x, n_z), True where the agent can stand; read-only.
    ``x0``, ``z0``: world position (metres) of the centre of cell (0, 0); ``resolution``: cell side
    in metres (the world's grid size, the MoveAhead length).
    """

    free: np.ndarray
    x0: float
    z0: float
    resolution: float

    def __post_init__(self) -> None:
        if self.free.ndim != 2 or self.free.dtype != np.bool_:
            raise GridError(f"free must be a 2-D bool array, got shape {self.free.shape} dtype {self.free.dtype}")
        if not (self.resolution > 0.0 and math.isfinite(self.resolution)):
            raise GridError(f"resolution must be a positive number of metres, got {self.resolution}")
        frozen = np.array(self.free, dtype=bool, copy=True)
        frozen.setflags(write=False)
        object.__setattr__(self, "free", frozen)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NavGrid):
            return NotImplemented
        return (self.x0, self.z0, self.resolution) == (other.x0, other.z0, other.resolution) and bool(
            np.array_equal(self.free, other.free)
        )

    __hash__ = None  # type: ignore[assignment]  # compared by array contents, so not hashable

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.free.shape[0]), int(self.free.shape[1]))

    def in_bounds(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.free.shape[0] and 0 <= cell[1] < self.free.shape[1]

    def is_free(self, cell: Cell) -> bool:
        return self.in_bounds(cell) and bool(self.free[cell])

    def world_of(self, cell: Cell) -> Vec2:
        """World floor position (x, z) of a cell centre, metres."""
        return (self.x0 + cell[0] * self.resolution, self.z0 + cell[1] * self.resolution)

    def nearest_cell(self, point: Vec2) -> Cell:
        """The lattice cell whose centre is nearest to ``point`` (may lie outside the grid)."""
        return (
            round((point[0] - self.x0) / self.resolution),
            round((point[1] - self.z0) / self.resolution),
        )

    def cell_of(self, point: Vec2) -> Cell:
        """The in-bounds cell centred at ``point``; GridError when ``point`` is off the lattice or
        outside the grid."""
        cell = self.nearest_cell(point)
        cx, cz = self.world_of(cell)
        slack = LATTICE_TOLERANCE * self.resolution
        if abs(cx - point[0]) > slack or abs(cz - point[1]) > slack:
            raise GridError(
                f"position ({point[0]:.4f}, {point[1]:.4f}) is not on the grid lattice "
                f"(origin ({self.x0}, {self.z0}), resolution {self.resolution} m)"
            )
        if not self.in_bounds(cell):
            raise GridError(f"position ({point[0]:.4f}, {point[1]:.4f}) lies outside the grid of shape {self.shape}")
        return cell

    def free_positions(self) -> list[Vec2]:
        """World positions of the free cells, in index order (the inverse of :func:`grid_from_reachable`)."""
        return [self.world_of((int(i), int(j))) for i, j in np.argwhere(self.free)]


def grid_from_reachable(positions: Sequence[Vec2], resolution: float) -> NavGrid:
    """The grid whose free cells are exactly ``positions`` (world (x, z), metres).

    The grid spans the bounding box of the positions. Raises GridError when there are none or
    when one lies off the lattice defined by the first position and ``resolution``.
    """
    if not (resolution > 0.0 and math.isfinite(resolution)):
        raise GridError(f"resolution must be a positive number of metres (sim_node.world.grid_size), got {resolution}")
    points = np.asarray(positions, dtype=float).reshape(-1, 2)
    if len(points) == 0:
        raise GridError("no reachable positions: the world reports nowhere the agent can stand")
    if not np.all(np.isfinite(points)):
        raise GridError("reachable positions contain NaN or infinite coordinates")
    anchor = points[0]
    offsets = (points - anchor) / resolution
    indices = np.rint(offsets)
    worst = np.abs(offsets - indices).max(axis=1)
    if worst.max() > LATTICE_TOLERANCE:
        bad = points[int(worst.argmax())]
        raise GridError(
            f"reachable position ({bad[0]:.4f}, {bad[1]:.4f}) is not on the {resolution} m lattice through "
            f"({anchor[0]:.4f}, {anchor[1]:.4f}); check sim_node.world.grid_size"
        )
    indices = indices.astype(np.int64)
    low = indices.min(axis=0)
    indices -= low
    free = np.zeros(tuple(indices.max(axis=0) + 1), dtype=bool)
    free[indices[:, 0], indices[:, 1]] = True
    return NavGrid(
        free=free,
        x0=float(anchor[0] + low[0] * resolution),
        z0=float(anchor[1] + low[1] * resolution),
        resolution=float(resolution),
    )


@dataclasses.dataclass(frozen=True)
class OccupancyGridFields:
    """The fields of a nav_msgs/OccupancyGrid in ``map`` (REP 103), without the header stamp.

    ``origin_position`` (metres) and ``origin_orientation`` (x, y, z, w) are the pose of the outer
    corner of cell (row 0, column 0) in ``frame_id``; ``data`` is int8 of length width·height,
    row-major (row = map y, column = map x), FREE or OCCUPIED.
    """

    frame_id: str
    resolution: float
    width: int
    height: int
    origin_position: tuple[float, float, float]
    origin_orientation: Quaternion
    data: np.ndarray


def to_occupancy_fields(grid: NavGrid, frame_id: str) -> OccupancyGridFields:
    """The OccupancyGrid fields of ``grid`` in ``frame_id`` (the map frame, REP 103)."""
    n_x, n_z = grid.shape
    half = grid.resolution / 2.0
    # Outer corner of cell (n_x - 1, 0): largest world x, smallest world z = smallest map x and y.
    corner_world = (grid.x0 + (n_x - 1) * grid.resolution + half, 0.0, grid.z0 - half)
    rows = grid.free[::-1, :]
    data = np.where(rows, FREE, OCCUPIED).astype(np.int8).ravel()
    return OccupancyGridFields(
        frame_id=frame_id,
        resolution=grid.resolution,
        width=n_z,
        height=n_x,
        origin_position=thor_to_ros_point(corner_world),
        origin_orientation=(0.0, 0.0, 0.0, 1.0),
        data=data,
    )


def from_occupancy_fields(fields: OccupancyGridFields) -> NavGrid:
    """The grid described by OccupancyGrid fields; a cell is free iff its value is FREE.

    Unknown (−1) and any occupancy probability above 0 count as not traversable. Raises GridError
    for a rotated origin or a data length that does not match width·height.
    """
    qx, qy, qz, qw = fields.origin_orientation
    if max(abs(qx), abs(qy), abs(qz), abs(abs(qw) - 1.0)) > ORIENTATION_TOLERANCE:
        raise GridError(f"OccupancyGrid origin must not be rotated, got quaternion {fields.origin_orientation}")
    data = np.asarray(fields.data)
    if data.size != fields.width * fields.height:
        raise GridError(
            f"OccupancyGrid data has {data.size} cells, expected width·height = {fields.width}·{fields.height}"
        )
    if fields.width == 0 or fields.height == 0:
        raise GridError("OccupancyGrid is empty (width or height is 0)")
    free = (data.reshape(fields.height, fields.width) == FREE)[::-1, :]
    corner_world = ros_to_thor_point(fields.origin_position)
    half = fields.resolution / 2.0
    return NavGrid(
        free=np.ascontiguousarray(free),
        x0=corner_world[0] - half - (fields.height - 1) * fields.resolution,
        z0=corner_world[2] + half,
        resolution=float(fields.resolution),
    )
