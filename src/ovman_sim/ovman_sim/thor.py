"""ThorWorld: the World protocol on AI2-THOR 5.0.0 (``ai2thor.controller.Controller``).

Frame: AI2-THOR's world frame throughout (metres, y up, left-handed; yaw ``rotation.y`` in degrees
clockwise from above, 0 facing +z; ``cameraHorizon`` in degrees, positive looking down), the core's
frame, so poses pass through unchanged. ``ai2thor`` is optional (``pip install -e .[thor]``) and
imported only when a ThorWorld is made; it never goes to the network: the pinned build must be on disk.

Why one module: it is one World implementation on AI2-THOR (:class:`ThorWorld`), its controller
start-up and errors, object templates and mover; every part talks to the same controller.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from ovman_core.actions import Action, ActionResult
from ovman_core.boxes import Box3, Vec2, Vec3
from ovman_core.camera import Intrinsics
from ovman_core.config import SimConfig
from ovman_core.observation import Observation, pose_observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_sim.conditions import degrade_low_light
from ovman_sim.world import AddObject, Change, Condition, MoveObject, RemoveObject, apply_by_kind

INSTALL_HINT = "pip install -e .[thor]"
THOR_PLATFORMS = ("CloudRendering", "Linux64")
START_THREAD_NAME = "ai2thor-controller-start"
_NO_COLOUR = 1 << 24  # a key no 24-bit colour packs to: marks pixels left out of segments
_DIRECTIONS = ((0.0, 1.0), (1.0, 0.0), (0.0, -1.0), (-1.0, 0.0))
"""Mover headings on the floor (dx, dz) for yaw 0, 90, 180, 270 degrees (+z, +x, −z, −x)."""


class ThorUnavailableError(ImportError):
    """The optional ``ai2thor`` package is not installed."""


class ThorBuildMissingError(FileNotFoundError):
    """The pinned Unity build (or the configured local executable) is not on disk."""


class ThorStartError(RuntimeError):
    """The Controller could not start the Unity player."""


class ThorStartTimeoutError(ThorStartError, TimeoutError):
    """The Unity player did not answer within ``sim_node.ai2thor.start_timeout_s``.

    ``pid`` is the process id of the player that was killed (None if none had been launched).
    """

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class ThorActionError(RuntimeError):
    """An action the adapter relies on failed inside AI2-THOR."""


# --------------------------------------------------------------------------- installation


def import_ai2thor() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``(ai2thor.controller, ai2thor.platform, ai2thor.fifo_server)``; raises ThorUnavailableError."""
    try:
        import ai2thor.controller
        import ai2thor.fifo_server
        import ai2thor.platform
    except ImportError as err:
        raise ThorUnavailableError(
            f"the AI2-THOR world needs the optional dependency ai2thor==5.0.0 ({err}); install it with "
            f"`{INSTALL_HINT}` or set sim_node.world.kind to 'embedded'"
        ) from err
    return ai2thor.controller, ai2thor.platform, ai2thor.fifo_server


def release_dir(commit_id: str, platform: str, home: Path | None = None) -> Path:
    """Where ai2thor looks for a provisioned build: ``~/.ai2thor/releases/thor-<platform>-<commit_id>``."""
    home = Path(os.path.expanduser("~")) if home is None else home
    return home / ".ai2thor" / "releases" / f"thor-{platform}-{commit_id}"


def check_thor_config(sim: SimConfig) -> None:
    """Reject ai2thor settings the Controller would fail on late or obscurely."""
    cfg = sim.ai2thor
    if cfg.platform not in THOR_PLATFORMS:
        raise ValueError(f"sim_node.ai2thor.platform is {cfg.platform!r}; expected one of {', '.join(THOR_PLATFORMS)}")
    if (cfg.local_executable_path or cfg.platform == "Linux64") and not cfg.x_display:
        # ExternalBuild and Linux64 launch Unity with DISPLAY=x_display; None crashes Popen.
        raise ValueError(
            "sim_node.ai2thor.x_display is empty, but Linux64 and local_executable_path launches need an X "
            "display (e.g. ':0'); set it, or use platform CloudRendering with a provisioned release"
        )
    try:
        Condition(sim.conditions.name)
    except ValueError:
        valid = ", ".join(c.value for c in Condition)
        raise ValueError(f"sim_node.conditions.name is {sim.conditions.name!r}; expected one of {valid}") from None
    hops = sim.mover.hop_length / sim.world.grid_size
    if hops < 1.0 - 1e-9 or abs(hops - round(hops)) > 1e-6 or sim.mover.steps_per_move < 1:
        raise ValueError(
            f"sim_node.mover.hop_length = {sim.mover.hop_length} must be a positive multiple of world.grid_size = "
            f"{sim.world.grid_size}, and mover.steps_per_move ({sim.mover.steps_per_move}) at least 1"
        )
    if cfg.settle_max_steps < 1:
        raise ValueError(f"sim_node.ai2thor.settle_max_steps must be at least 1, got {cfg.settle_max_steps}")
    if cfg.start_timeout_s <= 0.0 or cfg.server_timeout_s <= 0.0:
        raise ValueError("sim_node.ai2thor.start_timeout_s and server_timeout_s must be positive")


def check_thor_build(sim: SimConfig, home: Path | None = None) -> None:
    """Raise ThorBuildMissingError, with provisioning instructions, unless the build is on disk.
    Checked before any Controller exists: without its build a Controller goes to the network (with
    no timeout) or hangs."""
    cfg = sim.ai2thor
    if cfg.local_executable_path:
        path = Path(cfg.local_executable_path)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ThorBuildMissingError(
                f"sim_node.ai2thor.local_executable_path is {str(path)!r}, which is not an executable file; "
                "point it at the Unity player binary (thor-<platform>-<commit>/thor-<platform>-<commit>) or set "
                "it to '' to use the provisioned release directory"
            )
        return
    build = release_dir(cfg.commit_id, cfg.platform, home)
    name = build.name
    missing = [p for p in (build / "metadata.json", build / name) if not p.is_file()]
    if not missing:
        return
    raise ThorBuildMissingError(
        f"the AI2-THOR Unity build {name} is not provisioned: {', '.join(str(p) for p in missing)} missing. "
        "The adapter never downloads it (the ai2thor Controller would try, without a timeout). Provision it "
        "once, in one of these ways:\n"
        "  1. on a machine with network access, run\n"
        '       python -c "from ai2thor.controller import Controller; import ai2thor.platform as p; '
        f"Controller(download_only=True, commit_id='{cfg.commit_id}', platform=p.{cfg.platform})\"\n"
        f"     and copy the resulting ~/.ai2thor/releases/{name}/ directory to {build}/;\n"
        f"  2. download http://s3-us-west-2.amazonaws.com/ai2-thor-public/builds/{name}.zip and unzip it into "
        f"{build}/ (keep its metadata.json; chmod +x {name});\n"
        "  3. or set sim_node.ai2thor.local_executable_path to a Unity player binary (needs x_display).\n"
        "ai2thor keeps only the 3 newest directories in ~/.ai2thor/releases and deletes older ones on start."
    )


# --------------------------------------------------------------------------- start-up


def controller_arguments(sim: SimConfig, scene: str, platform: Any) -> dict[str, Any]:
    """Keyword arguments for ``Controller``: launch settings plus the ``Initialize`` parameters.

    ``platform`` is the ai2thor platform class (never its name: the string form crashes the
    Controller's own error path). ``x_display`` is always passed, because ExternalBuild launches
    use Linux64's environment and Popen fails on ``DISPLAY=None``.
    """
    cfg, camera, world = sim.ai2thor, sim.camera, sim.world
    arguments: dict[str, Any] = {
        "scene": scene,
        "width": camera.width,
        "height": camera.height,
        "quality": cfg.quality,
        "x_display": cfg.x_display or None,
        "server_timeout": cfg.server_timeout_s,
        "server_start_timeout": cfg.start_timeout_s,
        # Initialize (sent to Unity after every reset).
        "agentMode": "default",
        "gridSize": world.grid_size,
        "snapToGrid": True,
        "rotateStepDegrees": world.rotate_step_deg,
        "fieldOfView": camera.vertical_fov_deg,
        "renderDepthImage": True,
        "renderInstanceSegmentation": True,
    }
    if cfg.local_executable_path:
        arguments["local_executable_path"] = cfg.local_executable_path
    else:
        arguments["commit_id"] = cfg.commit_id
        arguments["platform"] = platform
    return arguments


def start_controller(controller_cls: type, arguments: Mapping[str, Any], timeout_s: float, fifo: ModuleType) -> Any:
    """Construct ``controller_cls(**arguments)`` in a worker thread, at most ``timeout_s`` seconds.

    A player that never opens its FIFO blocks the Controller forever (``server_start_timeout``
    does not cover the ``open``). On timeout the Unity process is killed, the blocked read is
    ended by writing an END_OF_MESSAGE header into the FIFO, and ThorStartTimeoutError is raised.
    """
    controller = controller_cls.__new__(controller_cls)
    failure: list[BaseException] = []

    def construct() -> None:
        try:
            controller.__init__(**arguments)
        except BaseException as err:  # handed to the caller's thread below
            failure.append(err)

    thread = threading.Thread(target=construct, name=START_THREAD_NAME, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        killed = _abort_start(controller, fifo)
        thread.join(timeout_s)
        _close_server(controller)
        raise ThorStartTimeoutError(
            f"AI2-THOR did not start within {timeout_s:g} s (sim_node.ai2thor.start_timeout_s); "
            + ("the Unity player was killed. " if killed is not None else "no Unity player had been launched. ")
            + "Check ~/.ai2thor/log/unity.log and ~/.config/unity3d/Allen Institute for Artificial Intelligence/"
            "AI2-THOR/Player.log; CloudRendering needs a working Vulkan driver (vulkaninfo), Linux64 an X "
            "server with GLX on x_display; with CUDA_VISIBLE_DEVICES set ai2thor also needs vulkaninfo and "
            "nvidia-smi.",
            killed,
        )
    if failure:
        _abort_start(controller, fifo)
        _close_server(controller)
        raise ThorStartError(f"AI2-THOR failed to start: {failure[0]}") from failure[0]
    return controller


def _abort_start(controller: Any, fifo: ModuleType) -> int | None:
    """Kill the player a stuck Controller start launched and unblock its reader.

    Returns the player's process id, or None when no player had been launched.
    """
    server = getattr(controller, "server", None)
    if server is None:
        return None
    process = getattr(server, "unity_proc", None)
    killed = None if process is None else int(process.pid)
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
    pipe_path = getattr(server, "server_pipe_path", None)
    if pipe_path and os.path.exists(pipe_path):
        # An empty message makes FifoServer.receive raise "no metadata", so the blocked thread ends.
        end_of_message = struct.pack(fifo.FifoServer.header_format, fifo.FieldType.END_OF_MESSAGE.value, 0)
        try:
            descriptor = os.open(pipe_path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as err:
            if err.errno != errno.ENXIO:  # ENXIO: nobody is reading, so nothing is blocked
                raise
        else:
            try:
                os.write(descriptor, end_of_message)
            finally:
                os.close(descriptor)
    return killed


def _close_server(controller: Any) -> None:
    """Close the FIFOs of a Controller whose start failed (its player is already dead)."""
    server = getattr(controller, "server", None)
    if server is not None:
        server.stop()


# --------------------------------------------------------------------------- metadata parsing


@dataclasses.dataclass(frozen=True)
class ThorObject:
    """One sim object as AI2-THOR reports it (world frame; metres and degrees).

    ``pivot`` is the transform position (what SetObjectPoses/TeleportObject take), ``center`` and
    ``size`` the axis-aligned bounding box.
    """

    object_id: str
    name: str
    object_type: str
    pivot: Vec3
    rotation: Vec3
    center: Vec3
    size: Vec3
    pickupable: bool
    moveable: bool
    receptacle: bool

    @property
    def movable(self) -> bool:
        return self.pickupable or self.moveable

    @property
    def box(self) -> Box3:
        return Box3.from_center_size(self.center, self.size)

    def pivot_for_center(self, center: Vec3) -> Vec3:
        """The pivot that puts the box centre at ``center`` (translation only, rotation kept)."""
        return (
            self.pivot[0] + center[0] - self.center[0],
            self.pivot[1] + center[1] - self.center[1],
            self.pivot[2] + center[2] - self.center[2],
        )


def _xyz(value: Mapping[str, Any]) -> Vec3:
    return (float(value["x"]), float(value["y"]), float(value["z"]))


def _vector(value: Vec3) -> dict[str, float]:
    return {"x": float(value[0]), "y": float(value[1]), "z": float(value[2])}


def parse_objects(metadata_objects: list[Mapping[str, Any]], structural_types: list[str]) -> dict[str, ThorObject]:
    """``metadata['objects']`` → ThorObject by objectId, structural types left out."""
    parsed: dict[str, ThorObject] = {}
    for entry in metadata_objects:
        if entry["objectType"] in structural_types:
            continue
        try:
            box = entry["axisAlignedBoundingBox"]
            obj = ThorObject(
                object_id=str(entry["objectId"]),
                name=str(entry["name"]),
                object_type=str(entry["objectType"]),
                pivot=_xyz(entry["position"]),
                rotation=_xyz(entry["rotation"]),
                center=_xyz(box["center"]),
                size=_xyz(box["size"]),
                pickupable=bool(entry["pickupable"]),
                moveable=bool(entry["moveable"]),
                receptacle=bool(entry.get("receptacle", False)),
            )
        except (KeyError, TypeError) as err:
            raise ThorActionError(
                f"metadata object {entry.get('objectId')!r} lacks field {err}; is this an ai2thor 5.0.0 build?"
            ) from err
        parsed[obj.object_id] = obj
    return parsed


def agent_pose_from_metadata(metadata: Mapping[str, Any]) -> AgentPose:
    """The agent pose: position (x, z), ``rotation.y`` as yaw in [0, 360), ``cameraHorizon``."""
    agent = metadata["agent"]
    return AgentPose(
        x=float(agent["position"]["x"]),
        z=float(agent["position"]["z"]),
        yaw_deg=float(agent["rotation"]["y"]) % 360.0,
        horizon_deg=float(agent["cameraHorizon"]),
    )


# --------------------------------------------------------------------------- images


def planar_depth(depth: np.ndarray, near: float, far: float, saturation: float, tolerance: float) -> np.ndarray:
    """AI2-THOR's metric depth frame → float32 planar depth with NaN where invalid.

    AI2-THOR depth is already planar (z along the optical axis). Invalid: closer than ``near``,
    farther than ``far``, or within ``tolerance`` of ``saturation`` (far − near of the Unity
    camera), the value rays that hit nothing read.
    """
    out = np.array(depth, dtype=np.float32, copy=True)
    invalid = ~np.isfinite(out) | (out < near) | (out > far) | (out >= saturation - tolerance)
    out[invalid] = np.nan
    return out


def segments_from_instance_frame(
    frame: np.ndarray,
    color_to_object_id: Mapping[tuple[int, ...], str],
    instances: Mapping[str, tuple[str, str]],
    valid: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[int, str], dict[int, str]]:
    """Per-frame segments from AI2-THOR's instance segmentation.

    ``frame`` is ``event.instance_segmentation_frame`` (uint8 H×W×3), ``color_to_object_id`` the
    event's colour map, ``instances`` maps an AI2-THOR objectId to (instance id, label) for the
    objects that count (structure and removed objects are absent and read 0). Segment ids are
    1..N in the order of the instance ids, so they carry no identity across frames. Pixels outside
    the optional bool mask ``valid`` read 0.
    Returns (int32 H×W segments, segment id → label, segment id → instance id).
    """
    rgb = np.asarray(frame, dtype=np.uint32)
    keys = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    if valid is not None:
        keys = np.where(valid, keys, np.uint32(_NO_COLOUR))
    unique, inverse = np.unique(keys.ravel(), return_inverse=True)
    present: list[tuple[str, str, int]] = []
    for index, key in enumerate(unique.tolist()):
        if key == _NO_COLOUR:
            continue
        object_id = color_to_object_id.get(((key >> 16) & 255, (key >> 8) & 255, key & 255))
        if object_id is not None and object_id in instances:
            instance_id, label = instances[object_id]
            present.append((instance_id, label, index))
    lookup = np.zeros(len(unique), dtype=np.int32)
    labels: dict[int, str] = {}
    owners: dict[int, str] = {}
    for segment, (instance_id, label, index) in enumerate(sorted(present), start=1):
        lookup[index] = segment
        labels[segment] = label
        owners[segment] = instance_id
    return lookup[inverse].reshape(keys.shape), labels, owners


# --------------------------------------------------------------------------- the world


@dataclasses.dataclass(frozen=True)
class _Template:
    """What :meth:`ThorWorld.new_instance` promised: a copy of ``source_id`` of ``category``."""

    category: str
    source_id: str


@dataclasses.dataclass
class _Mover:
    """State of the mover: the carried object, its seeded policy, the cells it may use, its heading."""

    thor_id: str
    rng: np.random.Generator
    cells: list[Vec2]
    heading: int | None = None


class ThorWorld:
    """The World protocol on an AI2-THOR 5.0.0 Controller (change mechanics: shared/design/notes/ai2thor.md
    §3 and §6). A visit's objects are one ``SetObjectPoses`` of the movables that stay (a name listed
    twice is copied: how added objects are made) and ``DisableObject`` for static ones that go; a move
    teleports with ``forceKinematic=False`` so the object comes to rest. After every change: ``Pass``
    until ``isSceneAtRest``, the reachable positions again, then one more ``Pass`` so no image taken
    before the edit is used. The mover hops by ``TeleportObject(forceKinematic=True)`` + ``Pass``.

    The Controller starts at the first :meth:`reset` (with that scene); the constructor only checks
    the installation, the configuration and the build on disk. The Controller is not thread-safe:
    use one ThorWorld from one thread.
    """

    def __init__(self, sim: SimConfig) -> None:
        self._controller_module, self._platform_module, self._fifo_module = import_ai2thor()
        check_thor_config(sim)
        check_thor_build(sim)
        self.config = sim
        """The simulator configuration this world runs with."""
        self._cfg = sim.ai2thor
        self._controller: Any = None
        self._scene = ""
        self._steps = 0
        self._reachable: list[Vec2] | None = None
        self._disabled: set[str] = set()
        self._aliases: dict[str, str] = {}  # AI2-THOR objectId of an added copy -> our instance id
        self._templates: dict[str, _Template] = {}
        self._mover: _Mover | None = None
        self._condition = Condition(sim.conditions.name)
        self._condition_seed = 0
        self._unity_dimmed = False

    # ---------------------------------------------------------------- controller plumbing

    @property
    def controller(self) -> Any:
        """The running ``ai2thor.controller.Controller`` (for diagnostics); raises before reset."""
        if self._controller is None:
            raise RuntimeError("ThorWorld: call reset(scene) first; the AI2-THOR controller starts there")
        return self._controller

    def _start(self, scene: str) -> None:
        platform = getattr(self._platform_module, self._cfg.platform)
        arguments = controller_arguments(self.config, scene, platform)
        self._controller = start_controller(
            self._controller_module.Controller, arguments, self._cfg.start_timeout_s, self._fifo_module
        )

    def _event(self) -> Any:
        return self.controller.last_event

    def _do(self, action: str, **arguments: Any) -> Any:
        return self.controller.step(action=action, **arguments)

    def _require(self, action: str, **arguments: Any) -> Any:
        event = self._do(action, **arguments)
        if not event.metadata["lastActionSuccess"]:
            raise ThorActionError(f"AI2-THOR action {action} failed: {event.metadata['errorMessage']}")
        return event

    def _objects_by_thor_id(self, metadata: Mapping[str, Any] | None = None) -> dict[str, ThorObject]:
        metadata = self._event().metadata if metadata is None else metadata
        parsed = parse_objects(metadata["objects"], self._cfg.structural_types)
        return {key: obj for key, obj in parsed.items() if key not in self._disabled}

    def _instance_id(self, thor_id: str) -> str:
        return self._aliases.get(thor_id, thor_id)

    def _find(self, instance_id: str) -> ThorObject | None:
        for thor_id, obj in self._objects_by_thor_id().items():
            if self._instance_id(thor_id) == instance_id:
                return obj
        return None

    def _floor_y(self) -> float:
        """Floor height under the agent: camera height minus the configured camera height."""
        return float(self._event().metadata["cameraPosition"]["y"]) - self.config.world.camera_height

    # ---------------------------------------------------------------- World protocol

    def reset(self, scene: str, objects: WorldState | None = None, pose: AgentPose | None = None) -> None:
        self._mover = None
        self._steps = 0
        self._disabled = set()
        self._aliases = {}
        self._reachable = None
        if self._controller is None:
            self._start(scene)
        else:
            self.controller.reset(scene)
        if self._scene and self._scene != scene:
            self._templates = {}
        self._scene = scene
        self._apply_condition()
        if objects is not None:
            self._set_objects(objects)
        self._reachable = self._query_reachable()
        if pose is not None:
            placed = self.teleport(pose)
            if not placed.success:
                raise ValueError(f"reset({scene!r}): cannot place the agent at {pose}: {placed.message}")
        self._require("Pass")

    def objects(self) -> WorldState:
        states = [
            ObjectState(self._instance_id(thor_id), obj.object_type, obj.center, obj.box, obj.movable)
            for thor_id, obj in sorted(self._objects_by_thor_id().items())
        ]
        return WorldState.of(states)

    def agent_pose(self) -> AgentPose:
        return agent_pose_from_metadata(self._event().metadata)

    def observe_pose(self) -> Observation:
        event = self._event()
        metadata = event.metadata
        if "cameraPosition" not in metadata:
            raise ThorActionError("AI2-THOR metadata has no 'cameraPosition'; is this an ai2thor 5.0.0 build?")
        return pose_observation(
            agent_pose_from_metadata(metadata),
            _xyz(metadata["cameraPosition"]),
            Intrinsics.from_vertical_fov(event.screen_width, event.screen_height, float(metadata["fov"])),
            self._steps,
        )

    def observe(self) -> Observation:
        event = self._event()
        if event.frame is None or event.depth_frame is None or event.instance_segmentation_frame is None:
            raise ThorActionError(
                "the last AI2-THOR event has no RGB, depth or instance segmentation image; the controller must "
                "run with renderDepthImage and renderInstanceSegmentation and not headless"
            )
        located = self.observe_pose()
        metadata = event.metadata
        server = self.controller.server
        camera = self.config.camera
        depth = planar_depth(
            event.depth_frame,
            near=camera.near,
            far=camera.far,
            saturation=float(server.camera_far_plane - server.camera_near_plane),
            tolerance=self._cfg.depth_saturation_tolerance,
        )
        rgb = np.array(event.frame, dtype=np.uint8, copy=True)
        visible = None
        if self._condition is Condition.LOW_LIGHT:
            conditions = self.config.conditions
            rgb, depth, visible = degrade_low_light(
                rgb,
                depth,
                gain=1.0 if self._unity_dimmed else conditions.low_light_gain,
                noise_std=conditions.low_light_noise_std,
                visibility=conditions.low_light_visibility,
                rng=np.random.default_rng((self._condition_seed, self._steps)),
            )
        instances = {
            thor_id: (self._instance_id(thor_id), obj.object_type)
            for thor_id, obj in self._objects_by_thor_id(metadata).items()
        }
        segments, labels, owners = segments_from_instance_frame(
            event.instance_segmentation_frame, event.color_to_object_id, instances, visible
        )
        return dataclasses.replace(
            located, rgb=rgb, depth=depth, segments=segments, segment_labels=labels, segment_instances=owners
        )

    def step(self, action: Action | str) -> ActionResult:
        action = Action(action)
        world = self.config.world
        result: ActionResult
        if action is Action.LOOK_UP or action is Action.LOOK_DOWN:
            sign = 1.0 if action is Action.LOOK_DOWN else -1.0
            target = self.agent_pose().horizon_deg + sign * world.look_step_deg
            if not world.horizon_min_deg <= target <= world.horizon_max_deg:
                result = ActionResult(False, message=f"horizon {target:g} deg is outside the configured range")
            else:
                result = self._result(self._do(action.value, degrees=world.look_step_deg), action)
        elif action is Action.ROTATE_LEFT or action is Action.ROTATE_RIGHT:
            result = self._result(self._do(action.value, degrees=world.rotate_step_deg), action)
        elif action is Action.MOVE_AHEAD:
            result = self._result(self._do("MoveAhead", moveMagnitude=world.grid_size), action)
        else:  # Stop ends the episode at this moment: time and the mover do not advance.
            return self._result(self._do("Done"), action)
        self._steps += 1
        if self._mover is not None and self._steps % self.config.mover.steps_per_move == 0:
            self._hop()
        return result

    @staticmethod
    def _result(event: Any, action: Action) -> ActionResult:
        success = bool(event.metadata["lastActionSuccess"])
        return ActionResult(
            success=success,
            collided=action is Action.MOVE_AHEAD and not success,
            message=str(event.metadata.get("errorMessage") or ""),
        )

    def teleport(self, pose: AgentPose) -> ActionResult:
        world = self.config.world
        if not self._is_reachable((pose.x, pose.z)):
            return ActionResult(False, message=f"({pose.x:.3f}, {pose.z:.3f}) is not a reachable position")
        if not world.horizon_min_deg <= pose.horizon_deg <= world.horizon_max_deg:
            return ActionResult(False, message=f"horizon {pose.horizon_deg:g} deg is outside the configured range")
        agent_y = float(self._event().metadata["agent"]["position"]["y"])
        event = self._do(
            "Teleport",
            position={"x": pose.x, "y": agent_y, "z": pose.z},
            rotation={"x": 0.0, "y": pose.yaw_deg, "z": 0.0},
            horizon=pose.horizon_deg,
            standing=True,
        )
        return ActionResult(bool(event.metadata["lastActionSuccess"]), message=str(event.metadata["errorMessage"]))

    def _is_reachable(self, point: Vec2) -> bool:
        tolerance = self._cfg.position_tolerance
        return any(math.dist(point, cell) <= tolerance for cell in self.reachable_positions())

    def reachable_positions(self) -> list[Vec2]:
        if self._reachable is None:
            self._reachable = self._query_reachable()
        return list(self._reachable)

    def _query_reachable(self) -> list[Vec2]:
        event = self._require("GetReachablePositions")
        return sorted((float(p["x"]), float(p["z"])) for p in event.metadata["actionReturn"])

    def apply_change(self, change: Change) -> ActionResult:
        return apply_by_kind(change, self._move, self._remove, self._add)

    def _move(self, change: MoveObject) -> ActionResult:
        obj = self._find(change.instance_id)
        if obj is None:
            return ActionResult(False, message=f"no object {change.instance_id!r} in the scene")
        if not obj.movable:
            return ActionResult(False, message=f"{change.instance_id!r} is neither pickupable nor moveable")
        event = self._do(
            "TeleportObject",
            objectId=obj.object_id,
            position=_vector(obj.pivot_for_center(change.position)),
            rotation=_vector(obj.rotation),
            forceAction=True,
            forceKinematic=False,
        )
        if not event.metadata["lastActionSuccess"]:
            return ActionResult(False, message=f"TeleportObject failed: {event.metadata['errorMessage']}")
        return self._after_change()

    def _remove(self, change: RemoveObject) -> ActionResult:
        obj = self._find(change.instance_id)
        if obj is None:
            return ActionResult(False, message=f"no object {change.instance_id!r} in the scene")
        event = self._do("DisableObject", objectId=obj.object_id)
        if not event.metadata["lastActionSuccess"]:
            return ActionResult(False, message=f"DisableObject failed: {event.metadata['errorMessage']}")
        # DisableObject keeps the object in AI2-THOR's registry; the adapter hides it from then on.
        self._disabled.add(obj.object_id)
        if self._mover is not None and self._mover.thor_id == obj.object_id:
            self._mover = None
        return self._after_change()

    def _add(self, change: AddObject) -> ActionResult:
        instance_id = change.obj.instance_id
        template = self._templates.get(instance_id)
        if template is None:
            return ActionResult(False, message=f"{instance_id!r} was not made by new_instance; call it first")
        current = self._objects_by_thor_id()
        if any(self._instance_id(key) == instance_id for key in current):
            return ActionResult(False, message=f"{instance_id!r} is already in the scene")
        source = current.get(template.source_id)
        if source is None:
            return ActionResult(False, message=f"the template object {template.source_id!r} is no longer in the scene")
        before = {str(entry["objectId"]) for entry in self._event().metadata["objects"]}
        poses = [_pose_entry(obj, obj.pivot) for obj in _movables(current)]
        index = _copy_index(poses, source, before)
        poses.insert(index, _pose_entry(source, source.pivot_for_center(change.obj.position)))
        event = self._do("SetObjectPoses", objectPoses=poses, placeStationary=False)
        if not event.metadata["lastActionSuccess"]:
            return ActionResult(False, message=f"SetObjectPoses failed: {event.metadata['errorMessage']}")
        created = [
            obj
            for key, obj in parse_objects(event.metadata["objects"], self._cfg.structural_types).items()
            if key not in before and obj.object_type == template.category
        ]
        if not created:
            self._after_change()
            return ActionResult(False, message=f"AI2-THOR made no copy of {source.object_id!r}")
        copy = min(created, key=lambda obj: (math.dist(obj.center, change.obj.position), obj.object_id))
        self._aliases[copy.object_id] = instance_id
        return self._after_change()

    def _after_change(self) -> ActionResult:
        """Settle, re-query the reachable grid, and take one fresh frame."""
        steps, at_rest = self._settle()
        self._reachable = self._query_reachable()
        self._require("Pass")
        message = f"settled after {steps} Pass steps" if at_rest else f"not at rest after {steps} Pass steps"
        return ActionResult(True, message=message)

    def _settle(self) -> tuple[int, bool]:
        """``Pass`` until AI2-THOR reports ``isSceneAtRest``, at most ``settle_max_steps`` times."""
        for count in range(1, self._cfg.settle_max_steps + 1):
            if self._require("Pass").metadata["isSceneAtRest"]:
                return count, True
        return self._cfg.settle_max_steps, False

    def _set_objects(self, objects: WorldState) -> None:
        """Make the freshly loaded scene hold exactly ``objects`` (one SetObjectPoses, DisableObject)."""
        scene = self._objects_by_thor_id()
        tolerance = self._cfg.position_tolerance
        poses: list[dict[str, Any]] = []
        to_disable: list[str] = []
        for thor_id, obj in sorted(scene.items()):
            wanted = objects.objects.get(thor_id)
            if wanted is None:
                if not obj.movable:
                    to_disable.append(thor_id)
                continue  # movable objects left out of SetObjectPoses are removed by AI2-THOR
            if obj.movable:
                poses.append(_pose_entry(obj, obj.pivot_for_center(wanted.position)))
            elif math.dist(obj.center, wanted.position) > tolerance:
                raise ValueError(
                    f"object {thor_id!r} of scene {self._scene!r} is static in AI2-THOR and cannot be moved to "
                    f"{wanted.position} (it is at {obj.center})"
                )
        added = sorted((o for o in objects if o.instance_id not in scene), key=lambda o: o.instance_id)
        listed = {entry["objectName"] for entry in poses}
        for new in added:
            source = self._copy_source(new, scene, listed)
            if source is None:
                raise ValueError(
                    f"object {new.instance_id!r} ({new.category}) is not in scene {self._scene!r}, and AI2-THOR can "
                    f"only add it as a copy of a pickupable or moveable {new.category} the visit keeps: there is none"
                )
            # A fresh scene has no copies yet, so every copy's id (source id + list index) is new.
            poses.append(_pose_entry(source, source.pivot_for_center(new.position)))
        if poses:
            event = self._require("SetObjectPoses", objectPoses=poses, placeStationary=False)
            after = parse_objects(event.metadata["objects"], self._cfg.structural_types)
            self._assign_copies(added, {key: obj for key, obj in after.items() if key not in scene})
        for thor_id in to_disable:
            self._require("DisableObject", objectId=thor_id)
            self._disabled.add(thor_id)
        self._settle()

    def _copy_source(self, new: ObjectState, scene: Mapping[str, ThorObject], listed: set[str]) -> ThorObject | None:
        """The scene object an added instance is copied from: its new_instance template when that
        object stays, else the first staying movable object of its category (by objectId)."""
        template = self._templates.get(new.instance_id)
        if template is not None and template.category == new.category:
            source = scene.get(template.source_id)
            if source is not None and source.name in listed:
                return source
        staying = [o for o in _movables(scene) if o.object_type == new.category and o.name in listed]
        return staying[0] if staying else None

    def _assign_copies(self, added: list[ObjectState], created: dict[str, ThorObject]) -> None:
        """Map the copies AI2-THOR made to the added instance ids, per category by nearest box centre."""
        for category in sorted({o.category for o in added}):
            wanted = [o for o in added if o.category == category]
            copies = sorted((obj for obj in created.values() if obj.object_type == category), key=lambda o: o.object_id)
            if len(copies) < len(wanted):
                raise ThorActionError(
                    f"AI2-THOR made {len(copies)} copies of category {category!r} but the visit adds {len(wanted)}"
                )
            cost = np.array([[math.dist(o.position, c.center) for c in copies] for o in wanted])
            rows, cols = linear_sum_assignment(cost)
            for row, col in zip(rows, cols, strict=True):
                self._aliases[copies[col].object_id] = wanted[row].instance_id

    def candidate_placements(self, instance_id: str) -> list[Vec3]:
        """Box centres on reachable floor cells and on receptacle tops (a ``grid_size`` lattice) where
        the object's box overlaps no other object's box; [] for static objects. ``instance_id`` may
        also name a :meth:`new_instance` template not yet added."""
        obj = self._find(instance_id)
        if obj is None:
            template = self._templates.get(instance_id)
            source = None if template is None else self._objects_by_thor_id().get(template.source_id)
            if source is None:
                raise ValueError(
                    f"candidate_placements: unknown instance {instance_id!r} (not in the scene, no template)"
                )
            size, exclude = source.size, ""
        elif not obj.movable:
            return []
        else:
            size, exclude = obj.size, obj.object_id
        others = [o for o in self._objects_by_thor_id().values() if o.object_id != exclude]
        half = np.array(size) / 2.0
        spacing = self.config.world.grid_size
        floor_y = self._floor_y()
        centres: list[Vec3] = [(x, floor_y + half[1], z) for x, z in self.reachable_positions()]
        for support in others:
            if not support.receptacle:
                continue
            lo, hi = np.array(support.box.lo), np.array(support.box.hi)
            xs = np.arange(lo[0] + half[0], hi[0] - half[0] + 1e-9, spacing)
            zs = np.arange(lo[2] + half[2], hi[2] - half[2] + 1e-9, spacing)
            centres += [(float(x), float(hi[1] + half[1]), float(z)) for x in xs for z in zs]
        if not centres or not others:
            return sorted(set(centres))
        points = np.array(centres)
        lows = np.array([o.box.lo for o in others])
        highs = np.array([o.box.hi for o in others])
        overlap = np.all(
            (points[:, None, :] - half < highs[None, :, :]) & (points[:, None, :] + half > lows[None, :, :]), axis=-1
        )
        return sorted({centres[i] for i in np.flatnonzero(~overlap.any(axis=1))})

    def new_instance(self, category: str, instance_id: str) -> ObjectState | None:
        current = self._objects_by_thor_id()
        if any(self._instance_id(key) == instance_id for key in current):
            raise ValueError(f"new_instance: {instance_id!r} is already an instance in the scene")
        sources = [
            obj for obj in _movables(current) if obj.object_type == category and obj.object_id not in self._aliases
        ]
        if not sources:
            return None
        source = sources[0]
        self._templates[instance_id] = _Template(category, source.object_id)
        return ObjectState(instance_id, category, source.center, source.box, True)

    def start_mover(self, instance_id: str, seed: int) -> None:
        """Set the object down on the reachable cell nearest to it, then carry it (see :meth:`_hop`).

        The cells are AI2-THOR's reachable positions with the object disabled for the query.
        """
        obj = self._find(instance_id)
        if obj is None or not obj.movable:
            raise ValueError(f"start_mover: {instance_id!r} is not a pickupable or moveable object of the scene")
        # The cells the object may use are those the agent reaches with the object itself removed.
        self._require("DisableObject", objectId=obj.object_id)
        try:
            cells = self._query_reachable()
        finally:
            self._require("EnableObject", objectId=obj.object_id)
        if not cells:
            raise ValueError("start_mover: the agent has no reachable cell to carry the object along")
        here = (obj.center[0], obj.center[2])
        start = min(cells, key=lambda cell: (math.dist(cell, here), cell))
        self._mover = _Mover(obj.object_id, np.random.default_rng(seed), cells)
        self._carry(obj, start)

    def stop_mover(self) -> None:
        self._mover = None

    def _hop(self) -> None:
        """One hop of the mover, with the embedded world's policy.

        Directions are the four lattice headings; a hop of ``mover.hop_length`` is open when every
        cell on the way was reachable when the mover started and the target keeps clear of the
        agent. The mover keeps its heading with probability ``mover.keep_direction_prob`` when it
        is open, otherwise picks uniformly among the other open headings (never straight back
        unless that is the only one).
        """
        mover = self._mover
        obj = None if mover is None else self._objects_by_thor_id().get(mover.thor_id)
        if mover is None or obj is None:
            self._mover = None
            return
        config, grid = self.config.mover, self.config.world.grid_size
        tolerance = self._cfg.position_tolerance
        here = (obj.center[0], obj.center[2])
        pose = self.agent_pose()
        clearance = self.config.world.agent_radius + max(obj.size[0], obj.size[2]) / 2.0
        hop_cells = round(config.hop_length / grid)
        targets: dict[int, Vec2] = {}
        for heading, (dx, dz) in enumerate(_DIRECTIONS):
            path = [(here[0] + dx * grid * k, here[1] + dz * grid * k) for k in range(1, hop_cells + 1)]
            if all(self._cell_in(point, mover.cells, tolerance) for point in path) and (
                math.dist(path[-1], (pose.x, pose.z)) > clearance
            ):
                targets[heading] = self._cell_in(path[-1], mover.cells, tolerance) or path[-1]
        keep = float(mover.rng.uniform())
        if not targets:
            return
        if mover.heading in targets and keep < config.keep_direction_prob:
            heading = mover.heading
        else:
            back = None if mover.heading is None else (mover.heading + 2) % 4
            others = [k for k in sorted(targets) if k != mover.heading and k != back]
            if not others:
                others = [k for k in sorted(targets) if k != mover.heading] or sorted(targets)
            heading = others[int(mover.rng.integers(0, len(others)))]
        mover.heading = heading
        self._carry(obj, targets[heading])

    @staticmethod
    def _cell_in(point: Vec2, cells: list[Vec2], tolerance: float) -> Vec2 | None:
        return next((cell for cell in cells if math.dist(point, cell) <= tolerance), None)

    def _carry(self, obj: ThorObject, cell: Vec2) -> None:
        """Put ``obj`` on the floor at ``cell`` kinematically (TeleportObject), then take a fresh frame."""
        centre = (cell[0], self._floor_y() + obj.size[1] / 2.0, cell[1])
        self._require(
            "TeleportObject",
            objectId=obj.object_id,
            position=_vector(obj.pivot_for_center(centre)),
            rotation=_vector(obj.rotation),
            forceAction=True,
            forceKinematic=True,
        )
        self._require("Pass")
        self._reachable = None

    def set_condition(self, condition: Condition | str, seed: int = 0) -> None:
        previous = self._condition
        self._condition = Condition(condition)
        self._condition_seed = seed
        if self._controller is not None:
            if previous is not Condition.BASELINE:
                self._require("ResetLighting")
                self._require("ResetMaterials")
            self._apply_condition()
            self._require("Pass")

    def _apply_condition(self) -> None:
        """Unity-side part of the condition on the current scene (a scene load restores lights and
        materials): lights dimmed for low_light, materials randomised for texture."""
        self._unity_dimmed = False
        if self._condition is Condition.LOW_LIGHT:
            gain = self.config.conditions.low_light_gain
            try:
                event = self._do("RandomizeLighting", brightness=[gain, gain], randomizeColor=False, synchronized=True)
            except ValueError:  # a build without the action: observe() dims in post-processing instead
                return
            self._unity_dimmed = bool(event.metadata["lastActionSuccess"])
        elif self._condition is Condition.TEXTURE:
            # Unity draws the materials from its own generator: not reproducible from our seed.
            self._require("RandomizeMaterials")

    def close(self) -> None:
        if self._controller is not None:
            controller, self._controller = self._controller, None
            controller.stop()


def _movables(objects: Mapping[str, ThorObject]) -> list[ThorObject]:
    """Pickupable and moveable objects, sorted by objectId (SetObjectPoses lists exactly these)."""
    return [obj for _, obj in sorted(objects.items()) if obj.movable]


def _pose_entry(obj: ThorObject, pivot: Vec3) -> dict[str, Any]:
    return {"objectName": obj.name, "position": _vector(pivot), "rotation": _vector(obj.rotation)}


def _copy_index(poses: list[dict[str, Any]], source: ThorObject, taken: set[str]) -> int:
    """Where to insert a second entry for ``source`` so AI2-THOR's copy id is new.

    AI2-THOR names a copy ``<objectId>_copy_<index in objectPoses>``; the entry must come after
    the source's own entry and its id must not collide with an existing copy.
    """
    first = next(i for i, entry in enumerate(poses) if entry["objectName"] == source.name)
    for index in range(first + 1, len(poses) + 1):
        if f"{source.object_id}_copy_{index}" not in taken:
            return index
    raise ThorActionError(f"no free copy index for {source.object_id!r} in a SetObjectPoses of {len(poses)} entries")
