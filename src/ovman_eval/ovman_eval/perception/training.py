"""Training and evaluating the learned segmenter on embedded-world renders.

Frames come from the coverage tours of *perception homes* (``perception-train-<k>``,
``perception-test-<k>``: :func:`ovman_sim.homes.perception_scene`), a seed namespace that
``ovman generate`` and the episode format refuse, so no benchmark scene is ever trained or tuned on.
Training is deterministic: the same config and threads give the same weights.

Why one module: rendering the homes, the targets, the training loop and the held-out evaluation
share the perception homes and the manifest they are written into.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from ovman_core.camera import Intrinsics
from ovman_core.config import OvmanConfig, PerceptionParams, check_ranges
from ovman_core.files import FILE_MODE, atomic_write_text
from ovman_core.observation import Observation
from ovman_eval.generation.dataset import code_revision
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend
from ovman_mapping.learned_segmenter import (
    INTRINSICS_FIELDS,
    MANIFEST_FILE,
    MODEL_FORMAT,
    MODEL_VERSION,
    WEIGHTS_FILE,
    weights_digest,
)
from ovman_mapping.segmenter import Segmentation, Segmenter
from ovman_sim.embedded import EmbeddedWorld
from ovman_sim.homes import CATEGORIES, perception_scene
from ovman_sim.tours import tour_observations
from ovman_sim.world import Condition

STRESS_CONDITIONS = tuple(c.value for c in Condition if c is not Condition.BASELINE)
"""The stress conditions a model's held-out figures are also taken under."""

VOCABULARY: tuple[str, ...] = tuple(sorted(CATEGORIES))
"""The embedded world's categories, in the order of the network's classes 1..K."""


@dataclasses.dataclass(frozen=True)
class Step:
    """Where training stands: ``done`` of ``total`` ``unit``s of ``stage``, and its log line."""

    stage: str
    done: int
    total: int
    unit: str
    message: str


Progress = Callable[[Step], None]


def check_perception(params: PerceptionParams) -> None:
    """ConfigError naming the first ``benchmark_node.perception`` key out of range."""
    checks = {
        "train_homes": (params.train_homes >= 1, "a count >= 1"),
        "test_homes": (params.test_homes >= 1, "a count >= 1"),
        "frame_stride": (params.frame_stride >= 1, "a stride >= 1"),
        "epochs": (params.epochs >= 1, "a count >= 1"),
        "batch_size": (params.batch_size >= 1, "a count >= 1"),
        "learning_rate": (math.isfinite(params.learning_rate) and params.learning_rate > 0.0, "a step size > 0"),
        "seed": (params.seed >= 0, "a non-negative integer"),
        "widths": (len(params.widths) == 3 and all(w >= 1 for w in params.widths), "three channel counts >= 1"),
        "decoder_stages": (params.decoder_stages in (1, 2, 3), "1, 2 or 3"),
        "context_dilation": (1 <= params.context_dilation <= 8, "a dilation in [1, 8]"),
        "train_conditions": (
            bool(params.train_conditions) and set(params.train_conditions) <= {c.value for c in Condition},
            f"a non-empty list of conditions ({', '.join(c.value for c in Condition)})",
        ),
        "input_stride": (params.input_stride >= 1, "a stride >= 1"),
        "threads": (params.threads >= 1, "a thread count >= 1"),
        "iou_threshold": (0.0 < params.iou_threshold <= 1.0, "an IoU in (0, 1]"),
    }
    check_ranges("benchmark_node.perception", params, checks)


# --------------------------------------------------------------------------------------------- frames


@dataclasses.dataclass(frozen=True)
class Frame:
    """One rendered frame and its ground truth: ``segments`` int32 (H, W) instance ids (0 = none)
    and ``labels`` id → category (evaluation only)."""

    scene: str
    observation: Observation
    segments: np.ndarray
    labels: dict[int, str]


def perception_frames(
    config: OvmanConfig,
    split: str,
    homes: int,
    condition: str | Sequence[str] = "baseline",
    progress: Progress | None = None,
) -> Iterator[Frame]:
    """Every ``frame_stride``-th coverage-tour frame of homes ``perception-<split>-0..homes-1``,
    home ``k`` rendered under ``condition`` (or, given a list, its ``k mod len``-th entry) with
    condition seed ``k``."""
    world = EmbeddedWorld(config.sim_node)
    conditions = [condition] if isinstance(condition, str) else list(condition)
    for k in range(homes):
        yield from home_frames(world, config, split, k, conditions[k % len(conditions)])
        if progress is not None:
            progress(Step(f"render {split}", k + 1, homes, "home", f"rendered {perception_scene(split, k)}"))


def home_frames(world: EmbeddedWorld, config: OvmanConfig, split: str, k: int, condition: str) -> Iterator[Frame]:
    """The frames :func:`perception_frames` takes of home ``perception-<split>-<k>`` under
    ``condition`` (condition seed ``k``), rendered by ``world`` (reset to the home first)."""
    sim = config.sim_node
    scene = perception_scene(split, k)
    world.reset(scene)
    world.set_condition(Condition(condition), k)
    for i, observation in enumerate(tour_observations(world, sim.tour, sim.world)):
        if i % config.benchmark_node.perception.frame_stride == 0:
            yield Frame(scene, observation, np.asarray(observation.segments), dict(observation.segment_labels))


def cell_targets(frame: Frame, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """(class uint8 (h, w), boundary bool (h, w)) of ``frame`` at ``stride`` camera pixels a cell."""
    index = {label: k for k, label in enumerate(VOCABULARY, start=1)}
    half = stride // 2
    ids = frame.segments[half::stride, half::stride]
    lut = np.zeros(int(ids.max(initial=0)) + 1, dtype=np.uint8)
    for k, label in frame.labels.items():
        if 0 < k < lut.size:
            lut[k] = index[label]
    classes = lut[np.clip(ids, 0, None)]
    boundary = np.zeros(ids.shape, dtype=bool)
    boundary[1:] |= (ids[1:] > 0) & (ids[:-1] > 0) & (ids[1:] != ids[:-1])
    boundary[:-1] |= (ids[1:] > 0) & (ids[:-1] > 0) & (ids[1:] != ids[:-1])
    boundary[:, 1:] |= (ids[:, 1:] > 0) & (ids[:, :-1] > 0) & (ids[:, 1:] != ids[:, :-1])
    boundary[:, :-1] |= (ids[:, 1:] > 0) & (ids[:, :-1] > 0) & (ids[:, 1:] != ids[:, :-1])
    return classes, boundary


# --------------------------------------------------------------------------------------------- training


@dataclasses.dataclass(frozen=True)
class TrainingSet:
    """Network inputs (N, 5, h, w) float16 and targets at the output resolution: classes uint8
    (N, h', w') and boundaries bool (N, h', w')."""

    inputs: np.ndarray
    classes: np.ndarray
    boundaries: np.ndarray


def training_set(frames: Sequence[Frame], params: PerceptionParams) -> TrainingSet:
    from ovman_mapping import segnet

    stride = segnet.output_stride(params.input_stride, params.decoder_stages)
    inputs, classes, boundaries = [], [], []
    for frame in frames:
        obs = frame.observation
        inputs.append(segnet.network_input(np.asarray(obs.rgb), np.asarray(obs.depth), params.input_stride))
        c, b = cell_targets(frame, stride)
        classes.append(c)
        boundaries.append(b)
    return TrainingSet(np.stack(inputs).astype(np.float16), np.stack(classes), np.stack(boundaries))


def _home_trainer(config: OvmanConfig) -> Callable[[int], tuple[int, TrainingSet]]:
    """A worker's renderer of training home ``k`` into its part of the training set
    (:meth:`ovman_eval.runs.backend.Backend.run`), with its own world."""
    world = EmbeddedWorld(config.sim_node)
    params = config.benchmark_node.perception
    conditions = params.train_conditions

    def part(k: int) -> tuple[int, TrainingSet]:
        frames = list(home_frames(world, config, "train", k, conditions[k % len(conditions)]))
        return k, training_set(frames, params)

    return part


def rendered_training_set(
    config: OvmanConfig, workers: int = 1, backend: Backend = LOCAL_BACKEND, progress: Progress | None = None
) -> TrainingSet:
    """:func:`training_set` of the ``perception.train_homes`` training homes, each home rendered as
    one unit of ``backend`` with ``workers`` and the parts joined in home order (the same arrays
    wherever a home was rendered)."""
    homes = list(range(config.benchmark_node.perception.train_homes))
    parts: dict[int, TrainingSet] = {}

    def commit(done: tuple[int, TrainingSet]) -> None:
        parts[done[0]] = done[1]
        if progress is not None:
            message = f"rendered {perception_scene('train', done[0])} ({len(parts)}/{len(homes)})"
            progress(Step("render train", len(parts), len(homes), "home", message))

    if backend.in_process(workers, len(homes)):
        part = _home_trainer(config)
        for k in homes:
            commit(part(k))
    else:
        backend.run(homes, workers, _home_trainer, (config,), commit, label=lambda k: perception_scene("train", k))
    ordered = [parts[k] for k in homes]
    return TrainingSet(
        np.concatenate([p.inputs for p in ordered]),
        np.concatenate([p.classes for p in ordered]),
        np.concatenate([p.boundaries for p in ordered]),
    )


def train_network(data: TrainingSet, params: PerceptionParams, progress: Progress | None = None) -> Any:
    """The trained SegNet; torch's thread count and determinism setting are restored afterwards.

    Loss: cross-entropy with class weights ``1 / sqrt(frequency)`` (mean 1 over the classes present)
    plus the boundary's binary cross-entropy weighted by the inverse boundary share. Adam with a
    cosine-decayed step size; ``perception.seed`` seeds the weights, the frame order and the mirroring."""
    import torch

    previous = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(params.threads)
    torch.use_deterministic_algorithms(True)
    try:
        return _train(data, params, progress)
    finally:  # the process's other torch users (the text encoder) keep their settings
        torch.set_num_threads(previous[0])
        torch.use_deterministic_algorithms(previous[1])


def _train(data: TrainingSet, params: PerceptionParams, progress: Progress | None) -> Any:
    import torch
    from torch.nn import functional

    from ovman_mapping import segnet

    torch.manual_seed(params.seed)
    model = segnet.SegNet(len(VOCABULARY), tuple(params.widths), params.decoder_stages, params.context_dilation)
    counts = np.bincount(data.classes.ravel(), minlength=len(VOCABULARY) + 1).astype(np.float64)
    present = counts > 0
    weights = np.zeros_like(counts)
    weights[present] = 1.0 / np.sqrt(counts[present] / counts.sum())
    weights[present] /= weights[present].mean()
    class_weight = torch.tensor(weights, dtype=torch.float32)
    share = float(data.boundaries.mean())
    boundary_weight = torch.tensor((1.0 - share) / max(share, 1e-6), dtype=torch.float32)
    optimiser = torch.optim.Adam(model.parameters(), lr=params.learning_rate)
    n = data.inputs.shape[0]
    steps_per_epoch = math.ceil(n / params.batch_size)
    total = params.epochs * steps_per_epoch
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / total)))
    order_rng = np.random.default_rng(params.seed)
    model.train()
    for epoch in range(params.epochs):
        order = order_rng.permutation(n)
        running = 0.0
        for start in range(0, n, params.batch_size):
            batch = order[start : start + params.batch_size]
            x = torch.from_numpy(data.inputs[batch].astype(np.float32))
            y = torch.from_numpy(data.classes[batch].astype(np.int64))
            edge = torch.from_numpy(data.boundaries[batch].astype(np.float32))
            if params.flip:  # each frame mirrored left-right with probability 1/2 (seeded)
                mirrored = torch.from_numpy(order_rng.random(len(batch)) < 0.5)
                x = torch.where(mirrored[:, None, None, None], x.flip(-1), x)
                y = torch.where(mirrored[:, None, None], y.flip(-1), y)
                edge = torch.where(mirrored[:, None, None], edge.flip(-1), edge)
            out = model(x)
            loss = functional.cross_entropy(out[:, :-1], y, weight=class_weight)
            loss = loss + functional.binary_cross_entropy_with_logits(out[:, -1], edge, pos_weight=boundary_weight)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
            running += float(loss.detach()) * len(batch)
        if progress is not None:
            message = f"epoch {epoch + 1}/{params.epochs}: loss {running / n:.4f}"
            progress(Step("train", epoch + 1, params.epochs, "epoch", message))
    return model.eval()


def train_perception(
    config: OvmanConfig,
    out: Path,
    progress: Progress | None = None,
    workers: int = 1,
    backend: Backend = LOCAL_BACKEND,
) -> dict[str, Any]:
    """``ovman train-perception``: render, train, evaluate on the test homes, write the model
    (weights atomically, then the manifest) into ``out``; returns the manifest. The homes are
    rendered (and the held-out ones evaluated) by ``workers`` on ``backend``, one unit per home;
    the gradient descent runs here, so the weights do not depend on where the homes were rendered."""
    import torch
    from safetensors.torch import save_file

    params = config.benchmark_node.perception
    check_perception(params)
    started = time.process_time()
    data = rendered_training_set(config, workers, backend, progress)
    if progress is not None:
        progress(Step("train", 0, params.epochs, "epoch", f"{data.inputs.shape[0]} training frames; training"))
    model = train_network(data, params, progress)
    out.mkdir(parents=True, exist_ok=True)
    weights = out / WEIGHTS_FILE
    temporary = out / f".{WEIGHTS_FILE}.tmp"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(temporary))
    temporary.chmod(FILE_MODE)
    temporary.replace(weights)
    camera = config.sim_node.camera
    intrinsics = Intrinsics.from_vertical_fov(camera.width, camera.height, camera.vertical_fov_deg)
    manifest: dict[str, Any] = {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "vocabulary": list(VOCABULARY),
        "widths": list(params.widths),
        "decoder_stages": params.decoder_stages,
        "context_dilation": params.context_dilation,
        "input_stride": params.input_stride,
        "image_size": [camera.width, camera.height],
        "intrinsics": {field: getattr(intrinsics, field) for field in INTRINSICS_FIELDS},
        "weights_sha256": weights_digest(weights),
        "parameters": sum(int(np.prod(p.shape)) for p in model.parameters()),
        "training": {
            "config": dataclasses.asdict(params),
            "train_scenes": [perception_scene("train", k) for k in range(params.train_homes)],
            "train_scene_conditions": [
                params.train_conditions[k % len(params.train_conditions)] for k in range(params.train_homes)
            ],
            "frames": int(data.inputs.shape[0]),
            "cpu_s": round(time.process_time() - started, 1),
            "torch": torch.__version__,
        },
        "code_revision": code_revision(),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    atomic_write_text(out / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    manifest["held_out"] = held_out_figures(config, out, params.test_homes, workers, backend, progress)
    atomic_write_text(out / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _home_evaluator(config: OvmanConfig, model: str) -> Callable[[tuple[str, int]], tuple[str, int, Tally]]:
    """A worker's evaluator of the model in directory ``model`` on one held-out home under one
    condition (:meth:`ovman_eval.runs.backend.Backend.run`), with its own world and segmenter."""
    from ovman_mapping.learned_segmenter import LearnedSegmenter

    world = EmbeddedWorld(config.sim_node)
    segmenter = LearnedSegmenter(dataclasses.replace(config.mapping_node.segmenter, model=model))

    def home(unit: tuple[str, int]) -> tuple[str, int, Tally]:
        condition, k = unit
        return condition, k, tally(segmenter, home_frames(world, config, "test", k, condition), config)

    return home


def held_out_figures(
    config: OvmanConfig,
    model: Path,
    homes: int,
    workers: int = 1,
    backend: Backend = LOCAL_BACKEND,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """What a model's manifest holds under ``held_out`` (and every benchmark report's Perception
    section shows): :func:`evaluate` of the learned model in directory ``model`` on the first
    ``homes`` held-out homes, with their names, and the same under each stress condition
    (``conditions``: condition → figures). Each (condition, home) is a unit of ``backend`` with
    ``workers``; their tallies are summed, so the figures do not depend on where they ran."""
    units = [(c, k) for c in ("baseline", *STRESS_CONDITIONS) for k in range(homes)]
    tallies: dict[tuple[str, int], Tally] = {}

    def commit(done: tuple[str, int, Tally]) -> None:
        tallies[(done[0], done[1])] = done[2]
        if progress is not None:
            message = f"evaluated {perception_scene('test', done[1])} ({done[0]}; {len(tallies)}/{len(units)})"
            progress(Step("evaluate", len(tallies), len(units), "home", message))

    if backend.in_process(workers, len(units)):
        evaluate_home = _home_evaluator(config, str(model))
        for unit in units:
            commit(evaluate_home(unit))
    else:
        label = lambda unit: f"{perception_scene('test', unit[1])} ({unit[0]})"  # noqa: E731
        backend.run(units, workers, _home_evaluator, (config, str(model)), commit, label=label)
    params = config.benchmark_node.perception

    def summed(condition: str) -> dict[str, Any]:
        return figures(sum((tallies[(condition, k)] for k in range(homes)), Tally()), params)

    result = summed("baseline")
    result["test_scenes"] = [perception_scene("test", k) for k in range(homes)]
    result["conditions"] = {c: summed(c) for c in STRESS_CONDITIONS}
    return result


# --------------------------------------------------------------------------------------------- evaluation


def match_segments(
    truth: np.ndarray, truth_ids: Sequence[int], predicted: Segmentation, threshold: float
) -> list[tuple[int, int]]:
    """One-to-one (ground-truth id, predicted id) pairs with mask IoU >= ``threshold`` (Hungarian on IoU)."""
    if not truth_ids or not predicted.segments:
        return []
    t = np.searchsorted(np.asarray(truth_ids), truth.ravel())
    t_valid = np.isin(truth.ravel(), truth_ids)
    p = predicted.ids.ravel()
    joint = np.zeros((len(truth_ids), len(predicted.segments) + 1), dtype=np.int64)
    np.add.at(joint, (t[t_valid], p[t_valid]), 1)
    joint = joint[:, 1:]
    truth_area = np.bincount(t[t_valid], minlength=len(truth_ids))
    pred_area = np.bincount(p, minlength=len(predicted.segments) + 1)[1:]
    iou = joint / (truth_area[:, None] + pred_area[None, :] - joint)
    rows, cols = linear_sum_assignment(-iou)
    return [(truth_ids[r], c + 1) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= threshold]


@dataclasses.dataclass(frozen=True)
class Tally:
    """What :func:`evaluate` counts over some frames; tallies of disjoint frames add up (``+``).
    ``per_category``: true label → (right, matched); ``confusions``: (true, predicted) → count."""

    frames: int = 0
    segments: int = 0
    predicted: int = 0
    matched: int = 0
    correct: int = 0
    per_category: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    confusions: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)

    def __add__(self, other: Tally) -> Tally:
        categories = {
            k: (self.per_category.get(k, (0, 0))[0] + other.per_category.get(k, (0, 0))[0],
                self.per_category.get(k, (0, 0))[1] + other.per_category.get(k, (0, 0))[1])
            for k in {*self.per_category, *other.per_category}
        }  # fmt: skip
        return Tally(
            self.frames + other.frames,
            self.segments + other.segments,
            self.predicted + other.predicted,
            self.matched + other.matched,
            self.correct + other.correct,
            categories,
            dict(Counter(self.confusions) + Counter(other.confusions)),
        )


def tally(segmenter: Segmenter, frames: Iterator[Frame] | Sequence[Frame], config: OvmanConfig) -> Tally:
    """The counts of ``segmenter`` on ``frames``: per frame, ground-truth segments of at least
    ``mapping.min_segment_pixels`` pixels matched one-to-one to predicted ones (:func:`match_segments`);
    precision = matched / predicted, recall = matched / ground truth, accuracy = matched pairs whose
    top label is right."""
    params = config.benchmark_node.perception
    min_pixels = config.mapping_node.mapping.min_segment_pixels
    predicted_total = truth_total = matched_total = correct_total = n_frames = 0
    per_category: dict[str, tuple[int, int]] = {}
    confusions: Counter[tuple[str, str]] = Counter()
    for frame, prediction in _segmented(segmenter, frames, config.mapping_node.segmenter.batch_frames):
        n_frames += 1
        ids, counts = np.unique(frame.segments, return_counts=True)
        truth_ids = [
            int(k) for k, c in zip(ids, counts, strict=True) if k > 0 and c >= min_pixels and k in frame.labels
        ]
        sizes = np.bincount(prediction.ids.ravel(), minlength=len(prediction.segments) + 1)
        counted = {k for k in range(1, len(prediction.segments) + 1) if sizes[k] >= min_pixels}
        pairs = [(t, p) for t, p in match_segments(frame.segments, truth_ids, prediction, params.iou_threshold)]
        predicted_total += len(counted)
        truth_total += len(truth_ids)
        for t, p in pairs:
            truth_label, label = frame.labels[t], prediction.segments[p - 1].label
            matched_total += 1
            right = truth_label == label
            correct_total += right
            right_before, matched_before = per_category.get(truth_label, (0, 0))
            per_category[truth_label] = (right_before + right, matched_before + 1)
            if not right:
                confusions[(truth_label, label)] += 1
    return Tally(n_frames, truth_total, predicted_total, matched_total, correct_total, per_category, dict(confusions))


def _segmented(
    segmenter: Segmenter, frames: Iterable[Frame], batch_frames: int
) -> Iterator[tuple[Frame, Segmentation]]:
    """Each of ``frames`` with its segments, ``batch_frames`` frames to a network pass (the same
    segments as one at a time)."""
    remaining = iter(frames)
    while chunk := list(itertools.islice(remaining, batch_frames)):
        yield from zip(chunk, segmenter.segment_batch([f.observation for f in chunk]), strict=True)


def figures(counts: Tally, params: PerceptionParams) -> dict[str, Any]:
    """Precision, recall, per-category accuracy and the ten most frequent confusions of ``counts``."""
    return {
        "frames": counts.frames,
        "segments": counts.segments,
        "predicted": counts.predicted,
        "matched": counts.matched,
        "precision": counts.matched / counts.predicted if counts.predicted else 0.0,
        "recall": counts.matched / counts.segments if counts.segments else 0.0,
        "accuracy": counts.correct / counts.matched if counts.matched else 0.0,
        "per_category": {k: {"accuracy": v[0] / v[1], "matched": v[1]} for k, v in sorted(counts.per_category.items())},
        "confusions": [
            {"true": a, "predicted": b, "count": n}
            for (a, b), n in sorted(counts.confusions.items(), key=lambda x: (-x[1], x[0]))[:10]
        ],
        "iou_threshold": params.iou_threshold,
    }


def evaluate(segmenter: Segmenter, frames: Iterator[Frame] | Sequence[Frame], config: OvmanConfig) -> dict[str, Any]:
    """Precision, recall, per-category accuracy and confusions of ``segmenter`` on ``frames``."""
    return figures(tally(segmenter, frames, config), config.benchmark_node.perception)


# --------------------------------------------------------------------------------------------- figures


def draw_frames(segmenter: Segmenter, frames: Sequence[Frame], directory: Path, count: int = 4) -> list[Path]:
    """PNGs of ``count`` frames among the busiest of ``frames`` (most true segments): RGB, the
    predicted segments with their labels, and the ground truth, side by side; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    directory.mkdir(parents=True, exist_ok=True)
    busiest = sorted(range(len(frames)), key=lambda i: (-len(frames[i].labels), i))[: max(count * 4, count)]
    picks = [frames[i] for i in sorted(busiest)[:: max(len(busiest) // count, 1)][:count]]
    written = []
    for n, frame in enumerate(picks):
        prediction = segmenter.segment(frame.observation)
        figure, axes = pyplot.subplots(1, 3, figsize=(12, 3.4))
        axes[0].imshow(frame.observation.rgb)
        axes[0].set_title(f"{frame.scene} step {frame.observation.step}")
        for axis, ids, labels, title in (
            (axes[1], prediction.ids, prediction.labels, f"predicted ({len(prediction.segments)})"),
            (axes[2], frame.segments, frame.labels, f"ground truth ({len(frame.labels)})"),
        ):
            axis.imshow(_colour_ids(ids))
            axis.set_title(title)
            for k, label in labels.items():
                rows, cols = np.nonzero(ids == k)
                if rows.size >= 30:
                    axis.text(cols.mean(), rows.mean(), label, fontsize=6, ha="center", color="white")
        for axis in axes:
            axis.set_axis_off()
        figure.tight_layout()
        path = directory / f"perception-{n}.png"
        figure.savefig(path, dpi=110)
        pyplot.close(figure)
        written.append(path)
    return written


def _colour_ids(ids: np.ndarray) -> np.ndarray:
    """Uint8 (H, W, 3): black where 0, a fixed colour per id elsewhere."""
    palette = np.random.default_rng(7).integers(40, 256, (int(ids.max(initial=0)) + 1, 3), dtype=np.uint8)
    palette[0] = 0
    return palette[np.clip(ids, 0, None)]
