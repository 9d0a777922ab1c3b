"""A run directory's lifecycle: created or resumed, locked, its partial files sorted into the final ones.

A run directory (``runs/<UTC stamp>/``, file layout in :mod:`ovman_eval.runs.results`) belongs to
one run identity (``run.json``): the same identity resumes it, another is refused. While a run
works it holds the directory's lock (:func:`run_dir_lock`). Results and sketches are appended to
partial files one line at a time with fsync (:class:`ovman_eval.runs.results.LineAppender`), and
:func:`finish_run` sorts them into ``results.jsonl`` and ``sketches.jsonl`` and writes the finish
marker. The in-process runner (:mod:`ovman_eval.benchmark.runner`) and the graph's
(:mod:`ovman_eval.graph.run`) share all of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ovman_core.files import atomic_write_text
from ovman_eval.runs.results import (
    ARM_ORDER,
    FINISHED,
    LOCK,
    PARTIAL_RESULTS,
    PARTIAL_SKETCHES,
    RESULTS,
    RUN_FILE,
    SKETCHES,
    TIMINGS,
    DamagedLine,
    EpisodeSketch,
    LineAppender,
    ResultRecord,
    read_checked_lines,
    record_from_dict,
    sketch_from_dict,
    sort_key,
    to_json_line,
)


class BenchmarkError(ValueError):
    """A benchmark run that cannot start or resume (bad arguments, a directory of another run)."""


class WorkerDiedError(BenchmarkError):
    """A worker process ended abruptly (a signal, the OOM killer, an exit); the message names it and
    its unit. The finished units are kept in ``run_dir``: the same command resumes the run."""

    def __init__(self, message: str, run_dir: Path) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def stamp() -> str:
    """The current UTC time as ``YYYYmmdd-HHMMSS``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")


def find_resumable(out_root: Path, identity: dict[str, Any]) -> Path | None:
    """The newest unfinished run directory under ``out_root`` with the same identity."""
    if not out_root.is_dir():
        return None
    for candidate in sorted((p for p in out_root.iterdir() if p.is_dir()), reverse=True):
        run_file = candidate / RUN_FILE
        if not run_file.is_file() or (candidate / FINISHED).exists():
            continue
        try:
            stored = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if stored.get("identity") == identity:
            return candidate
    return None


def new_run_dir(out_root: Path) -> Path:
    """A new run directory's path: ``out_root/<UTC stamp>``, suffixed ``-2``, ``-3``... when taken."""
    now = stamp()
    path = out_root / now
    suffix = 1
    while path.exists():
        suffix += 1
        path = out_root / f"{now}-{suffix}"
    return path


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold the lock of ``run_dir`` (:data:`ovman_eval.runs.results.LOCK`) for the ``with`` block.

    An advisory ``fcntl.flock`` on the lock file, which then holds this process's PID; the kernel
    releases it when the process ends, however it ends, so a killed run leaves no stale lock.
    BenchmarkError at once (naming the holder's PID) when another process holds it, or when
    ``run_dir`` is a non-empty directory of something else."""
    _refuse_foreign(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    with open(path, "a+", encoding="utf-8") as stream:
        try:
            fcntl.flock(stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            stream.seek(0)
            holder = stream.read().strip()
            by = f" (PID {holder})" if holder.isdigit() else ""
            raise BenchmarkError(
                f"{run_dir}: another benchmark{by} is running in this run directory (it holds {path}); "
                "wait for it to finish or stop it, then run this command again"
            ) from None
        stream.truncate(0)
        stream.write(f"{os.getpid()}\n")
        stream.flush()
        try:
            yield
        finally:
            stream.truncate(0)  # a released lock names nobody


def _refuse_foreign(run_dir: Path) -> None:
    """BenchmarkError when ``run_dir`` holds files but no run (a directory of something else)."""
    if not (run_dir / RUN_FILE).is_file() and run_dir.is_dir() and any(p.name != LOCK for p in run_dir.iterdir()):
        raise BenchmarkError(f"{run_dir}: not empty and holds no {RUN_FILE}; choose a new run directory")


@dataclasses.dataclass
class PreviousRun:
    """What a run directory held: its intact records and sketches, its timings, and the damaged
    lines skipped (their results are computed again)."""

    records: list[ResultRecord]
    sketches: dict[str, EpisodeSketch]
    timings: dict[str, float]
    wall_s: float
    damaged: tuple[DamagedLine, ...]


def open_run_dir(run_dir: Path, identity: dict[str, Any], about: dict[str, Any]) -> PreviousRun:
    """Create the run directory (its ``run.json`` holds ``identity``, the start time and ``about``),
    or check and load the run in it: an unfinished run from its partial
    files; a finished run given again from its final files, which then become the partial ones it
    is refinished from (the finish marker goes only once they are read). Damaged lines are skipped
    and returned (:attr:`PreviousRun.damaged`), never fatal."""
    run_file = run_dir / RUN_FILE
    finished = False
    if run_file.is_file():
        try:
            stored = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise BenchmarkError(f"{run_file}: unreadable ({err}); choose another run directory") from err
        if stored.get("identity") != identity:
            differences = sorted(k for k in identity if stored.get("identity", {}).get(k) != identity[k])
            raise BenchmarkError(
                f"{run_dir}: holds a different run (differs in {', '.join(differences) or 'format'}); "
                "resume it with the same dataset, arms, seeds, configuration and code, or choose another directory"
            )
        finished = (run_dir / FINISHED).exists()
    else:
        _refuse_foreign(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        document = {
            "identity": identity,
            "started_utc": stamp(),
            **about,
        }
        atomic_write_text(run_file, json.dumps(document, sort_keys=True, indent=1) + "\n")
    files = ((RESULTS, PARTIAL_RESULTS), (SKETCHES, PARTIAL_SKETCHES))
    results_file, sketches_file = (final if finished else partial for final, partial in files)
    records, damaged = read_checked_lines(run_dir / results_file, record_from_dict, partial=not finished)
    sketches, damaged_sketches = read_checked_lines(run_dir / sketches_file, sketch_from_dict, partial=not finished)
    if finished:
        for final, partial in files:
            if (run_dir / final).is_file():
                os.replace(run_dir / final, run_dir / partial)
        (run_dir / FINISHED).unlink()
    timings: dict[str, float] = {}
    wall = 0.0
    if (run_dir / TIMINGS).is_file():
        try:
            stored_timings = json.loads((run_dir / TIMINGS).read_text(encoding="utf-8"))
            timings = {k: float(v) for k, v in stored_timings.get("work", {}).items()}
            wall = float(stored_timings.get("wall_s", 0.0))
        except (OSError, json.JSONDecodeError, ValueError, AttributeError):
            timings, wall = {}, 0.0
    unique: dict[tuple[str, str, int, str], ResultRecord] = {}
    for record in records:
        unique.setdefault(record.key, record)
    return PreviousRun(
        list(unique.values()), {s.group_id: s for s in sketches}, timings, wall, (*damaged, *damaged_sketches)
    )


def write_timings(run_dir: Path, timings: dict[str, float], wall: float, complete: bool, workers: int = 0) -> None:
    """Write ``timings.json``: the work's cost split (seconds), the wall time, whether the run is complete."""
    document = {
        "complete": complete,
        "wall_s": round(wall, 3),
        "work": {k: round(v, 3) for k, v in timings.items()},
    }
    if workers:
        document["workers"] = workers
    atomic_write_text(run_dir / TIMINGS, json.dumps(document, sort_keys=True, indent=1) + "\n")


def finish_run(
    run_dir: Path,
    expected: set[tuple[str, str, int, str]],
    episode_order: dict[str, int],
    group_order: Sequence[str],
    timings: dict[str, float],
    wall: float,
    workers: int,
) -> list[ResultRecord]:
    """Sort the partial files into the final ones and write the finish marker; returns the records
    in their final order (episodes in ``episode_order``, then arm, seed, condition).

    ``expected``: the key of every record the run must hold (BenchmarkError when one is missing);
    ``group_order``: the order of the sketches. Damaged lines are skipped (:func:`open_run_dir`
    reported those it found; their results were computed again)."""
    results: dict[tuple[str, str, int, str], ResultRecord] = {}
    for record in read_checked_lines(run_dir / PARTIAL_RESULTS, record_from_dict, partial=True)[0]:
        results.setdefault(record.key, record)
    missing = sorted(expected - set(results))
    if missing:
        raise BenchmarkError(f"{run_dir}: {len(missing)} results missing after the run (first {missing[0]}); rerun")
    ordered = sorted((results[k] for k in expected), key=lambda r: sort_key(r, episode_order, ARM_ORDER))
    sketches: dict[str, EpisodeSketch] = {}
    for sketch in read_checked_lines(run_dir / PARTIAL_SKETCHES, sketch_from_dict, partial=True)[0]:
        sketches.setdefault(sketch.group_id, sketch)
    atomic_write_text(run_dir / RESULTS, "".join(to_json_line(r) + "\n" for r in ordered))
    atomic_write_text(
        run_dir / SKETCHES, "".join(to_json_line(sketches[g]) + "\n" for g in group_order if g in sketches)
    )
    write_timings(run_dir, timings, wall, complete=True, workers=workers)
    atomic_write_text(
        run_dir / FINISHED,
        json.dumps({"finished_utc": stamp(), "results": len(ordered), "wall_s": round(wall, 3)}, sort_keys=True) + "\n",
    )
    for name in (PARTIAL_RESULTS, PARTIAL_SKETCHES):
        (run_dir / name).unlink(missing_ok=True)
    return ordered


class RunFiles:
    """A run directory opened for work: what it held (:attr:`previous`), the partial files each
    finished unit is appended to (:meth:`commit`), the summed timings, and :meth:`finish`.

    Shared by the in-process runner and benchmark_node's :class:`ovman_eval.graph.run.GraphRun`.
    Opening creates the directory or checks and loads the run in it (:func:`open_run_dir`)."""

    def __init__(
        self, run_dir: Path, identity: dict[str, Any], about: dict[str, Any], timing_keys: Sequence[str]
    ) -> None:
        self.run_dir = run_dir
        self.started = time.monotonic()
        self.previous = open_run_dir(run_dir, identity, about)
        self.timings = dict.fromkeys(timing_keys, 0.0)
        self.timings.update({k: v for k, v in self.previous.timings.items() if k in self.timings})
        self._results = LineAppender(run_dir / PARTIAL_RESULTS)
        self._sketches = LineAppender(run_dir / PARTIAL_SKETCHES)

    @property
    def wall_s(self) -> float:
        """Wall time of the run (s), its earlier invocations included."""
        return time.monotonic() - self.started + self.previous.wall_s

    def commit(self, records: Iterable[ResultRecord], sketch: EpisodeSketch | None, timings: dict[str, float]) -> None:
        """Append one finished unit's records (and sketch) with fsync, and add its timings."""
        self._results.append(to_json_line(r) for r in records)
        if sketch is not None:
            self._sketches.append([to_json_line(sketch)])
        for key, value in timings.items():
            self.timings[key] += value
        write_timings(self.run_dir, self.timings, self.wall_s, complete=False)

    def close(self) -> None:
        """Close the partial files (the run can be resumed from them)."""
        self._results.close()
        self._sketches.close()

    def finish(
        self,
        expected: set[tuple[str, str, int, str]],
        episode_order: dict[str, int],
        group_order: Sequence[str],
        workers: int,
    ) -> list[ResultRecord]:
        """Close the partial files and sort them into the final ones (:func:`finish_run`)."""
        self.close()
        return finish_run(self.run_dir, expected, episode_order, group_order, self.timings, self.wall_s, workers)
