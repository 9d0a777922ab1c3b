"""The embedded world's RGB-D sensor model: what a consumer depth camera does to exact depth.

Depth: float32 (H, W) planar metres, NaN where invalid; the config is ``sim_node.sensor``
(:class:`ovman_core.config.SensorConfig`). The model, in order:

- **edges**: a pixel whose 4-neighbour differs from it by more than ``edge_jump`` of the nearer
  of the two depths lies on an object's edge (mixed pixels and the shadows of structured light);
  its depth is missing with probability ``edge_dropout``;
- **noise**: each valid depth gets normal noise of std ``depth_noise_base +
  depth_noise_quadratic · z²`` (the axial noise of Kinect-class cameras grows with the square of
  the range), and is rounded to the millimetre the way a camera's uint16 depth image reports it.
  One deviate is shared by each square cell of ``noise_cell_px`` pixels: structured-light and
  active-stereo cameras match a window of pixels, so neighbouring errors are strongly correlated
  (it also keeps recordings compressible: i.i.d. noise per pixel made them 20 times larger). The
  deviates are the 65,536 quantiles of :data:`NORMAL_QUANTILES` picked by uniform 16-bit draws
  (tails cut at ±4.3 std);
- **range**: depth beyond ``max_range`` (before the noise) is missing, and so is depth that is
  not a positive finite number.

Pose noise (:func:`noisy_pose`) perturbs the reported camera pose on the floor and in yaw.
Every draw comes from the generator the caller passes (seeded per frame by the world).
"""

from __future__ import annotations

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
    z = np.asarray(depth, dtype=np.float32)
    edge = np.zeros(z.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        rows = np.abs(z[1:] - z[:-1]) > jump * np.fmin(z[1:], z[:-1])
        cols = np.abs(z[:, 1:] - z[:, :-1]) > jump * np.fmin(z[:, 1:], z[:, :-1])
    edge[1:] |= rows
    edge[:-1] |= rows
    edge[:, 1:] |= cols
    edge[:, :-1] |= cols
    return edge


def degrade_depth(depth: np.ndarray, sensor: SensorConfig, rng: np.random.Generator) -> np.ndarray:
    """The sensor's reading of exact planar ``depth`` (see the module docstring); a new array."""
    z = np.asarray(depth, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        missing = ~((z > 0.0) & (z <= sensor.max_range))  # NaN, non-positive and beyond range
    edge = edge_pixels(z, sensor.edge_jump)
    ii, jj = np.nonzero(edge & ~missing)
    dropped = rng.random(ii.size) < sensor.edge_dropout
    missing[ii[dropped], jj[dropped]] = True
    std = np.float32(sensor.depth_noise_base) + np.float32(sensor.depth_noise_quadratic) * z * z
    cell = sensor.noise_cell_px
    rows, cols = -(-z.shape[0] // cell), -(-z.shape[1] // cell)
    draws = np.frombuffer(rng.bytes(2 * rows * cols), dtype=np.uint16).reshape(rows, cols)
    deviates = np.repeat(np.repeat(NORMAL_QUANTILES[draws], cell, axis=0), cell, axis=1)[: z.shape[0], : z.shape[1]]
    with np.errstate(invalid="ignore"):  # NaN and inf input become missing below
        noisy = np.rint((z + deviates * std) * np.float32(1000.0)) / np.float32(1000.0)
        missing |= ~(noisy > 0.0)
    noisy[missing] = np.nan
    return noisy.astype(np.float32, copy=False)


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
