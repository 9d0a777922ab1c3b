"""Executing a plan with the world's primitives: rotate, move ahead, replan, stop (TASK.md §3, §5.5).

Frame: AI2-THOR world (metres; floor (x, z); yaw in degrees clockwise from above, 0 facing +z). The
grid is built once per navigation from the world's reachable positions. A colliding MoveAhead blocks
its grid edge and triggers a replan (for a target that may move, the block expires after
``block_expiry_steps`` world steps: the obstacle may have been the mover); so does a newer estimate
farther than ``retarget_distance``. The run stops as soon as the success geometry (Eq. 4) holds with
the aim radius R − ``approach_margin`` (R when no tighter cell can be reached). Every action counts,
Stop included; the budget's last action is reserved for Stop.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Protocol, runtime_checkable

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import OvmanConfig
from ovman_core.grid import Cell, GridError, NavGrid, grid_from_reachable
from ovman_core.success import embodied_success
from ovman_core.world_state import AgentPose
from ovman_nav.astar import Edge, RegionPlan, edge_between, plan_to_region

YAW_TOLERANCE_DEG = 1.0
"""(deg) The agent counts as facing a direction when its yaw is this close; simulators report
yaws such as 89.99999."""

# Yaw (degrees, clockwise from +z) that faces the neighbour cell (di, dj): i runs along x, j along z.
_YAW_OF_STEP = {(0, 1): 0.0, (1, 0): 90.0, (0, -1): 180.0, (-1, 0): 270.0}


class NavError(enum.IntEnum):
    """Why navigation ended; the values are Navigate.action's Result error codes."""

    NONE = 0
    UNKNOWN = 1
    UNREACHABLE = 2
    TIMEOUT = 3
    CANCELED = 4
    NO_TARGET = 5
    INVALID_GOAL = 6
    COLLISION_LIMIT = 7
    SIM_FAILURE = 8


class TargetLostError(RuntimeError):
    """Raised by a target-updates callable when the estimate can no longer be followed: the run
    ends with NO_TARGET, keeping what it has done so far."""


@dataclasses.dataclass(frozen=True)
class NavTarget:
    """Where to go: the answer point ``point`` (x, z) and the answer region ``region`` (its floor
    footprint), world frame, metres. Success is judged against the region."""

    point: Vec2
    region: Footprint

    @classmethod
    def at_point(cls, point: Vec2) -> NavTarget:
        """A target without extent: the region is the point itself."""
        return cls(point=point, region=Footprint(point[0], point[1], point[0], point[1]))

    @property
    def finite(self) -> bool:
        values = (*self.point, self.region.x_min, self.region.z_min, self.region.x_max, self.region.z_max)
        return all(math.isfinite(v) for v in values)

    def moved_to(self, point: Vec2) -> NavTarget:
        """This target carried to a newer estimate ``point`` of a moving target: the region keeps its
        shape and follows the point (how nav_node applies a target update, and the in-process run
        a re-estimate)."""
        dx, dz = point[0] - self.point[0], point[1] - self.point[1]
        r = self.region
        return NavTarget(point=point, region=Footprint(r.x_min + dx, r.z_min + dz, r.x_max + dx, r.z_max + dz))


@dataclasses.dataclass(frozen=True)
class NavSettings:
    """Constants of one navigation run; :meth:`from_config` reads them from the typed config.

    ``resolution``: grid cell and MoveAhead length (m, sim_node.world.grid_size);
    ``rotate_step_deg``: one RotateLeft/RotateRight (deg); ``success_radius``: R (m);
    ``max_steps``: T_max (actions, Stop included); ``sequence_actions``: most actions sent to a
    :class:`SequenceWorld` at once; ``approach_margin``: how far inside R the run aims (m, below R);
    the rest as in config ``navigation``.
    """

    resolution: float
    rotate_step_deg: float
    success_radius: float
    max_steps: int
    block_expiry_steps: int
    max_replans: int
    max_collisions: int
    retarget_distance: float
    sequence_actions: int = 1
    approach_margin: float = 0.0

    def __post_init__(self) -> None:
        checks = {
            "sim_node.world.grid_size": self.resolution > 0.0,
            "task.success_radius": self.success_radius > 0.0,
            "task.max_steps": self.max_steps > 0,
            "navigation.block_expiry_steps": self.block_expiry_steps > 0,
            "navigation.max_replans": self.max_replans >= 0,
            "navigation.max_collisions": self.max_collisions >= 0,
            "navigation.retarget_distance": self.retarget_distance >= 0.0,
            "navigation.sequence_actions": self.sequence_actions >= 1,
            "navigation.approach_margin": 0.0 <= self.approach_margin < self.success_radius,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"navigation setting {key} has an invalid value: {self}")
        turns = 90.0 / self.rotate_step_deg if self.rotate_step_deg > 0.0 else 0.0
        if not (turns >= 1.0 and abs(turns - round(turns)) < 1e-9):
            raise ValueError(
                "sim_node.world.rotate_step_deg must divide 90 degrees for a 4-connected grid, "
                f"got {self.rotate_step_deg}"
            )

    @classmethod
    def from_config(cls, config: OvmanConfig) -> NavSettings:
        nav = config.nav_node.navigation
        return cls(
            resolution=config.sim_node.world.grid_size,
            rotate_step_deg=config.sim_node.world.rotate_step_deg,
            success_radius=config.task.success_radius,
            max_steps=config.task.max_steps,
            block_expiry_steps=nav.block_expiry_steps,
            max_replans=nav.max_replans,
            max_collisions=nav.max_collisions,
            retarget_distance=nav.retarget_distance,
            sequence_actions=nav.sequence_actions,
            approach_margin=nav.approach_margin,
        )


class NavigableWorld(Protocol):
    """The part of ovman_sim.world.World that navigation uses (every World satisfies it)."""

    def agent_pose(self) -> AgentPose: ...

    def step(self, action: Action) -> ActionResult: ...

    def reachable_positions(self) -> list[Vec2]: ...


@runtime_checkable
class SequenceWorld(NavigableWorld, Protocol):
    """A NavigableWorld that executes several actions per request (sim_node's act_sequence)."""

    def step_sequence(
        self, actions: Sequence[Action], expected: Sequence[AgentPose]
    ) -> list[tuple[ActionResult, AgentPose]]:
        """Execute ``actions`` in order, stopping after the first that fails, collides, or ends
        anywhere but its ``expected`` pose (within the world's tolerances); the result and the
        pose after each executed action (at least the first one)."""
        ...


def predicted_pose(pose: AgentPose, action: Action, step: tuple[int, int], settings: NavSettings) -> AgentPose:
    """Where ``action`` leaves an agent at ``pose`` if nothing blocks it: a MoveAhead moves one
    cell by ``step`` (grid cells along x, z), a rotation turns by ``rotate_step_deg``."""
    if action is Action.MOVE_AHEAD:
        res = settings.resolution
        return dataclasses.replace(pose, x=pose.x + step[0] * res, z=pose.z + step[1] * res)
    turn = settings.rotate_step_deg if action is Action.ROTATE_RIGHT else -settings.rotate_step_deg
    return dataclasses.replace(pose, yaw_deg=(pose.yaw_deg + turn) % 360.0)


@dataclasses.dataclass(frozen=True)
class NavProgress:
    """Feedback after each action: pose, current target point (x, z), remaining planned path (m,
    NaN when no path is known) and the counters so far."""

    pose: AgentPose
    target: Vec2
    distance_remaining: float
    steps: int
    collisions: int
    replans: int


@dataclasses.dataclass(frozen=True)
class NavResult:
    """Outcome of one navigation: the SPL inputs and why it ended.

    ``path_length``: metres actually travelled; ``shortest_path_length``: SPL's l, metres from the
    start to the nearest success position on the grid at the start (None when unreachable);
    ``trajectory``: floor positions visited, start first; ``final_pose`` is None only when the
    pose is unknown (the nav2 backend before any feedback).
    """

    error: NavError
    message: str
    success: bool
    final_pose: AgentPose | None
    path_length: float
    steps: int
    collisions: int
    replans: int
    shortest_path_length: float | None
    trajectory: tuple[Vec2, ...]

    @classmethod
    def failure(cls, error: NavError, message: str) -> NavResult:
        """A run that ended before any action (no pose known, nothing travelled)."""
        return cls(error, message, False, None, 0.0, 0, 0, 0, None, ())


TargetUpdates = Callable[[], "NavTarget | None"]
"""Polled before every action; returns a newer target estimate, or None when there is none."""


def navigate(
    world: NavigableWorld,
    target: NavTarget | None,
    settings: NavSettings,
    *,
    target_may_move: bool = False,
    target_updates: TargetUpdates | Iterator[NavTarget | None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    on_progress: Callable[[NavProgress], None] | None = None,
    on_plan: Callable[[list[Vec2]], None] | None = None,
) -> NavResult:
    """Drive ``world`` to ``target`` with A* on its reachable grid.

    When the world executes several actions in one request (:class:`SequenceWorld`) and the target
    cannot change, the actions the plan leads to go together (up to ``sequence_actions``, the first
    pose that passes the success test, or the end of the budget); the world stops after the first
    that fails, collides or ends off its predicted pose, so the results are those of one action at
    a time, with one round trip per sequence.

    ``target_updates`` is polled before every action: a callable, or an iterator (one item per
    poll; an exhausted iterator means no newer estimates). ``should_cancel`` is polled too.
    ``on_plan`` receives each new plan as world positions (start first).
    """
    if isinstance(target_updates, Iterator):
        estimates = target_updates
        target_updates = lambda: next(estimates, None)  # noqa: E731
    return _Run(world, settings, target_may_move, target_updates, should_cancel, on_progress, on_plan).run(target)


def facing_action(pose: AgentPose, here: Cell, there: Cell) -> Action:
    """From ``pose`` at cell ``here``: turn towards ``there`` (the shorter way), or move ahead
    when facing it."""
    desired = _YAW_OF_STEP[(there[0] - here[0], there[1] - here[1])]
    turn = (desired - pose.yaw_deg) % 360.0
    if min(turn, 360.0 - turn) <= YAW_TOLERANCE_DEG:
        return Action.MOVE_AHEAD
    return Action.ROTATE_RIGHT if turn <= 180.0 else Action.ROTATE_LEFT


class _Run:
    """State of one navigation run (counters, blocked edges, the current plan)."""

    def __init__(
        self,
        world: NavigableWorld,
        settings: NavSettings,
        target_may_move: bool,
        target_updates: TargetUpdates | None,
        should_cancel: Callable[[], bool] | None,
        on_progress: Callable[[NavProgress], None] | None,
        on_plan: Callable[[list[Vec2]], None] | None,
    ) -> None:
        self.world = world
        self.settings = settings
        self.target_may_move = target_may_move
        self.target_updates = target_updates
        self.should_cancel = should_cancel
        self.on_progress = on_progress
        self.on_plan = on_plan
        self.pose = world.agent_pose()
        self.trajectory: list[Vec2] = [self.pose.floor]
        self.path_length = 0.0
        self.steps = 0
        self.collisions = 0
        self.plans = 0
        self.retargets = 0
        self.shortest: float | None = None
        # Blocked edge -> world step at which it expires (None: never).
        self.blocked: dict[Edge, int | None] = {}
        self.excluded_goals: set[Cell] = set()
        self.path: tuple[Cell, ...] | None = None
        self.planned_for: Vec2 | None = None  # target point of the current plan
        # The stop and planning radius: R − approach_margin until no such cell can be reached, so that a
        # stop just inside R of an estimate a few centimetres off still succeeds against the true region.
        self.aim_radius = settings.success_radius - settings.approach_margin
        # True while every route is blocked by edges that will expire: turn in place until one does.
        self.waiting = False
        self.waiting_turn = Action.ROTATE_RIGHT
        # Actions the world has executed ahead of the run (one action sequence), with their outcome.
        self.executed: deque[tuple[Action, ActionResult, AgentPose]] = deque()

    @property
    def replans(self) -> int:
        return max(self.plans - 1, 0)

    def run(self, target: NavTarget | None) -> NavResult:
        if target is None or not target.finite:
            return self.finish(NavError.NO_TARGET, f"no usable target: {target}")
        try:
            grid = grid_from_reachable(self.world.reachable_positions(), self.settings.resolution)
            cell = grid.cell_of(self.pose.floor)
        except GridError as err:
            return self.finish(NavError.SIM_FAILURE, f"the world's reachable grid is unusable: {err}")
        while True:
            # Actions already executed are accounted for before a cancel takes effect.
            if not self.executed and self.should_cancel is not None and self.should_cancel():
                return self.finish(NavError.CANCELED, "navigation was canceled")
            try:
                target = self.poll_target(target)
            except TargetLostError as err:
                return self.finish(NavError.NO_TARGET, str(err))
            self.expire_blocks()
            if embodied_success(self.pose.floor, target.region, self.aim_radius):
                return self.stop()
            if self.steps + 1 >= self.settings.max_steps:
                return self.finish(NavError.TIMEOUT, f"step budget of {self.settings.max_steps} actions used up")
            if self.path is None and not self.waiting:
                outcome = self.replan(grid, cell, target)
                if outcome is not None:
                    return outcome
            edge: Edge | None = None  # the edge a MoveAhead would cross
            if self.path is None:
                action = self.waiting_turn
                self.waiting_turn = (
                    Action.ROTATE_LEFT if self.waiting_turn is Action.ROTATE_RIGHT else Action.ROTATE_RIGHT
                )
            elif len(self.path) == 1:
                # At the planned goal without success: either the estimate moved a little since
                # the plan (plan again), or the grid says this cell passes the test for this very
                # estimate but the actual pose does not (rounding at exactly R): never choose it again.
                if self.planned_for == target.point:
                    self.excluded_goals.add(cell)
                self.path = None
                continue
            else:
                action = self.next_action(self.path[0], self.path[1])
                if action is Action.MOVE_AHEAD:
                    edge = edge_between(self.path[0], self.path[1])
            result, pose = self.execute(action, target)
            self.steps += 1
            previous = self.pose.floor
            self.pose = pose
            self.path_length += math.hypot(self.pose.x - previous[0], self.pose.z - previous[1])
            if self.pose.floor != previous:
                self.trajectory.append(self.pose.floor)
            if edge is not None and result.collided:
                self.collisions += 1
                expiry = self.steps + self.settings.block_expiry_steps if self.target_may_move else None
                self.blocked[edge] = expiry
                self.path = None
                if self.collisions > self.settings.max_collisions:
                    return self.finish(
                        NavError.COLLISION_LIMIT,
                        f"{self.collisions} collisions exceed navigation.max_collisions={self.settings.max_collisions}",
                    )
            elif not result.success:
                return self.finish(NavError.SIM_FAILURE, f"{action.value} failed: {result.message or 'no message'}")
            elif edge is not None:
                try:
                    cell = grid.cell_of(self.pose.floor)
                except GridError as err:
                    return self.finish(NavError.SIM_FAILURE, f"MoveAhead left the reachable grid: {err}")
                # Anywhere but the planned next cell (the world displaced the agent): plan afresh.
                self.path = self.path[1:] if self.path is not None and cell == self.path[1] else None
            self.report(target)

    def execute(self, action: Action, target: NavTarget) -> tuple[ActionResult, AgentPose]:
        """``action``'s result and the pose after it: the next of the sequence already executed,
        else from the world (a new sequence when it can take one)."""
        if not self.executed:
            actions = self.predicted_actions(action, target)
            if len(actions) > 1:
                assert isinstance(self.world, SequenceWorld)
                done = self.world.step_sequence([a for a, _ in actions], [p for _, p in actions])
                if not 1 <= len(done) <= len(actions):
                    raise RuntimeError(f"the world executed {len(done)} of a sequence of {len(actions)} actions")
                self.executed.extend((a, r, p) for (a, _), (r, p) in zip(actions, done, strict=False))
            else:
                self.executed.append((action, self.world.step(action), self.world.agent_pose()))
        executed, result, pose = self.executed.popleft()
        if executed is not action:
            raise RuntimeError(f"the run chose {action.value} where the world had executed {executed.value}")
        return result, pose

    def predicted_actions(self, first: Action, target: NavTarget) -> list[tuple[Action, AgentPose]]:
        """``first`` and the actions the current plan leads to after it, each with the pose it
        should reach, while nothing may change the target: up to ``sequence_actions``, the first
        pose that passes the success test, the end of the plan or of the step budget."""
        limit = min(self.settings.sequence_actions, self.settings.max_steps - 1 - self.steps)
        if self.path is None or self.target_updates is not None or not isinstance(self.world, SequenceWorld):
            limit = 1
        path, pose, action = self.path, self.pose, first
        out: list[tuple[Action, AgentPose]] = []
        while True:
            step = (path[1][0] - path[0][0], path[1][1] - path[0][1]) if path is not None and len(path) > 1 else (0, 0)
            pose = predicted_pose(pose, action, step, self.settings)
            out.append((action, pose))
            if action is Action.MOVE_AHEAD and path is not None:
                path = path[1:]
            if (
                len(out) >= limit
                or path is None
                or len(path) < 2
                or embodied_success(pose.floor, target.region, self.aim_radius)
            ):
                return out
            action = facing_action(pose, path[0], path[1])

    def poll_target(self, target: NavTarget) -> NavTarget:
        """The newest usable estimate; one farther than ``retarget_distance`` from the estimate the
        current plan was made for drops that plan."""
        if self.target_updates is None:
            return target
        update = self.target_updates()
        if update is None or not update.finite:
            return target
        if self.planned_for is None:
            return update
        moved = math.hypot(update.point[0] - self.planned_for[0], update.point[1] - self.planned_for[1])
        if moved > self.settings.retarget_distance and (self.path is not None or self.waiting):
            self.path = None
            self.waiting = False
            self.retargets += 1
            self.aim_radius = self.settings.success_radius - self.settings.approach_margin
        return update

    def expire_blocks(self) -> None:
        expired = [edge for edge, until in self.blocked.items() if until is not None and self.steps >= until]
        for edge in expired:
            del self.blocked[edge]
        if expired:
            self.path = None
            self.waiting = False

    def replan(self, grid: NavGrid, cell: Cell, target: NavTarget) -> NavResult | None:
        """Plan from ``cell``; a NavResult when navigation must end, else None (path set or waiting)."""
        self.plans += 1
        failure_replans = self.replans - self.retargets
        if failure_replans > self.settings.max_replans:
            return self.finish(
                NavError.UNREACHABLE,
                f"gave up after {failure_replans} replans (navigation.max_replans={self.settings.max_replans})",
            )
        plan = self.plan(grid, cell, target, self.blocked)
        if not plan.reachable and self.aim_radius < self.settings.success_radius:
            self.aim_radius = self.settings.success_radius  # nothing reachable inside the margin
            plan = self.plan(grid, cell, target, self.blocked)
        self.planned_for = target.point
        if self.plans == 1:  # SPL's l is to the nearest cell within R, whatever the aim
            exact = plan
            if self.aim_radius < self.settings.success_radius:
                exact = plan_to_region(grid, cell, target.region, self.settings.success_radius, self.blocked)
            self.shortest = exact.length(grid.resolution) if exact.reachable else None
        if not plan.goals:
            return self.finish(
                NavError.UNREACHABLE,
                f"no reachable position within {self.settings.success_radius} m of the target region {target.region}",
            )
        if plan.path is None:
            temporary = {edge: until for edge, until in self.blocked.items() if until is not None}
            if temporary and self.plan(grid, cell, target, self.blocked.keys() - temporary.keys()).reachable:
                self.waiting = True
                return None
            return self.finish(NavError.UNREACHABLE, f"no collision-free path to the target region {target.region}")
        self.path = plan.path
        if self.on_plan is not None:
            self.on_plan([grid.world_of(c) for c in plan.path])
        return None

    def plan(self, grid: NavGrid, cell: Cell, target: NavTarget, blocked: Collection[Edge]) -> RegionPlan:
        return plan_to_region(grid, cell, target.region, self.aim_radius, blocked, exclude=self.excluded_goals)

    def next_action(self, here: Cell, there: Cell) -> Action:
        return facing_action(self.pose, here, there)

    def stop(self) -> NavResult:
        if self.executed:
            raise RuntimeError(f"the run stops with {len(self.executed)} executed actions not accounted for")
        result = self.world.step(Action.STOP)
        self.steps += 1
        if not result.success:
            return self.finish(NavError.SIM_FAILURE, f"Stop failed: {result.message or 'no message'}")
        return self.finish(NavError.NONE, "", success=True)

    def report(self, target: NavTarget) -> None:
        if self.on_progress is None:
            return
        remaining = (len(self.path) - 1) * self.settings.resolution if self.path is not None else math.nan
        self.on_progress(NavProgress(self.pose, target.point, remaining, self.steps, self.collisions, self.replans))

    def finish(self, error: NavError, message: str, success: bool = False) -> NavResult:
        return NavResult(
            error=error,
            message=message,
            success=success,
            final_pose=self.pose,
            path_length=self.path_length,
            steps=self.steps,
            collisions=self.collisions,
            replans=self.replans,
            shortest_path_length=self.shortest,
            trajectory=tuple(self.trajectory),
        )
