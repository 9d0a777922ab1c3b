"""The Ray backend on this machine: scaling from 1 to 2 workers, per-task overhead, connect time (issue 26).

Starts a Ray head on 127.0.0.1 only (``ray start --head --num-cpus 2``, no dashboard, a private
temporary directory; stopped at the end), then measures in one run, side by side:

- **connect**: the time :func:`ovman_eval.runs.ray_pool.connect` takes to join the running head
  (this process becomes a Ray driver);
- **throughput**: ``generate_dataset`` of the same dataset (``--per-relation`` episodes of each of
  the six relations in homes embedded-0..3: one Ray task per slot) with ``--workers 1`` and
  ``--workers 2``, after a warm-up dataset that starts both Ray worker processes; episodes per
  minute and their ratio (the issue's goal: ≥ 1.7× on 2 cores). Both datasets must be
  byte-identical to each other;
- **per-task overhead**: ``--tasks`` units that do nothing but return a small result, through the
  local process pool (:func:`ovman_eval.runs.pool.run_pool`) and through Ray, both with 2 workers;
  wall milliseconds per unit beyond a run of 2 units (so the pool's process start-up and Ray's
  worker start-up are left out), i.e. what the backend adds to each unit.

Usage: python benchmarks/bench_ray.py [--per-relation 4] [--tasks 400]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ovman_core.config import load_config
from ovman_core.relations import Relation
from ovman_eval.generation.dataset import generate_dataset
from ovman_eval.generation.plan import GenerationRequest
from ovman_eval.runs.backend import Backend
from ovman_eval.runs.pool import run_pool
from ovman_eval.runs.ray_pool import connect, run_ray

RAY = Path(sys.executable).with_name("ray")
LOCALHOST = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
GOAL = 1.7
SCENES = ("embedded-0", "embedded-1", "embedded-2", "embedded-3")


def nothing() -> Callable[[int], int]:
    """A unit that does no work (the per-task overhead's workload)."""
    return lambda item: item


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_head(temp: Path) -> str:
    port = free_port()
    command = [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
               "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"]  # fmt: skip
    subprocess.run(command, env={**os.environ, **LOCALHOST}, check=True, capture_output=True, timeout=300)
    return f"127.0.0.1:{port}"


def dataset_bytes(directory: Path) -> dict[str, bytes]:
    """The dataset's files but the manifest (which holds timings) and the generation state."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".generation" not in p.parts and p.name != "manifest.json"
    }


def per_task_ms(run: Callable[[list[int]], None], tasks: int) -> float:
    """Wall ms per unit of ``tasks`` units beyond a run of 2 (start-up left out)."""
    began = time.perf_counter()
    run(list(range(2)))
    small = time.perf_counter() - began
    began = time.perf_counter()
    run(list(range(tasks)))
    big = time.perf_counter() - began
    return 1000.0 * (big - small) / (tasks - 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-relation", type=int, default=4, help="episodes of each relation in the timed dataset")
    parser.add_argument("--tasks", type=int, default=400, help="no-op units for the per-task overhead")
    args = parser.parse_args()
    os.environ.update(LOCALHOST)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = load_config()
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    print(f"{os.cpu_count()} cores; Ray head on 127.0.0.1 with 2 CPUs")
    try:
        address = start_head(temp)
        began = time.perf_counter()
        connect(address)
        print(f"connect to the running head: {time.perf_counter() - began:.2f} s")
        backend = Backend("ray", address)

        def generate(out: Path, per_relation: int, workers: int, relations: tuple[Relation, ...]) -> float:
            request = GenerationRequest(
                world="embedded", scenes=SCENES, per_relation=per_relation, seed=0, relations=relations
            )
            began = time.perf_counter()
            generate_dataset(out, request, config, workers=workers, backend=backend)
            return time.perf_counter() - began

        warm = generate(temp / "warm", 1, 2, (Relation.STABLE, Relation.APPEARED))
        print(f"warm-up (2 episodes, starts both Ray workers): {warm:.1f} s")
        episodes = 6 * args.per_relation
        walls = {
            workers: generate(temp / f"w{workers}", args.per_relation, workers, tuple(Relation)) for workers in (1, 2)
        }
        identical = dataset_bytes(temp / "w1") == dataset_bytes(temp / "w2")
        what = f"{episodes} episodes ({args.per_relation} a relation in {len(SCENES)} homes)"
        print(f"\ngeneration of {what}, a Ray task each:")
        for workers, wall in walls.items():
            print(f"  {workers} Ray worker(s): {wall:6.1f} s  {60.0 * episodes / wall:6.2f} episodes/min")
        ratio = walls[1] / walls[2]
        verdict = "meets" if ratio >= GOAL else "misses"
        print(f"  2 workers / 1 worker: {ratio:.2f}x ({verdict} the {GOAL}x goal); datasets identical: {identical}")

        pool_ms = per_task_ms(lambda items: run_pool(items, 2, nothing, (), lambda _: None), args.tasks)
        ray_ms = per_task_ms(lambda items: run_ray(items, 2, nothing, (), lambda _: None, address=address), args.tasks)
        print(f"\nper-task overhead, {args.tasks} no-op units, 2 workers (wall ms a unit beyond a 2-unit run):")
        print(f"  process pool {pool_ms:6.2f} ms   Ray {ray_ms:6.2f} ms   Ray / pool {ray_ms / pool_ms:.1f}x")
    finally:
        import ray

        ray.shutdown()  # leave the cluster before it is stopped
        subprocess.run([str(RAY), "stop", "--force"], env={**os.environ, **LOCALHOST}, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
