"""ovman_interfaces/Segments to and from a Segmentation: a round trip keeps every field a map is
fused from (labels in their order, confidences, embeddings, the cell and the lattice), and a message
that does not fit its frame is refused with the field named."""

from __future__ import annotations

import numpy as np
import pytest

try:
    from ovman_ros.messages import header_msg
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(f"{error}: run these tests with the venv's python after scripts/build_interfaces.sh") from error

from ovman_mapping.backprojection import CellLattice
from ovman_mapping.segmenter import Segment, Segmentation, SegmenterError, TopicSegmenter
from ovman_mapping.segments_messages import SegmentsError, segmentation_from_msg, segments_msg

pytestmark = pytest.mark.ros

FRAME = "camera_color_optical_frame"


def segmentation(embedding: bool = False, lattice: bool = False) -> Segmentation:
    ids = np.zeros((6, 8), dtype=np.int32)
    ids[1:3, 1:4], ids[4:6, 5:8] = 1, 2
    vectors = [np.array([0.6, 0.8]), np.array([1.0, 0.0])] if embedding else [None, None]
    segments = (
        Segment({"Mug": 0.7, "Bowl": 0.3}, 0.9, vectors[0]),
        Segment({"Bowl": 0.25, "Chair": 0.75}, 0.4, vectors[1]),
    )
    grid = None
    if lattice:
        grid = CellLattice(
            rows=np.array([1, 4]), columns=np.array([2, 6]),
            row_spans=np.array([[0, 2], [3, 5]]), column_spans=np.array([[0, 3], [4, 7]]),
        )  # fmt: skip
    return Segmentation(ids, segments, cell=2, lattice=grid)


@pytest.mark.parametrize("embedding, lattice", [(False, False), (True, True)])
def test_a_round_trip_keeps_what_fusion_reads(embedding: bool, lattice: bool):
    original = segmentation(embedding, lattice)
    message = segments_msg(original, header_msg(5, FRAME), "a segmenter", exact_labels=False)
    back = segmentation_from_msg(message, 8, 6, FRAME)
    assert np.array_equal(back.ids, original.ids) and back.cell == 2
    for got, want in zip(back.segments, original.segments, strict=True):
        assert list(got.labels.items()) == list(want.labels.items()) and got.confidence == want.confidence
        assert (got.embedding is None) == (want.embedding is None)
        if want.embedding is not None:
            assert np.array_equal(got.embedding, want.embedding)
    if lattice:
        for field in ("rows", "columns", "row_spans", "column_spans"):
            assert np.array_equal(getattr(back.lattice, field), getattr(original.lattice, field)), field
    else:
        assert back.lattice is None


def broken(change) -> object:
    message = segments_msg(segmentation(), header_msg(5, FRAME), "a segmenter", exact_labels=False)
    change(message)
    return message


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda m: setattr(m.header, "frame_id", "other_frame"), "header.frame_id"),
        (lambda m: setattr(m.ids, "encoding", "rgb8"), "ids.encoding"),
        (lambda m: setattr(m, "segment_ids", [1, 7]), "not in segment_ids"),
        (lambda m: setattr(m, "segment_ids", [1, 1]), "segment_ids"),
        (lambda m: setattr(m, "label_distribution", [0.5] * 6), "label_distribution"),
        (lambda m: setattr(m, "label_distribution", [0.7, 0.3]), "label_distribution"),
        (lambda m: setattr(m, "label_distribution", [float("nan"), 0.3, 0.0, 0.0, 0.25, 0.75]), "not finite"),
        (lambda m: setattr(m, "label_distribution", []), "label_distribution has 0 values"),
        (lambda m: setattr(m, "confidence", [0.9, 0.0]), "confidence"),
        (lambda m: setattr(m, "confidence", [0.9, float("nan")]), "confidence"),
        (lambda m: setattr(m.ids, "data", m.ids.data[:10]), "ids:"),
        (lambda m: setattr(m, "embedding", [1.0, 0.0]), "embedding"),
        (lambda m: setattr(m, "lattice_rows", [1, 9]), "lattice_row"),
    ],
)
def test_a_message_that_does_not_fit_is_refused_naming_the_field(change, field: str):
    with pytest.raises(SegmentsError, match=field.replace(".", r"\.")):
        segmentation_from_msg(broken(change), 8, 6, FRAME)


def test_segments_of_another_size_than_the_colour_image_are_refused():
    message = segments_msg(segmentation(), header_msg(5, FRAME), "a segmenter", exact_labels=False)
    with pytest.raises(SegmentsError, match="ids is 8x6; expected the colour image's 848x480"):
        segmentation_from_msg(message, 848, 480, FRAME)


def test_the_topic_segmenter_hands_out_only_the_segments_given_for_that_frame():
    from tests.mapping.test_segmenter import observation

    frame, other = (observation(np.zeros((6, 8, 3), np.uint8), np.ones((6, 8), np.float32)) for _ in range(2))
    segmenter = TopicSegmenter()
    segmenter.give(frame, segmentation(), exact_labels=True, source="sim")
    with pytest.raises(SegmenterError, match="no Segments message was given"):
        segmenter.segment(other)
    assert segmenter.segment(frame).segments == segmentation().segments and segmenter.exact_labels
    with pytest.raises(SegmenterError, match="exact_labels False after True"):
        segmenter.give(other, segmentation(), exact_labels=False, source="learned")
