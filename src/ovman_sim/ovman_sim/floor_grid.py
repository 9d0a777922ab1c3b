"""The agent's lattice of floor positions and which of them a capsule can stand on and move between.

World frame: AI2-THOR's floor plane (x, z), metres. Lattice point (i, j) sits at
``(i · grid_size, j · grid_size)``. The agent is a capsule of radius ``radius``: a cell is blocked
when its centre lies closer than ``radius`` to an obstacle footprint (touching is allowed), and a
move between two 4-neighbours is blocked when the straight segment between them passes closer than
``radius`` (the swept capsule). Obstacles are floor rectangles ``(x_min, z_min, x_max, z_max)``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from ovman_core.boxes import Vec2

TOUCH_EPS = 1e-6
"""(m): numerical slack so that a clearance of exactly ``radius`` counts as touching, not colliding."""


@dataclasses.dataclass(frozen=True)
class FloorGrid:
    """Lattice of ``nx`` × ``nz`` points spaced ``grid_size`` metres, starting at the origin."""

    grid_size: float
    nx: int
    nz: int

    @classmethod
    def covering(cls, grid_size: float, x_max: float, z_max: float) -> FloorGrid:
        """The lattice over ``[0, x_max] × [0, z_max]``."""
        if grid_size <= 0.0:
            raise ValueError(f"world.grid_size must be positive, got {grid_size}")
        return cls(grid_size, math.floor(x_max / grid_size + 1e-9) + 1, math.floor(z_max / grid_size + 1e-9) + 1)

    def position(self, i: int, j: int) -> Vec2:
        return (round(i * self.grid_size, 6), round(j * self.grid_size, 6))

    def cell_of(self, point: Vec2) -> tuple[int, int] | None:
        """Lattice indices of ``point``, or None when it is off the lattice or outside the grid."""
        fi, fj = point[0] / self.grid_size, point[1] / self.grid_size
        i, j = round(fi), round(fj)
        if abs(fi - i) > 1e-6 or abs(fj - j) > 1e-6 or not (0 <= i < self.nx and 0 <= j < self.nz):
            return None
        return (i, j)

    def xs(self) -> np.ndarray:
        return np.arange(self.nx) * self.grid_size

    def zs(self) -> np.ndarray:
        return np.arange(self.nz) * self.grid_size


@dataclasses.dataclass
class Occupancy:
    """Blocked cells and blocked moves of the lattice.

    ``cells`` bool (nx, nz); ``edges_x`` bool (nx−1, nz) for the move (i, j)→(i+1, j);
    ``edges_z`` bool (nx, nz−1) for (i, j)→(i, j+1). True means blocked.
    """

    cells: np.ndarray
    edges_x: np.ndarray
    edges_z: np.ndarray

    @classmethod
    def empty(cls, grid: FloorGrid) -> Occupancy:
        return cls(
            np.zeros((grid.nx, grid.nz), dtype=bool),
            np.zeros((grid.nx - 1, grid.nz), dtype=bool),
            np.zeros((grid.nx, grid.nz - 1), dtype=bool),
        )

    def copy(self) -> Occupancy:
        return Occupancy(self.cells.copy(), self.edges_x.copy(), self.edges_z.copy())

    def union(self, other: Occupancy) -> Occupancy:
        return Occupancy(self.cells | other.cells, self.edges_x | other.edges_x, self.edges_z | other.edges_z)

    def block_cells(self, mask: np.ndarray) -> None:
        """Mark cells blocked (e.g. outside the home) and every move touching them."""
        self.cells |= mask
        self.edges_x |= mask[:-1, :] | mask[1:, :]
        self.edges_z |= mask[:, :-1] | mask[:, 1:]

    def add_rectangles(self, grid: FloorGrid, rects: np.ndarray, radius: float) -> None:
        """Block what a capsule of ``radius`` would hit among floor rectangles ``rects`` (M, 4)."""
        g = grid.grid_size
        limit = (radius - TOUCH_EPS) ** 2
        for x_min, z_min, x_max, z_max in np.asarray(rects, dtype=float).reshape(-1, 4):
            i0 = max(math.floor((x_min - radius) / g), 0)
            i1 = min(math.ceil((x_max + radius) / g), grid.nx - 1)
            j0 = max(math.floor((z_min - radius) / g), 0)
            j1 = min(math.ceil((z_max + radius) / g), grid.nz - 1)
            if i0 > i1 or j0 > j1:
                continue
            x = np.arange(i0, i1 + 1)[:, None] * g
            z = np.arange(j0, j1 + 1)[None, :] * g
            dx = np.maximum(np.maximum(x_min - x, 0.0), x - x_max)
            dz = np.maximum(np.maximum(z_min - z, 0.0), z - z_max)
            self.cells[i0 : i1 + 1, j0 : j1 + 1] |= dx**2 + dz**2 < limit
            # Segment (x, z)→(x+g, z): the gap along x is between [x, x+g] and [x_min, x_max].
            ie0, ie1 = max(i0 - 1, 0), min(i1, grid.nx - 2)
            if ie0 <= ie1:
                xe = np.arange(ie0, ie1 + 1)[:, None] * g
                gx = np.maximum(np.maximum(x_min - (xe + g), 0.0), xe - x_max)
                self.edges_x[ie0 : ie1 + 1, j0 : j1 + 1] |= gx**2 + dz**2 < limit
            je0, je1 = max(j0 - 1, 0), min(j1, grid.nz - 2)
            if je0 <= je1:
                ze = np.arange(je0, je1 + 1)[None, :] * g
                gz = np.maximum(np.maximum(z_min - (ze + g), 0.0), ze - z_max)
                self.edges_z[i0 : i1 + 1, je0 : je1 + 1] |= dx**2 + gz**2 < limit

    def move_blocked(self, cell: tuple[int, int], step: tuple[int, int]) -> bool:
        """Whether the unit move ``step`` (one of (±1, 0), (0, ±1)) from ``cell`` is blocked."""
        i, j = cell
        di, dj = step
        ti, tj = i + di, j + dj
        nx, nz = self.cells.shape
        if not (0 <= ti < nx and 0 <= tj < nz):
            return True
        if di != 0:
            return bool(self.edges_x[min(i, ti), j])
        return bool(self.edges_z[i, min(j, tj)])

    def graph(self):
        """Sparse undirected adjacency (nx·nz nodes, node = i·nz + j) of the unblocked moves."""
        nx, nz = self.cells.shape
        node = np.arange(nx * nz).reshape(nx, nz)
        ex = ~self.edges_x
        ez = ~self.edges_z
        rows = np.concatenate([node[:-1, :][ex], node[:, :-1][ez]])
        cols = np.concatenate([node[1:, :][ex], node[:, 1:][ez]])
        data = np.ones(rows.size, dtype=np.int8)
        return coo_matrix((data, (rows, cols)), shape=(nx * nz, nx * nz)).tocsr()

    def reachable_from(self, cell: tuple[int, int]) -> np.ndarray:
        """bool (nx, nz): cells reachable from ``cell`` by unblocked moves (empty if it is blocked)."""
        nx, nz = self.cells.shape
        out = np.zeros((nx, nz), dtype=bool)
        if self.cells[cell]:
            return out
        order = breadth_first_order(self.graph(), cell[0] * nz + cell[1], directed=False, return_predecessors=False)
        out.reshape(-1)[order] = True
        return out

    def free_components(self) -> tuple[int, np.ndarray]:
        """Number of connected components among free cells, and the (nx, nz) label of each cell."""
        _, labels = connected_components(self.graph(), directed=False)
        labels = labels.reshape(self.cells.shape)
        return len(np.unique(labels[~self.cells])), labels


def point_rect_distance(point: Vec2, rects: np.ndarray) -> np.ndarray:
    """Floor distance (M,) from ``point`` to each rectangle; 0 inside."""
    r = np.asarray(rects, dtype=float).reshape(-1, 4)
    dx = np.maximum(np.maximum(r[:, 0] - point[0], 0.0), point[0] - r[:, 2])
    dz = np.maximum(np.maximum(r[:, 1] - point[1], 0.0), point[1] - r[:, 3])
    return np.hypot(dx, dz)
