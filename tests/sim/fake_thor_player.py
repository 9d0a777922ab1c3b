#!/usr/bin/env python3
"""A fake AI2-THOR Unity player that speaks the real FIFO protocol of ai2thor 5.0.0.

``ai2thor.controller.Controller`` starts it like the Unity binary (``local_executable_path`` or a
release directory under ``~/.ai2thor/releases``), so the adapter's tests run the real Controller,
FifoServer and Event code with no Unity build and no GPU.

Protocol (ai2thor/fifo_server.py): the controller creates two FIFOs and passes their paths in
``AI2THOR_FIFO_SERVER_PIPE_PATH`` (player → controller) and ``AI2THOR_FIFO_CLIENT_PIPE_PATH``
(controller → player). Every field is framed by the header ``!BI`` (type byte, uint32 length);
a message ends with the END_OF_MESSAGE header (255, 0). The controller sends one ACTION field
(type 2, JSON); the player answers with a METADATA field (type 1, msgpack of
``{"agents": [event metadata], "thirdPartyCameras", "sequenceId", "activeAgentId"}``) followed
by image fields: RGB (4, uint8 H×W×3, or ×4 with ``--rgba`` like CloudRendering), depth
(5, float32 metres with ``depthFormat: "Meters"``) and instance ids (9, RGBA32, alpha 255).
Images go bottom row first, as Unity reads its render textures; the controller flips them.
The first message is sent unprompted when the player starts, with sequence id 0.

The world is one small room (``FloorPlan1_physics``, x and z in [-2, 2], walls 2.6 m high, no
ceiling: rays above the walls escape and read the saturated depth far − near). Objects are
axis-aligned boxes with their pivot at the bottom centre; images are ray cast from the camera
pose the metadata reports (Unity frame: left-handed, y up, yaw clockwise from above, positive
horizon looks down), so depth is planar and back-projection lands on the boxes.

Every action received is appended as one JSON line to ``--log`` before it is answered. Physics:
an edit without ``placeStationary``/``forceKinematic`` sets the scene moving for
``--settle-frames`` frames; each later action (``Pass``, ...) advances one frame.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import struct
import sys
import threading
from collections import deque
from typing import Any

import msgpack
import numpy as np

HEADER = struct.Struct("!BI")
METADATA, ACTION, RGB_IMAGE, DEPTH_IMAGE, IDS_IMAGE, END_OF_MESSAGE = 1, 2, 4, 5, 9, 255

SCENE = "FloorPlan1_physics"
SCENES_IN_BUILD = [SCENE]
ROOM_HALF = 2.0
WALL_HEIGHT = 2.6
WALL_THICKNESS = 0.1
AGENT_Y = 0.9009992
CAMERA_OFFSET = 0.675
AGENT_RADIUS = 0.2
NEAR, FAR = 0.1, 20.0
AGENT_START = (0.0, 0.0)
HORIZON_LIMITS = (-30.0, 60.0)
WALL_COLOUR = (90, 90, 90)


@dataclasses.dataclass
class FakeObject:
    """A box-shaped sim object; ``pivot`` is its bottom centre (Unity world, metres)."""

    object_id: str
    name: str
    object_type: str
    pivot: list[float]
    size: tuple[float, float, float]
    pickupable: bool = False
    moveable: bool = False
    receptacle: bool = False
    rotation: list[float] = dataclasses.field(default_factory=lambda: [0.0, 0.0, 0.0])
    disabled: bool = False

    @property
    def center(self) -> tuple[float, float, float]:
        return (self.pivot[0], self.pivot[1] + self.size[1] / 2.0, self.pivot[2])

    @property
    def lo(self) -> np.ndarray:
        return np.array(self.center) - np.array(self.size) / 2.0

    @property
    def hi(self) -> np.ndarray:
        return np.array(self.center) + np.array(self.size) / 2.0


# (type, pivot x, pivot y, pivot z, size, pickupable, moveable, receptacle)
_LAYOUT = [
    ("Floor", 0.0, -0.01, 0.0, (4.0, 0.01, 4.0), False, False, True),
    ("CounterTop", 1.55, 0.0, 0.0, (0.7, 0.9, 2.4), False, False, True),
    ("Sofa", -1.45, 0.0, 0.75, (0.9, 0.8, 1.6), False, True, True),
    ("Chair", 0.5, 0.0, -1.4, (0.5, 0.9, 0.5), False, True, False),
    ("Mug", 1.5, 0.9, -0.6, (0.12, 0.1, 0.12), True, False, False),
    ("Apple", 1.5, 0.9, 0.6, (0.08, 0.08, 0.08), True, False, False),
    ("Vase", 1.5, 0.9, 0.0, (0.12, 0.25, 0.12), True, False, False),
    ("Book", -1.4, 0.8, 0.4, (0.2, 0.04, 0.3), True, False, False),
    ("Vase", -0.75, 0.0, -1.25, (0.16, 0.3, 0.16), True, False, False),
    ("Box", 0.75, 0.0, 1.5, (0.4, 0.3, 0.4), True, False, True),
    ("HousePlant", -1.5, 0.0, -1.5, (0.4, 0.8, 0.4), True, False, False),
]


def object_id_for(object_type: str, pivot: tuple[float, float, float]) -> str:
    """AI2-THOR style object id: type and initial pivot, e.g. ``Mug|+01.50|+00.90|-00.60``."""
    return f"{object_type}|" + "|".join(f"{v:+06.2f}" for v in pivot)


def scene_objects() -> list[FakeObject]:
    """The objects of ``FloorPlan1_physics`` in their initial poses."""
    objects = []
    for index, (kind, x, y, z, size, pickupable, moveable, receptacle) in enumerate(_LAYOUT):
        objects.append(
            FakeObject(
                object_id=object_id_for(kind, (x, y, z)),
                name=f"{kind}_{index:02d}",
                object_type=kind,
                pivot=[x, y, z],
                size=size,
                pickupable=pickupable,
                moveable=moveable,
                receptacle=receptacle,
            )
        )
    return objects


def colour_for(name: str) -> tuple[int, int, int]:
    """A deterministic, non-black instance colour for a name."""
    digest = hashlib.md5(name.encode("utf-8")).digest()
    return (digest[0] | 1, digest[1] | 1, digest[2] | 1)


def _vec(values: Any) -> dict[str, float]:
    return {"x": float(values[0]), "y": float(values[1]), "z": float(values[2])}


def _xyz(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [float(value.get("x", 0.0)), float(value.get("y", 0.0)), float(value.get("z", 0.0))]
    return [0.0, float(value), 0.0]


class FakeWorld:
    """State of the fake player: agent, objects, render settings, physics."""

    def __init__(self, width: int, height: int, settle_frames: int) -> None:
        self.width = width
        self.height = height
        self.settle_frames = settle_frames
        self.fov = 90.0
        self.grid = 0.25
        self.render_depth = False
        self.render_ids = False
        self.brightness = 1.0
        self.material_shift = 0
        self._rendered: tuple[tuple[Any, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self.load(SCENE)

    def load(self, scene: str) -> None:
        self.scene = scene
        self.objects = scene_objects()
        self.agent = [AGENT_START[0], AGENT_Y, AGENT_START[1]]
        self.yaw = 0.0
        self.horizon = 0.0
        self.moving_frames = 0
        self.render_depth = False
        self.render_ids = False
        self.brightness = 1.0
        self.material_shift = 0

    # ---------------------------------------------------------------- geometry

    def camera_position(self) -> tuple[float, float, float]:
        return (self.agent[0], self.agent[1] + CAMERA_OFFSET, self.agent[2])

    def enabled(self) -> list[FakeObject]:
        return [o for o in self.objects if not o.disabled]

    def free(self, x: float, z: float) -> bool:
        """Whether the agent capsule fits at floor point (x, z)."""
        limit = ROOM_HALF - AGENT_RADIUS + 1e-6
        if abs(x) > limit or abs(z) > limit:
            return False
        for obj in self.enabled():
            if obj.object_type == "Floor":
                continue
            lo, hi = obj.lo, obj.hi
            dx = max(lo[0] - x, 0.0, x - hi[0])
            dz = max(lo[2] - z, 0.0, z - hi[2])
            if math.hypot(dx, dz) < AGENT_RADIUS:
                return False
        return True

    def reachable(self) -> list[tuple[float, float]]:
        """Breadth-first search on the grid anchored at the agent (as Unity's GetReachablePositions)."""
        start = (round(self.agent[0], 4), round(self.agent[2], 4))
        seen = {start}
        queue = deque([start])
        while queue:
            x, z = queue.popleft()
            for dx, dz in ((self.grid, 0.0), (-self.grid, 0.0), (0.0, self.grid), (0.0, -self.grid)):
                cell = (round(x + dx, 4), round(z + dz, 4))
                if cell not in seen and self.free(*cell):
                    seen.add(cell)
                    queue.append(cell)
        return sorted(seen)

    # ---------------------------------------------------------------- rendering

    def render(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rgb uint8 H×W×3, planar depth float32 H×W, ids uint8 H×W×3), row 0 at the top."""
        key = (
            self.width,
            self.height,
            self.fov,
            tuple(self.agent),
            self.yaw,
            self.horizon,
            self.brightness,
            self.material_shift,
            tuple((o.object_id, tuple(o.pivot), o.disabled) for o in self.objects),
        )
        if self._rendered is None or self._rendered[0] != key:
            self._rendered = (key, self._cast())
        return self._rendered[1]

    def _cast(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w, h = self.width, self.height
        f = (h / 2.0) / math.tan(math.radians(self.fov) / 2.0)
        u, v = np.meshgrid(np.arange(w, dtype=float), np.arange(h, dtype=float))
        # Unity camera frame: x right, y up, z forward; z = 1 so the ray parameter is planar depth.
        dx, dy, dz = (u - (w - 1) / 2.0) / f, -(v - (h - 1) / 2.0) / f, np.ones_like(u)
        pitch, yaw = math.radians(self.horizon), math.radians(self.yaw)
        dy, dz = dy * math.cos(pitch) - dz * math.sin(pitch), dy * math.sin(pitch) + dz * math.cos(pitch)
        dx, dz = dx * math.cos(yaw) + dz * math.sin(yaw), -dx * math.sin(yaw) + dz * math.cos(yaw)
        directions = np.stack([dx, dy, dz], axis=-1).reshape(-1, 3).astype(np.float32)
        directions[np.abs(directions) < 1e-9] = 1e-9
        inverse = 1.0 / directions
        origin = np.array(self.camera_position(), dtype=np.float32)

        boxes = [(o.lo, o.hi, colour_for(o.object_id), self._base_colour(o.object_type)) for o in self.enabled()]
        r, t = ROOM_HALF, WALL_THICKNESS
        for lo, hi in (
            ((r, 0.0, -r - t), (r + t, WALL_HEIGHT, r + t)),
            ((-r - t, 0.0, -r - t), (-r, WALL_HEIGHT, r + t)),
            ((-r - t, 0.0, r), (r + t, WALL_HEIGHT, r + t)),
            ((-r - t, 0.0, -r - t), (r + t, WALL_HEIGHT, -r)),
        ):
            boxes.append((np.array(lo), np.array(hi), WALL_COLOUR, (200, 200, 190)))
        lo = np.stack([b[0] for b in boxes]).astype(np.float32) - origin
        hi = np.stack([b[1] for b in boxes]).astype(np.float32) - origin
        # Slab test, one axis at a time to keep the temporaries (rays × boxes) small.
        t_near = np.full((len(directions), len(boxes)), -np.inf, dtype=np.float32)
        t_far = np.full_like(t_near, np.inf)
        for axis in range(3):
            t1 = np.outer(inverse[:, axis], lo[:, axis])
            t2 = np.outer(inverse[:, axis], hi[:, axis])
            np.maximum(t_near, np.minimum(t1, t2), out=t_near)
            np.minimum(t_far, np.maximum(t1, t2), out=t_far)
        distance = np.where((t_near <= t_far) & (t_near > 0.0), t_near, np.inf)
        nearest = distance.argmin(axis=1)
        depth = distance[np.arange(len(nearest)), nearest]
        escaped = ~np.isfinite(depth)

        id_colours = np.array([b[2] for b in boxes], dtype=np.uint8)
        base = np.array([b[3] for b in boxes], dtype=float)
        base = np.roll(base, self.material_shift, axis=0)
        ids = id_colours[nearest]
        ids[escaped] = 0
        shade = 0.55 + 0.45 * np.exp(-np.where(escaped, 0.0, depth) / 6.0)
        rgb = base[nearest] * shade[:, None] * self.brightness
        rgb[escaped] = (150.0 * self.brightness, 180.0 * self.brightness, 230.0 * self.brightness)
        depth = np.where(escaped, FAR - NEAR, depth).astype(np.float32)
        return (
            np.clip(rgb, 0, 255).astype(np.uint8).reshape(h, w, 3),
            depth.reshape(h, w),
            ids.reshape(h, w, 3),
        )

    @staticmethod
    def _base_colour(object_type: str) -> tuple[int, int, int]:
        digest = hashlib.sha1(object_type.encode("utf-8")).digest()
        return (60 + digest[0] % 180, 60 + digest[1] % 180, 60 + digest[2] % 180)

    # ---------------------------------------------------------------- metadata

    def metadata(self, action: str, success: bool, error: str, code: str, action_return: Any) -> dict[str, Any]:
        camera = self.camera_position()
        moving = self.moving_frames > 0
        objects = []
        for obj in self.objects:
            center, size = obj.center, obj.size
            corners = [
                [center[0] + sx * size[0] / 2, center[1] + sy * size[1] / 2, center[2] + sz * size[2] / 2]
                for sx in (-1, 1)
                for sy in (-1, 1)
                for sz in (-1, 1)
            ]
            distance = math.dist(camera, center)
            objects.append(
                {
                    "objectId": obj.object_id,
                    "name": obj.name,
                    "objectType": obj.object_type,
                    "position": _vec(obj.pivot),
                    "rotation": _vec(obj.rotation),
                    "axisAlignedBoundingBox": {"center": _vec(center), "size": _vec(size), "cornerPoints": corners},
                    "objectOrientedBoundingBox": {"cornerPoints": corners} if obj.pickupable else None,
                    "pickupable": obj.pickupable,
                    "moveable": obj.moveable,
                    "receptacle": obj.receptacle,
                    "openable": False,
                    "isOpen": False,
                    "openness": 0.0,
                    "isPickedUp": False,
                    "isMoving": moving and (obj.pickupable or obj.moveable),
                    "breakable": False,
                    "isBroken": False,
                    "visible": distance < 1.5 and not obj.disabled,
                    "distance": distance,
                    "mass": 1.0,
                    "parentReceptacles": None,
                    "receptacleObjectIds": None,
                    "salientMaterials": [],
                }
            )
        colors = [{"name": o.object_id, "color": list(colour_for(o.object_id))} for o in self.objects]
        colors.append({"name": "Wall", "color": list(WALL_COLOUR)})
        for kind in sorted({o.object_type for o in self.objects}):
            colors.append({"name": kind, "color": list(colour_for("class:" + kind))})
        return {
            "agent": {
                "name": "agent",
                "position": _vec(self.agent),
                "rotation": _vec((0.0, self.yaw, 0.0)),
                "cameraHorizon": self.horizon,
                "isStanding": True,
                "inHighFrictionArea": False,
            },
            "objects": objects,
            "colors": colors,
            "cameraPosition": _vec(camera),
            "fov": self.fov,
            "screenWidth": self.width,
            "screenHeight": self.height,
            "sceneName": self.scene,
            "lastAction": action,
            "lastActionSuccess": success,
            "errorMessage": error,
            "errorCode": code,
            "actionReturn": action_return,
            "isSceneAtRest": not moving,
            "collided": False,
            "collidedObjects": [],
            "inventoryObjects": [],
            "thirdPartyCameras": [],
            "depthFormat": "Meters",
            "sceneBounds": {"center": _vec((0.0, WALL_HEIGHT / 2, 0.0)), "size": _vec((4.0, WALL_HEIGHT, 4.0))},
        }

    # ---------------------------------------------------------------- actions

    def find(self, object_id: str) -> FakeObject | None:
        return next((o for o in self.objects if o.object_id == object_id), None)

    def apply(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        """Execute one action: (success, errorMessage, errorCode, actionReturn)."""
        name = action.get("action")
        if self.moving_frames > 0:
            self.moving_frames -= 1
        handler = getattr(self, "_do_" + str(name), None)
        if handler is None:
            return False, f"Invalid action: {name}", "InvalidAction", None
        return handler(action)

    def _ok(self, value: Any = None) -> tuple[bool, str, str, Any]:
        return True, "", "", value

    def _do_GetScenesInBuild(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._ok(list(SCENES_IN_BUILD))

    def _do_Reset(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        if action["sceneName"] not in SCENES_IN_BUILD:
            return False, f"unknown scene {action['sceneName']}", "InvalidArgument", None
        self.load(action["sceneName"])
        return self._ok()

    def _do_Initialize(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        self.grid = float(action.get("gridSize", self.grid))
        self.fov = float(action.get("fieldOfView", self.fov))
        self.render_depth = bool(action.get("renderDepthImage", False))
        self.render_ids = bool(action.get("renderInstanceSegmentation", False))
        return self._ok({"cameraNearPlane": NEAR, "cameraFarPlane": FAR})

    def _do_ChangeResolution(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        self.width, self.height = int(action["x"]), int(action["y"])
        return self._ok()

    def _do_ChangeQuality(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._ok()

    def _do_Pass(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._ok()

    def _do_Done(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._ok()

    def _do_MoveAhead(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        step = float(action.get("moveMagnitude") or self.grid)
        yaw = math.radians(self.yaw)
        x = round(self.agent[0] + step * math.sin(yaw), 4)
        z = round(self.agent[2] + step * math.cos(yaw), 4)
        if not self.free(x, z):
            return False, "MoveAhead: the agent is blocked", "", None
        self.agent[0], self.agent[2] = x, z
        return self._ok()

    def _rotate(self, action: dict[str, Any], sign: float) -> tuple[bool, str, str, Any]:
        self.yaw = (self.yaw + sign * float(action.get("degrees") or 90.0)) % 360.0
        return self._ok()

    def _do_RotateRight(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._rotate(action, 1.0)

    def _do_RotateLeft(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._rotate(action, -1.0)

    def _look(self, action: dict[str, Any], sign: float) -> tuple[bool, str, str, Any]:
        horizon = self.horizon + sign * float(action.get("degrees") or 30.0)
        if not HORIZON_LIMITS[0] <= horizon <= HORIZON_LIMITS[1]:
            return False, f"horizon {horizon} is out of range", "", None
        self.horizon = horizon
        return self._ok()

    def _do_LookDown(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._look(action, 1.0)

    def _do_LookUp(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._look(action, -1.0)

    def _do_Teleport(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        position = _xyz(action["position"])
        if not action.get("forceAction") and not self.free(position[0], position[2]):
            return False, "Teleport: the target position collides", "", None
        self.agent = [position[0], AGENT_Y, position[2]]
        if "rotation" in action:
            self.yaw = _xyz(action["rotation"])[1] % 360.0
        if "horizon" in action:
            self.horizon = float(action["horizon"])
        return self._ok()

    def _do_GetReachablePositions(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        return self._ok([_vec((x, AGENT_Y, z)) for x, z in self.reachable()])

    def _do_SetObjectPoses(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        # As PhysicsSceneManager.SetObjectPoses: every enabled pickupable/moveable object is first
        # deactivated; listed names are placed (a name listed again is copied, the copy named
        # "<name>_copy_<index>" with id "<objectId>_copy_<index>"); unlisted ones stay removed.
        by_name = {o.name: o for o in self.enabled() if o.pickupable or o.moveable}
        static_names = {o.name for o in self.objects if not (o.pickupable or o.moveable)}
        placed: dict[str, FakeObject] = {}
        copies: list[FakeObject] = []
        error = ""
        for index, pose in enumerate(action["objectPoses"]):
            name = pose["objectName"]
            source = by_name.get(name)
            if source is None:
                error = f"No Pickupable or Moveable object of name {name} found in scene."
                if name in static_names:
                    error = f"{name} is not a Moveable or Pickupable object."
                continue
            pivot, rotation = _xyz(pose["position"]), _xyz(pose["rotation"])
            if name in placed:
                copies.append(
                    dataclasses.replace(
                        source,
                        object_id=f"{source.object_id}_copy_{index}",
                        name=f"{source.name}_copy_{index}",
                        pivot=pivot,
                        rotation=rotation,
                    )
                )
            else:
                source.pivot, source.rotation = pivot, rotation
                placed[name] = source
        kept = {id(o) for o in placed.values()}
        self.objects = [o for o in self.objects if not (o.pickupable or o.moveable) or id(o) in kept]
        self.objects.extend(copies)
        if not action.get("placeStationary", True):
            self.moving_frames = self.settle_frames
        return (not error), error, "", None

    def _do_DisableObject(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        obj = self.find(action["objectId"])
        if obj is None:
            return False, f"DisableObject: no object {action['objectId']}", "InvalidArgument", None
        obj.disabled = True
        self.moving_frames = self.settle_frames
        return self._ok()

    def _do_EnableObject(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        obj = self.find(action["objectId"])
        if obj is None:
            return False, f"EnableObject: no object {action['objectId']}", "InvalidArgument", None
        obj.disabled = False
        return self._ok()

    def _do_TeleportObject(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        obj = self.find(action["objectId"])
        if obj is None or obj.disabled:
            return False, f"TeleportObject: no object {action['objectId']}", "InvalidArgument", None
        obj.pivot = _xyz(action["position"])
        if "rotation" in action:
            obj.rotation = _xyz(action["rotation"])
        if not action.get("forceKinematic", False):
            self.moving_frames = self.settle_frames
        return self._ok()

    def _do_RandomizeLighting(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        low, high = action.get("brightness") or (0.5, 1.5)
        self.brightness = (float(low) + float(high)) / 2.0
        return self._ok()

    def _do_ResetLighting(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        self.brightness = 1.0
        return self._ok()

    def _do_RandomizeMaterials(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        self.material_shift += 1
        return self._ok({"totalMaterialsConsidered": len(self.objects)})

    def _do_ResetMaterials(self, action: dict[str, Any]) -> tuple[bool, str, str, Any]:
        self.material_shift = 0
        return self._ok()


class Player:
    """The FIFO side of the fake player."""

    def __init__(self, world: FakeWorld, log_path: str, rgba: bool) -> None:
        self.world = world
        self.log_path = log_path
        self.rgba = rgba

    def serve(self) -> None:
        with open(os.environ["AI2THOR_FIFO_SERVER_PIPE_PATH"], "wb") as out:
            out.write(self.response(0, "", True, "", "", None, render=True))
            out.flush()
            with open(os.environ["AI2THOR_FIFO_CLIENT_PIPE_PATH"], "rb") as inp:
                while True:
                    action = self.read_action(inp)
                    if action is None:
                        return
                    with open(self.log_path, "a", encoding="utf-8") as log:
                        log.write(json.dumps(action, sort_keys=True) + "\n")
                    success, error, code, value = self.world.apply(action)
                    out.write(
                        self.response(
                            int(action.get("sequenceId", 0)),
                            str(action.get("action")),
                            success,
                            error,
                            code,
                            value,
                            render=action.get("renderImage", True) is not False,
                        )
                    )
                    out.flush()

    @staticmethod
    def read_action(inp: Any) -> dict[str, Any] | None:
        action = None
        while True:
            header = inp.read(HEADER.size)
            if len(header) < HEADER.size:
                return None
            kind, length = HEADER.unpack(header)
            if kind == END_OF_MESSAGE:
                return action
            body = inp.read(length)
            if kind != ACTION:
                raise ValueError(f"fake player: unexpected field type {kind} from the controller")
            action = json.loads(body.decode("utf-8"))

    def response(
        self, sequence_id: int, action: str, success: bool, error: str, code: str, value: Any, render: bool
    ) -> bytes:
        world = self.world
        metadata = world.metadata(action, success, error, code, value)
        body = msgpack.packb(
            {"agents": [metadata], "thirdPartyCameras": [], "sequenceId": sequence_id, "activeAgentId": 0},
            use_bin_type=True,
        )
        parts = [HEADER.pack(METADATA, len(body)), body]
        if render:
            rgb, depth, ids = world.render()
            if self.rgba:
                rgb = np.concatenate([rgb, np.full((*rgb.shape[:2], 1), 255, np.uint8)], axis=-1)
            fields = [(RGB_IMAGE, rgb)]
            if world.render_depth:
                fields.append((DEPTH_IMAGE, depth))
            if world.render_ids:
                fields.append((IDS_IMAGE, np.concatenate([ids, np.full((*ids.shape[:2], 1), 255, np.uint8)], -1)))
            for kind, image in fields:
                payload = np.ascontiguousarray(np.flipud(image)).tobytes()
                parts += [HEADER.pack(kind, len(payload)), payload]
        parts.append(HEADER.pack(END_OF_MESSAGE, 0))
        return b"".join(parts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="file that receives one JSON line per action")
    parser.add_argument("--settle-frames", type=int, default=3, help="frames physics moves after an edit")
    parser.add_argument("--rgba", action="store_true", help="send 4-channel RGB frames (CloudRendering)")
    parser.add_argument("--hang", action="store_true", help="never open the FIFOs (a player stuck at start)")
    parser.add_argument("--pid-file", default="", help="write the process id here at start")
    parser.add_argument("-screen-width", dest="width", type=int, default=300)
    parser.add_argument("-screen-height", dest="height", type=int, default=300)
    args, _unity_args = parser.parse_known_args(argv)
    if args.pid_file:
        with open(args.pid_file, "w", encoding="utf-8") as handle:
            handle.write(str(os.getpid()))
    if args.hang:
        threading.Event().wait()
    Player(FakeWorld(args.width, args.height, args.settle_frames), args.log, args.rgba).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
