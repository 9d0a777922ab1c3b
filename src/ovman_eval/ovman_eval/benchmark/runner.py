"""The in-process benchmark runner: the static gate and the embodied run of every arm (TASK.md §3, §6).

Per recorded group, and again per stress condition of the request: both visits' maps, built once and
cached (:mod:`ovman_eval.benchmark.map_cache`), then the static gate and the embodied run of each
(episode, arm, seed) (:class:`ovman_eval.benchmark.evaluator.GroupEvaluator`). Run seeds reseed the
agents' choices, never the simulator: the mover always restarts with the episode's seed. A result
depends only on its episode, so any number of workers writes the same bytes, and rerunning the same
command resumes the unfinished run (layout in :mod:`ovman_eval.runs.results`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ovman_core.config import OvmanConfig, to_document
from ovman_eval.benchmark.evaluator import GroupEvaluator
from ovman_eval.benchmark.map_cache import MapCache, PhraseByPhraseEncoder
from ovman_eval.benchmark.request import (
    TIMING_KEYS,
    BenchmarkRequest,
    UnitOutcome,
    WorkUnit,
    WorldFactory,
    check_in_process,
    configured_for,
    dataset_hash,
)
from ovman_eval.generation.dataset import DatasetError, code_revision, read_episodes, read_manifest
from ovman_eval.generation.validate import checked_episodes
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend
from ovman_eval.runs.pool import PoolBrokenError
from ovman_eval.runs.results import (
    BASELINE,
    FORMAT_VERSION,
    MULTI_CHANGE_PART,
    EpisodeSketch,
    ResultRecord,
)
from ovman_eval.runs.run_dir import (
    BenchmarkError,
    RunFiles,
    WorkerDiedError,
    find_resumable,
    new_run_dir,
    run_dir_lock,
)
from ovman_eval.task.episodes import EpisodeRecord
from ovman_query.arms import BUILT_IN_ARMS, Arm
from ovman_sim.session import make_world

# ---- the run -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunProgress:
    """Units (groups, times conditions) ``done`` of ``total`` (``resumed`` of them finished by an
    earlier invocation); ``last``: the unit just finished."""

    done: int
    total: int
    resumed: int
    elapsed_s: float
    last: str


ProgressCallback = Callable[[RunProgress], None]


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """A finished run: its directory and records (sorted as in ``results.jsonl``)."""

    run_dir: Path
    records: list[ResultRecord]
    timings: dict[str, float]


def run_identity(
    request: BenchmarkRequest, config: OvmanConfig, digest: str, revision: str, encoder: str
) -> dict[str, Any]:
    """What makes a run the same run (``run.json``'s identity): the request, the dataset's hash, the
    code revision, the encoder and the whole configuration."""
    return {
        "format_version": FORMAT_VERSION,
        "request": request.to_dict(),
        "dataset_sha256": digest,
        "code_revision": revision,
        "encoder": encoder,
        "config": to_document(config),
    }


def run_benchmark(
    request: BenchmarkRequest,
    config: OvmanConfig,
    *,
    out_root: Path | None = None,
    run_dir: Path | None = None,
    workers: int = 1,
    cache_dir: Path | None = None,
    world_factory: WorldFactory = make_world,
    progress: ProgressCallback | None = None,
    warn: Callable[[str], None] | None = None,
    full_validation: bool = False,
    backend: Backend = LOCAL_BACKEND,
) -> RunSummary:
    """Run (or resume) the benchmark of ``request``, then its multi-change part when it has one (a run
    directory of its own inside the run, ``RUN/multi_change``; the run is finished only once its part
    is). An episode whose evaluated world cannot be set up gets an embodied error result and the run
    goes on. ``backend``: where
    the ``workers`` compute the units (:class:`ovman_eval.runs.backend.Backend`: this machine's
    pool, or one Ray task per recorded group; the run's files are the same).

    The dataset must pass :func:`ovman_eval.generation.validate.checked_episodes` first (the cheap checks, or
    every check with ``full_validation``): a dataset that fails is refused (DatasetError) before
    anything runs.

    The run directory is ``run_dir`` when given (resumed when it holds the same run, refused when
    it holds another), else the newest unfinished run with the same identity under ``out_root``,
    else a new ``out_root/<UTC stamp>``; it is locked for the run (:func:`ovman_eval.runs.run_dir.run_dir_lock`: a
    BenchmarkError at once when another benchmark holds it). ``cache_dir`` keeps the maps (None:
    not cached). ``warn`` is told of each damaged line of the resumed files (its result is computed
    again). WorkerDiedError when a worker process dies (the finished units are kept).
    """
    if workers < 1:
        raise BenchmarkError(f"workers must be at least 1, got {workers}")
    check_in_process(request.arms)
    if (out_root is None) == (run_dir is None):
        raise BenchmarkError("give exactly one of out_root (a folder of runs) and run_dir (one run)")
    dataset = Path(request.dataset)
    records = checked_episodes(dataset, full=full_validation)
    if not records:
        raise BenchmarkError(f"{dataset}: the dataset holds no episodes")
    if request.multi_change is not None:
        check_multi_change(request.multi_change, full_validation)
    base_config, config = config, configured_for(config, records)
    recorded = sorted({r.scene.condition for r in records} - {BASELINE})
    if request.conditions and recorded:
        raise BenchmarkError(
            f"{dataset}: stress conditions are re-rendered from baseline recordings, but this dataset was recorded "
            f"under {', '.join(recorded)}; run --condition on a dataset generated without --condition"
        )
    digest = dataset_hash(dataset)
    encoder = PhraseByPhraseEncoder(config).description
    identity = run_identity(request, config, digest, code_revision(), encoder)
    if run_dir is None:
        assert out_root is not None
        run_dir = find_resumable(out_root, identity) or new_run_dir(out_root)
    run_dir = Path(run_dir)
    with run_dir_lock(run_dir):
        files = RunFiles(run_dir, identity, {"generation": generation_summary(dataset)}, TIMING_KEYS)
        if warn is not None:
            for line in files.previous.damaged:
                warn(f"{line}; skipped, any result it held is computed again")
        seen = {r.key for r in files.previous.records}
        units = plan_units(records, request, seen, set(files.previous.sketches))
        total_units = len({r.group_id for r in records}) * (1 + len(request.conditions))
        resumed = total_units - len(units)
        done = resumed

        def commit(outcome: UnitOutcome) -> None:
            nonlocal done
            files.commit(outcome.records, outcome.sketch, outcome.timings)
            done += 1
            if progress is not None:
                progress(RunProgress(done, total_units, resumed, time.monotonic() - files.started, outcome.group_id))

        try:
            if backend.in_process(workers, len(units)):
                evaluator = GroupEvaluator(
                    config,
                    dataset,
                    records,
                    MapCache(cache_dir),
                    digest,
                    world_factory,
                    static_only=request.static_only,
                )
                try:
                    for unit in units:
                        commit(evaluator.evaluate(unit))
                finally:
                    evaluator.close()
            else:
                initargs = (config, dataset, records, cache_dir, digest, request.static_only, world_factory)
                try:
                    backend.run(units, workers, _unit_evaluator, initargs, commit, label=lambda unit: unit.label)
                except PoolBrokenError as err:
                    raise WorkerDiedError(
                        f"{run_dir}: {err}; the {done} of {total_units} units finished are kept, and the run "
                        "resumes from them",
                        run_dir,
                    ) from None
        finally:
            files.close()
        if request.multi_change is not None:

            def part_progress(p: RunProgress) -> None:
                if progress is not None:
                    progress(dataclasses.replace(p, last=f"{p.last} ({MULTI_CHANGE_PART} part)"))

            try:
                run_benchmark(
                    request.multi_change_part(),
                    base_config,
                    run_dir=run_dir / MULTI_CHANGE_PART,
                    workers=workers,
                    cache_dir=cache_dir,
                    world_factory=world_factory,
                    progress=part_progress,
                    warn=warn,
                    full_validation=full_validation,
                    backend=backend,
                )
            except WorkerDiedError as err:  # the run resumes as a whole, from its own directory
                raise WorkerDiedError(f"{err} (its {MULTI_CHANGE_PART} part)", run_dir) from None
        episode_order = {r.episode_id: k for k, r in enumerate(records)}
        ordered = files.finish(expected_keys(records, request), episode_order, group_order(records), workers)
        return RunSummary(run_dir, ordered, dict(files.timings))


def check_multi_change(dataset: Path, full_validation: bool = False) -> None:
    """Refuse ``dataset`` as a run's multi-change part unless it passes the dataset checks and every
    episode is of the multi-change split."""
    records = checked_episodes(Path(dataset), full=full_validation)
    if not records:
        raise BenchmarkError(f"{dataset}: the multi-change dataset holds no episodes")
    splits = sorted({r.split for r in records} - {"multi_change"})
    if splits:
        raise BenchmarkError(
            f"{dataset}: a multi-change part must hold the multi-change split only (`ovman generate --multi-change`), "
            f"but episodes are split {', '.join(repr(s) for s in splits)}"
        )


def _unit_evaluator(
    config: OvmanConfig,
    dataset: Path,
    records: list[EpisodeRecord],
    cache_dir: Path | None,
    digest: str,
    static_only: bool,
    world_factory: WorldFactory,
) -> Callable[[WorkUnit], UnitOutcome]:
    """A worker's evaluator (:meth:`ovman_eval.runs.backend.Backend.run`), built once per process."""
    evaluator = GroupEvaluator(
        config, dataset, records, MapCache(cache_dir), digest, world_factory, static_only=static_only
    )
    return evaluator.evaluate


def generation_summary(dataset: Path) -> dict[str, Any] | None:
    """What the report needs of the dataset's generation (its request, counts, rejections per
    relation and reason, shortfall), or None when the dataset has no readable manifest."""
    try:
        manifest = read_manifest(dataset)
    except DatasetError:
        return None
    keys = ("request", "counts", "rejections", "shortfall")
    return {k: manifest[k] for k in keys} if all(k in manifest for k in keys) else None


def plan_units(
    records: Sequence[EpisodeRecord],
    request: BenchmarkRequest,
    seen: set[tuple[str, str, int, str]],
    sketched: set[str],
) -> list[WorkUnit]:
    """The work still to do: per group, the recordings as they are (and the group's sketch), then
    each stress condition of the request; ``seen`` holds the keys of the records already written."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        groups.setdefault(record.group_id, []).append(record)
    units = []
    for group_id, members in groups.items():
        for condition in (None, *request.conditions):
            pending = tuple(
                (r.episode_id, arm.value, seed)
                for r in members
                for arm in request.arms
                for seed in request.seeds
                if (r.episode_id, arm.value, seed, r.scene.condition if condition is None else condition) not in seen
            )
            need_sketch = condition is None and group_id not in sketched
            if pending or need_sketch:
                episodes = tuple(r.episode_id for r in members)
                units.append(WorkUnit(group_id, episodes, pending, need_sketch, condition))
    return units


def expected_keys(records: Sequence[EpisodeRecord], request: BenchmarkRequest) -> set[tuple[str, str, int, str]]:
    """The keys of every record a finished run holds."""
    return {
        (r.episode_id, a.value, s, c)
        for r in records
        for c in (r.scene.condition, *request.conditions)
        for a in request.arms
        for s in request.seeds
    }


def group_order(records: Sequence[EpisodeRecord]) -> list[str]:
    """The recorded groups of ``records``, in dataset order (the order of the sketches)."""
    return list(dict.fromkeys(r.group_id for r in records))


def evaluate_episode(
    dataset: Path,
    episode_id: str,
    config: OvmanConfig,
    arms: Sequence[Arm] = BUILT_IN_ARMS,
    seed: int = 0,
    *,
    static_only: bool = False,
    cache_dir: Path | None = None,
    world_factory: WorldFactory = make_world,
) -> tuple[list[ResultRecord], EpisodeSketch]:
    """One episode's records (every arm in ``arms``, one seed) and its sketch, without a run directory
    (``ovman show``)."""
    check_in_process(arms)
    records = read_episodes(dataset)
    by_id = {r.episode_id: r for r in records}
    if episode_id not in by_id:
        known = ", ".join(sorted(by_id)[:8])
        raise BenchmarkError(f"{dataset}: no episode {episode_id!r} (episodes include {known})")
    record = by_id[episode_id]
    evaluator = GroupEvaluator(
        config, dataset, records, MapCache(cache_dir), dataset_hash(dataset), world_factory, static_only=static_only
    )
    try:
        unit = WorkUnit(record.group_id, (episode_id,), tuple((episode_id, a.value, seed) for a in arms), True)
        outcome = evaluator.evaluate(unit)
    finally:
        evaluator.close()
    assert outcome.sketch is not None
    return outcome.records, outcome.sketch
