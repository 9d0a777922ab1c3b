"""A fusion track's points: kept per sighting while few, folded into per-voxel sums past
``mapping.fold_points``, so that a track sighted for minutes costs its object's voxels, not its frames.

The instance geometry is the mean point per voxel (edge ``mapping.voxel_size``) either way: folding
sums the same points, in another order. The vacancy check points of a folded track are subsampled
from those means instead of its raw points. World frame, metres.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ovman_mapping.backprojection import voxel_codes


@dataclasses.dataclass(frozen=True)
class VoxelSums:
    """Points summed per voxel: ``codes`` (V,) int64 voxel codes (sorted, unique), ``sums`` (V, 3)
    their points' coordinate sums, ``counts`` (V,) how many points each."""

    codes: np.ndarray
    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, codes: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> VoxelSums:
        """Sum rows that share a code (``sums`` (N, 3) and ``counts`` (N,) per code of ``codes``)."""
        unique, inverse = np.unique(codes, return_inverse=True)
        inverse = inverse.reshape(-1)
        summed = np.stack([np.bincount(inverse, weights=sums[:, k], minlength=len(unique)) for k in range(3)], axis=1)
        return cls(unique, summed, np.bincount(inverse, weights=counts, minlength=len(unique)).astype(np.int64))

    def means(self) -> np.ndarray:
        """(V, 3): the mean point of each voxel."""
        return self.sums / self.counts[:, None]


def combined(parts: list[VoxelSums]) -> VoxelSums:
    """The sums of several :class:`VoxelSums` together."""
    return VoxelSums.of(
        np.concatenate([v.codes for v in parts]),
        np.concatenate([v.sums for v in parts]),
        np.concatenate([v.counts for v in parts]),
    )


class TrackCloud:
    """The points of a track's sightings, each sighting's under its key (step, frame index) in key
    order, until more than ``fold_points`` are held: then they are folded into :class:`VoxelSums`
    (edge ``voxel_size``, metres)."""

    def __init__(self, key: tuple[int, int], points: np.ndarray, fold_points: int, voxel_size: float) -> None:
        self.fold_points = fold_points
        self.voxel_size = voxel_size
        self.raw: list[tuple[tuple[int, int], np.ndarray]] = []
        self.raw_points = 0
        """Points held per sighting (not folded)."""
        self.folded: VoxelSums | None = None
        self.add(key, points)

    def add(self, key: tuple[int, int], points: np.ndarray) -> None:
        """A later sighting's points (its key after every held one's)."""
        self.raw.append((key, points))
        self.raw_points += len(points)
        self._fold_if_full()

    def absorb(self, other: TrackCloud) -> None:
        """Take ``other``'s points in (sightings merged in key order)."""
        self.raw = sorted(self.raw + other.raw, key=lambda item: item[0])
        self.raw_points += other.raw_points
        folded = [v for v in (self.folded, other.folded) if v is not None]
        self.folded = combined(folded) if len(folded) > 1 else next(iter(folded), None)
        self._fold_if_full()

    def clouds(self) -> list[np.ndarray]:
        """The point clouds to fuse: each sighting's, or, once folded, the voxel means of all."""
        if self.folded is None:
            return [points for _, points in self.raw]
        return [self._everything().means()]

    def _everything(self) -> VoxelSums:
        """Every held point, folded or not, summed per voxel."""
        parts = [] if self.folded is None else [self.folded]
        if self.raw:
            points = np.concatenate([points for _, points in self.raw])
            parts.append(VoxelSums(voxel_codes(points, self.voxel_size), points, np.ones(len(points), dtype=np.int64)))
        return combined(parts)

    def _fold_if_full(self) -> None:
        if self.raw_points > self.fold_points:
            self.folded, self.raw, self.raw_points = self._everything(), [], 0
