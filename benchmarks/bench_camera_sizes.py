"""Per-frame cost of the learned segmenter and the mapping at other camera sizes, on one core.

Renders the first frames of a coverage tour of one embedded home at each size (90 degrees vertical
field of view; rendering is not timed), then times, frame by frame as mapping_node fuses them
(``VisitMapper.add``, one frame per network pass, ``segmenter.threads`` torch threads): the
resampling to the model's geometry, the segmenter as a whole (resampling, network, cells to
segments, mapping back), the mapping back alone, the back-projection of the segments, and the
whole ``add`` (segmenter, back-projection and fusion). The back-projection is also timed on every
``mapping.pixel_stride``-th camera pixel instead of one pixel a model cell, to show what sampling
at the camera's resolution would cost. Prints the median and p95 per stage in ms.

Usage: python benchmarks/bench_camera_sizes.py [--scene embedded-3] [--frames 48] [--sizes 320x240 848x480 1280x720]
"""

from __future__ import annotations

import os

# One core: every thread pool gets one thread (read at import).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import functools  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from ovman_core.config import MappingConfig, load_config  # noqa: E402
from ovman_core.observation import Observation  # noqa: E402
from ovman_mapping.backprojection import segment_frame  # noqa: E402
from ovman_mapping.camera_resampling import camera_resampling  # noqa: E402
from ovman_mapping.encoders import make_encoder  # noqa: E402
from ovman_mapping.learned_segmenter import LearnedSegmenter  # noqa: E402
from ovman_mapping.segmenter import Segmentation  # noqa: E402
from ovman_mapping.visit_mapper import VisitMapper  # noqa: E402
from ovman_sim.embedded import EmbeddedWorld  # noqa: E402
from ovman_sim.tours import tour_observations  # noqa: E402


def timed(times: dict[str, list[float]], stage: str, call: Callable[[], Any]) -> Any:
    """``call()``, its wall time (ms) appended to ``times[stage]``."""
    start = time.perf_counter()
    out = call()
    times.setdefault(stage, []).append(1e3 * (time.perf_counter() - start))
    return out


def back_projection(frame: Observation, segmentation: Segmentation, mapping: MappingConfig, lattice: bool) -> Any:
    """The frame's segments back-projected: on the segmentation's own lattice, or (``lattice`` False)
    on every ``mapping.pixel_stride``-th camera pixel."""
    pose = frame.pose
    return segment_frame(
        frame.rgb,
        frame.depth,
        segmentation.ids,
        segmentation.labels,
        frame.intrinsics,
        frame.camera_position,
        pose.yaw_deg,
        pose.horizon_deg,
        mapping.mapping,
        mapping.encoder.colour_bins,
        cell=segmentation.cell if lattice else 1,
        lattice=segmentation.lattice if lattice else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="embedded-3")
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--sizes", nargs="+", default=["320x240", "848x480", "1280x720"])
    args = parser.parse_args()
    config = load_config()
    mapping = config.mapping_node
    segmenter = LearnedSegmenter(dataclasses.replace(mapping.segmenter, kind="learned", model=""))
    segmenter.warm_up()
    encoder = make_encoder(mapping.encoder)
    threads = mapping.segmenter.threads
    print(f"{args.scene}, {args.frames} frames a size, torch threads {threads}; ms a frame, median / p95")
    for size in args.sizes:
        width, height = (int(x) for x in size.split("x"))
        camera = dataclasses.replace(config.sim_node.camera, width=width, height=height)
        sim = dataclasses.replace(config.sim_node, camera=camera)
        world = EmbeddedWorld(sim)
        world.reset(args.scene)
        frames = list(itertools.islice(tour_observations(world, sim.tour, sim.world), args.frames))
        times: dict[str, list[float]] = {}
        mapper = VisitMapper(mapping, encoder, segmenter)
        mapper.start(1)
        for n, frame in enumerate(frames, start=1):
            segmentation = timed(times, "segmenter (all of it)", functools.partial(segmenter.segment, frame))
            if segmentation.lattice is not None:
                resampling = camera_resampling(
                    frame.intrinsics, segmenter.intrinsics, segmenter.cell, mapping.segmenter.padding
                )
                timed(
                    times, "  resampling to the model", functools.partial(resampling.to_model, frame.rgb, frame.depth)
                )
                cells = np.zeros(resampling.cell_shape, np.int32)
                timed(times, "  mapping back to the camera", functools.partial(resampling.to_camera, cells))
            project = functools.partial(back_projection, frame, segmentation, mapping)
            timed(times, "back-projection", functools.partial(project, True))
            if segmentation.lattice is not None:
                timed(times, "  (every pixel_stride-th pixel instead)", functools.partial(project, False))
            timed(times, "VisitMapper.add (end to end)", functools.partial(mapper.add, frame, n))
        mapper.finish(1)
        print(f"{width}x{height}:")
        for stage, values in times.items():
            warm = values[2:]  # the first frames load and compile what they need
            print(f"  {stage:42s} {np.median(warm):7.2f} / {np.percentile(warm, 95):7.2f}")


if __name__ == "__main__":
    main()
