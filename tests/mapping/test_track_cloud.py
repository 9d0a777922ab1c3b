"""A track's points per sighting, folded into voxel sums past mapping.fold_points."""

import dataclasses

import numpy as np

from ovman_mapping.backprojection import voxel_downsample
from ovman_mapping.fusion import build_map
from ovman_mapping.track_cloud import TrackCloud

from .scenes import tour
from .test_fusion import AROUND, CONFIG, ENCODER, STATIC, blind

VOXEL = 0.05


def cloud_points(seed: int, n: int = 50) -> np.ndarray:
    """``n`` points on a 0.5 m box's top face (world, metres)."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(0, 0.5, n), np.full(n, 0.8), rng.uniform(1.0, 1.5, n)])


def test_below_the_limit_each_sightings_points_are_kept_in_step_order_even_across_a_merge():
    a = TrackCloud((0, 0), cloud_points(0), fold_points=1000, voxel_size=VOXEL)
    a.add((4, 4), cloud_points(4))
    b = TrackCloud((2, 2), cloud_points(2), fold_points=1000, voxel_size=VOXEL)
    a.absorb(b)
    assert a.folded is None and a.raw_points == 150
    assert [key for key, _ in a.raw] == [(0, 0), (2, 2), (4, 4)]
    assert all(np.array_equal(x, cloud_points(s)) for x, s in zip(a.clouds(), (0, 2, 4), strict=True))


def test_past_the_limit_the_points_fold_into_the_same_voxel_means_and_stop_growing():
    everything = [cloud_points(seed) for seed in range(40)]
    track = TrackCloud((0, 0), everything[0], fold_points=120, voxel_size=VOXEL)
    sizes = []
    for step, points in enumerate(everything[1:], start=1):
        track.add((step, step), points)
        assert track.raw_points <= 120
        if track.folded is not None:
            sizes.append(len(track.folded.codes))
    assert track.folded is not None and int(track.folded.counts.sum()) + track.raw_points == 40 * 50
    assert max(sizes) <= 100  # the face's 10 x 10 voxels, however many sightings
    (means,) = track.clouds()
    np.testing.assert_allclose(means, voxel_downsample(np.concatenate(everything), VOXEL), atol=1e-12)


def test_folded_tracks_merge_into_the_voxel_means_of_both():
    a = TrackCloud((0, 0), cloud_points(0), fold_points=10, voxel_size=VOXEL)
    b = TrackCloud((1, 1), cloud_points(1), fold_points=10, voxel_size=VOXEL)
    b.add((3, 3), cloud_points(3, n=5))
    a.absorb(b)
    (means,) = a.clouds()
    expected = voxel_downsample(np.concatenate([cloud_points(0), cloud_points(1), cloud_points(3, n=5)]), VOXEL)
    np.testing.assert_allclose(means, expected, atol=1e-12)


def test_a_map_whose_tracks_fold_keeps_the_same_instances_where_they_were():
    frames = blind(tour(STATIC, AROUND))
    folding = dataclasses.replace(CONFIG, mapping=dataclasses.replace(CONFIG.mapping, fold_points=50))
    exact, folded = build_map(frames, CONFIG, ENCODER, visit=1), build_map(frames, folding, ENCODER, visit=1)
    assert [(i.uid, i.label, i.moving, len(i.sightings)) for i in folded] == [
        (i.uid, i.label, i.moving, len(i.sightings)) for i in exact
    ]
    for a, b in zip(exact, folded, strict=True):
        np.testing.assert_allclose(a.position, b.position, atol=1e-9)
