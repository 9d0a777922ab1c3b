"""Episode generation throughput (episodes per minute) and its cost split, with the shipped config.

Generates a small single-change set on the embedded world (default: 3 scenes, 2 episodes per
relation = 12 episodes) once per worker count (default 1 and 2 processes), each into a fresh
temporary directory, and prints per run: wall time, episodes per minute, candidates drawn, and the
cost split summed over the workers (sampling: resets, changes, the unrendered mover tour and the
checks; render: the coverage tours; recording: serialising and compressing the MCAP visits;
oracle: the feasibility and certification runs). Then extrapolates to the paper's set, 219
single-change episodes in 20 scenes, from the measured rate of each worker count.

The rate depends little on the number of scenes but the measurement includes each process's
start-up (imports, numba compilation or cache load), so a small run slightly underestimates the
throughput of a long one. Wall time depends on what else the machine runs, so the CPU time of the
run (this process and its workers, user + system) is printed too, with the load average; the
estimate for dedicated cores divides the CPU time per episode by the number of workers (slots are
independent, so they parallelise without coordination).

Run: ``python benchmarks/bench_generation.py [--scenes 3] [--per-relation 2] [--workers 1,2]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from ovman_core.config import load_config
from ovman_eval.dataset import generate_dataset
from ovman_eval.generation import TIMING_KEYS, GenerationRequest

PAPER_EPISODES = 219
PAPER_SCENES = 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenes", type=int, default=3, help="embedded scenes (default 3)")
    parser.add_argument("--per-relation", type=int, default=2, help="episodes per relation (default 2)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure (default 1,2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--multi-change", action="store_true", help="measure the multi-change split instead")
    parser.add_argument("--keep", help="keep the datasets under this directory instead of a temporary one")
    args = parser.parse_args()
    config = load_config()
    cam, tour = config.sim_node.camera, config.sim_node.tour
    request = GenerationRequest(
        world="embedded",
        scenes=tuple(f"embedded-{k}" for k in range(args.scenes)),
        per_relation=args.per_relation,
        seed=args.seed,
        multi_change=args.multi_change,
    )
    print(
        f"embedded world, {args.scenes} scenes x {args.per_relation} per relation ({request.split}), "
        f"{cam.width}x{cam.height} frames, tours of up to {tour.max_waypoints} waypoints x {tour.turns_per_waypoint} "
        f"views, {config.task.certification_runs} certification runs; {os.cpu_count()} CPUs visible"
    )
    rates: dict[int, float] = {}
    cpu_per_episode: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep or scratch)
        for workers in (int(w) for w in args.workers.split(",")):
            out = root / f"workers-{workers}"
            start, cpu_start = time.perf_counter(), _cpu_seconds()
            summary = generate_dataset(out, request, config, workers=workers)
            wall, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
            manifest = summary.manifest
            episodes = manifest["counts"]["episodes"]
            timings = manifest["timings"]
            busy = sum(timings[k] for k in TIMING_KEYS)
            split = "  ".join(f"{k[:-2]} {timings[k]:6.1f} s ({100 * timings[k] / busy:4.1f}%)" for k in TIMING_KEYS)
            rates[workers] = episodes / (wall / 60.0)
            cpu_per_episode[workers] = cpu / max(episodes, 1)
            print(
                f"workers={workers}: {episodes} episodes, {manifest['counts']['attempts']} candidates, "
                f"wall {wall:6.1f} s -> {rates[workers]:5.2f} episodes/min; CPU {cpu:6.1f} s "
                f"({cpu_per_episode[workers]:4.2f} s per episode); load average {os.getloadavg()[0]:.1f}"
            )
            print(f"    cost split (summed over workers): {split}")
            per_relation = manifest["counts"]["attempts_per_relation"]
            print(f"    candidates per relation: {per_relation}")
    for workers, rate in rates.items():
        dedicated = PAPER_EPISODES * cpu_per_episode[workers] / workers / 60.0
        print(
            f"extrapolated: {PAPER_EPISODES} episodes in {PAPER_SCENES} scenes with {workers} worker(s): "
            f"{PAPER_EPISODES / rate:5.1f} min at the measured wall rate, {dedicated:5.1f} min on {workers} "
            "dedicated core(s) from the CPU time"
        )
    return 0


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its finished children (the workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
