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

``--baseline REV`` measures another revision of the code side by side in the same run: the
revision is exported to a temporary directory (``git archive``) and this script of that revision
runs there first (its sources and config first on ``PYTHONPATH``, so the editable install of this
checkout is bypassed; after a tiny warm-up run that compiles its numba functions), then this
checkout; the ratio of CPU seconds per episode is printed.

Run: ``python benchmarks/bench_generation.py [--scenes 3] [--per-relation 2] [--workers 1,2]
[--baseline REV]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from ovman_core.config import load_config
from ovman_eval.generation.dataset import generate_dataset
from ovman_eval.generation.plan import TIMING_KEYS, GenerationRequest

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
    parser.add_argument("--baseline", help="a git revision to measure first, side by side (e.g. HEAD~3)")
    args = parser.parse_args()
    baseline = _run_baseline(args) if args.baseline else None
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
    if baseline is not None:
        for workers, before in baseline.items():
            if workers in cpu_per_episode:
                print(
                    f"side by side, workers={workers}: {args.baseline} {before:.2f} s CPU per episode, this checkout "
                    f"{cpu_per_episode[workers]:.2f} s: {cpu_per_episode[workers] / before:.2f}x"
                )
    for workers, rate in rates.items():
        dedicated = PAPER_EPISODES * cpu_per_episode[workers] / workers / 60.0
        print(
            f"extrapolated: {PAPER_EPISODES} episodes in {PAPER_SCENES} scenes with {workers} worker(s): "
            f"{PAPER_EPISODES / rate:5.1f} min at the measured wall rate, {dedicated:5.1f} min on {workers} "
            "dedicated core(s) from the CPU time"
        )
    return 0


def _run_baseline(args: argparse.Namespace) -> dict[int, float]:
    """Run this benchmark on revision ``args.baseline`` (exported with git archive); returns its
    CPU seconds per episode by worker count, after echoing its output."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tree:
        archive = subprocess.run(["git", "-C", str(root), "archive", args.baseline], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        sources = sorted(str(p) for p in (Path(tree) / "src").iterdir() if p.is_dir())
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sources), "OVMAN_CONFIG": f"{tree}/config/ovman.yaml"}
        command = [sys.executable, f"{tree}/benchmarks/bench_generation.py", "--scenes", str(args.scenes)]
        command += ["--per-relation", str(args.per_relation), "--workers", args.workers, "--seed", str(args.seed)]
        command += ["--multi-change"] if args.multi_change else []
        # A first, tiny run compiles the revision's numba functions into its cache (this checkout's
        # are cached already), so that compilation is not counted against it.
        warm = [*command[:2], "--scenes", "1", "--per-relation", "1", "--workers", "1"]
        subprocess.run(warm, env=env, check=True, capture_output=True, text=True)
        print(f"baseline {args.baseline}:", flush=True)
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    print("    " + output.strip().replace("\n", "\n    "))
    found = re.findall(r"workers=(\d+): .*?\(([\d.]+) s per episode\)", output)
    return {int(w): float(c) for w, c in found}


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its finished children (the workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
