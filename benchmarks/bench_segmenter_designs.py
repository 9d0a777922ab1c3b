"""Two segmenter designs side by side on the held-out perception homes (issue 21).

- **A, semantic + boundary** (the packaged ``learned`` segmenter): one network predicts every
  cell's class (and an instance-boundary map); segments are the cells of one class, connected,
  and a segment's label distribution is the mean class probability of its cells.
- **B, proposals + crop classifier**: the same network's segments as proposals, each labelled by
  a separate small CNN on its
  RGB-D crop, resized to ``CROP`` × ``CROP`` pixels (RGB, depth and its validity, as the network's
  input). The classifier is trained here, deterministically on the CPU, on the ground-truth
  segments of the training homes (``benchmark_node.perception``'s homes and frame stride), the
  benchmark's scenes never seen.

Both designs share the proposals, so segment precision and recall are the same by construction;
what differs is the labelling: top-1 accuracy of the matched segments and the time per frame
(one thread). B is what the ``clip`` backend does with open_clip's zero-shot classifier in place of
the trained one (CLIP weights cannot be had here).

Usage: python benchmarks/bench_segmenter_designs.py [--train-homes 32] [--test-homes 8] [--epochs 8]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional  # noqa: E402

from ovman_core.config import load_config  # noqa: E402
from ovman_eval.perception.training import VOCABULARY, Frame, evaluate, perception_frames  # noqa: E402
from ovman_mapping.learned_segmenter import LearnedSegmenter  # noqa: E402
from ovman_mapping.segmenter import Segment, Segmentation  # noqa: E402
from ovman_mapping.segnet import network_input  # noqa: E402

CROP = 32
"""Side of a classifier input, pixels."""
PADDING = 0.1
"""Crops grow by this fraction of their size on each side (as ``encoder.crop_padding``)."""


class CropClassifier(nn.Module):
    """Three stride-2 conv stages (16/32/48 channels, as the segmenter's encoder), global average
    pooling, a linear layer to the vocabulary."""

    def __init__(self, classes: int) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU())

        self.features = nn.Sequential(block(5, 16), block(16, 32), block(32, 48))
        self.head = nn.Linear(48, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def crop_input(rgb: np.ndarray, depth: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(5, CROP, CROP) float32 classifier input of the padded bounding crop of ``mask``."""
    rows, cols = np.nonzero(mask)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    pr, pc = round((r1 - r0) * PADDING), round((c1 - c0) * PADDING)
    h, w = mask.shape
    r0, r1, c0, c1 = max(r0 - pr, 0), min(r1 + pr, h), max(c0 - pc, 0), min(c1 + pc, w)
    full = network_input(rgb[r0:r1, c0:c1], depth[r0:r1, c0:c1], 1)
    return functional.interpolate(torch.from_numpy(full)[None], size=(CROP, CROP), mode="bilinear")[0].numpy()


def training_crops(frames: list[Frame], min_pixels: int) -> tuple[np.ndarray, np.ndarray]:
    """Classifier inputs and label indices of every ground-truth segment of ``frames``."""
    index = {label: k for k, label in enumerate(VOCABULARY)}
    inputs, labels = [], []
    for frame in frames:
        rgb, depth = np.asarray(frame.observation.rgb), np.asarray(frame.observation.depth)
        for k, label in frame.labels.items():
            mask = frame.segments == k
            if mask.sum() >= min_pixels:
                inputs.append(crop_input(rgb, depth, mask))
                labels.append(index[label])
    return np.stack(inputs), np.array(labels, dtype=np.int64)


def train(inputs: np.ndarray, labels: np.ndarray, epochs: int, seed: int) -> CropClassifier:
    torch.manual_seed(seed)
    model = CropClassifier(len(VOCABULARY))
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(seed)
    x, y = torch.from_numpy(inputs), torch.from_numpy(labels)
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(order), 64):
            batch = torch.from_numpy(order[start : start + 64])
            loss = functional.cross_entropy(model(x[batch]), y[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(batch)
        print(f"  epoch {epoch + 1}/{epochs}: loss {total / len(order):.3f}", flush=True)
    return model.eval()


class ProposalsAndCrops:
    """Design B as a segmenter: the learned segmenter's segments, relabelled by the classifier."""

    kind = "proposals+crops"
    reads_simulator_segments = False
    exact_labels = False

    def __init__(self, proposals: LearnedSegmenter, classifier: CropClassifier) -> None:
        self.proposals, self.classifier = proposals, classifier
        self.description = f"proposals of {proposals.description} + a {CROP}x{CROP} crop classifier"

    def warm_up(self) -> None:
        self.proposals.warm_up()

    def segment(self, observation) -> Segmentation:
        found = self.proposals.segment(observation)
        if not found.segments:
            return found
        rgb, depth = np.asarray(observation.rgb), np.asarray(observation.depth)
        crops = np.stack([crop_input(rgb, depth, found.ids == k) for k in range(1, len(found.segments) + 1)])
        with torch.inference_mode():
            shares = torch.softmax(self.classifier(torch.from_numpy(crops)), dim=1).numpy()
        segments = []
        for row in shares:
            kept = np.nonzero(row >= 1e-3)[0]
            total = float(row[kept].sum())
            segments.append(Segment({VOCABULARY[i]: float(row[i] / total) for i in kept}, float(row.max())))
        return Segmentation(found.ids, tuple(segments))

    def segment_batch(self, observations) -> list[Segmentation]:
        return [self.segment(o) for o in observations]


def timed(segmenter, frames: list[Frame], config) -> tuple[dict, float]:
    segmenter.warm_up()
    for frame in frames[:5]:
        segmenter.segment(frame.observation)
    clock = time.perf_counter()
    for frame in frames:
        segmenter.segment(frame.observation)
    per_frame = (time.perf_counter() - clock) / len(frames) * 1e3
    return evaluate(segmenter, frames, config), per_frame


def main() -> None:
    config = load_config()
    params = config.benchmark_node.perception
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-homes", type=int, default=params.train_homes)
    parser.add_argument("--test-homes", type=int, default=params.test_homes)
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    min_pixels = config.mapping_node.mapping.min_segment_pixels
    print(f"rendering {args.train_homes} training homes ...", flush=True)
    train_frames = list(perception_frames(config, "train", args.train_homes))
    inputs, labels = training_crops(train_frames, min_pixels)
    del train_frames
    print(f"training the crop classifier on {len(labels)} ground-truth crops ...", flush=True)
    clock = time.process_time()
    classifier = train(inputs, labels, args.epochs, params.seed)
    print(f"  {time.process_time() - clock:.0f} s of CPU", flush=True)
    test = list(perception_frames(config, "test", args.test_homes))
    segmenter_config = dataclasses.replace(config.mapping_node.segmenter, kind="learned", model="")
    proposals = LearnedSegmenter(segmenter_config, VOCABULARY)
    rows = []
    for name, segmenter in (
        ("A semantic + boundary", proposals),
        ("B proposals + crop classifier", ProposalsAndCrops(proposals, classifier)),
    ):
        figures, ms = timed(segmenter, test, config)
        rows.append((name, figures, ms))
    print(f"\n{args.test_homes} held-out homes, {len(test)} frames, one thread:")
    print(f"{'design':<32} precision  recall  accuracy  ms/frame")
    for name, f, ms in rows:
        print(f"{name:<32} {f['precision']:9.3f} {f['recall']:7.3f} {f['accuracy']:9.3f} {ms:9.1f}")
    ratio = rows[1][2] / rows[0][2]
    print(f"B/A time per frame: {ratio:.2f}x; accuracy B - A: {rows[1][1]['accuracy'] - rows[0][1]['accuracy']:+.3f}")


if __name__ == "__main__":
    main()
