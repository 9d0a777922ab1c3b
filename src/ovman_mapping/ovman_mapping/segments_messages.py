"""ovman_interfaces/Segments: a frame's segments as another node publishes them, to and from a
:class:`ovman_mapping.segmenter.Segmentation`.

:func:`segments_msg` is what segmenter_node publishes; :func:`segmentation_from_msg` is what
mapping_node (``segmenter.kind: topic``) fuses, after checking every field against the frame it is
paired with: a message that does not fit is refused with the field named, never reshaped.
"""

from __future__ import annotations

import array

import numpy as np
from ovman_ros.messages import MessageError, image_array, image_msg
from std_msgs.msg import Header

from ovman_interfaces.msg import Segments
from ovman_mapping.backprojection import CellLattice
from ovman_mapping.segmenter import Segment, Segmentation

ID_ENCODINGS = ("32SC1", "16UC1", "mono16")
SUM_TOLERANCE = 1e-3
"""How far a label distribution's sum may be from 1."""
NORM_TOLERANCE = 1e-3
"""How far an embedding's length may be from 1."""


class SegmentsError(ValueError):
    """A Segments message that does not fit its frame or breaks the message's documented rules."""


def segments_msg(segmentation: Segmentation, header: Header, segmenter: str, exact_labels: bool) -> Segments:
    """The message of ``segmentation`` (a frame's segments, ids on the colour image's pixels) for
    the colour image of ``header``; the vocabulary is the labels the segments use, in the order they
    first appear (so each segment's labels come back in their order)."""
    segments = segmentation.segments
    vocabulary = list(dict.fromkeys(name for s in segments for name in s.labels))
    column = {name: j for j, name in enumerate(vocabulary)}
    rows = np.zeros((len(segments), len(vocabulary)), dtype=np.float64)
    for i, segment in enumerate(segments):
        for name, share in segment.labels.items():
            rows[i, column[name]] = share
    embeddings = [s.embedding for s in segments]
    dim = 0 if not segments or any(e is None for e in embeddings) else int(np.asarray(embeddings[0]).size)
    message = Segments(
        header=header,
        ids=image_msg(np.asarray(segmentation.ids, dtype=np.int32), "32SC1", header),
        segment_ids=list(range(1, len(segments) + 1)),
        vocabulary=vocabulary,
        label_distribution=array.array("d", rows.ravel().tobytes()),
        confidence=[float(s.confidence) for s in segments],
        embedding_dim=dim,
        exact_labels=bool(exact_labels),
        segmenter=segmenter,
        cell=int(segmentation.cell),
    )
    lattice = segmentation.lattice
    if lattice is not None:
        message.lattice_rows, message.lattice_columns = _int64(lattice.rows), _int64(lattice.columns)
        message.lattice_row_spans = _int64(lattice.row_spans)
        message.lattice_column_spans = _int64(lattice.column_spans)
    if dim:
        rows_of = np.stack([np.asarray(e, np.float64) for e in embeddings])
        message.embedding = array.array("d", rows_of.ravel().tobytes())
    return message


def segmentation_from_msg(message: Segments, width: int, height: int, frame_id: str) -> Segmentation:
    """The Segmentation of ``message`` for a colour image of ``width`` x ``height`` px in optical
    frame ``frame_id``; SegmentsError naming the field that does not fit."""
    where = "segments"
    if message.header.frame_id != frame_id:
        raise SegmentsError(
            f"{where}: header.frame_id {message.header.frame_id!r} is not the colour image's {frame_id!r}"
        )
    if message.ids.encoding not in ID_ENCODINGS:
        expected = ", ".join(ID_ENCODINGS)
        raise SegmentsError(f"{where}: ids.encoding {message.ids.encoding!r}; expected one of {expected}")
    if (message.ids.width, message.ids.height) != (width, height):
        raise SegmentsError(
            f"{where}: ids is {message.ids.width}x{message.ids.height}; expected the colour image's {width}x{height}"
        )
    try:
        raw = image_array(message.ids).astype(np.int64)
    except MessageError as err:
        raise SegmentsError(f"{where}: ids: {err}") from None
    listed = [int(k) for k in message.segment_ids]
    n, vocabulary = len(listed), list(message.vocabulary)
    if len(set(listed)) != n or any(k == 0 for k in listed):
        raise SegmentsError(f"{where}: segment_ids must be distinct and non-zero, got {listed}")
    if len(set(vocabulary)) != len(vocabulary) or not all(vocabulary):
        raise SegmentsError(f"{where}: vocabulary must be distinct non-empty names, got {vocabulary}")
    rows = _matrix(message.label_distribution, n, len(vocabulary), "label_distribution")
    if n and (not np.all(rows >= 0.0) or np.any(np.abs(rows.sum(axis=1) - 1.0) > SUM_TOLERANCE)):
        raise SegmentsError(f"{where}: label_distribution: each row must be >= 0 and sum to 1 (within {SUM_TOLERANCE})")
    confidence = np.asarray(message.confidence, dtype=np.float64)
    if confidence.shape != (n,) or not np.all((confidence > 0.0) & (confidence <= 1.0)):
        raise SegmentsError(f"{where}: confidence must hold one value in (0, 1] per segment ({n}), got {confidence}")
    dim = int(message.embedding_dim)
    embedding = _matrix(message.embedding, n, dim, "embedding") if dim else None
    if dim == 0 and len(message.embedding):
        raise SegmentsError(f"{where}: embedding has {len(message.embedding)} values but embedding_dim is 0")
    if embedding is not None and n and np.any(np.abs(np.linalg.norm(embedding, axis=1) - 1.0) > NORM_TOLERANCE):
        raise SegmentsError(f"{where}: embedding rows must be unit length (within {NORM_TOLERANCE})")
    unknown = sorted(set(np.unique(raw).tolist()) - {0} - set(listed))
    if unknown:
        raise SegmentsError(f"{where}: ids holds {len(unknown)} id(s) not in segment_ids, e.g. {unknown[:5]}")
    # Renumbered 1..n in segment_ids' order (Segmentation's convention).
    lut = np.zeros(int(max(listed, default=0)) + 1, dtype=np.int32)
    lut[listed] = np.arange(1, n + 1, dtype=np.int32)
    ids = lut[raw] if n else np.zeros((height, width), dtype=np.int32)
    segments = tuple(
        Segment(
            {vocabulary[j]: float(rows[i, j]) for j in np.flatnonzero(rows[i] > 0.0)},
            float(confidence[i]),
            None if embedding is None else embedding[i].astype(np.float64),
        )
        for i in range(n)
    )
    cell = max(1, int(message.cell))
    return Segmentation(ids.astype(np.int32, copy=False), segments, cell, _lattice(message, width, height))


def _lattice(message: Segments, width: int, height: int) -> CellLattice | None:
    fields = (message.lattice_rows, message.lattice_columns, message.lattice_row_spans, message.lattice_column_spans)
    if not any(len(f) for f in fields):
        return None
    axes = []
    for name, samples, spans, size in (
        ("row", message.lattice_rows, message.lattice_row_spans, height),
        ("column", message.lattice_columns, message.lattice_column_spans, width),
    ):
        samples, spans = np.asarray(samples, dtype=np.int64), np.asarray(spans, dtype=np.int64)
        if samples.size == 0 or spans.size != 2 * samples.size:
            raise SegmentsError(
                f"segments: lattice_{name}s has {samples.size} values and lattice_{name}_spans {spans.size}; "
                f"expected n >= 1 and 2n"
            )
        spans = spans.reshape(-1, 2)
        inside = (samples >= 0) & (samples < size) & (spans[:, 0] <= samples) & (samples <= spans[:, 1])
        if not (np.all(inside) and np.all(np.diff(samples) > 0) and spans.min() >= 0 and spans.max() < size):
            raise SegmentsError(
                f"segments: lattice_{name}s must ascend inside the image (0..{size - 1}), each within its span"
            )
        axes.append((samples, spans))
    return CellLattice(rows=axes[0][0], columns=axes[1][0], row_spans=axes[0][1], column_spans=axes[1][1])


def _int64(values: np.ndarray) -> array.array:
    return array.array("q", np.asarray(values, dtype=np.int64).ravel().tobytes())


def _matrix(values: object, rows: int, columns: int, field: str) -> np.ndarray:
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.size != rows * columns:
        raise SegmentsError(f"segments: {field} has {matrix.size} values; expected {rows} x {columns}")
    if not np.all(np.isfinite(matrix)):
        raise SegmentsError(f"segments: {field} holds a value that is not finite")
    return matrix.reshape(rows, columns)
