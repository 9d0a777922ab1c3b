"""Hand-built box scenes rendered by ray casting, and a test double of the feature encoders.

A scene is a square room (floor at y = 0, walls at ±``room_half``, ceiling at ``room_height``)
holding axis-aligned coloured boxes, seen by the configured camera (``sim_node.camera``).
:func:`render` casts one ray per pixel through the same
intrinsics and optical axes the mapping uses and returns an :class:`Observation` with planar
depth, per-frame segment ids (shuffled per frame, so nothing can rely on them) and labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ovman_core.boxes import Box3, Vec3
from ovman_core.camera import Intrinsics
from ovman_core.config import load_config
from ovman_core.frames import optical_axes_thor
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose, ObjectState, WorldState
from ovman_mapping.encoders import InstanceEvidence, label_text, normalise_rows

_SIM = load_config().sim_node
INTRINSICS = Intrinsics.from_vertical_fov(_SIM.camera.width, _SIM.camera.height, _SIM.camera.vertical_fov_deg)
CAMERA_HEIGHT = _SIM.world.camera_height
BACKGROUND_RGB = (128, 128, 128)


@dataclasses.dataclass(frozen=True)
class SceneBox:
    """A box object: ground-truth id, label, centre and size (world, metres), colour (RGB 0-255)."""

    instance_id: str
    label: str
    centre: Vec3
    size: Vec3
    colour: tuple[int, int, int]

    @property
    def box(self) -> Box3:
        return Box3.from_center_size(self.centre, self.size)

    def moved_to(self, x: float, z: float) -> SceneBox:
        return dataclasses.replace(self, centre=(x, self.centre[1], z))

    def state(self) -> ObjectState:
        return ObjectState(self.instance_id, self.label, self.centre, self.box)


def on_floor(instance_id: str, label: str, x: float, z: float, size: Vec3 = (0.5, 0.6, 0.5), colour=(200, 40, 40)):
    """A box standing on the floor with its floor centre at (x, z)."""
    return SceneBox(instance_id, label, (x, size[1] / 2.0, z), size, colour)


def world_state(boxes: Sequence[SceneBox]) -> WorldState:
    return WorldState.of([b.state() for b in boxes])


def _slab(origin: np.ndarray, directions: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = (lo - origin) / directions
        t2 = (hi - origin) / directions
    near = np.nanmax(np.minimum(t1, t2), axis=-1)
    far = np.nanmin(np.maximum(t1, t2), axis=-1)
    return near, far


def render(
    boxes: Sequence[SceneBox],
    pose: AgentPose,
    step: int,
    room_half: float = 6.0,
    room_height: float = 3.0,
    intrinsics: Intrinsics = INTRINSICS,
    far: float = 20.0,
) -> Observation:
    """Ray-cast ``boxes`` from a camera at ``CAMERA_HEIGHT`` above ``pose`` (see module docstring)."""
    origin = np.array([pose.x, CAMERA_HEIGHT, pose.z])
    axes = optical_axes_thor(pose.yaw_deg, pose.horizon_deg)
    rays = intrinsics.pixel_rays() @ axes.T  # optical z = 1, so the hit parameter t is planar depth
    height, width = intrinsics.height, intrinsics.width
    # Room interior: the exit distance is the nearest positive slab exit.
    room_lo, room_hi = np.array([-room_half, 0.0, -room_half]), np.array([room_half, room_height, room_half])
    _, depth = _slab(origin, rays, room_lo, room_hi)
    owner = np.full((height, width), -1)
    for index, b in enumerate(boxes):
        lo, hi = np.array(b.box.lo), np.array(b.box.hi)
        near, far_t = _slab(origin, rays, lo, hi)
        hit = (near <= far_t) & (near > 0) & (near < depth)
        depth = np.where(hit, near, depth)
        owner = np.where(hit, index, owner)
    rng = np.random.default_rng(step)
    frame_ids = rng.permutation(len(boxes)) + 1
    segments = np.zeros((height, width), dtype=np.int32)
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    rgb[:] = BACKGROUND_RGB
    labels: dict[int, str] = {}
    instances: dict[int, str] = {}
    for index, b in enumerate(boxes):
        mask = owner == index
        if mask.any():
            segments[mask] = frame_ids[index]
            rgb[mask] = b.colour
            labels[int(frame_ids[index])] = b.label
            instances[int(frame_ids[index])] = b.instance_id
    depth = np.where(depth > far, np.nan, depth).astype(np.float32)
    return Observation(
        rgb=rgb,
        depth=depth,
        segments=segments,
        segment_labels=labels,
        segment_instances=instances,
        pose=pose,
        camera_position=(float(origin[0]), float(origin[1]), float(origin[2])),
        intrinsics=intrinsics,
        step=step,
    )


def look_around(x: float, z: float, horizon: float = 30.0, turns: int = 4) -> list[AgentPose]:
    """Poses turning a full circle on the spot at (x, z)."""
    return [AgentPose(x, z, yaw_deg=360.0 * k / turns, horizon_deg=horizon) for k in range(turns)]


def tour(boxes: Sequence[SceneBox], poses: Sequence[AgentPose], first_step: int = 0) -> list[Observation]:
    return [render(boxes, pose, first_step + n) for n, pose in enumerate(poses)]


class OneHotEncoder:
    """Test double of the feature encoders: each known word is one axis, text embeds as the sum
    of its words, instances as their label distribution. Deterministic and instant."""

    kind = "onehot"
    description = "onehot (test double)"
    reads_views = False

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.words = sorted({w for phrase in vocabulary for w in label_text(phrase).split()})

    def embed_text(self, phrases: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(phrases), len(self.words) + 1))
        for row, phrase in enumerate(phrases):
            words = label_text(phrase).split()
            known = [self.words.index(w) for w in words if w in self.words]
            if known:
                out[row, known] = 1.0
            else:
                out[row, -1] = 1.0
        return normalise_rows(out)

    def embed_labels(self, labels: Sequence[str]) -> np.ndarray:
        return self.embed_text(list(labels))

    def warm_up(self) -> None:
        """Nothing to load."""

    def embed_instances(self, evidence: Sequence[InstanceEvidence]) -> np.ndarray:
        rows = []
        for item in evidence:
            vectors = self.embed_labels(list(item.labels))
            rows.append((np.array(list(item.labels.values()))[:, None] * vectors).sum(axis=0))
        return normalise_rows(np.array(rows))
