"""The frames a visit's map builder keeps for its passes after the last frame, within a byte budget.

Free-space evidence and the next visit's cross-visit evidence read a visit's frames again once the
visit ends (depth, segment ids, camera). A benchmark visit keeps them all; a robot touring for
minutes at 15 Hz would not fit in memory, so past ``mapping.frame_memory_mb`` the store keeps every
2nd frame, then every 4th, and so on: the kept frames stay evenly spread over the visit, in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

import numpy as np

from ovman_core.camera import Intrinsics
from ovman_mapping.cross_visit import DepthView

MEGABYTE = 1 << 20
"""Bytes in the MB of ``mapping.frame_memory_mb``."""


@dataclasses.dataclass(frozen=True)
class KeptFrame:
    """What the passes after the last frame need of one frame: depth (H, W) float32 metres or
    None, segment ids (H, W) with their labels, the intrinsics and the camera (world frame)."""

    index: int
    step: int
    depth: np.ndarray | None
    segments: np.ndarray
    labels: Mapping[int, str]
    intrinsics: Intrinsics
    camera_position: np.ndarray
    axes: np.ndarray

    @property
    def view(self) -> DepthView:
        """The frame as cross-visit evidence reads it (its depth must exist)."""
        assert self.depth is not None
        return DepthView(self.step, self.depth, self.intrinsics, self.camera_position, self.axes)

    @property
    def nbytes(self) -> int:
        """Bytes of its images."""
        return self.segments.nbytes + (0 if self.depth is None else self.depth.nbytes)


def compact_ids(ids: np.ndarray) -> np.ndarray:
    """``ids`` in the narrowest unsigned integer type that holds them (the same values), or as they
    are when some are negative."""
    if ids.size == 0 or ids.min() < 0:
        return ids
    top = int(ids.max())
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return ids if ids.dtype == dtype else ids.astype(dtype)
    return ids


class FrameStore:
    """A visit's kept frames, in order: every ``stride``-th frame of the visit (frame index a
    multiple of it); the stride doubles whenever their images pass ``budget_bytes``."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be > 0, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self.stride = 1
        self._frames: list[KeptFrame] = []
        self._bytes = 0

    def add(self, frame: KeptFrame) -> None:
        """Keep ``frame`` if its index falls on the stride, then thin until within the budget (the
        first frame stays, however large)."""
        if frame.index % self.stride:
            return
        self._frames.append(frame)
        self._bytes += frame.nbytes
        while self._bytes > self.budget_bytes and len(self._frames) > 1:
            self.stride *= 2
            self._frames = [f for f in self._frames if f.index % self.stride == 0]
            self._bytes = sum(f.nbytes for f in self._frames)

    @property
    def nbytes(self) -> int:
        """Bytes of the kept frames' images."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._frames)

    def __iter__(self) -> Iterator[KeptFrame]:
        return iter(self._frames)
