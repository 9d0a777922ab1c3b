"""Eq. 4, the static gate and SPL."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ovman_core.boxes import Footprint
from ovman_core.success import embodied_success, spl, static_success

R = 1.0
BOX = Footprint(2.0, 3.0, 2.6, 3.4)

offset = st.floats(0.0, 5.0, allow_nan=False)


@given(st.floats(0, 1), st.floats(0, 1))
def test_stopping_inside_the_footprint_succeeds(fx, fz):
    inside = (BOX.x_min + fx * (BOX.x_max - BOX.x_min), BOX.z_min + fz * (BOX.z_max - BOX.z_min))
    assert embodied_success(inside, BOX, R)


@given(st.floats(0, 2 * math.pi))
def test_boundary_at_exactly_R_from_an_edge_or_corner_succeeds(theta):
    # From the nearest point of the footprint, step exactly R outward (corner case included).
    cx = BOX.x_max if math.cos(theta) >= 0 else BOX.x_min
    cz = BOX.z_max if math.sin(theta) >= 0 else BOX.z_min
    point = (cx + R * math.cos(theta), cz + R * math.sin(theta))
    assert math.isclose(BOX.distance_to(point), R, rel_tol=1e-12)
    assert embodied_success(point, BOX, R)


@given(st.floats(0, 2 * math.pi), st.floats(1e-6, 10.0))
def test_just_outside_R_fails(theta, extra):
    cx = BOX.x_max if math.cos(theta) >= 0 else BOX.x_min
    cz = BOX.z_max if math.sin(theta) >= 0 else BOX.z_min
    d = R + extra
    point = (cx + d * math.cos(theta), cz + d * math.sin(theta))
    assert not embodied_success(point, BOX, R)


def test_no_stop_fails():
    assert not embodied_success(None, BOX, R)


def test_static_gate_is_a_radius_around_the_answer_point():
    assert static_success((1.0, 1.0), (1.0, 2.0), R)  # exactly R
    assert not static_success((1.0, 1.0), (1.0, 2.0001), R)
    assert not static_success(None, (1.0, 2.0), R)  # abstaining fails


def test_spl_values():
    assert spl(True, 4.0, 8.0) == 0.5
    assert spl(True, 4.0, 3.0) == 1.0  # a shorter walk than l cannot score above 1
    assert spl(False, 4.0, 4.0) == 0.0
    assert spl(True, 0.0, 0.0) == 1.0  # started where the test already passes
    with pytest.raises(ValueError):
        spl(True, -1.0, 2.0)
