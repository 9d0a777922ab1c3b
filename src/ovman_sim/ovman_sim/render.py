"""The embedded world's renderer: axis-aligned boxes → RGB, planar depth and per-pixel box index.

Everything the embedded world draws is an axis-aligned box, so the renderer is a z-buffer
rasteriser of box faces compiled with numba; depth is **planar**, along the optical axis (AI2-THOR's
convention). World frame: AI2-THOR's (metres, y up); the camera pose is its centre and the (3, 3)
optical axes (columns x right, y down, z forward; ovman_core.frames.optical_axes_thor). Pixel
(u, v) has its centre at integer coordinates. :func:`render` is the one entry point, so the engine
can be swapped without touching the world.
"""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np

from ovman_core.boxes import Vec3
from ovman_core.camera import Intrinsics

FACE_NORMALS = np.array(
    [[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [0.0, 0.0, 1.0]]
)
"""Outward normal of face ``f`` of a box: axis ``f // 2``, the low side for even ``f``, the high for odd."""


@dataclasses.dataclass(frozen=True)
class BoxGeometry:
    """The boxes of one scene, as arrays the kernel reads directly.

    - ``lo``, ``hi``: float64 (N, 3) corners, metres, world frame.
    - ``colour``: float64 (N, 3) base albedo in [0, 1] (RGB).
    - ``pattern_period``: float64 (N,) checker period in metres on the box faces; 0 = plain.
    - ``pattern_contrast``: float64 (N,) fraction by which dark checker squares are dimmed.
    """

    lo: np.ndarray
    hi: np.ndarray
    colour: np.ndarray
    pattern_period: np.ndarray
    pattern_contrast: np.ndarray

    def __post_init__(self) -> None:
        n = self.lo.shape[0]
        shapes = {
            "lo": (self.lo, (n, 3)),
            "hi": (self.hi, (n, 3)),
            "colour": (self.colour, (n, 3)),
            "pattern_period": (self.pattern_period, (n,)),
            "pattern_contrast": (self.pattern_contrast, (n,)),
        }
        for name, (array, shape) in shapes.items():
            if array.shape != shape or array.dtype != np.float64:
                raise ValueError(f"BoxGeometry.{name}: expected float64 {shape}, got {array.dtype} {array.shape}")


@dataclasses.dataclass(frozen=True)
class Shading:
    """Lambert shading: ``ambient + diffuse · max(0, n·l)``, dimmed by ``1 / (1 + falloff · depth)``.

    ``light_direction`` points from the scene towards the light (world frame, need not be unit).
    """

    ambient: float
    diffuse: float
    light_direction: Vec3
    distance_falloff: float

    def face_factors(self) -> np.ndarray:
        """Shading factor of each of the six face orientations, float64 (6,)."""
        light = np.asarray(self.light_direction, dtype=float)
        norm = float(np.linalg.norm(light))
        if norm == 0.0:
            raise ValueError("shading light_direction must not be the zero vector")
        return self.ambient + self.diffuse * np.maximum(FACE_NORMALS @ (light / norm), 0.0)


@dataclasses.dataclass(frozen=True)
class RenderedFrame:
    """``rgb`` uint8 (H, W, 3); ``depth`` float32 (H, W) planar metres, NaN where nothing lies
    within [near, far]; ``box_index`` int32 (H, W) index of the box seen, −1 where none."""

    rgb: np.ndarray
    depth: np.ndarray
    box_index: np.ndarray


def render(
    boxes: BoxGeometry,
    camera_position: Vec3,
    optical_axes: np.ndarray,
    intrinsics: Intrinsics,
    near: float,
    far: float,
    shading: Shading,
) -> RenderedFrame:
    """Render ``boxes`` from a pinhole camera at ``camera_position`` with ``optical_axes`` (3, 3)."""
    if not 0.0 < near < far:
        raise ValueError(f"camera near/far must satisfy 0 < near < far, got near={near} far={far}")
    cam = np.asarray(camera_position, dtype=np.float64)
    axes = np.ascontiguousarray(optical_axes, dtype=np.float64)
    pinhole = (cam, axes, intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy)
    depth, index, face = _rasterise(boxes.lo, boxes.hi, *pinhole, intrinsics.width, intrinsics.height, near, far)
    rgb = _shade(
        depth,
        index,
        face,
        *pinhole,
        boxes.colour,
        boxes.pattern_period,
        boxes.pattern_contrast,
        shading.face_factors(),
        shading.distance_falloff,
    )
    return RenderedFrame(rgb=rgb, depth=depth, box_index=index)


@numba.njit(cache=True, inline="always")
def _ray(axes: np.ndarray, x: float, y: float, out: np.ndarray) -> None:
    """World direction of the optical-frame ray (x, y, 1), written into ``out``."""
    for k in range(3):
        out[k] = axes[k, 0] * x + axes[k, 1] * y + axes[k, 2]


@numba.njit(cache=True)
def _rasterise(lo, hi, cam, axes, fx, fy, cx, cy, width, height, near, far):
    """Each front-facing face clipped at the near plane and projected to a screen rectangle; every
    pixel there intersects its ray with the face's plane exactly (one division: the plane is
    axis-aligned) and keeps the nearest hit inside the face, its ray parameter for optical z = 1."""
    depth = np.full((height, width), np.float32(np.nan), dtype=np.float32)
    zbuf = np.full((height, width), np.inf)
    index = np.full((height, width), -1, dtype=np.int32)
    face = np.zeros((height, width), dtype=np.int8)
    # Per-pixel world ray directions (optical z = 1) and their reciprocals per axis.
    inv = np.empty((3, height, width))
    dirs = np.empty((3, height, width))
    d = np.empty(3)
    for v in range(height):
        for u in range(width):
            _ray(axes, (u - cx) / fx, (v - cy) / fy, d)
            for k in range(3):
                dirs[k, v, u] = d[k]
                inv[k, v, u] = 1.0 / d[k] if d[k] != 0.0 else np.inf
    corners = np.empty((4, 3))
    clipped = np.empty((8, 3))
    w = np.empty(3)
    eps = 1e-9
    for b in range(lo.shape[0]):
        # Whole-box rejection: every corner behind the near plane.
        any_front = False
        for c in range(8):
            px = (hi[b, 0] if c & 1 else lo[b, 0]) - cam[0]
            py = (hi[b, 1] if c & 2 else lo[b, 1]) - cam[1]
            pz = (hi[b, 2] if c & 4 else lo[b, 2]) - cam[2]
            if px * axes[0, 2] + py * axes[1, 2] + pz * axes[2, 2] >= near:
                any_front = True
                break
        if not any_front:
            continue
        for f in range(6):
            a = f // 2
            high = f % 2 == 1
            plane = hi[b, a] if high else lo[b, a]
            # Back-face culling: the camera must lie on the face's outer side.
            if (high and cam[a] <= plane) or ((not high) and cam[a] >= plane):
                continue
            a1 = (a + 1) % 3
            a2 = (a + 2) % 3
            if hi[b, a1] - lo[b, a1] <= 0.0 or hi[b, a2] - lo[b, a2] <= 0.0:
                continue
            # Face corners in camera coordinates (x right, y down, z forward), in polygon order.
            for c in range(4):
                p1 = lo[b, a1] if c == 0 or c == 3 else hi[b, a1]
                p2 = lo[b, a2] if c < 2 else hi[b, a2]
                w[a] = plane - cam[a]
                w[a1] = p1 - cam[a1]
                w[a2] = p2 - cam[a2]
                for k in range(3):
                    corners[c, k] = w[0] * axes[0, k] + w[1] * axes[1, k] + w[2] * axes[2, k]
            # Sutherland-Hodgman clip against z >= near.
            n = 0
            for c in range(4):
                cur = corners[c]
                nxt = corners[(c + 1) % 4]
                cur_in = cur[2] >= near
                nxt_in = nxt[2] >= near
                if cur_in:
                    clipped[n] = cur
                    n += 1
                if cur_in != nxt_in:
                    s = (near - cur[2]) / (nxt[2] - cur[2])
                    for k in range(3):
                        clipped[n, k] = cur[k] + s * (nxt[k] - cur[k])
                    n += 1
            if n == 0:
                continue
            umin = np.inf
            umax = -np.inf
            vmin = np.inf
            vmax = -np.inf
            for c in range(n):
                pu = fx * clipped[c, 0] / clipped[c, 2] + cx
                pv = fy * clipped[c, 1] / clipped[c, 2] + cy
                umin = min(umin, pu)
                umax = max(umax, pu)
                vmin = min(vmin, pv)
                vmax = max(vmax, pv)
            u0 = max(math.floor(umin) - 1, 0)
            u1 = min(math.ceil(umax) + 1, width - 1)
            v0 = max(math.floor(vmin) - 1, 0)
            v1 = min(math.ceil(vmax) + 1, height - 1)
            if u0 > u1 or v0 > v1:
                continue
            offset = plane - cam[a]
            lo1 = lo[b, a1] - eps
            hi1 = hi[b, a1] + eps
            lo2 = lo[b, a2] - eps
            hi2 = hi[b, a2] + eps
            for v in range(v0, v1 + 1):
                for u in range(u0, u1 + 1):
                    t = offset * inv[a, v, u]
                    if t < near or t >= zbuf[v, u] or t > far:
                        continue
                    q1 = cam[a1] + t * dirs[a1, v, u]
                    if q1 < lo1 or q1 > hi1:
                        continue
                    q2 = cam[a2] + t * dirs[a2, v, u]
                    if q2 < lo2 or q2 > hi2:
                        continue
                    zbuf[v, u] = t
                    index[v, u] = b
                    face[v, u] = f
    for v in range(height):
        for u in range(width):
            if index[v, u] >= 0:
                depth[v, u] = zbuf[v, u]
    return depth, index, face


@numba.njit(cache=True)
def _shade(depth, index, face, cam, axes, fx, fy, cx, cy, colour, period, contrast, factors, falloff):
    height, width = index.shape
    rgb = np.zeros((height, width, 3), dtype=np.uint8)
    d = np.empty(3)
    for v in range(height):
        for u in range(width):
            b = index[v, u]
            if b < 0:
                continue
            f = face[v, u]
            t = depth[v, u]
            level = factors[f] / (1.0 + falloff * t)
            if period[b] > 0.0:
                _ray(axes, (u - cx) / fx, (v - cy) / fy, d)
                a = f // 2
                q1 = cam[(a + 1) % 3] + t * d[(a + 1) % 3]
                q2 = cam[(a + 2) % 3] + t * d[(a + 2) % 3]
                if (math.floor(q1 / period[b]) + math.floor(q2 / period[b])) % 2 != 0:
                    level *= 1.0 - contrast[b]
            for k in range(3):
                value = colour[b, k] * level * 255.0
                rgb[v, u, k] = np.uint8(min(max(value + 0.5, 0.0), 255.0))
    return rgb
