"""The shipped network's decoder against a cheaper one, trained with the same recipe (issue 21's
mapping-time goal).

- **concat** (shipped, :class:`ovman_mapping.segnet.SegNet`): each decoder step upsamples the
  coarser features, concatenates the skip features and runs a 3×3 block on both (96 → 32 channels
  at 1/8 of the camera image, 48 → 16 at 1/4).
- **add**: each step projects the coarser features with a 1×1 convolution to the skip's width,
  upsamples them, adds the skip and runs a 3×3 block on the sum (32 → 32, 16 → 16): the same
  encoder, head and output stride, about a third fewer multiply-adds.

The add variant is trained here with ``ovman train-perception``'s code and settings
(``benchmark_node.perception``: homes, epochs, augmentation, seed; deterministic on the CPU) and
both are scored on the held-out homes with ``ovman eval-perception``'s code; the shipped model is
the packaged one. Prints precision, recall, accuracy and the network's forward time per frame
(one thread, channels-last, batch norm folded), measured side by side.

Usage: python benchmarks/bench_segnet_decoders.py [--train-homes N] [--epochs N] [--workers 2]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional  # noqa: E402

from ovman_core.config import load_config  # noqa: E402
from ovman_eval.perception.training import (  # noqa: E402
    VOCABULARY,
    evaluate,
    perception_frames,
    rendered_training_set,
    train_network,
)
from ovman_mapping import segnet  # noqa: E402
from ovman_mapping.learned_segmenter import LearnedSegmenter  # noqa: E402
from ovman_mapping.segnet import conv_block  # noqa: E402


class AddSegNet(nn.Module):
    """The shipped encoder and head with an additive-skip decoder (see the module docstring);
    the constructor takes SegNet's arguments (two decoder stages only)."""

    def __init__(self, classes: int, widths: tuple[int, int, int], decoder_stages: int, context_dilation: int) -> None:
        super().__init__()
        if decoder_stages != 2:
            raise ValueError("the add variant is built for decoder_stages 2 (the shipped model's)")
        c1, c2, c3 = widths
        d = context_dilation
        self.enc1 = nn.Sequential(conv_block(segnet.IN_CHANNELS, c1, 2), conv_block(c1, c1))
        self.enc2 = nn.Sequential(conv_block(c1, c2, 2), conv_block(c2, c2))
        self.enc3 = nn.Sequential(
            conv_block(c2, c3, 2), conv_block(c3, c3, dilation=d), conv_block(c3, c3, dilation=2 * d)
        )
        self.proj2 = nn.Conv2d(c3, c2, 1)
        self.dec2 = conv_block(c2, c2)
        self.proj1 = nn.Conv2d(c2, c1, 1)
        self.dec1 = conv_block(c1, c1)
        self.head = nn.Conv2d(c1, classes + 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.enc1(x)
        b = self.enc2(a)
        y = self.enc3(b)
        y = self.dec2(functional.interpolate(self.proj2(y), size=b.shape[2:]) + b)
        y = self.dec1(functional.interpolate(self.proj1(y), size=a.shape[2:]) + a)
        return self.head(y)


class TrainedSegmenter(LearnedSegmenter):
    """The learned segmenter's pipeline around a network trained in this process (the packaged
    manifest supplies vocabulary, strides and image size, which both variants share)."""

    def __init__(self, config: Any, network: nn.Module) -> None:
        super().__init__(config, VOCABULARY)
        self._trained = segnet.fold_batch_norm(network).to(memory_format=torch.channels_last)

    @property
    def _network(self) -> Any:  # type: ignore[override]
        return self._trained


def forward_ms(network: nn.Module, frames: list[Any], stride: int, repeats: int = 3) -> float:
    """Mean forward time per frame (ms, one thread) over ``frames`` run ``repeats`` times."""
    inputs = [
        torch.from_numpy(segnet.network_input(np.asarray(f.observation.rgb), np.asarray(f.observation.depth), stride))[
            None
        ].contiguous(memory_format=torch.channels_last)
        for f in frames
    ]
    with torch.inference_mode():
        for x in inputs[:10]:
            network(x)
        clock = time.perf_counter()
        for _ in range(repeats):
            for x in inputs:
                network(x)
    return (time.perf_counter() - clock) / (repeats * len(inputs)) * 1e3


def main() -> None:
    config = load_config()
    params = config.benchmark_node.perception
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-homes", type=int, default=params.train_homes)
    parser.add_argument("--epochs", type=int, default=params.epochs)
    parser.add_argument("--workers", type=int, default=2, help="processes rendering the training homes")
    args = parser.parse_args()
    config = dataclasses.replace(
        config,
        benchmark_node=dataclasses.replace(
            config.benchmark_node,
            perception=dataclasses.replace(params, train_homes=args.train_homes, epochs=args.epochs),
        ),
    )
    params = config.benchmark_node.perception
    segmenter_config = dataclasses.replace(config.mapping_node.segmenter, kind="learned", model="")
    shipped = LearnedSegmenter(segmenter_config, VOCABULARY)
    print(f"rendering {params.train_homes} training homes ({args.workers} workers) ...", flush=True)
    data = rendered_training_set(config, args.workers)
    print(f"training the add variant on {len(data.inputs)} frames, {params.epochs} epochs ...", flush=True)
    clock = time.process_time()
    original = segnet.SegNet
    segnet.SegNet = AddSegNet  # train_network builds segnet.SegNet(...): the variant, same recipe
    try:
        variant = train_network(data, params, lambda step: print(f"  {step.message}", flush=True))
    finally:
        segnet.SegNet = original
    print(f"  {time.process_time() - clock:.0f} s of CPU", flush=True)
    del data
    test = list(perception_frames(config, "test", params.test_homes))
    added = TrainedSegmenter(segmenter_config, variant)
    torch.set_num_threads(1)
    rows = []
    for name, segmenter in (("concat (shipped)", shipped), ("add", added)):
        segmenter.warm_up()
        figures = evaluate(segmenter, test, config)
        torch.set_num_threads(1)
        ms = forward_ms(segmenter._network, test, shipped.input_stride)
        parameters = sum(p.numel() for p in segmenter._network.parameters())
        rows.append((name, figures, ms, parameters))
    print(f"\n{params.test_homes} held-out homes, {len(test)} frames; forward pass on one thread:")
    print(f"{'decoder':<18} parameters  precision  recall  accuracy  forward ms/frame")
    for name, f, ms, n in rows:
        print(f"{name:<18} {n:10d} {f['precision']:10.3f} {f['recall']:7.3f} {f['accuracy']:9.3f} {ms:17.2f}")
    print(f"add/concat forward time: {rows[1][2] / rows[0][2]:.2f}x")


if __name__ == "__main__":
    main()
