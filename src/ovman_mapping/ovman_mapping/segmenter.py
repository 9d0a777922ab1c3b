"""Segmenters: instance segments with label distributions from one RGB-D frame.

Input: RGB uint8 (H, W, 3), planar depth float32 (H, W) metres (NaN invalid) and pinhole intrinsics;
output: a :class:`Segmentation`, an int32 (H, W) id image (0 = none) and per segment a label
distribution (summing to 1), a confidence in (0, 1] and optionally an embedding. By
``mapping.segmenter.kind``: ``learned`` and ``clip`` read RGB, depth and intrinsics only; ``topic``
takes another node's segments of the frame; ``simulator`` reads the simulator's masks and labels
(one-hot), for the oracle arms and the ``sim_perception`` diagnostic only. A label-blind one never
touches ``Observation.segments``, ``segment_labels`` or ``segment_instances``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ovman_core.camera import Intrinsics
from ovman_core.config import EncoderConfig, MappingConfig, SegmenterConfig, check_ranges
from ovman_mapping.backprojection import CellLattice
from ovman_mapping.camera_resampling import PADDINGS

if TYPE_CHECKING:
    from ovman_core.observation import Observation

SEGMENTER_KINDS = ("learned", "simulator", "clip", "topic")
TOPIC = "topic"
SIMULATOR = "simulator"
"""The simulator's own segments (ground truth: the sim_perception arm's maps); every other kind reads pixels only."""
PRECISIONS = ("float32", "bfloat16")
SEGMENTER_NODE_PARAMETERS = (
    "segmenter.",
    "encoder.",
    "node.camera_input",
    "node.qos_depth",
    "node.qos_keep_all",
    "node.sync_max_pending",
    "node.step_dt",
)
"""The mapping_node parameters (keys and key prefixes) segmenter_node declares too: the segmenter it
runs, the clip backend's model, how it reads the camera."""


class SegmenterError(RuntimeError):
    """A segmenter cannot be built as configured (names the file and the config key to fix)."""


@dataclasses.dataclass(frozen=True)
class Segment:
    """One segment: ``labels`` label → share (sums to 1), ``confidence`` in (0, 1],
    ``embedding`` an optional unit float64 vector (e.g. CLIP's)."""

    labels: Mapping[str, float]
    confidence: float
    embedding: np.ndarray | None = None

    @property
    def label(self) -> str:
        """The most likely label (ties: the alphabetically first)."""
        return min(self.labels, key=lambda name: (-self.labels[name], name))


@dataclasses.dataclass(frozen=True)
class Segmentation:
    """``ids`` int32 (H, W): 0 where no segment, k where ``segments[k - 1]``. ``cell`` (px): the
    ids are constant on the cell × cell pixel blocks of a grid from the image's corner (a network's
    output cells; 1 = per pixel), so one pixel a block tells a block's segment. ``lattice``: the ids
    are constant on the cells of this lattice instead (a network's cells on a camera resampled to its
    geometry), one pixel of which tells each cell's segment."""

    ids: np.ndarray
    segments: tuple[Segment, ...]
    cell: int = 1
    lattice: CellLattice | None = None

    def mask(self, k: int) -> np.ndarray:
        """Bool (H, W) mask of segment ``k`` (1-based, as in ``ids``)."""
        return self.ids == k

    @property
    def labels(self) -> dict[int, str]:
        """Segment id → most likely label (the table ``Observation.segment_labels`` holds)."""
        return {k: s.label for k, s in enumerate(self.segments, start=1)}

    @classmethod
    def empty(cls, shape: tuple[int, int]) -> Segmentation:
        return cls(np.zeros(shape, dtype=np.int32), ())


class Segmenter(Protocol):
    """Shared interface of the backends."""

    kind: str
    reads_simulator_segments: bool
    exact_labels: bool
    """Whether an object gets the same label in every frame (ground truth): then a pixel labelled
    otherwise is evidence that the object is not there (fusion's vacancy test)."""

    @property
    def description(self) -> str:
        """Backend and model identity, recorded in results."""

    def segment(self, observation: Observation) -> Segmentation:
        """The segments of one frame (its ``rgb``, ``depth`` and ``intrinsics``; the simulator
        backend also its ``segments`` and ``segment_labels``)."""

    def segment_batch(self, observations: Sequence[Observation]) -> list[Segmentation]:
        """Each frame's segments, the same as :meth:`segment` gives it (the learned network runs
        once for all of them: ``segmenter.batch_frames``)."""

    def warm_up(self) -> None:
        """Load now what the first frame would otherwise wait for (a network)."""


class SimulatorSegmenter:
    """The simulator's masks and labels, one-hot (see the module docstring)."""

    kind = "simulator"
    reads_simulator_segments = True
    exact_labels = True
    description = "simulator masks and labels"

    def warm_up(self) -> None:
        """Nothing to load."""

    def segment(self, observation: Observation) -> Segmentation:
        ids = np.asarray(observation.segments)
        table = observation.segment_labels
        present = [int(k) for k in np.unique(ids) if k > 0 and int(k) in table]
        lut = np.zeros(int(ids.max(initial=0)) + 1, dtype=np.int32)
        for new, old in enumerate(present, start=1):
            lut[old] = new
        clipped = np.where(ids > 0, ids, 0)
        return Segmentation(
            ids=lut[clipped].astype(np.int32, copy=False),
            segments=tuple(Segment({table[k]: 1.0}, 1.0) for k in present),
        )

    def segment_batch(self, observations: Sequence[Observation]) -> list[Segmentation]:
        return [self.segment(o) for o in observations]


class TopicSegmenter:
    """Segments made by another node (``segmenter.kind: topic``): the node that pairs each frame
    with its ovman_interfaces/Segments :meth:`give` s them before the frame is fused, and
    :meth:`segment` hands out the ones given for that very frame. Label-blind: it reads no
    simulator field. ``exact_labels`` comes from the messages and must not change within a map."""

    kind = TOPIC
    reads_simulator_segments = False

    def __init__(self) -> None:
        self._given: dict[int, tuple[Observation, Segmentation]] = {}
        self.exact_labels = False
        self.source = ""
        """The publishing segmenter's identity (the messages' ``segmenter``)."""
        self._fixed = False

    @property
    def description(self) -> str:
        return f"segments from another node ({self.source or 'none received yet'})"

    def warm_up(self) -> None:
        """Nothing to load."""

    def reset(self) -> None:
        """A new map: forget what was given and the exact_labels of the last one."""
        self._given.clear()
        self._fixed = False

    def give(self, observation: Observation, segmentation: Segmentation, exact_labels: bool, source: str) -> None:
        """The segments of ``observation`` (this object), as its Segments message gave them;
        SegmenterError when ``exact_labels`` differs from earlier messages of this map."""
        if self._fixed and exact_labels != self.exact_labels:
            raise SegmenterError(
                f"segments of {source!r}: exact_labels {exact_labels} after {self.exact_labels} earlier in this map; "
                "one map's segments must come from one kind of segmenter"
            )
        self.exact_labels, self.source, self._fixed = exact_labels, source, True
        self._given[id(observation)] = (observation, segmentation)

    def segment(self, observation: Observation) -> Segmentation:
        given = self._given.pop(id(observation), None)
        if given is None or given[0] is not observation:
            raise SegmenterError("segmenter.kind topic: no Segments message was given for this frame")
        return given[1]

    def segment_batch(self, observations: Sequence[Observation]) -> list[Segmentation]:
        return [self.segment(o) for o in observations]


def check_frame(rgb: np.ndarray, depth: np.ndarray | None, intrinsics: Intrinsics) -> None:
    """ValueError unless ``rgb`` is uint8 (H, W, 3) and ``depth`` (H, W) for ``intrinsics``' size
    (``None``: a frame without depth, which only the simulator's segmenter reads), the focal lengths
    finite and > 0 and the principal point finite."""
    for field in ("fx", "fy"):
        value = getattr(intrinsics, field)
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"camera intrinsics {field} = {value}: a focal length must be finite and > 0 (px)")
    if not (math.isfinite(intrinsics.cx) and math.isfinite(intrinsics.cy)):
        raise ValueError(f"camera intrinsics cx, cy = {intrinsics.cx}, {intrinsics.cy}: must be finite (px)")
    shape = (intrinsics.height, intrinsics.width)
    if rgb.dtype != np.uint8 or rgb.shape != (*shape, 3):
        raise ValueError(f"rgb must be uint8 {(*shape, 3)} for the intrinsics, got {rgb.dtype} {rgb.shape}")
    if depth is not None and depth.shape != shape:
        raise ValueError(f"depth must have shape {shape} for the intrinsics, got {depth.shape}")


def check_segmenter(config: SegmenterConfig) -> None:
    """ConfigError naming the first ``mapping_node.segmenter`` key out of range."""
    checks = {
        "kind": (config.kind in SEGMENTER_KINDS, f"one of {', '.join(SEGMENTER_KINDS)}"),
        "boundary_threshold": (0.0 <= config.boundary_threshold <= 1.0, "a probability in [0, 1]"),
        "min_confidence": (0.0 <= config.min_confidence <= 1.0, "a probability in [0, 1]"),
        "threads": (config.threads >= 1, "a thread count >= 1"),
        "batch_frames": (config.batch_frames >= 1, "a frame count >= 1"),
        "precision": (config.precision in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
        "min_view_share": (0.0 < config.min_view_share <= 1.0, "a share in (0, 1]"),
        "padding": (config.padding in PADDINGS, f"one of {', '.join(PADDINGS)}"),
    }
    check_ranges("mapping_node.segmenter", config, checks)


def with_segmenter(config: MappingConfig, kind: str) -> MappingConfig:
    """``config`` with ``segmenter.kind`` set to ``kind`` (its other segmenter keys kept)."""
    return dataclasses.replace(config, segmenter=dataclasses.replace(config.segmenter, kind=kind))


def segmenter_identity(config: SegmenterConfig) -> str:
    """What a cached map built with ``config``'s segmenter depends on beyond the config: the
    learned model's weights digest, also the clip backend's proposals' (SegmenterError if the model
    cannot be read); the clip model and weights are in the encoder config."""
    check_segmenter(config)
    if config.kind in ("simulator", TOPIC):
        return config.kind
    from ovman_mapping.learned_segmenter import model_directory, read_manifest

    return f"{config.kind}:{read_manifest(model_directory(config))['weights_sha256']}"


def make_segmenter(
    config: SegmenterConfig, vocabulary: Sequence[str] | None = None, encoder: EncoderConfig | None = None
) -> Segmenter:
    """The backend ``config.kind`` names; a learned model is checked now (SegmenterError naming
    the file and the key), its network loaded at the first frame or :meth:`warm_up`. ``encoder``:
    ``mapping_node.encoder``, whose open_clip model the ``clip`` backend uses."""
    check_segmenter(config)
    if config.kind == "simulator":
        return SimulatorSegmenter()
    if config.kind == TOPIC:
        return TopicSegmenter()
    if config.kind == "clip":
        from ovman_mapping.clip_segmenter import ClipSegmenter

        if encoder is None:
            raise SegmenterError("mapping_node.segmenter.kind clip needs mapping_node.encoder (its open_clip model)")
        return ClipSegmenter(config, encoder, vocabulary)
    from ovman_mapping.learned_segmenter import LearnedSegmenter

    return LearnedSegmenter(config, vocabulary)
