"""Intrinsics from the vertical field of view (notes/ai2thor.md §2.4)."""

import math

import numpy as np
import pytest

from ovman_core.camera import Intrinsics


def test_known_values_from_the_notes():
    k = Intrinsics.from_vertical_fov(640, 480, 60.0)
    assert math.isclose(k.fx, 415.69, abs_tol=0.01) and k.fx == k.fy
    assert math.isclose(k.horizontal_fov_deg, 75.18, abs_tol=0.01)
    assert Intrinsics.from_vertical_fov(300, 300, 90.0).fx == pytest.approx(150.0)
    assert (k.cx, k.cy) == (319.5, 239.5)


def test_project_inverts_back_project():
    k = Intrinsics.from_vertical_fov(320, 240, 90.0)
    u, v = np.array([0.0, 100.5, 319.0]), np.array([0.0, 50.0, 239.0])
    points = k.back_project(u, v, np.array([1.0, 2.5, 7.0]))
    assert np.allclose(k.project(points), np.stack([u, v], axis=-1))
    assert np.allclose(points[:, 2], [1.0, 2.5, 7.0])  # planar depth is z


def test_invalid_fov_is_rejected():
    with pytest.raises(ValueError, match="field of view"):
        Intrinsics.from_vertical_fov(320, 240, 180.0)
