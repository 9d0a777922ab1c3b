"""Pinhole camera intrinsics derived from the vertical field of view (AI2-THOR's convention).

Never hard-code intrinsics: ``fy = (H/2) / tan(vfov/2)``, ``fx = fy`` (square pixels), and the
principal point at the pixel-centre convention of OpenCV/ROS, ``((W−1)/2, (H−1)/2)``.
Pixel (u, v) has u to the right and v down, row 0 at the top, matching the optical frame.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

_ASPECTS = {"4:3": 4 / 3, "16:9": 16 / 9, "16:10": 16 / 10, "3:2": 3 / 2, "5:4": 5 / 4, "1:1": 1.0}
"""Aspect ratios cameras are named by (:attr:`Intrinsics.aspect`)."""


@dataclasses.dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics in pixels for a ``width`` × ``height`` image, no distortion."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_vertical_fov(cls, width: int, height: int, vertical_fov_deg: float) -> Intrinsics:
        if width <= 0 or height <= 0:
            raise ValueError(f"image size must be positive, got {width}x{height}")
        if not 0.0 < vertical_fov_deg < 180.0:
            raise ValueError(f"vertical field of view must be in (0, 180) degrees, got {vertical_fov_deg}")
        f = (height / 2.0) / math.tan(math.radians(vertical_fov_deg) / 2.0)
        return cls(width, height, f, f, (width - 1) / 2.0, (height - 1) / 2.0)

    @property
    def matrix(self) -> np.ndarray:
        """K, the (3, 3) camera matrix."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def horizontal_fov_deg(self) -> float:
        return math.degrees(2.0 * math.atan((self.width / 2.0) / self.fx))

    @property
    def vertical_fov_deg(self) -> float:
        return math.degrees(2.0 * math.atan((self.height / 2.0) / self.fy))

    @property
    def aspect(self) -> str:
        """The image's aspect ratio as people name it: ``4:3``, ``16:9`` (848x480 too), ``16:10``, ...
        within 1 %, else the reduced ratio of the sides."""
        for name, ratio in _ASPECTS.items():
            if abs(self.width / self.height / ratio - 1.0) <= 0.01:
                return name
        common = math.gcd(self.width, self.height)
        return f"{self.width // common}:{self.height // common}"

    def describe(self) -> str:
        """One line for messages: size, aspect and the pinhole parameters (px)."""
        return (
            f"{self.width}x{self.height} ({self.aspect}), fx {self.fx:.6g}, fy {self.fy:.6g}, cx {self.cx:.6g}, "
            f"cy {self.cy:.6g}"
        )

    def pixel_rays(self) -> np.ndarray:
        """(H, W, 3) optical-frame directions with z = 1 for every pixel centre."""
        u, v = np.meshgrid(np.arange(self.width, dtype=float), np.arange(self.height, dtype=float))
        return np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones_like(u)], axis=-1)

    def back_project(self, u: np.ndarray, v: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Optical-frame points (N, 3) of pixels (u, v) with **planar** depth (metres along z)."""
        z = np.asarray(depth, dtype=float)
        return np.stack([(np.asarray(u) - self.cx) / self.fx * z, (np.asarray(v) - self.cy) / self.fy * z, z], axis=-1)

    def project(self, points: np.ndarray) -> np.ndarray:
        """Pixel coordinates (N, 2) of optical-frame points (N, 3) with z > 0."""
        p = np.asarray(points, dtype=float)
        return np.stack([self.fx * p[:, 0] / p[:, 2] + self.cx, self.fy * p[:, 1] / p[:, 2] + self.cy], axis=-1)
