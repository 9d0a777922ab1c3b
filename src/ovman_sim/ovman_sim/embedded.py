"""EmbeddedWorld: the World protocol on a procedural home, rendered on the CPU.

Scenes are ``embedded-<seed>`` (ovman_sim.homes). World frame: AI2-THOR's (metres, y up, floor at
y = 0, floor plane (x, z)); yaw in degrees clockwise from above with 0 facing +z; horizon in
degrees, positive looking down. Every draw (physics, mover, sensor, conditions) is seeded, so the
same change settles the same way and a frame renders alike; segments and labels stay exact.

Why one module: it is one World implementation (:class:`EmbeddedWorld`) with its mover; its
methods are the World protocol's, on one home's state.
"""

from __future__ import annotations

import colorsys
import dataclasses
import math

import numpy as np

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Box3, Vec2, Vec3
from ovman_core.camera import Intrinsics
from ovman_core.config import SimConfig, check_ranges, load_config
from ovman_core.frames import optical_axes_thor
from ovman_core.observation import Observation, pose_observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_sim.conditions import degrade_low_light
from ovman_sim.floor_grid import FloorGrid, Occupancy
from ovman_sim.homes import (
    CATEGORIES,
    Appearance,
    Home,
    Look,
    PlacedObject,
    Support,
    draw_look,
    generate_home,
    object_parts,
    object_supports,
    parse_scene,
    stable_seed,
    usual_asset,
    world_size,
)
from ovman_sim.render import BoxGeometry, Shading, render
from ovman_sim.sensor import check_sensor, degrade_depth, noisy_pose
from ovman_sim.world import AddObject, Change, Condition, MoveObject, RemoveObject, apply_by_kind

_FLOOR_SLAB = 0.05
"""(m): thickness of the floor and ceiling slabs (only their inner faces are ever seen)."""

_DIRECTIONS = ((0, 1), (1, 0), (0, -1), (-1, 0))
_EXCLUDING_KINDS = ("occupancy", "supports", "parts")
"""Cache entries ``<kind>:<instance id>`` built from every object except that one."""
"""Lattice steps for yaw 0, 90, 180, 270 degrees (+z, +x, −z, −x)."""

# Reasons a placement is invalid (codes of _placement_reasons).
_OK, _NO_SUPPORT, _OVERLAP, _ON_AGENT = 0, 1, 2, 3


_SENSOR_STREAM = 1
"""Extra key of the sensor's per-frame seed, so its draws are independent of low light's."""


@dataclasses.dataclass
class _Mover:
    instance_id: str
    rng: np.random.Generator
    heading: int | None = None


@dataclasses.dataclass
class _Slide:
    """A knocked object sliding from ``start`` to ``end`` (box centres, world frame) over ``steps``
    world steps; ``done`` of them have passed."""

    instance_id: str
    start: Vec3
    end: Vec3
    steps: int
    done: int = 0


class EmbeddedWorld:
    """The embedded procedural world (implements ovman_sim.world.World).

    The agent is a capsule of radius ``world.agent_radius`` on the lattice of ``world.grid_size``
    (AI2-THOR's snap-to-grid agent): MoveAhead moves one step unless the swept capsule would touch a
    wall or an object's footprint (then ``collided``); rotations turn by ``world.rotate_step_deg`` (a
    multiple of 90). Reachable positions are a flood fill from the agent's cell. A change is valid
    only when the object rests on the floor or a support its category may use, intersects no wall,
    object or agent, and carries nothing; an invalid one changes nothing and fails with a message."""

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config if config is not None else load_config().sim_node
        world, camera = self.config.world, self.config.camera
        if world.rotate_step_deg <= 0.0 or world.rotate_step_deg % 90.0 != 0.0:
            raise ValueError(
                f"config sim_node.world.rotate_step_deg = {world.rotate_step_deg}: the embedded world keeps the "
                "agent on its grid, so rotations must be positive multiples of 90 degrees"
            )
        hops = self.config.mover.hop_length / world.grid_size
        if hops < 1.0 - 1e-9 or abs(hops - round(hops)) > 1e-6:
            raise ValueError(
                f"config sim_node.mover.hop_length = {self.config.mover.hop_length} must be a positive multiple "
                f"of world.grid_size = {world.grid_size}"
            )
        if self.config.mover.steps_per_move < 1:
            raise ValueError("config sim_node.mover.steps_per_move must be at least 1")
        self._hop_cells = round(hops)
        _check_physics(self.config)
        check_sensor(self.config.sensor)
        self.intrinsics = Intrinsics.from_vertical_fov(camera.width, camera.height, camera.vertical_fov_deg)
        emb = self.config.embedded
        self._shading = Shading(emb.ambient_light, emb.diffuse_light, tuple(emb.light_direction), emb.distance_falloff)
        try:
            self._condition = Condition(self.config.conditions.name)
        except ValueError:
            valid = ", ".join(c.value for c in Condition)
            raise ValueError(
                f"config sim_node.conditions.name = {self.config.conditions.name!r}; expected one of {valid}"
            ) from None
        self._condition_seed = 0
        self._homes: dict[int, Home] = {}
        self._home: Home | None = None
        self._objects: dict[str, PlacedObject] = {}
        self._templates: dict[str, PlacedObject] = {}
        self._pose = AgentPose(0.0, 0.0)
        self._step = 0
        self._mover: _Mover | None = None
        self._slides: list[_Slide] = []
        self._version = 0
        self._cache: dict[str, tuple[object, object]] = {}

    # ------------------------------------------------------------------ protocol: scene and state

    @property
    def home(self) -> Home:
        """The loaded home (structure and the objects it was generated with)."""
        if self._home is None:
            raise RuntimeError("no scene loaded: call reset('embedded-<seed>') first")
        return self._home

    def reset(self, scene: str, objects: WorldState | None = None, pose: AgentPose | None = None) -> None:
        seed = parse_scene(scene)
        if seed not in self._homes:
            self._homes = {seed: generate_home(seed, self.config.world, self.config.embedded)}
        home = self._homes[seed]
        self._home = home
        self._mover = None
        self._slides = []
        self._step = 0
        self._templates = {}
        generated = {p.state.instance_id: p for p in home.objects}
        if objects is None:
            placed = dict(generated)
        else:
            placed = {}
            for obj in objects:
                _check_state(obj)
                known = generated.get(obj.instance_id)
                appearance = (
                    known.appearance if known is not None else self._appearance_for(obj.category, obj.instance_id)
                )
                placed[obj.instance_id] = PlacedObject(obj, appearance)
        self._objects = dict(sorted(placed.items()))
        self._changed()
        start = pose if pose is not None else AgentPose(home.start[0], home.start[1], 0.0, 0.0)
        problem = self._pose_problem(start)
        if problem:
            raise ValueError(f"reset({scene!r}): cannot place the agent at {start}: {problem}")
        self._pose = _normalised(start)

    def objects(self) -> WorldState:
        return WorldState.of([p.state for p in self._objects.values()])

    def agent_pose(self) -> AgentPose:
        return self._pose

    def appearance(self, instance_id: str) -> Appearance:
        """Colours and facing of a present instance (for figures)."""
        return self._objects[instance_id].appearance

    # ------------------------------------------------------------------ protocol: camera

    def observe_pose(self) -> Observation:
        pose = self._pose
        return pose_observation(pose, (pose.x, self.config.world.camera_height, pose.z), self.intrinsics, self._step)

    def observe(self) -> Observation:
        located = self.observe_pose()
        pose = located.pose
        camera = self.config.camera
        boxes, owners, ids = self._geometry()
        frame = render(
            boxes,
            located.camera_position,
            optical_axes_thor(pose.yaw_deg, pose.horizon_deg),
            self.intrinsics,
            camera.near,
            camera.far,
            self._shading,
        )
        owner = np.append(owners, -1)[frame.box_index]
        rgb, depth = frame.rgb, frame.depth
        sensor = self.config.sensor
        # Sensor and low-light draws are seeded per frame by the condition seed, the step and the pose;
        # segments and labels stay exact, and observe_pose (the agent's control) reports the true pose.
        if sensor.enabled:
            rng = np.random.default_rng([self._condition_seed, self._step, self._pose_key(), _SENSOR_STREAM])
            depth = degrade_depth(depth, sensor, rng)
            if sensor.pose_noise_translation > 0.0 or sensor.pose_noise_yaw_deg > 0.0:
                reported = noisy_pose(pose, sensor, rng)
                located = dataclasses.replace(
                    located,
                    pose=reported,
                    camera_position=(reported.x, located.camera_position[1], reported.z),
                )
        if self._condition is Condition.LOW_LIGHT:
            rgb, depth, owner = self._low_light(rgb, depth, owner)
        present, first = np.unique(owner.ravel(), return_index=True)
        keep = present >= 0
        order = present[keep][np.argsort(first[keep], kind="stable")]
        lut = np.zeros(len(ids) + 1, dtype=np.int32)
        lut[order + 1] = np.arange(1, order.size + 1, dtype=np.int32)
        segments = lut[owner + 1]
        instances = {k + 1: ids[int(o)] for k, o in enumerate(order)}
        labels = {k: self._objects[i].state.category for k, i in instances.items()}
        return dataclasses.replace(
            located, rgb=rgb, depth=depth, segments=segments, segment_labels=labels, segment_instances=instances
        )

    def _pose_key(self) -> int:
        pose = self._pose
        return stable_seed(round(pose.x, 3), round(pose.z, 3), round(pose.yaw_deg, 3), round(pose.horizon_deg, 3))

    def _low_light(self, rgb: np.ndarray, depth: np.ndarray, owner: np.ndarray):
        cond = self.config.conditions
        rng = np.random.default_rng([self._condition_seed, self._step, self._pose_key()])
        rgb, depth, visible = degrade_low_light(
            rgb, depth, cond.low_light_gain, cond.low_light_noise_std, cond.low_light_visibility, rng
        )
        return rgb, depth, np.where(visible, owner, -1)

    # ------------------------------------------------------------------ protocol: acting

    def step(self, action: Action | str) -> ActionResult:
        action = Action(action)
        world = self.config.world
        pose = self._pose
        if action is Action.MOVE_AHEAD:
            cell = self._cell(pose.floor)
            direction = _DIRECTIONS[round(pose.yaw_deg / 90.0) % 4]
            if self.occupancy().move_blocked(cell, direction):
                result = ActionResult(False, True, f"MoveAhead from {pose.floor} at yaw {pose.yaw_deg:g} is blocked")
            else:
                x, z = self._grid().position(cell[0] + direction[0], cell[1] + direction[1])
                self._pose = dataclasses.replace(pose, x=x, z=z)
                result = ActionResult(True)
        elif action in (Action.ROTATE_LEFT, Action.ROTATE_RIGHT):
            sign = 1.0 if action is Action.ROTATE_RIGHT else -1.0
            self._pose = dataclasses.replace(pose, yaw_deg=(pose.yaw_deg + sign * world.rotate_step_deg) % 360.0)
            result = ActionResult(True)
        elif action in (Action.LOOK_UP, Action.LOOK_DOWN):
            sign = 1.0 if action is Action.LOOK_DOWN else -1.0
            horizon = pose.horizon_deg + sign * world.look_step_deg
            if world.horizon_min_deg - 1e-6 <= horizon <= world.horizon_max_deg + 1e-6:
                self._pose = dataclasses.replace(pose, horizon_deg=horizon)
                result = ActionResult(True)
            else:
                result = ActionResult(
                    False,
                    False,
                    f"{action.value}: horizon {horizon:g} is outside "
                    f"[{world.horizon_min_deg:g}, {world.horizon_max_deg:g}]",
                )
        else:  # Stop ends the episode at this moment: time and the mover do not advance.
            return ActionResult(True)
        self._step += 1
        self._tick_mover()
        self._tick_slides()
        return result

    def teleport(self, pose: AgentPose) -> ActionResult:
        problem = self._pose_problem(pose)
        if problem:
            return ActionResult(False, False, f"teleport to {pose}: {problem}")
        self._pose = _normalised(pose)
        return ActionResult(True)

    def reachable_positions(self) -> list[Vec2]:
        grid = self._grid()
        mask = self.occupancy().reachable_from(self._cell(self._pose.floor))
        ii, jj = np.nonzero(mask)
        return sorted(grid.position(int(i), int(j)) for i, j in zip(ii, jj, strict=True))

    # ------------------------------------------------------------------ protocol: changes

    def apply_change(self, change: Change) -> ActionResult:
        return apply_by_kind(change, self._move, self._remove, self._add)

    def _move(self, change: MoveObject) -> ActionResult:
        placed = self._objects.get(change.instance_id)
        if placed is None:
            return ActionResult(False, False, f"move {change.instance_id}: no such instance in the world")
        if not placed.state.movable:
            return ActionResult(False, False, f"move {change.instance_id}: {placed.state.category} is not movable")
        carried = self.resting_on(change.instance_id)
        if carried:
            return ActionResult(
                False, False, f"move {change.instance_id}: it carries {', '.join(carried)}; move or remove those first"
            )
        problem = self._placement_problem(placed, change.position, exclude=change.instance_id)
        if problem:
            return ActionResult(False, False, f"move {change.instance_id} to {_fmt(change.position)}: {problem}")
        self._objects[change.instance_id] = _moved(placed, change.position)
        self._changed()
        self._settle("move", change.instance_id, change.position, [placed.state.box])
        return ActionResult(True)

    def _remove(self, change: RemoveObject) -> ActionResult:
        if change.instance_id not in self._objects:
            return ActionResult(False, False, f"remove {change.instance_id}: no such instance in the world")
        carried = self.resting_on(change.instance_id)
        if carried:
            return ActionResult(
                False, False, f"remove {change.instance_id}: it carries {', '.join(carried)}; remove those first"
            )
        if self._mover is not None and self._mover.instance_id == change.instance_id:
            self._mover = None
        removed = self._objects.pop(change.instance_id)
        self._changed()
        self._settle("remove", change.instance_id, removed.state.position, [removed.state.box])
        return ActionResult(True)

    def _add(self, change: AddObject) -> ActionResult:
        obj = change.obj
        if obj.instance_id in self._objects:
            return ActionResult(False, False, f"add {obj.instance_id}: an instance with this id is already present")
        try:
            _check_state(obj)
        except ValueError as err:
            return ActionResult(False, False, f"add {obj.instance_id}: {err}")
        template = self._templates.get(obj.instance_id)
        if template is not None and template.state.category == obj.category:
            appearance = template.appearance
        else:
            appearance = self._appearance_for(obj.category, obj.instance_id)
        placed = PlacedObject(obj, appearance)
        problem = self._placement_problem(placed, obj.position, exclude=obj.instance_id)
        if problem:
            return ActionResult(False, False, f"add {obj.instance_id} at {_fmt(obj.position)}: {problem}")
        self._objects[obj.instance_id] = placed
        self._objects = dict(sorted(self._objects.items()))
        self._changed()
        self._settle("add", obj.instance_id, obj.position, [])
        return ActionResult(True)

    def candidate_placements(self, instance_id: str) -> list[Vec3]:
        placed = self._objects.get(instance_id) or self._templates.get(instance_id)
        if placed is None:
            raise ValueError(f"candidate_placements: unknown instance {instance_id!r} (not in the world, no template)")
        if instance_id in self._objects and (not placed.state.movable or self.resting_on(instance_id)):
            return []
        state, facing = placed.state, placed.appearance.facing
        sx, sy, sz = state.box.size
        spec = CATEGORIES.get(state.category)
        centres: list[Vec3] = []
        if spec is None or spec.furniture or spec.floor:
            grid = self._grid()
            for i in range(grid.nx):
                for j in range(grid.nz):
                    x, z = grid.position(i, j)
                    centres.append((x, round(sy / 2.0, 6), z))
        if spec is None or not spec.furniture:
            spacing = self.config.embedded.placement_spacing
            margin = self.config.embedded.surface_margin
            for owner, support in self._supports(exclude=instance_id):
                if not _may_rest_on(state.category, self._objects[owner].state.category):
                    continue
                xs = _lattice(support.x_min + margin + sx / 2.0, support.x_max - margin - sx / 2.0, spacing)
                zs = _lattice(support.z_min + margin + sz / 2.0, support.z_max - margin - sz / 2.0, spacing)
                centres.extend((x, round(support.y + sy / 2.0, 6), z) for x in xs for z in zs)
        if not centres:
            return []
        reasons = self._placement_reasons(state.category, state.box, facing, np.array(centres), instance_id)
        return sorted(c for c, r in zip(centres, reasons, strict=True) if r == _OK)

    def new_instance(self, category: str, instance_id: str) -> ObjectState | None:
        if category not in CATEGORIES:
            return None
        if instance_id in self._objects:
            raise ValueError(f"new_instance: {instance_id!r} is already an instance in the world")
        look = self._look_for(category, instance_id)
        size = world_size(look.size, 0)
        box = Box3((-size[0] / 2.0, 0.0, -size[2] / 2.0), (size[0] / 2.0, size[1], size[2] / 2.0))
        state = ObjectState(instance_id, category, box.center, box, CATEGORIES[category].movable)
        self._templates[instance_id] = PlacedObject(state, look.appearance(0))
        return state

    # ------------------------------------------------------------------ protocol: mover, conditions

    def start_mover(self, instance_id: str, seed: int) -> None:
        placed = self._objects.get(instance_id)
        if placed is None:
            raise ValueError(f"start_mover: no instance {instance_id!r} in the world")
        if not placed.state.movable:
            raise ValueError(f"start_mover: {instance_id} ({placed.state.category}) is not movable")
        carried = self.resting_on(instance_id)
        if carried:
            raise ValueError(f"start_mover: {instance_id} carries {', '.join(carried)}")
        cells = self._mover_cells(instance_id)
        if not cells:
            raise ValueError(f"start_mover: no reachable floor cell where {instance_id} fits")
        here = placed.state.floor
        x, z = min(cells, key=lambda c: ((c[0] - here[0]) ** 2 + (c[1] - here[1]) ** 2, c))
        sy = placed.state.box.size[1]
        self._objects[instance_id] = _moved(placed, (x, sy / 2.0, z))
        self._changed()
        self._mover = _Mover(instance_id, np.random.default_rng(seed))

    def stop_mover(self) -> None:
        self._mover = None

    def set_condition(self, condition: Condition | str, seed: int = 0) -> None:
        self._condition = Condition(condition)
        self._condition_seed = seed  # the geometry cache is keyed by condition and seed

    def close(self) -> None:
        self._homes.clear()
        self._home = None
        self._objects = {}
        self._templates = {}
        self._mover = None
        self._cache.clear()

    # ------------------------------------------------------------------ internals: grid

    def _grid(self) -> FloorGrid:
        return self.home.grid(self.config.world.grid_size)

    def _cell(self, point: Vec2) -> tuple[int, int]:
        cell = self._grid().cell_of(point)
        if cell is None:
            raise RuntimeError(f"agent position {point} is off the lattice")
        return cell

    def _changed(self, only: str | None = None) -> None:
        """Invalidate what was derived from the objects. ``only``: the one object that changed;
        the structure and what was built without that object (``<kind>:<only>`` entries of
        :data:`_EXCLUDING_KINDS`) stay valid."""
        self._version += 1
        kept = {"structure", *(f"{kind}:{only}" for kind in _EXCLUDING_KINDS)} if only is not None else set()
        self._cache = {k: (self._version, v) for k, (_, v) in self._cache.items() if k in kept}

    def _cached(self, key: str, build):
        entry = self._cache.get(key)
        if entry is None or entry[0] != self._version:
            entry = (self._version, build())
            self._cache[key] = entry
        return entry[1]

    def _structure(self) -> Occupancy:
        return self._cached(
            "structure", lambda: self.home.structure_occupancy(self._grid(), self.config.world.agent_radius)
        )

    def occupancy(self, exclude: str | None = None) -> Occupancy:
        """Blocked cells and moves: the structure and every object except ``exclude``. With a mover,
        the full occupancy is the one without the mover plus the mover (that one stays valid while
        only the mover moves, see :meth:`_changed`)."""
        mover = self._mover.instance_id if self._mover is not None else None

        def build() -> Occupancy:
            if exclude is None and mover is not None:
                occ, placed = self.occupancy(exclude=mover).copy(), [self._objects[mover]]
            else:
                occ, placed = self._structure().copy(), [p for i, p in self._objects.items() if i != exclude]
            rects = [(p.state.box.lo[0], p.state.box.lo[2], p.state.box.hi[0], p.state.box.hi[2]) for p in placed]
            occ.add_rectangles(self._grid(), np.array(rects).reshape(-1, 4), self.config.world.agent_radius)
            return occ

        return self._cached(f"occupancy:{exclude}", build)

    def _pose_problem(self, pose: AgentPose) -> str:
        world = self.config.world
        cell = self._grid().cell_of(pose.floor)
        if cell is None:
            return f"({pose.x}, {pose.z}) is not a point of the {world.grid_size} m grid inside the home"
        if self.occupancy().cells[cell]:
            return f"({pose.x}, {pose.z}) is blocked (a wall or an object is within the agent radius)"
        if abs(pose.yaw_deg / world.rotate_step_deg - round(pose.yaw_deg / world.rotate_step_deg)) > 1e-6:
            return f"yaw {pose.yaw_deg} is not a multiple of world.rotate_step_deg = {world.rotate_step_deg}"
        if not world.horizon_min_deg - 1e-6 <= pose.horizon_deg <= world.horizon_max_deg + 1e-6:
            return f"horizon {pose.horizon_deg} is outside [{world.horizon_min_deg}, {world.horizon_max_deg}]"
        return ""

    # ------------------------------------------------------------------ internals: placement rules

    def _supports(self, exclude: str | None = None) -> list[tuple[str, Support]]:
        return self._cached(f"supports:{exclude}", lambda: self._build_supports(exclude))

    def _build_supports(self, exclude: str | None) -> list[tuple[str, Support]]:
        out = []
        for instance_id, placed in self._objects.items():
            if instance_id == exclude:
                continue
            facing = placed.appearance.facing
            out.extend((instance_id, s) for s in object_supports(placed.state.category, placed.state.box, facing))
        return out

    def resting_on(self, instance_id: str) -> list[str]:
        """Instances resting on a support of ``instance_id``."""
        placed = self._objects[instance_id]
        supports = object_supports(placed.state.category, placed.state.box, placed.appearance.facing)
        tol = self.config.embedded.contact_tolerance
        out = []
        for other_id, other in self._objects.items():
            box = other.state.box
            if other_id != instance_id and any(_rests(box, s, tol) for s in supports):
                out.append(other_id)
        return out

    def _all_parts(self, exclude: str | None) -> tuple[np.ndarray, np.ndarray]:
        """Corners (M, 3) of every wall and every part of every object except ``exclude``."""
        return self._cached(f"parts:{exclude}", lambda: self._build_all_parts(exclude))

    def _build_all_parts(self, exclude: str | None) -> tuple[np.ndarray, np.ndarray]:
        boxes = list(self.home.walls)
        for instance_id, placed in self._objects.items():
            if instance_id != exclude:
                boxes.extend(
                    part.box for part in object_parts(placed.state.category, placed.state.box, placed.appearance.facing)
                )
        return np.array([b.lo for b in boxes]).reshape(-1, 3), np.array([b.hi for b in boxes]).reshape(-1, 3)

    def _placement_reasons(
        self, category: str, box: Box3, facing: int, centres: np.ndarray, exclude: str, floor_only: bool = False
    ) -> np.ndarray:
        """Reason code (int, _OK when valid) for each box centre (C, 3) where ``box`` could be put."""
        emb = self.config.embedded
        tol = emb.contact_tolerance
        size = np.array(box.size)
        centres = np.asarray(centres, dtype=float).reshape(-1, 3)
        bottoms = centres[:, 1] - size[1] / 2.0
        lo2 = centres[:, [0, 2]] - size[[0, 2]] / 2.0
        hi2 = centres[:, [0, 2]] + size[[0, 2]] / 2.0
        # Resting: on the floor inside a room, or on a support this category may use.
        spec = CATEGORIES.get(category)
        floor_ok = floor_only or spec is None or spec.furniture or spec.floor
        rests = np.zeros(len(centres), dtype=bool)
        if floor_ok:
            inside = np.zeros(len(centres), dtype=bool)
            for room in self.home.rooms:
                inside |= (
                    (centres[:, 0] >= room.x_min)
                    & (centres[:, 0] <= room.x_max)
                    & (centres[:, 2] >= room.z_min)
                    & (centres[:, 2] <= room.z_max)
                )
            rests |= (np.abs(bottoms) <= tol) & inside
        if not floor_only:
            for owner, s in self._supports(exclude=exclude):
                if not _may_rest_on(category, self._objects[owner].state.category):
                    continue
                rests |= (
                    (np.abs(bottoms - s.y) <= tol)
                    & (lo2[:, 0] >= s.x_min - tol)
                    & (hi2[:, 0] <= s.x_max + tol)
                    & (lo2[:, 1] >= s.z_min - tol)
                    & (hi2[:, 1] <= s.z_max + tol)
                )
        # Overlap: every part of the object against every wall and every other object's part.
        origin = Box3.from_center_size((0.0, 0.0, 0.0), box.size)
        parts = object_parts(category, origin, facing)
        lo, hi = self._all_parts(exclude)
        overlap = np.zeros(len(centres), dtype=bool)
        for part in parts:
            plo = centres[:, None, :] + np.array(part.box.lo)[None, None, :]
            phi = centres[:, None, :] + np.array(part.box.hi)[None, None, :]
            hit = np.all((plo < hi[None] - tol) & (lo[None] < phi - tol), axis=2)
            overlap |= hit.any(axis=1)
        # The agent: the footprint must stay a capsule radius away from where it stands.
        ax, az = self._pose.floor
        dx = np.maximum(np.maximum(lo2[:, 0] - ax, 0.0), ax - hi2[:, 0])
        dz = np.maximum(np.maximum(lo2[:, 1] - az, 0.0), az - hi2[:, 1])
        on_agent = np.hypot(dx, dz) < self.config.world.agent_radius - 1e-6
        reasons = np.full(len(centres), _OK, dtype=np.int8)
        reasons[on_agent] = _ON_AGENT
        reasons[overlap] = _OVERLAP
        reasons[~rests] = _NO_SUPPORT
        return reasons

    def _placement_problem(self, placed: PlacedObject, position: Vec3, exclude: str) -> str:
        state = placed.state
        code = int(
            self._placement_reasons(state.category, state.box, placed.appearance.facing, np.array([position]), exclude)[
                0
            ]
        )
        if code == _NO_SUPPORT:
            bottom = position[1] - state.box.size[1] / 2.0
            return (
                f"it would not rest on anything: its bottom (y = {bottom:.3f} m) is neither on the floor inside a room "
                f"nor on a furniture top a {state.category} may stand on"
            )
        if code == _OVERLAP:
            return "it would intersect a wall or another object"
        if code == _ON_AGENT:
            return f"it would land on the agent at {self._pose.floor}"
        return ""

    # ------------------------------------------------------------------ internals: mover

    def _mover_cells(self, instance_id: str) -> list[Vec2]:
        """Cells reachable by the agent (carried object removed) where the carried object fits on the floor."""
        grid = self._grid()
        occ = self.occupancy(exclude=instance_id)
        mask = occ.reachable_from(self._cell(self._pose.floor))
        ii, jj = np.nonzero(mask)
        cells = [grid.position(int(i), int(j)) for i, j in zip(ii, jj, strict=True)]
        if not cells:
            return []
        placed = self._objects[instance_id]
        sy = placed.state.box.size[1]
        centres = np.array([(x, sy / 2.0, z) for x, z in cells])
        reasons = self._placement_reasons(
            placed.state.category, placed.state.box, placed.appearance.facing, centres, instance_id, floor_only=True
        )
        return [c for c, r in zip(cells, reasons, strict=True) if r == _OK]

    def _tick_mover(self) -> None:
        """Every ``mover.steps_per_move`` world steps, hop the carried instance ``mover.hop_length``
        to a 4-neighbour: the same heading with probability ``mover.keep_direction_prob`` when open,
        else uniformly one of the other open directions (not back, unless it is the only one). A hop
        is open when the agent's capsule could make it with the object removed, the object fits at
        the target, and it stays clear of the agent."""
        mover = self._mover
        if mover is None or self._step % self.config.mover.steps_per_move != 0:
            return
        placed = self._objects[mover.instance_id]
        grid = self._grid()
        cell = grid.cell_of(placed.state.floor)
        if cell is None:
            return
        occ = self.occupancy(exclude=mover.instance_id)
        open_dirs: list[int] = []
        targets: dict[int, tuple[int, int]] = {}
        for k, (di, dj) in enumerate(_DIRECTIONS):
            at = cell
            ok = True
            for _ in range(self._hop_cells):
                if occ.move_blocked(at, (di, dj)):
                    ok = False
                    break
                at = (at[0] + di, at[1] + dj)
            if ok:
                targets[k] = at
        if targets:
            sy = placed.state.box.size[1]
            ks = sorted(targets)
            centres = np.array([(grid.position(*targets[k])[0], sy / 2.0, grid.position(*targets[k])[1]) for k in ks])
            reasons = self._placement_reasons(
                placed.state.category, placed.state.box, placed.appearance.facing, centres, mover.instance_id, True
            )
            open_dirs = [k for k, r in zip(ks, reasons, strict=True) if r == _OK]
        keep = float(mover.rng.uniform())
        if not open_dirs:
            return
        if mover.heading in open_dirs and keep < self.config.mover.keep_direction_prob:
            heading = mover.heading
        else:
            others = [
                k for k in open_dirs if k != mover.heading and (mover.heading is None or k != (mover.heading + 2) % 4)
            ]
            if not others:
                others = [k for k in open_dirs if k != mover.heading] or open_dirs
            heading = others[int(mover.rng.integers(0, len(others)))]
        mover.heading = heading
        x, z = grid.position(*targets[heading])
        self._objects[mover.instance_id] = _moved(placed, (x, placed.state.position[1], z))
        self._changed(only=mover.instance_id)

    # ------------------------------------------------------------------ internals: physics

    def _valid_at(self, placed: PlacedObject, position: Vec3) -> bool:
        """Whether ``placed`` could stand at box centre ``position`` (everything else as it is)."""
        state = placed.state
        reasons = self._placement_reasons(
            state.category, state.box, placed.appearance.facing, np.array([position]), state.instance_id
        )
        return int(reasons[0]) == _OK

    def _settle(self, kind: str, instance_id: str, position: Vec3, touched: list[Box3]) -> None:
        """Settle the world after a change of ``instance_id`` (intended box centre ``position``;
        ``touched``: the footprints it left): it lands off its destination by a seeded offset (kept
        only where still valid), then every movable neighbour carrying nothing within ``knock_radius``
        of its old or new footprint is knocked with ``knock_probability`` and slides (an exponential
        length of mean ``slide_mean``, a uniform direction) over ``settle_steps`` world steps. So an
        object may still move when a recording starts: Algorithm 1's drift check sees it."""
        physics = self.config.physics
        if not physics.enabled:
            return
        where = tuple(round(float(v), 4) for v in position)
        rng = np.random.default_rng([self.home.seed, stable_seed("settle", kind, instance_id, where)])
        offset = rng.normal(0.0, physics.landing_offset_std, size=2)
        placed = self._objects.get(instance_id)
        if placed is not None:
            for fraction in (1.0, 0.5):
                target = _offset(position, fraction * offset[0], fraction * offset[1])
                if self._valid_at(placed, target):
                    self._objects[instance_id] = _moved(placed, target)
                    self._changed(only=instance_id)
                    break
            touched = [*touched, self._objects[instance_id].state.box]
        mover = self._mover.instance_id if self._mover is not None else None
        sliding = {slide.instance_id for slide in self._slides}
        for other_id in list(self._objects):
            knock, angle, length = rng.uniform(), rng.uniform(0.0, 2.0 * math.pi), rng.exponential(physics.slide_mean)
            other = self._objects[other_id]
            if (
                knock >= physics.knock_probability
                or other_id in (instance_id, mover)
                or other_id in sliding
                or not other.state.movable
                or min(other.state.box.footprint.distance_to_footprint(b.footprint) for b in touched)
                > physics.knock_radius
                or self.resting_on(other_id)
            ):
                continue
            start = other.state.position
            for fraction in (1.0, 0.5, 0.25):
                end = _offset(start, fraction * length * math.cos(angle), fraction * length * math.sin(angle))
                if self._valid_at(other, end):
                    self._slides.append(_Slide(other_id, start, end, physics.settle_steps))
                    break

    def _tick_slides(self) -> None:
        """Advance every slide by one world step; a slide whose next position is not a valid
        placement (or whose object now carries something) ends where it is."""
        kept = []
        for slide in self._slides:
            placed = self._objects.get(slide.instance_id)
            if placed is None or self.resting_on(slide.instance_id):
                continue
            slide.done += 1
            f = slide.done / slide.steps
            target = tuple(round(a + f * (b - a), 6) for a, b in zip(slide.start, slide.end, strict=True))
            if not self._valid_at(placed, target):  # type: ignore[arg-type]
                continue
            self._objects[slide.instance_id] = _moved(placed, target)  # type: ignore[arg-type]
            self._changed(only=slide.instance_id)
            if slide.done < slide.steps:
                kept.append(slide)
        self._slides = kept

    # ------------------------------------------------------------------ internals: drawing

    def _look_for(self, category: str, instance_id: str) -> Look:
        """The look of a new instance, drawn from the home's assets, seeded by the home and the id."""
        rng = np.random.default_rng(stable_seed(self.home.seed, category, instance_id))
        look = self.config.world.appearance
        return draw_look(category, rng, look, usual_asset(self.home.seed, category, look))

    def _appearance_for(self, category: str, instance_id: str) -> Appearance:
        return self._look_for(category, instance_id).appearance(0)

    def _geometry(self) -> tuple[BoxGeometry, np.ndarray, list[str]]:
        key = f"geometry:{self._condition.value}:{self._condition_seed}"
        return self._cached(key, self._build_geometry)

    def _build_geometry(self) -> tuple[BoxGeometry, np.ndarray, list[str]]:
        home = self.home
        emb = self.config.embedded
        cond = self.config.conditions
        texture = self._condition is Condition.TEXTURE
        lo, hi, colour, period, contrast, owners = [], [], [], [], [], []

        def add(box: Box3, rgb, owner: int, tile: float = 0.0, tile_contrast: float = 0.0, key: object = None):
            if texture:  # seeded per asset (look-alike instances stay alike) and per surface
                rng = np.random.default_rng([self._condition_seed, stable_seed(key)])
                rgb = _hue_shift(rgb, float(rng.uniform(-cond.texture_hue_jitter, cond.texture_hue_jitter)))
                tile = float(rng.uniform(cond.texture_period_min, cond.texture_period_max))
                tile_contrast = cond.texture_contrast
            lo.append(box.lo)
            hi.append(box.hi)
            colour.append(rgb)
            period.append(tile)
            contrast.append(tile_contrast)
            owners.append(owner)

        for room in home.rooms:
            floor = Box3((room.x_min, -_FLOOR_SLAB, room.z_min), (room.x_max, 0.0, room.z_max))
            add(floor, room.floor_colour, -1, emb.floor_tile_size, emb.floor_tile_contrast, ("floor", room.name))
        ceiling = Box3((0.0, home.wall_height, 0.0), (home.size_x, home.wall_height + _FLOOR_SLAB, home.size_z))
        add(ceiling, home.ceiling_colour, -1, key=("ceiling",))
        for k, wall in enumerate(home.walls):
            add(wall, home.wall_colour, -1, key=("wall", k))
        ids = list(self._objects)
        for index, instance_id in enumerate(ids):
            placed = self._objects[instance_id]
            app = placed.appearance
            for k, part in enumerate(object_parts(placed.state.category, placed.state.box, app.facing)):
                key = (placed.state.category, app.asset, part.tone, k)
                add(part.box, app.secondary if part.tone else app.primary, index, key=key)
        boxes = BoxGeometry(
            np.array(lo, dtype=np.float64),
            np.array(hi, dtype=np.float64),
            np.array(colour, dtype=np.float64),
            np.array(period, dtype=np.float64),
            np.array(contrast, dtype=np.float64),
        )
        return boxes, np.array(owners, dtype=np.int64), ids


def _hue_shift(rgb, shift: float):
    h, s, v = colorsys.rgb_to_hsv(*rgb)
    # Greys have no hue to shift: give them some saturation so the texture condition recolours them too.
    return colorsys.hsv_to_rgb((h + shift) % 1.0, max(s, 0.35), v)


def _rests(box: Box3, support: Support, tol: float) -> bool:
    return (
        abs(box.lo[1] - support.y) <= tol
        and box.lo[0] >= support.x_min - tol
        and box.hi[0] <= support.x_max + tol
        and box.lo[2] >= support.z_min - tol
        and box.hi[2] <= support.z_max + tol
    )


def _may_rest_on(category: str, support_category: str) -> bool:
    spec = CATEGORIES.get(category)
    if spec is None:
        return True
    if spec.furniture and spec.placement != "companion":
        return False
    return spec.on is None or support_category in spec.on


def _offset(position: Vec3, dx: float, dz: float) -> Vec3:
    """``position`` shifted on the floor plane, rounded to the micrometre."""
    return (round(position[0] + float(dx), 6), position[1], round(position[2] + float(dz), 6))


def _check_physics(config: SimConfig) -> None:
    """Raise ConfigError (a ValueError) naming the first ``sim_node.physics`` key out of range."""
    physics = config.physics
    checks = {
        "landing_offset_std": (physics.landing_offset_std >= 0.0, "a std in metres >= 0"),
        "knock_radius": (physics.knock_radius >= 0.0, "a distance in metres >= 0"),
        "knock_probability": (0.0 <= physics.knock_probability <= 1.0, "a probability in [0, 1]"),
        "slide_mean": (physics.slide_mean > 0.0, "a mean length in metres > 0"),
        "settle_steps": (physics.settle_steps >= 1, "a number of world steps >= 1"),
    }
    check_ranges("sim_node.physics", physics, checks)


def _lattice(lo: float, hi: float, spacing: float) -> list[float]:
    """Points spaced ``spacing`` centred in [lo, hi] (empty when lo > hi)."""
    if hi < lo - 1e-9:
        return []
    count = math.floor((hi - lo) / spacing + 1e-9) + 1
    start = (lo + hi) / 2.0 - (count - 1) * spacing / 2.0
    return [round(start + k * spacing, 6) for k in range(count)]


def _moved(placed: PlacedObject, position: Vec3) -> PlacedObject:
    box = placed.state.box
    delta = tuple(p - c for p, c in zip(position, box.center, strict=True))
    moved = box.translated(delta)  # type: ignore[arg-type]
    state = dataclasses.replace(placed.state, position=moved.center, box=moved)
    return PlacedObject(state, placed.appearance)


def _check_state(obj: ObjectState) -> None:
    centre = obj.box.center
    if any(abs(a - b) > 1e-6 for a, b in zip(obj.position, centre, strict=True)):
        raise ValueError(f"object {obj.instance_id}: position {obj.position} is not its box centre {centre}")


def _normalised(pose: AgentPose) -> AgentPose:
    return AgentPose(round(pose.x, 6), round(pose.z, 6), round(pose.yaw_deg, 6) % 360.0, round(pose.horizon_deg, 6))


def _fmt(p: Vec3) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in p) + ")"
