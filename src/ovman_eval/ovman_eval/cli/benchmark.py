"""``ovman benchmark``, ``ovman report`` and ``ovman show``: run the benchmark, (re)write its report, draw one episode.

Argument parsing and printing only: the run is :mod:`ovman_eval.benchmark.runner`, the report
:mod:`ovman_eval.analysis.report`. ``--default-dataset ROOT`` generates (once, keyed on the request,
the config and the generation code) and runs the default dataset with its multi-change part; the
same command again resumes an unfinished run. docs/benchmark.md describes every option.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ovman_core.config import ConfigError, OvmanConfig, load_config, to_document
from ovman_core.relations import Relation
from ovman_eval.cli.backend_options import add_backend_options, backend_of, backend_words
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend, BackendError
from ovman_eval.runs.fingerprint import source_fingerprint
from ovman_eval.runs.pool import PoolBrokenError
from ovman_eval.runs.results import ResultRecord, ResultsError, parse_seeds

if TYPE_CHECKING:
    from ovman_eval.benchmark.request import BenchmarkRequest

GENERATION_SOURCES = (
    ("ovman_core", None),
    ("ovman_ros", None),
    ("ovman_sim", None),
    ("ovman_nav", None),
    ("ovman_query", "surface_forms.py"),
    ("ovman_query", "phrasings/*.json"),
    ("ovman_eval.generation", None),
    ("ovman_eval.task", "episodes.py"),
    ("ovman_eval.task", "admissibility.py"),
    ("ovman_eval.task", "answers.py"),
)
"""Source files whose content keys the default dataset (None: every .py of the package)."""


def _seeds_argument(text: str) -> tuple[int, ...]:
    try:
        return parse_seeds(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


# ---- ovman benchmark ---------------------------------------------------------------------------------


def add(parser: argparse.ArgumentParser) -> object:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="episode dataset directory (from `ovman generate`)")
    source.add_argument(
        "--default-dataset",
        metavar="ROOT",
        help="generate (once, cached under ROOT/<key>) and use the default embedded dataset",
    )
    parser.add_argument("--arms", help="comma-separated arms, or all (default: benchmark.arms of the config)")
    parser.add_argument(
        "--seeds",
        type=_seeds_argument,
        help="run seeds: a count (3 = seeds 0,1,2; the spread and margin range over seeds) or a comma-separated "
        "list (default: benchmark.seeds)",
    )
    parser.add_argument("--workers", type=int, help="parallel processes (default: benchmark.workers)")
    add_backend_options(parser)
    parser.add_argument("--out", default="runs", help="folder of run directories (default runs/)")
    parser.add_argument("--run-dir", help="run (or resume) in exactly this directory instead of OUT/<stamp>")
    parser.add_argument("--static-only", action="store_true", help="the static gate only (no embodied runs)")
    parser.add_argument(
        "--condition",
        "--conditions",
        dest="conditions",
        action="append",
        metavar="low_light|texture",
        help="also run under this stress condition (repeatable or comma-separated), compared with the baseline",
    )
    parser.add_argument(
        "--validate",
        choices=("cheap", "full"),
        default="cheap",
        help="check the dataset before running, as `ovman validate` does: cheap (default: manifest, checksum, "
        "every episode line, start poses, recordings' metadata) or full (also every recorded frame and the "
        "recomputed answers); a dataset that fails is refused",
    )
    parser.add_argument(
        "--multi-change",
        metavar="DIR",
        help="also run a dataset of the multi-change split (`ovman generate --multi-change`) with the same arms and "
        'seeds, into RUN/multi_change, tabulated in the report\'s "Multi-change split" (with --default-dataset: '
        "the default multi-change part, benchmark.default_multi_change_per_relation, unless this names another)",
    )
    parser.add_argument("--cache", help="map cache directory (default OUT/.cache/maps)")
    parser.add_argument("--no-report", action="store_true", help="do not write report.md/report.html")
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also re-derive admissibility over benchmark_node.sweep (as `ovman sweep RUN`) for the report",
    )
    parser.add_argument("--no-episode-figures", action="store_true", help="report without per-episode figures")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return run


def generation_code_fingerprint() -> str:
    """sha256 over :data:`GENERATION_SOURCES` (part of the default dataset's key)."""
    return source_fingerprint(GENERATION_SOURCES)


def default_dataset(
    root: Path,
    config: OvmanConfig,
    workers: int,
    quiet: bool,
    multi_change: bool = False,
    backend: Backend = LOCAL_BACKEND,
) -> Path:
    """The default dataset under ``root`` (generated now, on ``backend``, unless a complete one with
    the same key exists): its single-change split, or with ``multi_change`` its multi-change part
    (``benchmark.default_multi_change_per_relation`` groups per relation in the same homes)."""
    from ovman_eval.cli.generate import ProgressBar, summary_text
    from ovman_eval.generation.dataset import DatasetError, generate_dataset, read_manifest
    from ovman_eval.generation.plan import GenerationRequest

    params = config.benchmark_node.benchmark
    per_relation = params.default_multi_change_per_relation if multi_change else params.default_per_relation
    request = GenerationRequest(
        world="embedded",
        scenes=tuple(f"embedded-{k}" for k in range(params.default_scenes)),
        per_relation=per_relation,
        seed=params.default_seed,
        multi_change=multi_change,
        relations=tuple(Relation),
    )
    identity = {"request": request.to_dict(), "config": to_document(config), "code": generation_code_fingerprint()}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    part = "-multi" if multi_change else ""
    directory = root / f"embedded-{params.default_scenes}x{per_relation}{part}-{key}"
    try:
        if read_manifest(directory).get("complete"):
            print(f"ovman benchmark: using the cached default dataset {directory}", file=sys.stderr)
            return directory
    except DatasetError:
        pass  # not generated yet (or interrupted): generate_dataset creates or resumes it
    what = "groups per relation of the multi-change part" if multi_change else "episodes per relation"
    print(
        f"ovman benchmark: generating the default dataset ({params.default_scenes} embedded homes, "
        f"{per_relation} {what}) into {directory}",
        file=sys.stderr,
    )
    bar = None if quiet else ProgressBar(sys.stderr, config.benchmark_node.generation.progress_period_s)
    try:
        summary = generate_dataset(directory, request, config, workers=workers, progress=bar, backend=backend)
    finally:
        if bar is not None:
            bar.close()
    print(summary_text(summary), file=sys.stderr)
    return directory


def run(args: argparse.Namespace) -> int:
    from ovman_eval.benchmark.map_cache import MapCacheError
    from ovman_eval.benchmark.request import BenchmarkRequest, parse_arms, parse_conditions
    from ovman_eval.benchmark.runner import RunProgress, run_benchmark
    from ovman_eval.cli.progress import ProgressDisplay
    from ovman_eval.generation.dataset import DatasetError
    from ovman_eval.runs.run_dir import BenchmarkError, WorkerDiedError
    from ovman_sim.recording import RecordingError

    try:
        config = load_config(args.config)
        params = config.benchmark_node.benchmark
        arms = parse_arms(args.arms if args.arms else params.arms)
        conditions = parse_conditions([n for text in args.conditions or () for n in text.split(",")])
        seeds = args.seeds if args.seeds else tuple(params.seeds)
        workers = args.workers if args.workers is not None else params.workers
        backend = backend_of(args, config)
        out = Path(args.out)
        dataset = (
            Path(args.dataset)
            if args.dataset
            else default_dataset(Path(args.default_dataset), config, workers, args.quiet, backend=backend)
        )
        multi_change = Path(args.multi_change) if args.multi_change else None
        if args.default_dataset and multi_change is None and params.default_multi_change_per_relation > 0:
            multi_change = default_dataset(
                Path(args.default_dataset), config, workers, args.quiet, multi_change=True, backend=backend
            )
        request = BenchmarkRequest(dataset, arms, tuple(seeds), args.static_only, conditions, multi_change)
    except (ConfigError, BenchmarkError, DatasetError, ValueError) as err:
        print(f"ovman benchmark: {err}", file=sys.stderr)
        return 2
    cache = Path(args.cache) if args.cache else out / ".cache" / "maps"
    began = time.monotonic()

    units = "groups" if not conditions else "groups x conditions"
    display = ProgressDisplay(sys.stderr)

    def progress(p: RunProgress) -> None:
        if not args.quiet:
            plain = f"[{p.done}/{p.total} {units}, {p.resumed} resumed] {p.last} ({p.elapsed_s:.0f} s)"
            display.update("benchmark", p.done, p.total, "group", p.last, plain, p.resumed)

    def warn(message: str) -> None:
        display.note(f"ovman benchmark: {message}")

    try:
        summary = run_benchmark(
            request,
            config,
            out_root=None if args.run_dir else out,
            run_dir=Path(args.run_dir) if args.run_dir else None,
            workers=workers,
            cache_dir=cache,
            progress=progress,
            warn=warn,
            full_validation=args.validate == "full",
            backend=backend,
        )
    except WorkerDiedError as err:
        resume = resume_command(args, request, workers, cache, err.run_dir, backend)
        print(f"ovman benchmark: {err}; resume with:\n  {resume}", file=sys.stderr)
        return 1
    except (BenchmarkError, DatasetError, RecordingError, MapCacheError, BackendError) as err:
        print(f"ovman benchmark: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\novman benchmark: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        display.close()
    run_s = time.monotonic() - began
    if args.sweep:
        from ovman_eval.analysis.sweep import SweepError, write_sweep
        from ovman_eval.cli.sweep import run_dataset, sweep_run

        clock = time.monotonic()
        try:
            swept = write_sweep(
                summary.run_dir,
                sweep_run(summary.run_dir, config, workers=workers, backend=backend),
                run_dataset(summary.run_dir),
            )
        except (SweepError, DatasetError, RecordingError, ResultsError, BackendError, PoolBrokenError) as err:
            print(f"ovman benchmark: the admissibility sweep failed: {err}", file=sys.stderr)
            return 1
        print(f"ovman benchmark: wrote {swept} ({time.monotonic() - clock:.1f} s)", file=sys.stderr)
    if request.multi_change is not None:
        from ovman_eval.analysis.appearance_fit import CueFitError
        from ovman_eval.cli.appearance import fit_run

        clock = time.monotonic()
        try:
            fit_run(summary.run_dir, cache=cache)
            print(f"ovman benchmark: fitted the appearance cues ({time.monotonic() - clock:.1f} s)", file=sys.stderr)
        except CueFitError as err:  # a run too small to fit is not a failed run
            print(f"ovman benchmark: the appearance cues were not fitted: {err}", file=sys.stderr)
    report_note = ""
    if not args.no_report:
        from ovman_eval.analysis.report import write_report

        clock = time.monotonic()
        md, html_path = write_report(summary.run_dir, episode_figures=not args.no_episode_figures, workers=workers)
        report_note = f"; report {md} and {html_path} ({time.monotonic() - clock:.1f} s)"
    print(run_summary_text(summary.records))
    if request.multi_change is not None:
        from ovman_eval.analysis.tables import headline_table
        from ovman_eval.runs.results import MULTI_CHANGE_PART, read_results

        part = headline_table(read_results(summary.run_dir / MULTI_CHANGE_PART))
        print(f"\nMulti-change part ({request.multi_change}):\n{part.text()}")
    print(f"\nrun {summary.run_dir}: {len(summary.records)} results in {run_s:.1f} s{report_note}")
    return 0


def resume_command(
    args: argparse.Namespace,
    request: BenchmarkRequest,
    workers: int,
    cache: Path,
    run_dir: Path,
    backend: Backend = LOCAL_BACKEND,
) -> str:
    """The command that resumes ``run_dir``: this one's request and options, pinned to the run directory."""
    seeds = ",".join(str(s) for s in request.seeds) + ("," if len(request.seeds) == 1 else "")
    words = ["ovman", "benchmark", "--dataset", str(request.dataset), "--arms", ",".join(a.value for a in request.arms)]
    words += ["--seeds", seeds, "--workers", str(workers), "--run-dir", str(run_dir), "--cache", str(cache)]
    if request.static_only:
        words.append("--static-only")
    if request.conditions:
        words += ["--condition", ",".join(request.conditions)]
    if request.multi_change is not None:
        words += ["--multi-change", str(request.multi_change)]
    if args.validate != "cheap":
        words += ["--validate", args.validate]
    if args.config:
        words += ["--config", args.config]
    words += backend_words(backend)
    flags = (
        ("--no-report", args.no_report),
        ("--sweep", args.sweep),
        ("--no-episode-figures", args.no_episode_figures),
        ("--quiet", args.quiet),
    )
    words += [flag for flag, given in flags if given]
    return shlex.join(words)


def run_summary_text(records: Sequence[ResultRecord]) -> str:
    """What a finished run prints: the headline table, and the stress comparison when the run has conditions."""
    from ovman_eval.analysis.stress import condition_success_table
    from ovman_eval.analysis.tables import headline_table

    tables = [headline_table(records), condition_success_table(records)]
    return "\n\n".join(t.text() for t in tables if t is not None)


# ---- ovman report ------------------------------------------------------------------------------------


def add_report(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("run", help="a finished run directory (runs/<stamp>)")
    parser.add_argument("--no-episode-figures", action="store_true", help="skip the per-episode figures")
    parser.add_argument("--workers", type=int, default=1, help="processes drawing the per-episode figures (default 1)")
    return run_report


def run_report(args: argparse.Namespace) -> int:
    from ovman_eval.analysis.report import write_report
    from ovman_eval.runs.results import complete_episodes, read_results, read_sketches

    try:
        md, html_path = write_report(Path(args.run), episode_figures=not args.no_episode_figures, workers=args.workers)
        records = read_results(Path(args.run))
        damaged = (*records.damaged, *read_sketches(Path(args.run)).damaged)
    except ResultsError as err:
        print(f"ovman report: {err}", file=sys.stderr)
        return 1
    kept, incomplete = complete_episodes(records)
    for line in damaged:
        print(f"ovman report: skipped {line}", file=sys.stderr)
    if damaged:
        left_out = f": {', '.join(incomplete)}" if incomplete else ""
        print(
            f"ovman report: {len(damaged)} damaged line(s) skipped, {len(incomplete)} episode(s) left out of the "
            f"tables{left_out} (named at the top of {md})",
            file=sys.stderr,
        )
    print(run_summary_text(kept))
    print(f"\nwrote {md} and {html_path}")
    return 0


# ---- ovman show --------------------------------------------------------------------------------------


def add_show(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("episode", help="episode id, e.g. moved-0003")
    parser.add_argument("--dataset", required=True, help="episode dataset directory")
    parser.add_argument("--run", help="draw this run's results for the episode instead of evaluating it now")
    parser.add_argument("--arms", default="all", help="arms to evaluate when there is no --run (default all)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    parser.add_argument("--static-only", action="store_true", help="evaluate without navigating (no path)")
    parser.add_argument("--cache", default="runs/.cache/maps", help="map cache directory (default runs/.cache/maps)")
    parser.add_argument("--out", help="output PNG (default <episode>.png)")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    return run_show


def run_show(args: argparse.Namespace) -> int:
    from ovman_eval.analysis.figures import draw_episode
    from ovman_eval.benchmark.request import parse_arms
    from ovman_eval.benchmark.runner import evaluate_episode
    from ovman_eval.generation.dataset import DatasetError
    from ovman_eval.runs.results import baseline_records, read_results, read_sketches
    from ovman_eval.runs.run_dir import BenchmarkError
    from ovman_sim.recording import RecordingError

    out = Path(args.out) if args.out else Path(f"{args.episode}.png")
    try:
        if args.run:
            records = [
                r
                for r in baseline_records(read_results(Path(args.run)))
                if r.episode_id == args.episode and r.seed == args.seed
            ]
            if not records:
                raise ResultsError(f"{args.run}: no results for episode {args.episode!r} and seed {args.seed}")
            sketch = read_sketches(Path(args.run)).get(records[0].group_id)
            if sketch is None:
                raise ResultsError(f"{args.run}: no sketch of group {records[0].group_id!r}")
        else:
            config = load_config(args.config)
            records, sketch = evaluate_episode(
                Path(args.dataset),
                args.episode,
                config,
                parse_arms(args.arms),
                args.seed,
                static_only=args.static_only,
                cache_dir=Path(args.cache) if args.cache else None,
            )
    except (ConfigError, ResultsError, BenchmarkError, DatasetError, RecordingError) as err:
        print(f"ovman show: {err}", file=sys.stderr)
        return 1
    draw_episode(sketch, records, out)
    for record in records:
        embodied = "" if record.embodied is None else f", embodied {record.embodied.failure}"
        print(f"{record.arm}: static {record.static.failure}{embodied}")
    print(f"wrote {out}")
    return 0
