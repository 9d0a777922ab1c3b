"""Back-projection of one frame's segments into world points, and its robustness to bad input."""

import dataclasses

import numpy as np
import pytest
from scipy import ndimage

from ovman_core.config import load_config
from ovman_core.world_state import AgentPose
from ovman_mapping.backprojection import (
    FrameFormatError,
    camera_points,
    hue_saturation_cells,
    nearest_largest_depth_parts,
    remove_outliers,
    segment_frame,
    voxel_downsample,
)

from .scenes import on_floor, render

CONFIG = load_config().mapping_node
PARAMS = CONFIG.mapping
BINS = CONFIG.encoder.colour_bins

CHAIR = on_floor("Chair_1", "Chair", 0.0, 2.0, colour=(200, 40, 40))
VASE = on_floor("Vase_1", "Vase", 1.0, 3.0, size=(0.2, 0.4, 0.2), colour=(40, 40, 200))
POSE = AgentPose(0.0, 0.0, yaw_deg=0.0, horizon_deg=30.0)


def segments_of(obs, params=PARAMS, cell=1):
    return segment_frame(
        obs.rgb,
        obs.depth,
        obs.segments,
        obs.segment_labels,
        obs.intrinsics,
        obs.camera_position,
        obs.pose.yaw_deg,
        obs.pose.horizon_deg,
        params,
        BINS,
        cell=cell,
    )


def inside(points, box, tol):
    return np.all((points >= np.array(box.lo) - tol) & (points <= np.array(box.hi) + tol), axis=1)


def test_segment_points_land_on_the_rendered_boxes_in_the_world_frame():
    segments = segments_of(render([CHAIR, VASE], POSE, step=0))
    by_label = {s.label: s for s in segments}
    assert set(by_label) == {"Chair", "Vase"}
    for label, obj in (("Chair", CHAIR), ("Vase", VASE)):
        assert inside(by_label[label].points, obj.box, PARAMS.voxel_size).all()
        assert by_label[label].colour.sum() == pytest.approx(1.0)


def test_camera_points_follow_the_thor_frame_for_a_turned_camera():
    # Yaw 90 looks along +x (AI2-THOR yaw is clockwise from +z); a pixel at the centre, 2 m deep.
    k = render([], AgentPose(0.0, 0.0, 90.0, 0.0), 0).intrinsics
    point = camera_points(k, (0.0, 1.5, 0.0), 90.0, 0.0, np.array([k.cx]), np.array([k.cy]), np.array([2.0]))
    assert np.allclose(point, [[2.0, 1.5, 0.0]])


def test_frame_without_depth_gives_no_segments():
    obs = render([CHAIR], POSE, 0)
    assert segments_of(dataclasses.replace(obs, depth=None)) == []
    assert segments_of(dataclasses.replace(obs, depth=np.full_like(obs.depth, np.nan))) == []


def test_nan_inf_and_negative_depth_pixels_are_skipped_not_trusted():
    obs = render([CHAIR], POSE, 0)
    depth = obs.depth.copy()
    depth[::3] = np.nan
    depth[1::3] = np.inf
    depth[:, ::5] = -1.0
    (segment,) = segments_of(dataclasses.replace(obs, depth=depth))
    assert np.isfinite(segment.points).all()
    assert inside(segment.points, CHAIR.box, PARAMS.voxel_size).all()


def test_depth_beyond_max_depth_is_not_back_projected():
    obs = render([CHAIR], POSE, 0)
    params = dataclasses.replace(PARAMS, max_depth=1.0)  # the chair is 2 m away
    assert segments_of(obs, params) == []


def test_segments_of_a_few_pixels_are_dropped():
    obs = render([CHAIR], POSE, 0)
    segments = obs.segments.copy()
    segments[0:3, 0:3] = 77  # a 9-pixel speck on the wall
    labels = {**obs.segment_labels, 77: "Speck"}
    kept = segments_of(dataclasses.replace(obs, segments=segments, segment_labels=labels))
    assert [s.label for s in kept] == ["Chair"]


def test_segment_ids_of_any_size_and_sign_give_the_same_segments():
    """Small ids (a segmenter's 1..n) and huge ones (an id scheme of another source) are counted
    alike; ids at or below 0 are background."""
    obs = render([CHAIR, VASE], POSE, 0)
    expected = [(s.label, s.pixel_count, s.points.tobytes()) for s in segments_of(obs)]
    for offset in (0, 10**12):
        ids = np.where(obs.segments > 0, obs.segments.astype(np.int64) + offset, -5)
        labels = {k + offset: v for k, v in obs.segment_labels.items()}
        got = segments_of(dataclasses.replace(obs, segments=ids, segment_labels=labels))
        assert [(s.label, s.pixel_count, s.points.tobytes()) for s in got] == expected


def blocky(obs, cell):
    """``obs`` with its segment ids made constant on cell × cell blocks (each block takes the id of
    its centre pixel), as a network's output cells give them."""
    h, w = obs.segments.shape
    centres = obs.segments[cell // 2 :: cell, cell // 2 :: cell]
    return dataclasses.replace(obs, segments=np.repeat(np.repeat(centres, cell, axis=0), cell, axis=1)[:h, :w])


def test_segments_in_cells_are_sampled_once_a_cell_at_its_centre_and_counted_whole():
    """With ids constant on 4 × 4 blocks and ``pixel_stride`` 2, one pixel a block is back-projected,
    the block's centre: depth valid only there still gives the segments, pixel counts are whole
    blocks and crops are the blocks of the sampled pixels."""
    obs = blocky(render([CHAIR, VASE], POSE, step=0), 4)
    corners = np.full_like(obs.depth, np.nan)
    corners[::4, ::4] = obs.depth[::4, ::4]
    assert segments_of(dataclasses.replace(obs, depth=corners)) != []  # the stride-2 lattice reads corners
    assert segments_of(dataclasses.replace(obs, depth=corners), cell=4) == []  # the cell lattice does not
    depth = np.full_like(obs.depth, np.nan)
    depth[2::4, 2::4] = obs.depth[2::4, 2::4]
    thinned = dataclasses.replace(obs, depth=depth)
    by_label = {s.label: s for s in segments_of(thinned, cell=4)}
    assert set(by_label) == {"Chair", "Vase"}
    for label, obj in (("Chair", CHAIR), ("Vase", VASE)):
        segment = by_label[label]
        assert inside(segment.points, obj.box, PARAMS.voxel_size).all()
        mask = obs.segments == next(k for k, v in obs.segment_labels.items() if v == label)
        assert segment.pixel_count == mask.sum() and segment.pixel_count % 16 == 0
        rows, cols = np.nonzero(mask)
        row0, col0, row1, col1 = segment.crop  # the blocks of its sampled pixels
        assert all(c % 4 == 0 for c in segment.crop)
        assert rows.min() <= row0 < row1 <= rows.max() + 1 and cols.min() <= col0 < col1 <= cols.max() + 1
    # The full depth image gives the same segments on the cell lattice as on its centres alone.
    full = {s.label: s.points.tobytes() for s in segments_of(obs, cell=4)}
    assert full == {label: s.points.tobytes() for label, s in by_label.items()}


def test_a_stride_coarser_than_the_cells_keeps_its_own_lattice():
    obs = blocky(render([CHAIR], POSE, step=0), 2)
    coarse = dataclasses.replace(PARAMS, pixel_stride=4)
    assert [s.points.tobytes() for s in segments_of(obs, coarse, cell=2)] == [
        s.points.tobytes() for s in segments_of(obs, coarse)
    ]


def test_empty_frame_gives_no_segments():
    assert segments_of(render([], POSE, 0)) == []


def test_mismatched_image_shapes_raise_a_named_error():
    obs = render([CHAIR], POSE, 0)
    with pytest.raises(FrameFormatError, match="depth has shape"):
        segments_of(dataclasses.replace(obs, depth=obs.depth[:-1]))
    with pytest.raises(FrameFormatError, match="segments have shape"):
        segments_of(dataclasses.replace(obs, segments=obs.segments[:, :-1]))


def test_voxel_downsample_keeps_one_mean_point_per_voxel():
    points = np.array([[0.01, 0.01, 0.01], [0.03, 0.03, 0.03], [0.51, 0.0, 0.0]])
    out = voxel_downsample(points, 0.05)
    assert np.allclose(out, [[0.02, 0.02, 0.02], [0.51, 0.0, 0.0]])
    assert voxel_downsample(np.empty((0, 3)), 0.05).shape == (0, 3)


def test_statistical_outlier_removal_drops_an_isolated_point():
    grid = np.stack(np.meshgrid(*[np.arange(5) * 0.05] * 3), axis=-1).reshape(-1, 3)
    cloud = np.vstack([grid, [[3.0, 3.0, 3.0]]])
    cleaned = remove_outliers(cloud, 8, 2.0)
    assert len(cleaned) == len(grid)
    assert remove_outliers(cloud[:5], 8, 2.0).shape == (5, 3)  # too few points to judge: unchanged


def test_the_colour_cell_table_is_pils_hsv_conversion_for_every_colour_it_is_asked_for():
    """hue_saturation_cells: the histogram cells by table lookup are those of converting the
    colours through PIL directly: random colours, greys, the primaries and the extremes, for 8
    bins (uint8 cells) and 17 (uint16)."""
    from PIL import Image

    rng = np.random.default_rng(5)
    colours = np.vstack(
        [
            rng.integers(0, 256, (200_000, 3)),
            np.repeat(np.arange(256)[:, None], 3, axis=1),
            np.array(np.meshgrid([0, 1, 127, 128, 254, 255], [0, 1, 127, 128, 254, 255], [0, 1, 127, 128, 254, 255]))
            .reshape(3, -1)
            .T,
        ]
    ).astype(np.uint8)
    hsv = np.asarray(Image.fromarray(colours[None]).convert("HSV"))[0].astype(np.int64)
    index = (colours[:, 0].astype(np.int64) << 16) | (colours[:, 1].astype(np.int64) << 8) | colours[:, 2]
    for bins in (8, 17):
        table = hue_saturation_cells(bins)
        assert table.shape == (1 << 24,) and table.dtype == (np.uint8 if bins <= 16 else np.uint16)
        expected = ((hsv[:, 0] * bins) >> 8) * bins + ((hsv[:, 1] * bins) >> 8)
        assert np.array_equal(table[index], expected)


def test_a_segment_keeps_its_largest_depth_part_and_drops_the_background_it_spilled_over():
    # Segment 1: an object at about 2 m and the wall 3 m behind it that its mask spilled over;
    # segment 2: one continuous surface from 1 m to 1.3 m (no jump) stays whole; segment 3: two
    # equal parts, the nearer one kept.
    ids = np.array([1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    depth = np.array([2.0, 2.05, 2.1, 5.0, 5.1, 1.98, 1.0, 1.1, 1.2, 1.3, 4.0, 4.1, 2.0, 2.1])
    keep = nearest_largest_depth_parts(ids, depth, gap=0.15)
    assert keep.tolist() == [True, True, True, False, False, True, True, True, True, True, False, False, True, True]
    assert nearest_largest_depth_parts(ids, depth, gap=10.0).all()


def test_a_mask_spilled_over_the_object_edge_still_lands_on_the_object():
    # A coarse mask: the vase's segment grown 6 pixels upwards, over the room behind it (a mask
    # that spills onto the floor it stands on keeps those points: no depth jump there).
    obs = render([VASE], POSE, step=0)
    vase_id = next(k for k, name in obs.segment_labels.items() if name == "Vase")
    mask = obs.segments == vase_id
    grown = mask | ndimage.shift(mask, (-6, 0), order=0)
    spilled = dataclasses.replace(obs, segments=np.where(grown, vase_id, 0).astype(obs.segments.dtype))
    (kept,) = segments_of(spilled)
    assert inside(kept.points, VASE.box, PARAMS.voxel_size).all()
    (raw,) = segments_of(spilled, dataclasses.replace(PARAMS, segment_depth_gap=0.0))
    assert not inside(raw.points, VASE.box, PARAMS.voxel_size).all()
