"""Stress-condition post-processing shared by every world (the second seed's reduced light).

Images: uint8 (H, W, 3) RGB; depth: float32 (H, W) planar metres, NaN where invalid.
"""

from __future__ import annotations

import numpy as np


def degrade_low_light(
    rgb: np.ndarray,
    depth: np.ndarray,
    gain: float,
    noise_std: float,
    visibility: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The low-light condition as post-processing: darker, noisier, and blind beyond ``visibility``.

    Pixels farther than ``visibility`` metres (or without depth) go black and invalid (depth NaN);
    the rest is dimmed by ``gain``; then Gaussian noise of ``noise_std`` (0-255 units) is added.
    Pure: ``rgb`` uint8 H×W×3 and ``depth`` float32 H×W planar metres are not modified.
    Returns (rgb, depth, visible) with ``visible`` the bool H×W mask of pixels still valid.
    """
    with np.errstate(invalid="ignore"):
        visible = np.asarray(depth) <= visibility
    value = rgb.astype(np.float32) * gain
    value[~visible] = 0.0
    value += rng.normal(0.0, noise_std, size=value.shape).astype(np.float32)
    limited = np.where(visible, depth, np.float32(np.nan)).astype(np.float32)
    return np.clip(np.rint(value), 0, 255).astype(np.uint8), limited, visible
