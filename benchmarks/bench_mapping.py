"""Mapping cost per episode (both visits) on 2 cores: label mode (the simulator's segments), learned
mode (the learned segmenter on the pixels, issue 21) and clip mode (issue 6: goal ≤ 1.9 s per
episode, the paper's figure on a laptop GPU; issue 21: the same goal in learned mode, and peak RSS
≤ 2 GB per worker).

For each embedded scene: record visit 1 on the coverage tour, move one instance more than Δmin,
record visit 2 (recording is not timed). Then, per encoder mode, time building both visits' maps
from the recorded frames: back-projection, fusion, free-space evidence, motion tracks, the
instance features and the cross-visit evidence of visit 2 against visit 1. Model loading is
reported separately (once per process); text embeddings of the labels are cached across episodes
as in a long run. ``clip`` uses open_clip with random
weights (no download): the cost is the same as with trained weights of the same model. ``learned``
uses the packaged segmenter model (``mapping_node.segmenter``, its configured threads) with the
label encoder; the modes run one after the other in one process, so the peak RSS printed after each
is the process's peak so far (it includes every recorded frame the bench holds: about 0.26 GB an
episode). ``--threads N`` runs the learned network on N torch threads instead of the configured
``segmenter.threads`` (1, one per benchmark worker): a robot's mapping_node alone on 2 cores may
use 2; the segment masks are the same, their label shares equal to float rounding
(tests/mapping/test_segmenter.py). Frames are segmented ``segmenter.batch_frames`` at a time, as
in the benchmark's map cache. ``--precision
bfloat16`` runs it under ``torch.autocast`` (``segmenter.precision``).

Prints, per mode, the median and mean wall time and CPU time per episode, ms per frame, and the
ratio to the goal.

``--robot WxH`` is the robot mode instead: a tour rendered at W x H is published over DDS as a
robot's driver publishes it (colour, aligned 16UC1 depth, camera_info, /tf and /tf_static, stamped
with the wall clock; large messages over shared memory, config/fastdds.xml) at ``--rate-hz`` (15)
for ``--seconds`` (20, the tour looping) to a
mapping_node process pinned to one core (learned segmenter, ``node.frame_policy: keep_newest``),
and prints what its /diagnostics say: frames fused and skipped, the fused rate, the end-to-end
latency p50/p95 (image stamp to fused) and the node's peak RSS (issue 43's goal: 848x480 at 15 Hz,
every frame fused, p95 <= 100 ms, <= 1.5 GB over 20 minutes).

Usage: python benchmarks/bench_mapping.py [--scenes 4] [--modes label learned clip] [--cores 2] [--threads N]
       [--precision float32|bfloat16]
       python benchmarks/bench_mapping.py --robot 848x480 [--rate-hz 15] [--seconds 20]
"""

from __future__ import annotations

import os

# Thread pools read these at import: 2 cores means 2 threads everywhere.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from ovman_core.config import OvmanConfig, load_config  # noqa: E402
from ovman_core.observation import Observation  # noqa: E402
from ovman_mapping.encoders import make_encoder  # noqa: E402
from ovman_mapping.fusion import build_map, build_visits  # noqa: E402
from ovman_mapping.segmenter import make_segmenter  # noqa: E402
from ovman_sim.embedded import EmbeddedWorld  # noqa: E402
from ovman_sim.tours import tour_observations  # noqa: E402
from ovman_sim.world import MoveObject  # noqa: E402

GOAL_S = 1.9


def record_episode(
    world: EmbeddedWorld, config: OvmanConfig, scene: str
) -> tuple[list[Observation], list[Observation]]:
    """Both visits' frames of ``scene`` with one instance moved at least Δmin + 1 m between them."""
    world.reset(scene)
    w1, start = world.objects(), world.agent_pose()
    visit_1 = list(tour_observations(world, config.sim_node.tour, config.sim_node.world))
    world.reset(scene, w1, start)
    far = config.task.min_displacement + 1.0
    for obj in w1:
        places = [
            p
            for p in world.candidate_placements(obj.instance_id)
            if math.hypot(p[0] - obj.position[0], p[2] - obj.position[2]) >= far
        ]
        if places and world.apply_change(MoveObject(obj.instance_id, places[len(places) // 2])).success:
            break
    world.reset(scene, world.objects(), start)
    visit_2 = list(tour_observations(world, config.sim_node.tour, config.sim_node.world))
    return visit_1, visit_2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=4, help="embedded scenes (embedded-0 ... embedded-N-1)")
    parser.add_argument(
        "--modes", nargs="+", default=["label", "learned", "clip"], choices=["label", "learned", "clip"]
    )
    parser.add_argument("--cores", type=int, default=2, help="CPU cores the process may use")
    parser.add_argument("--clip-views", type=int, default=None, help="override encoder.views_per_instance (clip)")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads of the learned network (default: config)"
    )
    parser.add_argument("--precision", choices=["float32", "bfloat16"], default=None, help="learned network arithmetic")
    parser.add_argument("--robot", metavar="WxH", default=None, help="the robot mode at this camera size")
    parser.add_argument("--rate-hz", type=float, default=15.0, help="robot mode: frames a second")
    parser.add_argument("--seconds", type=float, default=20.0, help="robot mode: how long the camera publishes")
    args = parser.parse_args()
    if args.robot:
        from robot_camera import run_robot_mode

        width, height = (int(v) for v in args.robot.lower().split("x"))
        return run_robot_mode(load_config(), width, height, args.rate_hz, args.seconds)
    if hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(available[: args.cores]))
    config = load_config()
    world = EmbeddedWorld(config.sim_node)
    print(f"recording {args.scenes} episodes (not timed) ...", flush=True)
    episodes = [record_episode(world, config, f"embedded-{k}") for k in range(args.scenes)]
    frames = [len(v1) + len(v2) for v1, v2 in episodes]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    camera = config.sim_node.camera
    print(f"frames per episode (both visits): {statistics.mean(frames):.0f}, camera {camera.width}x{camera.height}; "
          f"cores: {cores}")  # fmt: skip
    for mode in args.modes:
        encoder_kind = "clip" if mode == "clip" else "label"
        encoder_config = dataclasses.replace(config.mapping_node.encoder, kind=encoder_kind, clip_weights="")
        if mode == "clip" and args.clip_views is not None:
            encoder_config = dataclasses.replace(encoder_config, views_per_instance=args.clip_views)
        segmenter_config = dataclasses.replace(
            config.mapping_node.segmenter, kind="learned" if mode == "learned" else "simulator"
        )
        if mode == "learned" and args.threads is not None:
            segmenter_config = dataclasses.replace(segmenter_config, threads=args.threads)
        if mode == "learned" and args.precision is not None:
            segmenter_config = dataclasses.replace(segmenter_config, precision=args.precision)
        mapping_config = dataclasses.replace(config.mapping_node, encoder=encoder_config, segmenter=segmenter_config)
        encoder = make_encoder(encoder_config)
        segmenter = make_segmenter(segmenter_config)
        if mode == "clip":
            import torch

            torch.set_num_threads(args.cores)
        start = time.perf_counter()
        encoder.embed_text(["warm-up"])  # loads the model
        segmenter.warm_up()
        load_s = time.perf_counter() - start
        # One untimed episode warms caches (JIT, label embeddings) as a long run would be warm.
        build_map(episodes[0][0], mapping_config, encoder, 1, segmenter)
        walls, cpus, instances, crops = [], [], [], []
        for visit_1, visit_2 in episodes:
            wall, cpu = time.perf_counter(), time.process_time()
            maps = build_visits(visit_1, visit_2, mapping_config, encoder, segmenter)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            instances.append(sum(len(m) for m in maps))
            views = encoder_config.views_per_instance
            crops.append(sum(min(views, len(i.sightings)) for m in maps for i in m))
        per_frame_ms = 1000.0 * sum(walls) / sum(frames[: len(walls)])
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(
            f"{mode:7s}: {segmenter.description}"
            + (f" on {segmenter_config.threads} thread(s), {segmenter_config.precision}" if mode == "learned" else "")
            + f"; {encoder.description}\n"
            f"       model load {load_s:.1f} s (once per process)\n"
            f"       per episode: wall median {statistics.median(walls):.2f} s, mean {statistics.mean(walls):.2f} s, "
            f"max {max(walls):.2f} s; CPU mean {statistics.mean(cpus):.2f} s; {per_frame_ms:.1f} ms per frame; "
            f"{statistics.mean(instances):.0f} instances"
            + (f", {statistics.mean(crops):.0f} crops encoded" if mode == "clip" else "")
            + f"\n       peak RSS of the process so far {peak_gb:.2f} GB (goal <= 2 GB per worker)"
        )
        if mode in ("label", "learned"):
            ratio = statistics.median(walls) / GOAL_S
            verdict = "meets" if ratio <= 1.0 else "misses"
            print(f"       goal <= {GOAL_S} s per episode: median/goal = {ratio:.2f} ({verdict} the goal)")
    world.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
