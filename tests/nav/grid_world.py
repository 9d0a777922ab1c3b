"""A grid-only world for the navigation tests: the World methods the executor uses, nothing else.

Layouts are ASCII, one string per grid row: row index ``i`` runs along world x and column ``j``
along world z, cell (i, j) centred at ``(X0 + i·RES, Z0 + j·RES)`` (AI2-THOR world frame).
``#`` is a wall (not reachable, collides), ``.`` floor, ``S`` the start (floor), ``T`` a marked
floor cell (the tests' target), ``o`` an obstacle the world forgets to carve (reported reachable,
yet a move into it collides). A mover may occupy a cell for a while (reachable, collides), and
the target object may move along a schedule.
"""

from __future__ import annotations

from collections.abc import Callable

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Vec2
from ovman_core.world_state import AgentPose

RES = 0.25
X0 = -1.5
Z0 = 2.0

Cell = tuple[int, int]

_STEP_OF_YAW = {0: (0, 1), 90: (1, 0), 180: (0, -1), 270: (-1, 0)}


def world_of(cell: Cell) -> Vec2:
    return (X0 + cell[0] * RES, Z0 + cell[1] * RES)


def cell_of(point: Vec2) -> Cell:
    return (round((point[0] - X0) / RES), round((point[1] - Z0) / RES))


class GridWorld:
    """Agent on a lattice of cells with walls that can change, hidden obstacles and a mover."""

    def __init__(self, layout: list[str], yaw_deg: float = 0.0) -> None:
        self.rows = len(layout)
        self.cols = len(layout[0])
        if any(len(row) != self.cols for row in layout):
            raise ValueError("layout rows must have equal length")
        self.walls: set[Cell] = set()
        self.hidden: set[Cell] = set()
        self.marks: dict[str, Cell] = {}
        for i, row in enumerate(layout):
            for j, char in enumerate(row):
                if char == "#":
                    self.walls.add((i, j))
                elif char == "o":
                    self.hidden.add((i, j))
                elif char in "ST":
                    self.marks[char] = (i, j)
                elif char != ".":
                    raise ValueError(f"unknown layout character {char!r}")
        self.agent = self.marks["S"]
        self.yaw = yaw_deg % 360.0
        self.steps = 0
        self.actions: list[Action] = []
        self.mover: Callable[[int], Cell | None] = lambda step: None
        self.target_schedule: Callable[[int], Cell] | None = None
        self.failing_actions: set[Action] = set()

    # --- the World methods the executor uses -------------------------------------------------

    def agent_pose(self) -> AgentPose:
        x, z = world_of(self.agent)
        return AgentPose(x, z, self.yaw, 0.0)

    def reachable_positions(self) -> list[Vec2]:
        cells = [(i, j) for i in range(self.rows) for j in range(self.cols) if (i, j) not in self.walls]
        return sorted(world_of(c) for c in cells)

    def step(self, action: Action) -> ActionResult:
        self.actions.append(action)
        self.steps += 1
        if action in self.failing_actions:
            return ActionResult(False, message=f"{action.value} refused by the test world")
        if action is Action.ROTATE_RIGHT:
            self.yaw = (self.yaw + 90.0) % 360.0
        elif action is Action.ROTATE_LEFT:
            self.yaw = (self.yaw - 90.0) % 360.0
        elif action is Action.MOVE_AHEAD:
            di, dj = _STEP_OF_YAW[round(self.yaw) % 360]
            there = (self.agent[0] + di, self.agent[1] + dj)
            # The mover is checked at the step the move happens, before time advances.
            if self.blocks(there, self.steps - 1):
                return ActionResult(False, collided=True, message="blocked")
            self.agent = there
        return ActionResult(True)

    # --- test controls -------------------------------------------------------------------------

    def blocks(self, cell: Cell, step: int) -> bool:
        inside = 0 <= cell[0] < self.rows and 0 <= cell[1] < self.cols
        return not inside or cell in self.walls or cell in self.hidden or cell == self.mover(step)

    def add_walls(self, cells: set[Cell]) -> None:
        """The change between visits: these cells become walls (no longer reachable)."""
        self.walls |= cells

    def target_cell(self) -> Cell:
        """Where the target object is now."""
        if self.target_schedule is None:
            return self.marks["T"]
        return self.target_schedule(self.steps)
