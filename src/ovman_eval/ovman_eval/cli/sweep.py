"""``ovman sweep RUN``: the static memory margin of a finished run over a grid of admissibility settings.

Reads the run's static results and its dataset's recorded ground truth (``--workers`` processes or
Ray tasks), re-derives admissibility for every setting of ``benchmark_node.sweep``
(:mod:`ovman_eval.analysis.sweep`), prints the table and writes ``sweep.json`` into the run
directory atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ovman_core.config import PARAMS_KEY, SHARED_KEY, ConfigError, OvmanConfig, TaskConfig, load_config
from ovman_eval.analysis.sweep import (
    SweepError,
    SweepResult,
    read_truths,
    settings_grid,
    sweep,
    sweep_table,
    write_sweep,
)
from ovman_eval.cli.backend_options import add_backend_options, backend_of
from ovman_eval.generation.dataset import DatasetError, read_episodes, read_manifest
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend, BackendError
from ovman_eval.runs.pool import PoolBrokenError
from ovman_eval.runs.results import RUN_FILE, ResultsError, read_results
from ovman_sim.recording import RecordingError

Progress = Callable[[int, int], None]
"""Called with (recorded groups read, groups) while the ground truth is read."""


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("run", help="a finished benchmark run directory (holds run.json and results.jsonl)")
    parser.add_argument("--dataset", help="the run's dataset directory (default: the path stored in run.json)")
    parser.add_argument("--config", help="configuration file whose benchmark_node.sweep is the grid")
    parser.add_argument("--seed", type=int, help="run seed whose results are used (default: the smallest)")
    parser.add_argument("--all", action="store_true", help="also print every setting's row")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--workers", type=int, help="processes reading the recorded groups (default: benchmark.workers)"
    )
    add_backend_options(parser)
    return run


def run_dataset(run_dir: Path, override: str | None = None) -> Path:
    """The dataset of a run: ``override``, else the path in ``run.json`` (relative paths are taken
    from the current directory, as the benchmark command wrote them). SweepError when it is
    missing or is not the dataset the run scored (sha256 of ``episodes.jsonl``)."""
    from ovman_eval.benchmark.request import dataset_hash

    run_file = run_dir / RUN_FILE
    try:
        identity = json.loads(run_file.read_text(encoding="utf-8"))["identity"]
        stored = str(identity["request"]["dataset"])
        digest = str(identity["dataset_sha256"])
    except FileNotFoundError:
        raise SweepError(f"{run_file}: missing; not a benchmark run directory") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SweepError(f"{run_file}: unreadable or without identity.request.dataset: {err}") from err
    dataset = Path(override) if override else Path(stored)
    if not dataset.is_dir():
        hint = "" if override else f" (the path stored in {run_file}); give the dataset with --dataset"
        raise SweepError(f"{dataset}: no dataset directory there{hint}")
    if dataset_hash(dataset) != digest:
        raise SweepError(
            f"{dataset}: its episodes.jsonl is not the one run {run_dir} scored (sha256 differs from {run_file})"
        )
    return dataset


def generation_task(dataset: Path) -> TaskConfig:
    """The task constants a dataset was generated with (its ``manifest.json``)."""
    manifest = read_manifest(dataset)
    try:
        document = manifest["config"][SHARED_KEY][PARAMS_KEY]["task"]
        return TaskConfig(**document)
    except (KeyError, TypeError) as err:
        raise SweepError(
            f"{dataset}/manifest.json: config '/**.ros__parameters.task' is missing or bad: {err}"
        ) from err


def sweep_run(
    run_dir: str | Path,
    config: OvmanConfig,
    dataset: str | Path | None = None,
    seed: int | None = None,
    progress: Progress | None = None,
    workers: int = 1,
    backend: Backend = LOCAL_BACKEND,
) -> SweepResult:
    """The sweep of a finished run over ``config``'s grid (see the module docstring), the ground
    truth read by ``workers`` on ``backend``; does not write anything. SweepError, DatasetError,
    ResultsError, RecordingError or BackendError on bad inputs."""
    run_dir = Path(run_dir)
    directory = run_dataset(run_dir, None if dataset is None else str(dataset))
    return _sweep(run_dir, directory, config, seed, progress, workers, backend)


def _sweep(
    run_dir: Path,
    directory: Path,
    config: OvmanConfig,
    seed: int | None,
    progress: Progress | None,
    workers: int = 1,
    backend: Backend = LOCAL_BACKEND,
) -> SweepResult:
    settings = settings_grid(config.benchmark_node.sweep)
    results = read_results(run_dir)
    records = read_episodes(directory)
    base = generation_task(directory)
    truths = read_truths(directory, records, progress, workers, backend)
    return sweep(records, truths, results, settings, base, seed)


def run(args: argparse.Namespace) -> int:
    began = time.monotonic()

    def progress(done: int, total: int) -> None:
        if not args.quiet and (done == total or done % 10 == 0):
            print(f"[{done}/{total} recorded groups read]", file=sys.stderr, flush=True)

    try:
        config = load_config(args.config)
        backend = backend_of(args, config)
        workers = args.workers if args.workers is not None else config.benchmark_node.benchmark.workers
        if workers < 1:
            raise SweepError(f"--workers must be at least 1, got {workers}")
        dataset = run_dataset(Path(args.run), args.dataset)
        result = _sweep(Path(args.run), dataset, config, args.seed, progress, workers, backend)
    except (ConfigError, SweepError, DatasetError, ResultsError, RecordingError, BackendError, PoolBrokenError) as err:
        print(f"ovman sweep: {err}", file=sys.stderr)
        return 1
    print(sweep_table(result).text())
    if args.all:
        print()
        for row in result.rows:
            margin = "–" if row.margin is None else f"{row.margin:+.3f}"
            print(f"{row.setting.label:<60} n={row.admitted:<4} margin {margin}")
    path = write_sweep(args.run, result, dataset)
    print(f"\nwrote {path} ({len(result.rows)} settings in {time.monotonic() - began:.1f} s)")
    return 0
