"""The embedded world's RGB-D sensor model: what a consumer depth camera does to exact depth.

Depth: float32 (H, W) planar metres, NaN where invalid; the config is ``sim_node.sensor``
(:class:`ovman_core.config.SensorConfig`). :func:`degrade_depth` drops depth at object edges,
adds range-dependent noise rounded to the millimetre, and drops depth beyond ``max_range``;
:func:`noisy_pose` perturbs the reported camera pose on the floor and in yaw. Every draw comes from
the generator the caller passes (seeded per frame by the world). The compiled passes do in float32
exactly what the equivalent numpy expressions do, so the readings are the same.
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.special import ndtri

from ovman_core.config import SensorConfig, check_ranges
from ovman_core.world_state import AgentPose

NORMAL_QUANTILES = ndtri((np.arange(65536) + 0.5) / 65536).astype(np.float32)
"""Standard normal deviates at the midpoints of 65,536 equal-probability bins (float32)."""


def check_sensor(sensor: SensorConfig) -> None:
    """Raise ConfigError (a ValueError) naming the first ``sim_node.sensor`` key out of range."""
    checks = {
        "depth_noise_base": (sensor.depth_noise_base >= 0.0, "a std in metres >= 0"),
        "depth_noise_quadratic": (sensor.depth_noise_quadratic >= 0.0, "a coefficient in 1/m >= 0"),
        "noise_cell_px": (sensor.noise_cell_px >= 1, "a cell side in pixels >= 1"),
        "max_range": (sensor.max_range > 0.0, "a range in metres > 0"),
        "edge_jump": (sensor.edge_jump > 0.0, "a fraction of depth > 0"),
        "edge_dropout": (0.0 <= sensor.edge_dropout <= 1.0, "a probability in [0, 1]"),
        "pose_noise_translation": (sensor.pose_noise_translation >= 0.0, "a std in metres >= 0"),
        "pose_noise_yaw_deg": (sensor.pose_noise_yaw_deg >= 0.0, "a std in degrees >= 0"),
    }
    check_ranges("sim_node.sensor", sensor, checks)


def edge_pixels(depth: np.ndarray, jump: float) -> np.ndarray:
    """Bool (H, W): pixels with a 4-neighbour whose depth differs by more than ``jump`` times the
    nearer of the two (both pixels of such a pair are marked; NaN neighbours mark nothing)."""
    z = np.ascontiguousarray(depth, dtype=np.float32)
    edge = np.zeros(z.shape, dtype=np.bool_)
    _mark_edges(z, np.float32(jump), edge)
    return edge


def degrade_depth(depth: np.ndarray, sensor: SensorConfig, rng: np.random.Generator) -> np.ndarray:
    """The sensor's reading of exact planar ``depth``; a new array. In order:

    - edges: a pixel on an object's edge (:func:`edge_pixels` with ``edge_jump``: mixed pixels and
      the shadows of structured light) loses its depth with probability ``edge_dropout``;
    - noise: normal, std ``depth_noise_base + depth_noise_quadratic · z²`` (Kinect-class axial noise),
      one deviate per square cell of ``noise_cell_px`` pixels (such cameras match a window of
      pixels, so neighbouring errors are correlated; it also keeps recordings compressible), picked
      from :data:`NORMAL_QUANTILES` by uniform 16-bit draws, then rounded to the millimetre;
    - range: depth beyond ``max_range`` (before the noise), or not positive and finite, is missing.

    Draws: first one uniform per valid edge pixel (row-major), then the 16-bit cell draws."""
    z = np.ascontiguousarray(depth, dtype=np.float32)
    edge = np.zeros(z.shape, dtype=np.bool_)
    _mark_edges(z, np.float32(sensor.edge_jump), edge)
    missing = np.empty(z.shape, dtype=np.bool_)
    candidates = _mark_missing(z, np.float32(sensor.max_range), edge, missing)
    drops = rng.random(candidates)
    cell = sensor.noise_cell_px
    rows, cols = -(-z.shape[0] // cell), -(-z.shape[1] // cell)
    draws = np.frombuffer(rng.bytes(2 * rows * cols), dtype=np.uint16).reshape(rows, cols)
    out = np.empty(z.shape, dtype=np.float32)
    _read_depth(
        z,
        edge,
        missing,
        drops,
        float(sensor.edge_dropout),
        draws,
        NORMAL_QUANTILES,
        cell,
        np.float32(sensor.depth_noise_base),
        np.float32(sensor.depth_noise_quadratic),
        out,
    )
    return out


@numba.njit(cache=True)
def _mark_edges(z: np.ndarray, jump: np.float32, edge: np.ndarray) -> None:
    """Set ``edge`` (bool H×W, zeroed) where a 4-neighbour of ``z`` (float32 m) jumps by more than
    ``jump`` times the nearer depth; a NaN on either side compares false."""
    h, w = z.shape
    for i in range(h):
        for j in range(w):
            a = z[i, j]
            if i + 1 < h:
                b = z[i + 1, j]
                if abs(b - a) > jump * np.fmin(b, a):
                    edge[i, j] = True
                    edge[i + 1, j] = True
            if j + 1 < w:
                b = z[i, j + 1]
                if abs(b - a) > jump * np.fmin(b, a):
                    edge[i, j] = True
                    edge[i, j + 1] = True


@numba.njit(cache=True)
def _mark_missing(z: np.ndarray, max_range: np.float32, edge: np.ndarray, missing: np.ndarray) -> int:
    """Fill ``missing`` (bool H×W): depth that is not in (0, ``max_range``] m; return the number of
    valid edge pixels (each draws one uniform for the drop-out)."""
    h, w = z.shape
    candidates = 0
    for i in range(h):
        for j in range(w):
            gone = not (z[i, j] > 0.0 and z[i, j] <= max_range)
            missing[i, j] = gone
            if edge[i, j] and not gone:
                candidates += 1
    return candidates


@numba.njit(cache=True)
def _read_depth(
    z: np.ndarray,
    edge: np.ndarray,
    missing: np.ndarray,
    drops: np.ndarray,
    dropout: float,
    draws: np.ndarray,
    quantiles: np.ndarray,
    cell: int,
    base: np.float32,
    quadratic: np.float32,
    out: np.ndarray,
) -> None:
    """Write into ``out`` (float32 m) the noisy, millimetre-rounded depth with NaN where missing:
    ``drops`` holds one uniform per valid edge pixel in row-major order (below ``dropout``: dropped),
    ``draws`` the uint16 quantile index of each ``cell``-pixel square."""
    h, w = z.shape
    k = 0
    thousand = np.float32(1000.0)
    for i in range(h):
        for j in range(w):
            gone = missing[i, j]
            if edge[i, j] and not gone:
                gone = drops[k] < dropout
                k += 1
            zz = z[i, j]
            std = base + quadratic * zz * zz
            noisy = np.float32(np.rint((zz + quantiles[draws[i // cell, j // cell]] * std) * thousand) / thousand)
            out[i, j] = np.float32(np.nan) if gone or not noisy > 0.0 else noisy


def noisy_pose(pose: AgentPose, sensor: SensorConfig, rng: np.random.Generator) -> AgentPose:
    """``pose`` with the sensor's pose noise (floor position and yaw; the horizon is kept). Always
    draws three numbers from ``rng``, so enabling one axis does not reshuffle the others."""
    dx, dz, dyaw = rng.standard_normal(3)
    return AgentPose(
        pose.x + float(dx) * sensor.pose_noise_translation,
        pose.z + float(dz) * sensor.pose_noise_translation,
        (pose.yaw_deg + float(dyaw) * sensor.pose_noise_yaw_deg) % 360.0,
        pose.horizon_deg,
    )
