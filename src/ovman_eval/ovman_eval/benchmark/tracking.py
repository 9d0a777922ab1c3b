"""Following a moving target with the agent's own eyes: the latest estimate from live frames.

Each frame is segmented by the segmenter the maps were built with and back-projected as the mapper
does; the nearest segment of the tracked label within ``gate`` of the estimate becomes the new one.
Only the segmenter's output and geometry are read, never the simulator's instance channel (with
the learned segmenter). Frames: AI2-THOR world (metres); estimates are floor points (x, z).
"""

from __future__ import annotations

import dataclasses
import math

from ovman_core.boxes import Vec2
from ovman_core.config import MappingConfig
from ovman_core.observation import Observation
from ovman_mapping.backprojection import segment_frame
from ovman_mapping.segmenter import Segmenter
from ovman_nav.executor import NavTarget


@dataclasses.dataclass
class LabelTracker:
    """The estimate of one moving instance (``label``: its majority segmenter label; ``estimate``:
    floor point, metres), updated from frames segmented by ``segmenter``; ``updates`` counts the
    sightings that moved it."""

    label: str
    estimate: Vec2
    gate: float
    mapping: MappingConfig
    segmenter: Segmenter
    updates: int = 0

    def __post_init__(self) -> None:
        # The gate keeps the tracker on its instance: the anti-shortcut rule keeps every other instance
        # of the category beyond task.separation_radius along the mover's path, and track_gate stays below it.
        if not (math.isfinite(self.gate) and self.gate > 0.0):
            raise ValueError(f"benchmark.track_gate must be a positive distance in metres, got {self.gate!r}")

    def observe(self, observation: Observation) -> NavTarget | None:
        """Update from one frame; returns the new target (the sighting's floor point and footprint)
        when this frame moved the estimate, else None."""
        pose = observation.pose
        segmentation = self.segmenter.segment(observation)
        segments = segment_frame(
            observation.rgb,
            observation.depth,
            segmentation.ids,
            segmentation.labels,
            observation.intrinsics,
            observation.camera_position,
            pose.yaw_deg,
            pose.horizon_deg,
            self.mapping.mapping,
            self.mapping.encoder.colour_bins,
            step=observation.step,
            cell=segmentation.cell,
            lattice=segmentation.lattice,
        )
        best: tuple[float, NavTarget] | None = None
        for segment in segments:
            if segment.label != self.label:
                continue
            box = segment.box
            point = (box.center[0], box.center[2])
            distance = math.hypot(point[0] - self.estimate[0], point[1] - self.estimate[1])
            if distance <= self.gate and (best is None or distance < best[0]):
                best = (distance, NavTarget(point, box.footprint))
        if best is None or best[1].point == self.estimate:
            return None
        self.estimate = best[1].point
        self.updates += 1
        return best[1]
