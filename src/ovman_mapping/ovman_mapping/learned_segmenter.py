"""The ``learned`` segmenter: the project's network (:mod:`ovman_mapping.segnet`) on RGB-D pixels.

Label-blind by construction: it reads an observation's ``rgb``, ``depth`` and ``intrinsics`` and
nothing else. A model is a directory with ``segmenter.safetensors`` (weights; loading executes no
code) and ``segmenter.json`` (its manifest, with the weights' SHA-256); loading checks all of it and
names the file and ``mapping_node.segmenter.model`` when anything does not fit. It reads any pinhole
camera: a frame is resampled to the training camera's geometry (``intrinsics`` in the manifest;
:mod:`ovman_mapping.camera_resampling`), a whole multiple of it read at its own resolution. A frame's
segments are the same alone and in a batch, bit for bit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ovman_core.camera import Intrinsics
from ovman_core.config import SegmenterConfig
from ovman_mapping.camera_resampling import CameraResampling, camera_resampling, is_whole_multiple, view_share
from ovman_mapping.cell_fragments import cell_classes, cell_fragments, compile_cell_kernels
from ovman_mapping.segmenter import Segment, Segmentation, SegmenterError, check_frame

if TYPE_CHECKING:
    from ovman_core.observation import Observation

MODEL_FORMAT = "ovman-segmenter"
MODEL_VERSION = 2
WEIGHTS_FILE = "segmenter.safetensors"
MANIFEST_FILE = "segmenter.json"
PACKAGED_MODEL = Path(__file__).with_name("models") / "segmenter"
"""The default model, trained by ``ovman train-perception`` and shipped with the package."""
CONFIG_KEY = "mapping_node.segmenter.model"
VIEW_SHARE_KEY = "mapping_node.segmenter.min_view_share"
INTRINSICS_FIELDS = ("fx", "fy", "cx", "cy")
"""The manifest's ``intrinsics``: the training camera's pinhole intrinsics (px) at ``image_size``."""


def model_directory(config: SegmenterConfig) -> Path:
    """The model the config names: ``segmenter.model``, or the packaged one when that is empty."""
    return Path(config.model).expanduser() if config.model else PACKAGED_MODEL


def read_manifest(directory: Path) -> dict[str, Any]:
    """The checked manifest of the model in ``directory`` (SegmenterError naming file and key)."""
    path = directory / MANIFEST_FILE
    where = f"{path} (config {CONFIG_KEY})"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SegmenterError(f"{where}: no segmenter model there (train one with `ovman train-perception`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SegmenterError(f"{where}: unreadable manifest: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MODEL_FORMAT:
        raise SegmenterError(f"{where}: not a segmenter manifest (field 'format' is not {MODEL_FORMAT!r})")
    if manifest.get("version") != MODEL_VERSION:
        raise SegmenterError(f"{where}: field 'version' is {manifest.get('version')!r}, expected {MODEL_VERSION}")
    checks = {
        "vocabulary": lambda v: isinstance(v, list) and v and all(isinstance(x, str) and x for x in v),
        "widths": lambda v: isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) and x > 0 for x in v),
        "decoder_stages": lambda v: v in (1, 2, 3),
        "context_dilation": lambda v: isinstance(v, int) and 1 <= v <= 8,
        "input_stride": lambda v: isinstance(v, int) and v >= 1,
        "image_size": lambda v: isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and x > 0 for x in v),
        "weights_sha256": lambda v: isinstance(v, str) and len(v) == 64,
    }
    for field, ok in checks.items():
        if field not in manifest or not ok(manifest[field]):
            raise SegmenterError(f"{where}: field {field!r} is missing or malformed: {manifest.get(field)!r}")
    if len(set(manifest["vocabulary"])) != len(manifest["vocabulary"]):
        raise SegmenterError(f"{where}: field 'vocabulary' repeats a label")
    if "intrinsics" not in manifest:  # models written before the field was recorded
        raise SegmenterError(
            f"{where}: field 'intrinsics' is missing: the training camera's pinhole intrinsics in pixels at "
            f"image_size, {{{', '.join(repr(f) + ': ...' for f in INTRINSICS_FIELDS)}}}; add those of the camera "
            "the model was trained with (sim_node.camera: a 320x240 camera of 90 degrees vertical field of view has "
            "fx = fy = 120, cx = 159.5, cy = 119.5) or retrain with `ovman train-perception`"
        )
    camera = manifest["intrinsics"]
    if not (
        isinstance(camera, dict)
        and set(camera) == set(INTRINSICS_FIELDS)
        and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in camera.values())
        and camera["fx"] > 0
        and camera["fy"] > 0
    ):
        raise SegmenterError(
            f"{where}: field 'intrinsics' is malformed: {camera!r} (expected finite {', '.join(INTRINSICS_FIELDS)} "
            "in pixels, focal lengths > 0)"
        )
    return manifest


def model_intrinsics(manifest: dict[str, Any]) -> Intrinsics:
    """The training camera of a checked manifest (:func:`read_manifest`): its image size and intrinsics."""
    width, height = manifest["image_size"]
    camera = manifest["intrinsics"]
    return Intrinsics(width, height, *(float(camera[f]) for f in INTRINSICS_FIELDS))


def weights_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class LearnedSegmenter:
    """The learned segmenter (label-blind). The network runs in float32, or in bfloat16 under
    ``torch.autocast`` with ``segmenter.precision: bfloat16``. Segment masks do not depend on
    ``segmenter.threads``; label shares and confidences only to float rounding. Any pinhole camera is
    read: its frame is resampled to the training camera's focal lengths, principal point and size
    (objects keep the apparent size the network learned), and the network's cells are mapped back onto
    the camera's own pixels; a camera that splits each training pixel into k x k pixels is read at its
    own resolution instead (the same segments, bit for bit, in cells k times larger). A camera covering
    less than ``segmenter.min_view_share`` of the model's input is refused. ``vocabulary``: when given,
    the labels the caller grounds against; a model trained for another vocabulary is refused."""

    kind = "learned"
    reads_simulator_segments = False
    exact_labels = False

    def __init__(self, config: SegmenterConfig, vocabulary: Sequence[str] | None = None) -> None:
        self.config = config
        self.directory = model_directory(config)
        self.manifest = read_manifest(self.directory)
        self.vocabulary: tuple[str, ...] = tuple(self.manifest["vocabulary"])
        where = f"{self.directory / MANIFEST_FILE} (config {CONFIG_KEY})"
        if vocabulary is not None and set(vocabulary) != set(self.vocabulary):
            missing = sorted(set(vocabulary) - set(self.vocabulary))
            extra = sorted(set(self.vocabulary) - set(vocabulary))
            raise SegmenterError(
                f"{where}: the model was trained for another vocabulary (missing {missing[:5]}, extra {extra[:5]})"
            )
        weights = self.directory / WEIGHTS_FILE
        if not weights.is_file():
            raise SegmenterError(f"{weights} (config {CONFIG_KEY}): the weights file is missing")
        if weights_digest(weights) != self.manifest["weights_sha256"]:
            raise SegmenterError(
                f"{weights} (config {CONFIG_KEY}): the weights do not match the manifest's weights_sha256 (corrupt?)"
            )
        self.input_stride = int(self.manifest["input_stride"])
        self.image_size = tuple(self.manifest["image_size"])  # (width, height)
        self.intrinsics = model_intrinsics(self.manifest)
        """The training camera: the model's input geometry."""
        self._weights = weights

    @property
    def description(self) -> str:
        return f"learned segmenter {self.manifest['weights_sha256'][:12]} ({self.directory})"

    @property
    def _network(self) -> Any:
        return _load_network(
            str(self._weights),
            self.manifest["weights_sha256"],
            len(self.vocabulary),
            tuple(self.manifest["widths"]),
            int(self.manifest["decoder_stages"]),
            int(self.manifest["context_dilation"]),
            self.config.threads,
        )

    def warm_up(self) -> None:
        """Load the network now (a second or so) and compile the input and cell kernels (numba: a
        few seconds in a fresh checkout, cached afterwards), not at the first frame."""
        from ovman_mapping import segnet

        self._network  # noqa: B018 - the cached property loads it
        s = self.input_stride
        segnet.network_input(np.zeros((s, s, 3), np.uint8), np.zeros((s, s), np.float32), s)
        compile_cell_kernels()

    @property
    def cell(self) -> int:
        """Model pixels per output cell (``segnet.output_stride``)."""
        from ovman_mapping import segnet

        return segnet.output_stride(self.input_stride, int(self.manifest["decoder_stages"]))

    def _forward(self, frames: Sequence[_ModelInput]) -> np.ndarray:
        """The (B, K + 2, h, w) output of the ``frames`` (see :meth:`_checked`),
        a view of the network's channels-last memory (the classes of one cell are adjacent). A
        frame's output does not depend on the others (tests/mapping/test_segmenter.py)."""
        import torch

        from ovman_mapping import segnet

        width, height = self.image_size
        x = np.empty(
            (len(frames), height // self.input_stride, width // self.input_stride, segnet.IN_CHANNELS), np.float32
        )
        for row, frame in enumerate(frames):
            segnet.network_input(frame.rgb, frame.depth, self.input_stride * frame.scale, out=x[row])
        network = self._network
        if torch.get_num_threads() != self.config.threads:  # another library set its own: ours, always
            torch.set_num_threads(self.config.threads)
        inputs = torch.from_numpy(x).permute(0, 3, 1, 2)  # channels-last memory, as the network's weights
        with torch.inference_mode():
            if self.config.precision == "float32":
                return network(inputs).numpy()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return network(inputs).float().numpy()

    def segment(self, observation: Observation) -> Segmentation:
        return self.segment_batch([observation])[0]

    def segment_batch(self, observations: Sequence[Observation]) -> list[Segmentation]:
        """Each frame's segments, the same as :meth:`segment` gives it, with one network pass for
        all the frames that have something to see."""
        frames = [self._checked(o) for o in observations]
        seen = [k for k, f in enumerate(frames) if f.rgb.any() and np.any(np.isfinite(f.depth) & (f.depth > 0))]
        out = [Segmentation.empty(f.camera_shape) for f in frames]  # black, depthless or empty: nothing to see
        if seen:
            logits = self._forward([frames[k] for k in seen])
            for row, k in enumerate(seen):
                frame = frames[k]
                if frame.resampling is None:
                    out[k] = segments_from_logits(logits[row], self.vocabulary, self.config, frame.camera_shape)
                else:
                    out[k] = _on_camera(
                        segments_from_logits(logits[row], self.vocabulary, self.config, logits.shape[2:]),
                        frame.resampling,
                    )
        return out

    def _checked(self, observation: Observation) -> _ModelInput:
        """What the network reads of ``observation``. A camera k times the model's image size in both
        directions with the same rays (a robot's 640x480 for a 320x240 model,
        :func:`camera_resampling.is_whole_multiple`) is read at its own resolution, its input blocks k
        times larger, and its segments come in cells k times larger; any other camera is resampled to
        the model's geometry (:func:`camera_resampling.camera_resampling`). ValueError for a malformed
        frame (images that do not fit the intrinsics, a focal length not finite or <= 0),
        SegmenterError for a camera covering less than ``segmenter.min_view_share`` of the model's view."""
        from ovman_mapping.segnet import MAX_INPUT_STRIDE

        rgb, depth, camera = np.asarray(observation.rgb), np.asarray(observation.depth), observation.intrinsics
        check_frame(rgb, depth, camera)
        model = self.intrinsics
        scale = camera.width // model.width
        if self.input_stride * scale <= MAX_INPUT_STRIDE and is_whole_multiple(camera, model, scale):
            return _ModelInput(rgb, depth, scale, None, depth.shape)
        share = view_share(camera, model)
        if share < self.config.min_view_share:
            raise SegmenterError(
                f"{self.directory / MANIFEST_FILE} (config {VIEW_SHARE_KEY} = {self.config.min_view_share}): the "
                f"camera ({camera.describe()}) covers {share:.1%} of the model's view ({model.describe()}, "
                f"{model.horizontal_fov_deg:.0f}x{model.vertical_fov_deg:.0f} degrees); the network would see "
                "mostly padding"
            )
        resampling = camera_resampling(camera, model, self.cell, self.config.padding)
        model_rgb, model_depth = resampling.to_model(rgb, depth)
        return _ModelInput(model_rgb, model_depth, 1, resampling, depth.shape)


class _ModelInput(NamedTuple):
    """One frame as the network reads it: ``rgb`` and ``depth`` at the model's geometry, or at the
    camera's own when ``resampling`` is None (the camera a whole ``scale`` times the model's);
    ``camera_shape`` (H, W), the camera's image."""

    rgb: np.ndarray
    depth: np.ndarray
    scale: int
    resampling: CameraResampling | None
    camera_shape: tuple[int, int]


def _on_camera(cells: Segmentation, resampling: CameraResampling) -> Segmentation:
    """The segments of ``cells`` (one id a model cell) on the camera's pixels; a segment that no
    camera pixel sees (it lies in the padding only) is dropped, the others renumbered in order."""
    visible = np.zeros(len(cells.segments) + 1, dtype=bool)
    visible[resampling.visible_cells(cells.ids).ravel()] = True
    visible[0] = False
    renumber = np.zeros(len(cells.segments) + 1, dtype=np.int32)
    renumber[visible] = np.arange(1, int(visible.sum()) + 1, dtype=np.int32)
    segments = tuple(s for s, keep in zip(cells.segments, visible[1:], strict=True) if keep)
    return Segmentation(resampling.to_camera(renumber[cells.ids]), segments, lattice=resampling.lattice)


@functools.lru_cache(maxsize=4)
def _load_network(
    weights: str,
    sha256: str,
    classes: int,
    widths: tuple[int, int, int],
    stages: int,
    dilation: int,
    threads: int,
) -> Any:
    """The inference network (batch norm folded), loaded once per process and model."""
    import torch
    from safetensors.torch import load_file

    from ovman_mapping import segnet

    del sha256  # part of the cache key only: a retrained model in the same place loads anew
    torch.set_num_threads(threads)
    model = segnet.SegNet(classes, widths, stages, dilation)
    try:
        model.load_state_dict(load_file(weights))
    except (RuntimeError, ValueError, OSError) as err:
        raise SegmenterError(f"{weights} (config {CONFIG_KEY}): the weights do not fit the manifest: {err}") from None
    # Channels-last convolutions are 1.45x faster on the CPU here (6.6 -> 4.5 ms a frame; logits
    # differ by float rounding, 3e-5 at most).
    return segnet.fold_batch_norm(model).to(memory_format=torch.channels_last)


def segments_from_logits(
    logits: np.ndarray, vocabulary: Sequence[str], config: SegmenterConfig, image_shape: tuple[int, int]
) -> Segmentation:
    """The segments of one frame from the network's (K + 2, h, w) float32 output; ``image_shape``
    (H, W) the camera image, a multiple of (h, w).

    Cells of class 0 and cells whose boundary probability exceeds ``segmenter.boundary_threshold``
    seed nothing. Fragments are the 4-connected components of the seed cells of one class (touching
    objects of different classes stay apart, the boundary splits touching objects of one class); each
    one under ``segmenter.merge_cells`` cells joins the fragment it shares the longest border with; the
    result grows one step back over the object cells on a boundary, then is upsampled to camera pixels.
    A segment's labels are its cells' mean class probability (background excluded, renormalised), its
    confidence the largest share; segments below ``segmenter.min_confidence`` are dropped.

    The cells' classes and fragments are integer work, compiled
    (:mod:`ovman_mapping.cell_fragments`). Class probabilities (a softmax over the K + 1 class
    logits, float64) are computed only for the cells of a segment: a cell's class is the argmax of
    its logits, the same as of its softmax. A (K + 2, h, w) view of channels-last memory (the
    network's) is read without a copy.
    """
    channels, h, w = logits.shape
    # A view of channels-last float32 memory (the network's); anything else is copied.
    per_cell = logits.transpose(1, 2, 0).reshape(h * w, channels).astype(np.float32, copy=False)
    best, finite = cell_classes(per_cell, per_cell.view(np.uint32))
    if not finite:
        return Segmentation.empty(image_shape)
    best = best.reshape(h, w)
    objects = best > 0
    if config.boundary_threshold < 1.0:
        boundary = 1.0 / (1.0 + np.exp(-per_cell[:, -1].astype(np.float64))) > config.boundary_threshold
        seeds = objects & ~boundary.reshape(h, w)
    else:  # no probability exceeds 1
        seeds = objects
    cells, count = cell_fragments(best, seeds, objects, config.merge_cells)
    if count == 0:
        return Segmentation.empty(image_shape)
    inside = np.flatnonzero(cells)
    order = inside[np.argsort(cells[inside], kind="stable")]  # segment by segment, raster order within
    z = per_cell[order, :-1].astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    starts = np.searchsorted(cells[order], np.arange(1, count + 1))
    shares = np.add.reduceat(z, starts, axis=0)[:, 1:]  # (count, K): class 0 (none) left out
    shares /= shares.sum(axis=1, keepdims=True)
    confidence = shares.max(axis=1)
    keep = confidence >= config.min_confidence
    renumber = np.zeros(count + 1, dtype=np.int32)
    renumber[1:][keep] = np.arange(1, int(keep.sum()) + 1, dtype=np.int32)
    segments = []
    for k in np.nonzero(keep)[0]:
        row = shares[k]
        kept = np.nonzero(row >= 1e-3)[0]
        total = float(row[kept].sum())
        segments.append(Segment({vocabulary[i]: float(row[i] / total) for i in kept}, float(confidence[k])))
    sy, sx = image_shape[0] // h, image_shape[1] // w
    ids = np.broadcast_to(renumber[cells].reshape(h, 1, w, 1), (h, sy, w, sx)).reshape(image_shape)
    return Segmentation(ids, tuple(segments), cell=sy if sy == sx else 1)
