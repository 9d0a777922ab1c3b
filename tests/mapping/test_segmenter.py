"""Segmenters: the simulator backend, the learned backend's model checks and its logits-to-segments
step, and frames that must give no segments."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from ovman_core.camera import Intrinsics
from ovman_core.config import ConfigError, load_config
from ovman_core.observation import Observation
from ovman_core.world_state import AgentPose
from ovman_mapping.learned_segmenter import (
    MANIFEST_FILE,
    MODEL_FORMAT,
    MODEL_VERSION,
    WEIGHTS_FILE,
    LearnedSegmenter,
    segments_from_logits,
)
from ovman_mapping.segmenter import SegmenterError, SimulatorSegmenter, make_segmenter, segmenter_identity

CONFIG = load_config().mapping_node.segmenter
VOCABULARY = ("Chair", "Mug", "Sofa")


def observation(rgb: np.ndarray, depth: np.ndarray, segments: np.ndarray | None = None, labels=None) -> Observation:
    h, w = depth.shape
    return Observation(
        rgb=rgb,
        depth=depth,
        segments=np.zeros((h, w), np.int32) if segments is None else segments,
        segment_labels={} if labels is None else labels,
        segment_instances={},
        pose=AgentPose(0.0, 0.0, 0.0, 0.0),
        camera_position=(0.0, 1.5, 0.0),
        intrinsics=Intrinsics.from_vertical_fov(w, h, 90.0),
        step=1,
    )


def write_model(directory: Path, vocabulary=VOCABULARY, image_size=(32, 24), seed: int = 0) -> Path:
    """A randomly initialised model with a valid manifest (what ``ovman train-perception`` writes)."""
    import torch
    from safetensors.torch import save_file

    from ovman_mapping.segnet import SegNet

    torch.manual_seed(seed)
    model = SegNet(len(vocabulary), (4, 4, 4), 2, 2)
    camera = Intrinsics.from_vertical_fov(*image_size, 90.0)  # the training camera
    directory.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / WEIGHTS_FILE))
    manifest = {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "vocabulary": list(vocabulary),
        "widths": [4, 4, 4],
        "decoder_stages": 2,
        "context_dilation": 2,
        "input_stride": 2,
        "image_size": list(image_size),
        "intrinsics": {f: getattr(camera, f) for f in ("fx", "fy", "cx", "cy")},
        "weights_sha256": hashlib.sha256((directory / WEIGHTS_FILE).read_bytes()).hexdigest(),
    }
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest))
    return directory


def learned(directory: Path, **changes) -> LearnedSegmenter:
    return LearnedSegmenter(dataclasses.replace(CONFIG, kind="learned", model=str(directory), **changes))


def test_the_simulator_backend_passes_masks_and_labels_on_one_hot_with_compact_ids():
    segments = np.array([[0, 4, 4], [7, 7, 9]], np.int32)
    out = SimulatorSegmenter().segment(
        observation(np.zeros((2, 3, 3), np.uint8), np.ones((2, 3), np.float32), segments, {4: "Mug", 7: "Sofa"})
    )
    assert out.ids.tolist() == [[0, 1, 1], [2, 2, 0]]  # id 9 has no label: no segment
    assert out.labels == {1: "Mug", 2: "Sofa"}
    assert [s.labels for s in out.segments] == [{"Mug": 1.0}, {"Sofa": 1.0}]
    assert SimulatorSegmenter.reads_simulator_segments


def class_logits(classes: list[list[int]]) -> np.ndarray:
    """(K + 2, h, w) logits: each cell's class (0 = background, k = VOCABULARY[k - 1]) at 10, the
    other classes at -10, no boundary anywhere."""
    classes = np.asarray(classes)
    logits = np.full((len(VOCABULARY) + 2, *classes.shape), -10.0, np.float32)
    for k in range(len(VOCABULARY) + 1):
        logits[k][classes == k] = 10.0
    return logits


def test_touching_objects_of_different_classes_stay_apart():
    # A chair (class 1) against a sofa (class 3): one 4-connected blob of object cells, two segments.
    logits = class_logits([[1, 1, 1, 3, 3, 3, 0]] * 4)
    out = segments_from_logits(logits, VOCABULARY, dataclasses.replace(CONFIG, merge_cells=10), (8, 14))
    assert sorted(s.label for s in out.segments) == ["Chair", "Sofa"]
    assert out.labels[out.ids[0, 0]] == "Chair" and out.labels[out.ids[0, 7]] == "Sofa"
    assert (out.ids[:, 12:] == 0).all()
    # Each output cell covers 2 x 2 pixels: the segmentation says so (back-projection samples a cell once).
    assert out.cell == 2 and np.array_equal(out.ids, np.repeat(np.repeat(out.ids[::2, ::2], 2, axis=0), 2, axis=1))


def test_class_noise_joins_the_fragment_it_borders_most_and_an_isolated_small_object_stays():
    # A 4x6 chair with a 2-cell mug speck inside, and a lone 2-cell mug in the corner.
    rows = [[1, 1, 1, 1, 1, 1, 0, 0, 0]] * 4 + [[0] * 7 + [2, 2]]
    rows[1] = [1, 1, 2, 2, 1, 1, 0, 0, 0]
    logits = class_logits(rows)
    out = segments_from_logits(logits, VOCABULARY, dataclasses.replace(CONFIG, merge_cells=10), (5, 9))
    assert sorted(s.label for s in out.segments) == ["Chair", "Mug"]
    chair = next(k for k, s in enumerate(out.segments, start=1) if s.label == "Chair")
    assert (out.ids[:4, :6] == chair).all(), "the speck is part of the chair"
    assert out.segments[chair - 1].labels["Mug"] == pytest.approx(2 / 24, abs=1e-6)
    assert out.labels[out.ids[4, 8]] == "Mug", "nothing to join: the lone mug stays"
    # Without merging, the speck is a segment of its own.
    unmerged = segments_from_logits(logits, VOCABULARY, dataclasses.replace(CONFIG, merge_cells=0), (5, 9))
    assert sorted(s.label for s in unmerged.segments) == ["Chair", "Mug", "Mug"]


def test_small_fragments_merge_smallest_first_into_the_longest_border():
    # Fragments: A chair 3x4 (12 cells), B sofa 1x4 below it (4 cells), C mug 1x1 touching B only.
    rows = [[1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [3, 3, 3, 3, 2]]
    out = segments_from_logits(class_logits(rows), VOCABULARY, dataclasses.replace(CONFIG, merge_cells=5), (4, 5))
    # C (1 cell) joins B, its only neighbour; B+C (5 cells) is then big enough to stay.
    assert sorted(s.label for s in out.segments) == ["Chair", "Sofa"]
    assert out.ids[3, 4] == out.ids[3, 0] != out.ids[0, 0]


def test_fragments_are_the_4_connected_cells_of_one_class_numbered_class_by_class():
    """Without merging, every component of one class's cells is one segment; segments are
    numbered by class, then by their first cell in raster order (what the per-class labelling of
    scipy gives), on random grids of every shape down to one cell."""
    from scipy import ndimage

    config = dataclasses.replace(CONFIG, merge_cells=0, min_confidence=0.0, boundary_threshold=1.0)
    rng = np.random.default_rng(3)
    for _ in range(300):
        h, w = (int(x) for x in rng.integers(1, 10, 2))
        classes = rng.integers(0, len(VOCABULARY) + 1, (h, w))
        expected = np.zeros((h, w), dtype=np.int64)
        for c in range(1, len(VOCABULARY) + 1):
            labelled, _ = ndimage.label(classes == c)
            expected[labelled > 0] = labelled[labelled > 0] + expected.max()
        out = segments_from_logits(class_logits(classes.tolist()), VOCABULARY, config, (2 * h, 2 * w))
        assert np.array_equal(out.ids[::2, ::2], expected)
        assert [s.label for s in out.segments] == [
            VOCABULARY[int(classes[expected == k][0]) - 1] for k in range(1, int(expected.max()) + 1)
        ]


def reference_fragments(best, seeds, objects, min_cells):
    """A plain, slow statement of cell_fragments: per-class scipy labelling, the greedy merge of
    small fragments over a table of border lengths, one step of growth."""
    import collections

    from scipy import ndimage

    h, w = best.shape
    ids, count = np.zeros((h, w), dtype=np.int64), 0
    for c in sorted(set(best[seeds].tolist())):
        labelled, n = ndimage.label(seeds & (best == c))
        ids[labelled > 0] = labelled[labelled > 0] + count
        count += n
    if count == 0:
        return np.zeros(h * w, dtype=np.int64), 0
    border = collections.Counter()
    rows = zip(ids[:, :-1].ravel(), ids[:, 1:].ravel(), strict=True)
    for a, b in [*rows, *zip(ids[:-1].ravel(), ids[1:].ravel(), strict=True)]:
        if a != b and a > 0 and b > 0:
            border[frozenset((int(a), int(b)))] += 1
    size = np.bincount(ids.ravel(), minlength=count + 1)
    group, total = list(range(count + 1)), size.tolist()

    def root(k):
        while group[k] != k:
            k = group[k]
        return k

    for k in sorted((k for k in range(1, count + 1) if size[k] < min_cells), key=lambda k: (size[k], k)):
        mine = root(k)
        if total[mine] >= min_cells:
            continue
        shared = collections.Counter()
        for pair, length in border.items():
            if k in pair and root(next(iter(pair - {k}))) != mine:
                shared[root(next(iter(pair - {k})))] += length
        if shared:
            into = min(shared, key=lambda r: (-shared[r], r))
            group[mine] = into
            total[into] += total[mine]
    number = {r: n for n, r in enumerate(sorted({root(k) for k in range(count + 1)}))}
    merged = np.vectorize(lambda v: number[root(int(v))])(ids)
    padded = np.pad(merged, 1)
    around = np.max([padded[:-2, 1:-1], padded[2:, 1:-1], padded[1:-1, :-2], padded[1:-1, 2:]], axis=0)
    return np.where(merged > 0, merged, np.where(objects, around, 0)).ravel(), len(number) - 1


def test_cell_fragments_equal_a_plain_statement_of_the_rule_on_random_class_maps():
    """ovman_mapping.cell_fragments (numba) against reference_fragments on blobby random class
    maps with boundary cells taken out of the seeds, for several merge sizes; and the cell classes
    are numpy's argmax (the first of equal maxima), refused when any logit is not finite."""
    from ovman_mapping.cell_fragments import cell_classes, cell_fragments

    rng = np.random.default_rng(7)
    merged_any = 0
    for trial in range(120):
        h, w = (int(x) for x in rng.integers(1, 6, 2) * 3)
        coarse = rng.integers(0, 5, (h // 3 + 1, w // 3 + 1))
        best = np.kron(coarse, np.ones((3, 3), dtype=np.int64))[:h, :w]
        noise = rng.random((h, w)) < 0.2
        best = np.where(noise, rng.integers(0, 5, (h, w)), best)
        objects = best > 0
        seeds = objects & (rng.random((h, w)) > 0.1)
        min_cells = int(rng.choice([0, 1, 3, 6, 12]))
        cells, count = cell_fragments(best, seeds, objects, min_cells)
        expected, expected_count = reference_fragments(best, seeds, objects, min_cells)
        assert count == expected_count and np.array_equal(cells, expected), trial
        merged_any += count < len(np.unique(reference_fragments(best, seeds, objects, 0)[0])) - 1
    assert merged_any > 20
    logits = rng.integers(-3, 3, (200, 9)).astype(np.float32)  # many ties
    best, finite = cell_classes(logits, logits.view(np.uint32))
    assert finite and np.array_equal(best, logits[:, :-1].argmax(axis=1))
    for bad in (np.nan, np.inf, -np.inf):
        for column in (0, 8):
            spoiled = logits.copy()
            spoiled[17, column] = bad
            assert not cell_classes(spoiled, spoiled.view(np.uint32))[1]


def test_the_network_input_is_the_block_mean_colour_and_the_sampled_depth():
    from ovman_mapping.segnet import DEPTH_SCALE, network_input

    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    depth = rng.uniform(0.2, 6.0, (12, 16)).astype(np.float32)
    depth[0, 0], depth[2, 4], depth[4, 6] = np.nan, 0.0, -1.0
    x = network_input(rgb, depth, 2)
    assert x.shape == (5, 6, 8) and x.dtype == np.float32 and x.flags.c_contiguous  # training stacks these
    mean = rgb.reshape(6, 2, 8, 2, 3).astype(np.float64).mean(axis=(1, 3)).transpose(2, 0, 1) / 255.0 - 0.5
    np.testing.assert_allclose(x[:3], mean, atol=1e-6)
    sampled = depth[::2, ::2]
    valid = np.isfinite(sampled) & (sampled > 0)
    assert np.array_equal(x[4], valid.astype(np.float32))
    assert x[4, 0, 0] == 0 and x[4, 1, 2] == 0 and x[4, 2, 3] == 0
    np.testing.assert_array_equal(x[3], np.where(valid, sampled, 0.0).astype(np.float32) / np.float32(DEPTH_SCALE))
    white = network_input(np.full((32, 32, 3), 255, np.uint8), depth[:1, :1].repeat(32, 0).repeat(32, 1), 16)
    assert np.all(white[:3] == np.float32(0.5))  # 256 pixels of 255 sum exactly
    with pytest.raises(ValueError, match="divisible"):
        network_input(rgb, depth, 5)
    with pytest.raises(ValueError, match=r"rgb must be uint8 \(12, 16, 3\) for a depth image of 16x12"):
        network_input(rgb[:, :-2], depth, 2)
    batch = np.zeros((2, 6, 8, 5), np.float32)  # channels-last rows of a batch, written in place
    assert np.array_equal(network_input(rgb, depth, 2, out=batch[1]), x)
    assert np.array_equal(batch[1].transpose(2, 0, 1), x) and not batch[0].any()
    # 17 x 17 pixels: sums beyond uint16, the same float32 product.
    white = network_input(np.full((34, 34, 3), 255, np.uint8), np.ones((34, 34), np.float32), 17)
    assert white.shape == (5, 2, 2) and np.all(white[:3] == np.float32(0.5))
    grey = rng.integers(0, 256, (34, 34, 3), dtype=np.uint8)
    sums = grey.reshape(2, 17, 2, 17, 3).sum(axis=(1, 3)).transpose(2, 0, 1)
    expected = sums.astype(np.float32) * np.float32(1.0 / (255.0 * 17 * 17)) - np.float32(0.5)
    assert np.array_equal(network_input(grey, np.ones((34, 34), np.float32), 17)[:3], expected)
    with pytest.raises(ValueError, match="not be exact in float32"):
        network_input(np.zeros((257, 257, 3), np.uint8), np.ones((257, 257), np.float32), 257)


def test_logits_become_segments_split_at_boundaries_with_their_label_distributions():
    k = len(VOCABULARY)
    logits = np.full((k + 2, 4, 6), -10.0, np.float32)
    logits[0] = 10.0  # background everywhere ...
    logits[0, :, :5] = -10.0
    logits[1, :, :5] = 10.0  # ... but columns 0-4 are Chair
    logits[2, :, :5] = 9.0
    logits[-1, :, 2] = 10.0  # a boundary down column 2 splits the Chair cells into two instances
    config = dataclasses.replace(CONFIG, boundary_threshold=0.5, merge_cells=0)
    unsplit = segments_from_logits(logits, VOCABULARY, dataclasses.replace(config, boundary_threshold=1.0), (8, 12))
    assert len(unsplit.segments) == 1  # 1.0: the boundary head is not used
    out = segments_from_logits(logits, VOCABULARY, config, (8, 12))
    assert len(out.segments) == 2
    assert out.ids.shape == (8, 12) and set(np.unique(out.ids)) == {0, 1, 2}
    first, second = out.segments
    assert first.label == "Chair" and first.labels["Chair"] > first.labels["Mug"] > 0.2
    assert sum(first.labels.values()) == pytest.approx(1.0)
    assert (out.ids[:, 10:] == 0).all()  # the background columns
    # The boundary column is grown back into the segment on its left (the lower id touching it first).
    assert set(np.unique(out.ids[:, 4:6])) <= {1, 2}
    assert second.confidence > 0.5


def test_non_finite_logits_and_unconfident_segments_give_nothing():
    k = len(VOCABULARY)
    flat = np.zeros((k + 2, 3, 3), np.float32)  # the k classes equally likely: confidence about 1/k
    flat[0] = -5.0
    assert len(segments_from_logits(flat, VOCABULARY, CONFIG, (3, 3)).segments) == 1
    strict = dataclasses.replace(CONFIG, min_confidence=0.5)
    assert segments_from_logits(flat, VOCABULARY, strict, (3, 3)).segments == ()
    for bad in (np.nan, np.inf, -np.inf):  # a non-finite logit anywhere: no segments
        broken = flat.copy()
        broken[1, 1, 1] = bad
        assert segments_from_logits(broken, VOCABULARY, CONFIG, (3, 3)).segments == ()


def test_a_random_model_segments_a_frame_and_black_depthless_frames_give_no_segments(tmp_path):
    segmenter = learned(write_model(tmp_path / "model"))
    assert not segmenter.reads_simulator_segments
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    depth = rng.uniform(0.5, 4.0, (24, 32)).astype(np.float32)
    out = segmenter.segment(observation(rgb, depth))
    assert out.ids.shape == (24, 32) and out.ids.max(initial=0) == len(out.segments)
    nan_depth = np.full((24, 32), np.nan, np.float32)
    assert segmenter.segment(observation(rgb, nan_depth)).segments == ()
    assert segmenter.segment(observation(np.zeros_like(rgb), depth)).segments == ()
    # Label-blind: the simulator's segments and labels change nothing.
    fake = observation(rgb, depth, np.ones((24, 32), np.int32), {1: "Sofa"})
    again = segmenter.segment(fake)
    assert np.array_equal(again.ids, out.ids) and again.segments == out.segments


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / MANIFEST_FILE).unlink(), "no segmenter model there"),
        (lambda d: (d / MANIFEST_FILE).write_text("{not json"), "unreadable manifest"),
        (lambda d: (d / MANIFEST_FILE).write_text('{"format": "other"}'), "not a segmenter manifest"),
        (lambda d: (d / WEIGHTS_FILE).unlink(), "the weights file is missing"),
        (lambda d: _flip_byte(d / WEIGHTS_FILE), "do not match the manifest's weights_sha256"),
        (lambda d: _edit_manifest(d, widths=[4, 4]), "field 'widths' is missing or malformed"),
    ],
)
def test_a_missing_or_corrupt_model_fails_at_start_up_naming_the_file_and_the_key(tmp_path, damage, message):
    directory = write_model(tmp_path / "model")
    damage(directory)
    with pytest.raises(SegmenterError, match=message) as caught:
        make_segmenter(dataclasses.replace(CONFIG, kind="learned", model=str(directory)))
    assert str(directory) in str(caught.value) and "mapping_node.segmenter.model" in str(caught.value)


def test_a_model_for_another_vocabulary_is_refused_and_other_cameras_are_read(tmp_path):
    """Cameras of other sizes are resampled to the model's (tests/mapping/test_any_camera.py has the
    geometry and the refusals)."""
    directory = write_model(tmp_path / "model")
    with pytest.raises(SegmenterError, match="trained for another vocabulary"):
        make_segmenter(dataclasses.replace(CONFIG, kind="learned", model=str(directory)), ("Chair", "Bed"))
    segmenter = learned(directory)
    for h, w in ((48, 72), (12, 16)):
        out = segmenter.segment(observation(np.ones((h, w, 3), np.uint8), np.ones((h, w), np.float32)))
        assert out.ids.shape == (h, w) and out.ids.max(initial=0) == len(out.segments)
    # A whole multiple whose input blocks would exceed 256 pixels (129 x 2) is resampled, not a crash.
    tiny = learned(write_model(tmp_path / "tiny", image_size=(8, 8)))
    huge = observation(np.ones((1032, 1032, 3), np.uint8), np.ones((1032, 1032), np.float32))
    assert tiny.segment(huge).ids.shape == (1032, 1032)


def test_a_camera_a_whole_multiple_of_the_models_size_is_read_at_the_models_resolution():
    """A robot's 640x480 camera with the packaged 320x240 model: each frame's input blocks are twice
    as large, so a 320x240 render upsampled twice (and its intrinsics scaled) gives the network the
    same input bit for bit, and the same segments in cells twice as large."""
    from ovman_sim.embedded import EmbeddedWorld
    from ovman_sim.tours import tour_observations

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-3")
    frames = list(itertools.islice(tour_observations(world, config.sim_node.tour, config.sim_node.world), 0, 40, 8))
    segmenter = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model=""))
    for frame in frames:
        k = frame.intrinsics
        twice = dataclasses.replace(
            frame,
            rgb=frame.rgb.repeat(2, 0).repeat(2, 1),
            depth=frame.depth.repeat(2, 0).repeat(2, 1),
            intrinsics=Intrinsics(2 * k.width, 2 * k.height, 2 * k.fx, 2 * k.fy, 2 * k.cx + 0.5, 2 * k.cy + 0.5),
        )
        one, big = segmenter.segment(frame), segmenter.segment(twice)
        assert big.cell == 2 * one.cell and big.segments == one.segments
        assert np.array_equal(big.ids, one.ids.repeat(2, 0).repeat(2, 1))
    assert sum(len(segmenter.segment(f).segments) for f in frames) > 0


def test_weights_that_do_not_fit_the_manifest_fail_with_the_file_named(tmp_path):
    directory = write_model(tmp_path / "model")
    _edit_manifest(directory, widths=[8, 8, 8])
    with pytest.raises(SegmenterError, match="the weights do not fit the manifest"):
        learned(directory).warm_up()


def test_segmenter_settings_are_range_checked_and_the_cache_identity_follows_the_weights(tmp_path):
    with pytest.raises(ConfigError, match=r"mapping_node\.segmenter\.kind"):
        make_segmenter(dataclasses.replace(CONFIG, kind="oracle"))
    with pytest.raises(ConfigError, match=r"mapping_node\.segmenter\.boundary_threshold"):
        make_segmenter(dataclasses.replace(CONFIG, boundary_threshold=float("nan")))
    with pytest.raises(ConfigError, match=r"mapping_node\.segmenter\.precision.*float32, bfloat16"):
        make_segmenter(dataclasses.replace(CONFIG, precision="float16"))
    assert segmenter_identity(dataclasses.replace(CONFIG, kind="simulator")) == "simulator"
    one = segmenter_identity(dataclasses.replace(CONFIG, kind="learned", model=str(write_model(tmp_path / "a"))))
    other = write_model(tmp_path / "b", seed=1)
    two = segmenter_identity(dataclasses.replace(CONFIG, kind="learned", model=str(other)))
    assert one.startswith("learned:") and one != two


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))


def _edit_manifest(directory: Path, **fields) -> None:
    manifest = json.loads((directory / MANIFEST_FILE).read_text())
    manifest.update(fields)
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest))


def test_the_packaged_model_loads_for_the_embedded_vocabulary_and_camera():
    from ovman_mapping.learned_segmenter import PACKAGED_MODEL
    from ovman_sim.homes import CATEGORIES

    segmenter = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model=""), sorted(CATEGORIES))
    assert segmenter.directory == PACKAGED_MODEL
    camera = load_config().sim_node.camera
    assert segmenter.image_size == (camera.width, camera.height)
    assert (PACKAGED_MODEL / WEIGHTS_FILE).stat().st_size <= 5 * 2**20  # the limit for a committed model
    segmenter.warm_up()


def test_the_learned_segmenters_threads_change_its_speed_not_its_segments_and_bfloat16_its_floats():
    """``segmenter.threads`` is a speed setting: one and two torch threads give the same segment
    masks on rendered frames, and label shares and confidences equal to float rounding (oneDNN
    splits one dilated convolution of a lone frame differently on two threads, 1e-5 in the logits);
    ``segmenter.precision: bfloat16`` gives nearly the same segments."""
    from ovman_sim.embedded import EmbeddedWorld
    from ovman_sim.tours import tour_observations

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-4")
    frames = list(itertools.islice(tour_observations(world, config.sim_node.tour, config.sim_node.world), 0, 40, 4))
    outputs = []
    for threads in (1, 2):
        segmenter = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model="", threads=threads))
        outputs.append([segmenter.segment(o) for o in frames])
    assert sum(len(s.segments) for s in outputs[0]) > 0
    for one, two in zip(*outputs, strict=True):
        assert np.array_equal(one.ids, two.ids) and len(one.segments) == len(two.segments)
        for a, b in zip(one.segments, two.segments, strict=True):
            assert a.labels.keys() == b.labels.keys()
            assert a.confidence == pytest.approx(b.confidence, abs=1e-5)
            assert all(a.labels[k] == pytest.approx(b.labels[k], abs=1e-5) for k in a.labels)
    # bfloat16 arithmetic: nearly the same segments, not the same floats.
    bf16 = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model="", precision="bfloat16"))
    near = [bf16.segment(o) for o in frames]
    same = np.mean([np.mean((a.ids > 0) == (b.ids > 0)) for a, b in zip(outputs[0], near, strict=True)])
    assert same > 0.98
    assert sum(len(s.segments) for s in near) == pytest.approx(sum(len(s.segments) for s in outputs[0]), rel=0.1)


def test_a_map_from_the_learned_segmenter_ignores_the_simulators_segments_and_labels():
    """Label-blind in process: the same frames with the simulator's segments and labels stripped
    give the same map, instance by instance."""
    from ovman_mapping.encoders import make_encoder
    from ovman_mapping.fusion import build_map
    from ovman_sim.embedded import EmbeddedWorld
    from ovman_sim.tours import tour_observations

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-11")
    frames = list(itertools.islice(tour_observations(world, config.sim_node.tour, config.sim_node.world), 24))
    stripped = [dataclasses.replace(o, segments=np.zeros_like(o.segments), segment_labels={}) for o in frames]
    segmenter = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model=""))
    encoder = make_encoder(config.mapping_node.encoder)
    full = build_map(frames, config.mapping_node, encoder, 1, segmenter)
    blind = build_map(stripped, config.mapping_node, encoder, 1, segmenter)
    assert len(full.instances) > 0
    assert [(i.uid, i.box, dict(i.labels)) for i in full.instances] == [
        (i.uid, i.box, dict(i.labels)) for i in blind.instances
    ]
    assert all(np.array_equal(a.points, b.points) for a, b in zip(full.instances, blind.instances, strict=True))


def test_the_clip_backend_labels_the_learned_proposals_with_open_clip_crop_features():
    """Random CLIP weights (no download): the path is the real one, the labels are not meaningful."""
    from ovman_sim.embedded import EmbeddedWorld

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-11")
    frame = world.observe()
    clip_config = dataclasses.replace(CONFIG, kind="clip", model="")
    with pytest.raises(SegmenterError, match=r"needs mapping_node\.encoder"):
        make_segmenter(clip_config)
    clip = make_segmenter(clip_config, encoder=dataclasses.replace(config.mapping_node.encoder, clip_weights=""))
    assert clip.kind == "clip" and not clip.reads_simulator_segments
    proposals = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model="")).segment(frame)
    got = clip.segment(frame)
    assert proposals.segments and np.array_equal(got.ids, proposals.ids)  # the learned class-agnostic proposals
    for segment in got.segments:
        assert set(segment.labels) <= set(clip.vocabulary) and sum(segment.labels.values()) == pytest.approx(1.0)
        assert segment.confidence == pytest.approx(max(segment.labels.values()), rel=1e-2)
        assert segment.embedding is not None and np.linalg.norm(segment.embedding) == pytest.approx(1.0)
    black = dataclasses.replace(frame, rgb=np.zeros_like(frame.rgb))
    assert clip.segment(black).segments == ()
    assert segmenter_identity(clip_config).startswith("clip:")


def test_the_learned_segmenter_gives_a_frame_the_same_segments_alone_and_in_a_batch():
    """Every convolution of the inference network runs through oneDNN (segnet.OneDnnConv2d):
    ``torch.conv2d`` sent the dilated ones to im2col for one frame and to oneDNN for several,
    which round differently, so a frame's segments depended on its batch
    (``segmenter.batch_frames`` in process, one frame at a time in mapping_node). A black frame in
    the batch gets no segments and changes nothing for the others."""
    import torch

    from ovman_mapping import segnet
    from ovman_sim.embedded import EmbeddedWorld
    from ovman_sim.tours import tour_observations

    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    world.reset("embedded-2")
    frames = list(itertools.islice(tour_observations(world, config.sim_node.tour, config.sim_node.world), 0, 48, 6))
    frames.insert(3, dataclasses.replace(frames[0], rgb=np.zeros_like(frames[0].rgb)))
    segmenter = make_segmenter(dataclasses.replace(CONFIG, kind="learned", model=""))
    batch = segmenter.segment_batch(frames)
    alone = [segmenter.segment(o) for o in frames]
    assert not batch[3].segments and sum(len(s.segments) for s in batch) > 0
    for k, (one, many) in enumerate(zip(alone, batch, strict=True)):
        assert np.array_equal(one.ids, many.ids) and one.segments == many.segments, k
    inference = segnet.fold_batch_norm(segnet.SegNet(3, (8, 8, 8), 2, 2))
    convolutions = [m for m in inference.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convolutions) == 10 and all(isinstance(m, segnet.OneDnnConv2d) for m in convolutions)


def test_the_inference_network_folds_each_upsampling_into_a_transposed_convolution():
    """segnet.UpConv: a decoder step's 3x3 convolution of [upsampled coarse, skip] runs as one of
    the skip plus a stride-2 transposed convolution of the coarse features, with the training
    network's logits to float rounding; where the skip is not twice the coarse size (odd sizes),
    the concatenation is convolved as in training."""
    import torch
    from torch.nn import functional

    from ovman_mapping import segnet

    # The kernel: a 3x3 convolution of the 2x nearest upsampling, exactly in float64.
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(4, 3, 3, 3, generator=generator, dtype=torch.float64)
    coarse = torch.randn(2, 3, 5, 7, generator=generator, dtype=torch.float64)
    expected = functional.conv2d(functional.interpolate(coarse, scale_factor=2.0), weight, padding=1)
    got = functional.conv_transpose2d(coarse, segnet.upsampled_kernel(weight), stride=2, padding=1)
    assert got.shape == expected.shape == (2, 4, 10, 14)
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)

    torch.manual_seed(0)
    model = segnet.SegNet(5, (8, 16, 16), 3, 2)
    for module in model.modules():  # batch norm statistics that folding must carry
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    model.eval()
    inference = segnet.fold_batch_norm(model)
    steps = [inference.dec2, inference.dec1, inference.dec0]
    assert all(isinstance(step, segnet.UpConv) for step in steps)
    # 48x64: every skip twice its coarse input (the transposed path); 30x44: the 1/8 and 1/4
    # steps (4x6 -> 8x11, 8x11 -> 15x22) are not, the last (15x22 -> 30x44) is.
    for shape in ((2, 5, 48, 64), (1, 5, 30, 44)):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
        with torch.inference_mode():
            reference = model(x)
            assert torch.allclose(inference(x), reference, rtol=0, atol=1e-4)
    # The transposed path does not read the concatenation's weights: spoiling them changes only
    # the steps that take the concatenation path.
    with torch.inference_mode():
        before = {shape: inference(torch.ones(shape)) for shape in ((1, 5, 48, 64), (1, 5, 30, 44))}
        for step in steps:
            step.conv.weight.zero_()
        assert torch.equal(inference(torch.ones(1, 5, 48, 64)), before[(1, 5, 48, 64)])
        assert not torch.allclose(inference(torch.ones(1, 5, 30, 44)), before[(1, 5, 30, 44)])
