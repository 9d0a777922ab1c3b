"""Cross-visit free-space evidence (ovman_mapping.cross_visit): depth frames of one visit judging
the places of the other visit's instances, on hand-made depth images."""

import dataclasses

import numpy as np

from ovman_core.camera import Intrinsics
from ovman_core.config import load_config
from ovman_core.frames import optical_axes_thor
from ovman_mapping.cross_visit import DepthView, PriorVisit, cross_visit_evidence, project, seen_empty
from ovman_mapping.instances import Instance, InstanceMap, Sighting, box_of

PARAMS = load_config().mapping_node.mapping
K = Intrinsics.from_vertical_fov(64, 48, 60.0)


def patch(x: float, z: float, size: float = 0.4) -> np.ndarray:
    """A vertical square of points facing a camera at the origin that looks along +z (world, m)."""
    s = np.linspace(-size / 2, size / 2, 9)
    xs, ys = np.meshgrid(s, s)
    return np.column_stack([xs.ravel() + x, ys.ravel() + 1.0, np.full(xs.size, z)])


def view(depth: float, step: int = 0) -> DepthView:
    """A frame from (0, 1, 0) looking along +z that sees ``depth`` metres everywhere."""
    return DepthView(step, np.full((K.height, K.width), depth, np.float32), K, np.array([0.0, 1.0, 0.0]),
                     optical_axes_thor(0.0, 0.0))  # fmt: skip


def test_a_frame_that_sees_behind_the_place_sees_it_empty_and_one_that_sees_the_surface_does_not():
    place = [patch(0.0, 2.0)]
    assert seen_empty(place, [view(3.0)], PARAMS).tolist() == [True]
    assert seen_empty(place, [view(2.0)], PARAMS).tolist() == [False]
    # Hidden behind something nearer, or no valid depth: the frame does not judge.
    assert seen_empty(place, [view(1.0)], PARAMS).tolist() == [False]
    assert seen_empty(place, [view(np.nan), view(0.0)], PARAMS).tolist() == [False]
    # More frames saw it empty than occupied; a tie claims nothing; unjudging frames do not vote.
    assert seen_empty(place, [view(3.0), view(3.0), view(2.0), view(1.0)], PARAMS).tolist() == [True]
    assert seen_empty(place, [view(3.0), view(2.0), view(np.nan)], PARAMS).tolist() == [False]


def test_small_far_or_unseen_places_are_not_judged():
    # Out of the image (behind the camera), and too small there to judge (a 2 cm patch 7 m away).
    assert seen_empty([patch(0.0, -2.0)], [view(9.0)], PARAMS).tolist() == [False]
    assert seen_empty([patch(0.0, 7.0, size=0.02)], [view(7.9)], PARAMS).tolist() == [False]
    assert seen_empty([], [view(3.0)], PARAMS).tolist() == []
    assert seen_empty([patch(0.0, 2.0)], [], PARAMS).tolist() == [False]


def test_the_evidence_names_gone_visit1_and_new_visit2_instances():
    def at(uid: str, points: np.ndarray) -> Instance:
        box = box_of(points)
        sighting = Sighting(0, 0, box.center, 100)
        return Instance(uid, box.center, box, points, np.ones(1), np.ones(1), {"Vase": 1.0}, (sighting,))

    map1 = InstanceMap(1, (at("v1:0", patch(0.0, 2.0)), at("v1:1", patch(0.6, 2.0))), "test")
    map2 = InstanceMap(2, (at("v2:0", patch(0.0, 2.0)), at("v2:1", patch(-0.6, 2.0))), "test")
    # Visit 1 saw the wall at 3 m on the left (where v2:1 now stands) and the two vases at 2 m;
    # visit 2 sees the vase at the centre and the wall behind where v1:1 stood.
    wall = np.full((K.height, K.width), 3.0, np.float32)
    first = wall.copy()
    first[:, 26:] = 2.0
    second = wall.copy()
    second[:, 25:39] = 2.0
    prior = PriorVisit(map1, (dataclasses.replace(view(0.0), depth=first),))
    evidence = cross_visit_evidence(prior, map2, [dataclasses.replace(view(0.0), depth=second)], PARAMS)
    assert evidence.gone == {"v1:1"} and evidence.new == {"v2:1"}


def test_projection_is_the_plain_pinhole_statement_point_by_point():
    """project(): the pixels, the points inside and the observed depth are those of the plain
    numpy statement (rotation, division, rounding half to even), for points in front, behind,
    beyond the range, outside the image and not finite, on a depth image with holes."""
    rng = np.random.default_rng(2)
    points = np.column_stack([rng.uniform(-4, 4, 4000), rng.uniform(-1, 3, 4000), rng.uniform(-2, 12, 4000)])
    points[:3] = [[np.nan, 1.0, 3.0], [0.0, np.inf, 3.0], [0.0, 1.0, -np.inf]]  # never inside, never indexed
    depth = rng.uniform(0.5, 8.0, (K.height, K.width)).astype(np.float32)
    depth[rng.random(depth.shape) < 0.1] = np.nan
    frame = DepthView(0, depth, K, np.array([0.3, 1.1, -0.2]), optical_axes_thor(25.0, 10.0))
    with np.errstate(invalid="ignore"):  # inf times a zero of the rotation
        seen = project(points, frame, 10.0)
        optical = (points - frame.camera_position) @ frame.axes
    z = optical[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = np.rint(K.fx * optical[:, 0] / z + K.cx), np.rint(K.fy * optical[:, 1] / z + K.cy)
        inside = (z > 0) & (z <= 10.0) & (u >= 0) & (u < K.width) & (v >= 0) & (v < K.height)
    assert not inside[:3].any()
    assert 500 < inside.sum() < 3500
    assert np.array_equal(seen.inside, inside) and np.array_equal(seen.z, z, equal_nan=True)
    assert np.array_equal(seen.rows, v[inside].astype(int)) and np.array_equal(seen.cols, u[inside].astype(int))
    expected = np.full(len(points), np.nan)
    expected[inside] = depth[seen.rows, seen.cols]
    assert np.array_equal(seen.observed, expected, equal_nan=True)
