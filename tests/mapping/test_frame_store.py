"""A visit's kept frames within mapping.frame_memory_mb, and the builder's crops kept without frames."""

import dataclasses

import numpy as np
import pytest

from ovman_core.camera import Intrinsics
from ovman_mapping.frame_store import MEGABYTE, FrameStore, KeptFrame, compact_ids
from ovman_mapping.fusion import MapBuilder, build_map

from .scenes import OneHotEncoder, look_around, tour
from .test_fusion import AROUND, CHAIR, CONFIG, ENCODER, STATIC, VASE, blind

CAMERA = Intrinsics(width=4, height=2, fx=2.0, fy=2.0, cx=2.0, cy=1.0)


def kept(index: int, depth: bool = True) -> KeptFrame:
    return KeptFrame(
        index=index,
        step=index,
        depth=np.ones((2, 4), np.float32) if depth else None,  # 32 bytes
        segments=np.zeros((2, 4), np.uint8),  # 8 bytes
        labels={},
        intrinsics=CAMERA,
        camera_position=np.zeros(3),
        axes=np.eye(3),
    )


def with_memory(megabytes: float):
    return dataclasses.replace(CONFIG, mapping=dataclasses.replace(CONFIG.mapping, frame_memory_mb=megabytes))


def test_the_store_keeps_every_frame_within_its_budget_then_every_2nd_4th_evenly_spread():
    store = FrameStore(budget_bytes=40 * 8)  # eight frames of 40 bytes
    for index in range(8):
        store.add(kept(index))
    assert [f.index for f in store] == list(range(8)) and store.stride == 1
    store.add(kept(8))
    assert [f.index for f in store] == [0, 2, 4, 6, 8] and store.stride == 2
    for index in range(9, 100):
        store.add(kept(index))
        assert store.nbytes <= store.budget_bytes
        assert all(f.index % store.stride == 0 for f in store)
    assert store.stride == 16 and [f.index for f in store] == list(range(0, 100, 16))
    assert store.nbytes == sum(f.nbytes for f in store) == 7 * 40


def test_the_first_frame_stays_however_large_and_a_depthless_frame_costs_its_segments_only():
    store = FrameStore(budget_bytes=10)
    store.add(kept(0))
    assert len(store) == 1 and store.nbytes == 40
    assert kept(1, depth=False).nbytes == 8
    with pytest.raises(ValueError, match="budget_bytes must be > 0"):
        FrameStore(0)


def test_segment_ids_are_kept_in_the_narrowest_type_with_their_values():
    for top, dtype in ((200, np.uint8), (60000, np.uint16), (70000, np.uint32)):
        ids = np.array([[0, top], [1, 2]], dtype=np.int64)
        small = compact_ids(ids)
        assert small.dtype == dtype and np.array_equal(small, ids)
    negative = np.array([[-1, 3]], dtype=np.int32)
    assert compact_ids(negative) is negative


def test_a_builder_past_its_frame_memory_keeps_spread_frames_and_still_sees_an_object_gone():
    frames = blind(tour([CHAIR, VASE], look_around(0.0, 0.0)) + tour([CHAIR], look_around(0.0, 0.0), first_step=4))
    per_frame = frames[0].depth.nbytes + frames[0].rgb[..., 0].nbytes  # float32 depth + uint8 ids
    everything = MapBuilder(CONFIG, ENCODER, 2)
    half = MapBuilder(with_memory(4.5 * per_frame / MEGABYTE), ENCODER, 2)
    for builder in (everything, half):
        for frame in frames:
            builder.add(frame)
    assert everything.frames_kept == (8, 1) and half.frames_kept == (4, 2)
    assert len(half.views()) == 4
    full_map, thinned = everything.build(), half.build()
    assert thinned.frames == full_map.frames == 8
    assert len(thinned.history) == 8
    vase = next(i for i in thinned if i.label == "Vase")
    assert vase.moving and vase.motion_evidence == "seen gone from its place at step 6"
    assert [(i.uid, i.label, i.moving) for i in thinned] == [(i.uid, i.label, i.moving) for i in full_map]


class ViewRecorder(OneHotEncoder):
    """The one-hot encoder, but it reads views: records each instance's."""

    reads_views = True

    def __init__(self, vocabulary):
        super().__init__(vocabulary)
        self.views = []

    def embed_instances(self, evidence):
        self.views = [[np.array(v) for v in item.views] for item in evidence]
        return super().embed_instances(evidence)


def test_an_encoder_reading_views_gets_each_instances_best_crops_whatever_the_frame_memory():
    frames = blind(tour(STATIC, AROUND))
    count = CONFIG.encoder.views_per_instance
    recorders = []
    for megabytes in (256.0, 0.01):
        recorder = ViewRecorder(["Chair", "Vase", "Box", "Sofa"])
        instance_map = build_map(frames, with_memory(megabytes), recorder, visit=1)
        recorders.append(recorder)
        assert len(recorder.views) == len(instance_map)
        for views, instance in zip(recorder.views, instance_map, strict=True):
            assert len(views) == min(count, len(instance.sightings))
            best = sorted(instance.sightings, key=lambda s: (-s.pixel_count, s.frame_index))[0]
            rgb = frames[best.frame_index].rgb
            windows = np.lib.stride_tricks.sliding_window_view(rgb, views[0].shape)
            assert np.any(np.all(windows == views[0], axis=(-3, -2, -1)))  # a crop of its best frame
    full, thinned = recorders
    assert all(
        len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        for a, b in zip(full.views, thinned.views, strict=True)
    )


def test_an_encoder_that_reads_no_views_gets_none():
    recorder = ViewRecorder(["Chair"])
    recorder.reads_views = False
    build_map(blind(tour([CHAIR], look_around(0.0, 0.0))), CONFIG, recorder, visit=1)
    assert recorder.views == [[]]
