"""What an agent sees of a world: one synchronised camera frame and the pose it was taken from.

Frame: AI2-THOR's world frame (metres, y up, left-handed; floor plane (x, z)); yaw in degrees
clockwise from above with 0 facing +z; camera horizon in degrees, positive looking down
(:mod:`ovman_core.world_state`). A simulator fills every field; a robot's camera fills the images,
intrinsics, pose and step, and leaves the simulator's segments empty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ovman_core.boxes import Vec3
from ovman_core.camera import Intrinsics
from ovman_core.world_state import AgentPose


@dataclasses.dataclass(frozen=True)
class Observation:
    """One synchronised camera bundle.

    - ``rgb``: uint8 (H, W, 3), row 0 at the top.
    - ``depth``: float32 (H, W), **planar** depth in metres along the optical axis; NaN where
      invalid (nothing in range, beyond the visibility distance).
    - ``segments``: int32 (H, W) per-frame segment ids, 0 = no object. Ids are only meaningful
      within this frame: mapping must fuse by geometry and features, never by id.
    - ``segment_labels``: segment id → category label (what a segmenter would output).
    - ``segment_instances``: segment id → ground-truth instance id. Reserved for the oracle arms,
      diagnostics and the ground-truth channel; the reference agent never reads it.
    - ``pose``: the agent pose; ``camera_position``: camera centre in the world frame (metres).
    - ``step``: the world's step counter when the frame was taken (sim time = step × dt).
    """

    rgb: np.ndarray
    depth: np.ndarray
    segments: np.ndarray
    segment_labels: Mapping[int, str]
    segment_instances: Mapping[int, str]
    pose: AgentPose
    camera_position: Vec3
    intrinsics: Intrinsics
    step: int


def pose_observation(pose: AgentPose, camera_position: Vec3, intrinsics: Intrinsics, step: int) -> Observation:
    """An Observation without images: pose, camera centre (world frame, metres), intrinsics and
    step as the rendered frame would hold them; rgb, depth and segments 0x0, no segments."""
    return Observation(
        rgb=np.zeros((0, 0, 3), dtype=np.uint8),
        depth=np.zeros((0, 0), dtype=np.float32),
        segments=np.zeros((0, 0), dtype=np.int32),
        segment_labels={},
        segment_instances={},
        pose=pose,
        camera_position=camera_position,
        intrinsics=intrinsics,
        step=step,
    )
