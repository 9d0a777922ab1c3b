"""``ovman generate``: generate a certified episode dataset (Algorithm 1) with a progress bar.

Argument parsing and printing only: generation is :mod:`ovman_eval.generation.dataset`.
``--preset paper`` sets the paper's scale (both splits, into OUT/single and OUT/multi_change);
running the same command again on the same ``--out`` resumes. The rejection table and the cost
split are printed at the end and kept in ``DIR/manifest.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import TextIO

from ovman_core.config import ConfigError, OvmanConfig, load_config
from ovman_core.relations import Relation
from ovman_eval.analysis.tables import rejection_table
from ovman_eval.cli.backend_options import add_backend_options, backend_of
from ovman_eval.cli.progress import ProgressDisplay
from ovman_eval.generation.dataset import DatasetError, GenerationSummary, Progress, generate_dataset
from ovman_eval.generation.plan import TIMING_KEYS, GenerationRequest
from ovman_eval.runs.backend import BackendError
from ovman_sim.world import Condition

BAR_WIDTH = 30
PAPER = "paper"
SPLIT_DIRECTORIES = {"single": "single", "multi_change": "multi_change"}
"""Where ``--preset paper`` writes each split, under ``--out``."""


def add(parser: argparse.ArgumentParser) -> object:
    parser.epilog = (
        "Running the same command on the same --out resumes an interrupted run. Exit status: 0 when every "
        "episode slot was filled, 3 when some were given up (see the shortfall column), 1 or 2 on errors, "
        "130 when interrupted."
    )
    parser.add_argument(
        "--world", choices=("embedded", "ai2thor"), default="embedded", help="simulator (default embedded)"
    )
    parser.add_argument(
        "--preset",
        choices=(PAPER,),
        help="paper: the paper's scale (benchmark.paper_*), both splits, into OUT/single and OUT/multi_change",
    )
    parser.add_argument(
        "--scenes",
        help="a number N (embedded: scenes embedded-<first>..embedded-<first+N-1>) or comma-separated scene names "
        "(e.g. FloorPlan1,FloorPlan2 for ai2thor)",
    )
    parser.add_argument(
        "--first-scene", type=int, default=0, help="seed of the first embedded scene when --scenes is N"
    )
    parser.add_argument("--per-relation", type=int, help="episodes per relation (K); required without --preset")
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    parser.add_argument("--out", required=True, help="dataset directory to create, or to resume")
    parser.add_argument("--multi-change", action="store_true", help="generate the multi-change split")
    parser.add_argument(
        "--condition", choices=[c.value for c in Condition], default="baseline", help="recording condition"
    )
    parser.add_argument(
        "--relations",
        help="comma-separated subset of relations (default all six: " + ",".join(r.value for r in Relation) + ")",
    )
    parser.add_argument("--workers", type=int, help="parallel processes (default: benchmark_node.generation.workers)")
    add_backend_options(parser)
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    parser.add_argument(
        "--thor-executable", help="AI2-THOR: Unity player binary (sim_node.ai2thor.local_executable_path)"
    )
    parser.add_argument("--thor-platform", help="AI2-THOR: CloudRendering or Linux64 (sim_node.ai2thor.platform)")
    parser.add_argument("--x-display", help="AI2-THOR: X display for Linux64 (sim_node.ai2thor.x_display)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return run


def scene_list(text: str, world: str, first: int) -> tuple[str, ...]:
    """The scenes named by ``--scenes``: N (embedded only) or a comma-separated list."""
    if text.strip().isdigit():
        count = int(text)
        if world != "embedded":
            raise ValueError(f"--scenes {text}: a count only names embedded scenes; list the {world} scenes by name")
        if count < 1 or first < 0:
            raise ValueError("--scenes must be at least 1 and --first-scene non-negative")
        return tuple(f"embedded-{first + k}" for k in range(count))
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise ValueError("--scenes names no scene")
    return names


def configured(config: OvmanConfig, args: argparse.Namespace) -> OvmanConfig:
    """The configuration with the world chosen on the command line."""
    sim = config.sim_node
    thor = sim.ai2thor
    if args.thor_executable:
        thor = dataclasses.replace(thor, local_executable_path=args.thor_executable)
    if args.thor_platform:
        thor = dataclasses.replace(thor, platform=args.thor_platform)
    if args.x_display:
        thor = dataclasses.replace(thor, x_display=args.x_display)
    sim = dataclasses.replace(sim, world=dataclasses.replace(sim.world, kind=args.world), ai2thor=thor)
    return dataclasses.replace(config, sim_node=sim)


def requests(args: argparse.Namespace, config: OvmanConfig) -> list[tuple[Path, GenerationRequest]]:
    """The datasets the command asks for: (directory, request) of ``--out``, or of each split under
    it with ``--preset paper``. ValueError naming the flag when the flags do not fit together."""
    relations = (
        tuple(Relation.parse(r.strip()) for r in args.relations.split(",")) if args.relations else tuple(Relation)
    )
    out = Path(args.out)
    if args.preset == PAPER:
        given = [f for f, v in (("--scenes", args.scenes), ("--per-relation", args.per_relation)) if v is not None]
        given += ["--multi-change"] if args.multi_change else []
        if given or args.world != "embedded":
            clash = ", ".join(given) if given else f"--world {args.world}"
            raise ValueError(f"--preset paper sets the embedded homes, their sizes and both splits; drop {clash}")
        params = config.benchmark_node.benchmark
        scenes = scene_list(str(params.paper_scenes), "embedded", args.first_scene)
        sizes = (("single", params.paper_per_relation), ("multi_change", params.paper_multi_change_per_relation))
        return [
            (
                out / SPLIT_DIRECTORIES[split],
                GenerationRequest(
                    "embedded", scenes, per_relation, args.seed, split == "multi_change", args.condition, relations
                ),
            )
            for split, per_relation in sizes
        ]
    missing = [f for f, v in (("--scenes", args.scenes), ("--per-relation", args.per_relation)) if v is None]
    if missing:
        raise ValueError(f"{' and '.join(missing)} required (or --preset paper)")
    request = GenerationRequest(
        world=args.world,
        scenes=scene_list(args.scenes, args.world, args.first_scene),
        per_relation=args.per_relation,
        seed=args.seed,
        multi_change=args.multi_change,
        condition=args.condition,
        relations=relations,
    )
    return [(out, request)]


def run(args: argparse.Namespace) -> int:
    try:
        config = configured(load_config(args.config), args)
        planned = requests(args, config)
        backend = backend_of(args, config)
    except (ConfigError, ValueError) as err:
        print(f"ovman generate: {err}", file=sys.stderr)
        return 2
    shortfall = 0
    for directory, request in planned:
        bar = None if args.quiet else ProgressBar(sys.stderr, config.benchmark_node.generation.progress_period_s)
        try:
            summary = generate_dataset(directory, request, config, workers=args.workers, progress=bar, backend=backend)
        except (DatasetError, BackendError) as err:
            print(f"ovman generate: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"\novman generate: interrupted; run the same command again to resume {args.out}", file=sys.stderr)
            return 130
        finally:
            if bar is not None:
                bar.close()
        print(summary_text(summary))
        shortfall += sum(summary.manifest["shortfall"].values())
    return 0 if shortfall == 0 else 3


class ProgressBar:
    """Generation's progress: a live bar (slots, rate, ETA) on a terminal; elsewhere (logs) a plain
    line every ``period_s`` seconds and at the end."""

    def __init__(self, stream: TextIO, period_s: float, tty: bool | None = None) -> None:
        self.display = ProgressDisplay(stream, tty)
        self.period_s = period_s
        self.last_line = -float("inf")

    def __call__(self, progress: Progress) -> None:
        postfix = f"{progress.episodes} episodes, {progress.given_up} given up, {progress.attempts} candidates"
        now = time.monotonic()
        plain = None
        if progress.done == progress.total or now - self.last_line >= self.period_s:
            self.last_line = now
            plain = plain_line(progress)
        self.display.update("generate", progress.done, progress.total, "slot", postfix, plain, progress.resumed)

    def close(self) -> None:
        self.display.close()


def plain_line(progress: Progress) -> str:
    """The log line of generation's progress: a text bar, counts, elapsed time and ETA."""
    filled = round(BAR_WIDTH * progress.done / max(progress.total, 1))
    eta = "--:--" if progress.eta_s is None else _clock(progress.eta_s)
    return (
        f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {progress.done}/{progress.total} slots  "
        f"{progress.episodes} episodes  {progress.given_up} given up  {progress.attempts} candidates  "
        f"elapsed {_clock(progress.elapsed_s)}  ETA {eta}"
    )


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def summary_text(summary: GenerationSummary) -> str:
    """The rejection table (relation × reason) and the cost split of a finished run."""
    manifest = summary.manifest
    counts = manifest["counts"]
    table = rejection_table(manifest)
    rows = [table.header, *table.rows]
    widths = [max(len(row[k]) for row in rows) for k in range(len(table.header))]
    lines = [
        "  ".join(cell.rjust(w) if k else cell.ljust(w) for k, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    timings = manifest["timings"]
    split = ", ".join(f"{k[:-2]} {timings[k]:.1f} s" for k in TIMING_KEYS)
    minutes = timings["wall_s"] / 60.0
    rate = counts["episodes"] / minutes if minutes > 0 else float("nan")
    state = "complete" if manifest["complete"] else "INCOMPLETE"
    lines.append(
        f"{summary.directory}: {counts['episodes']} episodes ({state}), {counts['recordings']} recorded groups, "
        f"{counts['attempts']} candidates; wall {timings['wall_s']:.1f} s ({rate:.2f} episodes/min); "
        f"cost split (summed over workers): {split}"
    )
    return "\n".join(lines)
