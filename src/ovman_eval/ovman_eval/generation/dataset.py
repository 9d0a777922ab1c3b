"""An episode dataset on disk, and the run that generates it (resumable, atomic, deterministic).

``DIR`` holds ``episodes.jsonl`` (one :class:`ovman_eval.task.episodes.EpisodeRecord` a line, in plan
order), ``recordings/<group>/visit1|visit2`` (:mod:`ovman_sim.recording`), ``manifest.json`` (request,
configuration, code revision, counts, rejections, timings and the clean-finish marker ``complete``)
and ``.generation/``, the run's state. Every file is written atomically, so the directory never
holds half an episode, and an interrupted run resumes to the bytes an uninterrupted run writes,
whatever the number of workers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ovman_core.config import OvmanConfig, SimConfig, to_document
from ovman_core.files import atomic_write_text
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.generation.generator import EpisodeGenerator
from ovman_eval.generation.plan import TIMING_KEYS, GenerationRequest, Slot, SlotOutcome, plan_slots
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend
from ovman_eval.runs.pool import PoolBrokenError
from ovman_eval.task.episodes import (
    EpisodeFormatError,
    EpisodeRecord,
    episode_from_dict,
    episode_from_json,
    episode_to_dict,
    episodes_to_jsonl,
)
from ovman_sim.recording import RecordingError, read_visit
from ovman_sim.session import make_world
from ovman_sim.world import World

MANIFEST = "manifest.json"
EPISODES = "episodes.jsonl"
RECORDINGS = "recordings"
STATE = ".generation"
RUN_FILE = "run.json"
SLOTS = "slots"
STAGING = "staging"
MANIFEST_VERSION = 1
DATASET_KIND = "ovman-episodes"

WorldFactory = Callable[[SimConfig], World]


class DatasetError(ValueError):
    """A dataset directory that cannot be read, or a run that cannot start or resume there."""


# ---- atomic files --------------------------------------------------------------------------------


def _json(document: Any) -> str:
    return json.dumps(document, sort_keys=True, indent=1, allow_nan=False) + "\n"


def code_revision() -> str:
    """``git describe --always --dirty`` of the checkout this module lives in, or ``unknown``."""
    checkout = Path(__file__).resolve().parents[4]
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--always", "--dirty", "--abbrev=40"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (git is not available)"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown (not a git checkout)"


# ---- progress ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a run stands: slots ``done`` of ``total`` (``resumed`` of them from an earlier run),
    episodes emitted, slots given up, candidates drawn, wall seconds of this invocation, and the
    estimated seconds left (None until a slot finished in this invocation)."""

    done: int
    total: int
    resumed: int
    episodes: int
    given_up: int
    attempts: int
    elapsed_s: float
    eta_s: float | None
    last: str


ProgressCallback = Callable[[Progress], None]


@dataclasses.dataclass(frozen=True)
class GenerationSummary:
    """The finished run: the manifest written and where."""

    directory: Path
    manifest: dict[str, Any]

    @property
    def episodes(self) -> int:
        return int(self.manifest["counts"]["episodes"])


# ---- the run -------------------------------------------------------------------------------------


def _slot_filler(
    config: OvmanConfig, request: GenerationRequest, world_factory: WorldFactory, staging: Path
) -> Callable[[Slot], SlotOutcome]:
    """A worker's slot filler (:meth:`ovman_eval.runs.backend.Backend.run`), with its own world."""
    generator = EpisodeGenerator(world_factory(config.sim_node), config, request)
    return lambda slot: generator.fill_slot(slot, staging / slot.key)


def generate_dataset(
    directory: str | os.PathLike[str],
    request: GenerationRequest,
    config: OvmanConfig,
    *,
    workers: int | None = None,
    world_factory: WorldFactory = make_world,
    progress: ProgressCallback | None = None,
    backend: Backend = LOCAL_BACKEND,
) -> GenerationSummary:
    """Generate (or resume generating) the dataset of ``request`` in ``directory``.

    ``workers`` processes (default ``generation.workers``) fill slots in parallel, each with its
    own world from ``world_factory``; with one worker everything runs in this process. ``backend``:
    where (:class:`ovman_eval.runs.backend.Backend`: this machine's pool, or one Ray task per slot;
    the dataset is the same). Raises DatasetError when ``directory`` holds something else (another
    request or configuration).
    """
    workers = config.benchmark_node.generation.workers if workers is None else workers
    if workers < 1:
        raise DatasetError(f"workers must be at least 1, got {workers}")
    if request.world != config.sim_node.world.kind:
        raise DatasetError(
            f"the request is for the {request.world!r} world but config sim_node.world.kind is "
            f"{config.sim_node.world.kind!r}; set both to the same world"
        )
    run = _Run(Path(directory), request, config, progress)
    # Work scene by scene (a world keeps the last scene it built); the files come out in plan order anyway.
    pending = sorted(run.open(), key=lambda slot: (slot.scene_index, slot.index))
    if backend.in_process(workers, len(pending)):
        world = world_factory(config.sim_node)
        try:
            generator = EpisodeGenerator(world, config, request)
            for slot in pending:
                run.commit(generator.fill_slot(slot, run.staging / slot.key))
        finally:
            world.close()
    else:
        args = (config, request, world_factory, run.staging)
        try:
            backend.run(pending, workers, _slot_filler, args, run.commit, label=lambda slot: slot.key)
        except PoolBrokenError as err:
            raise DatasetError(
                f"{directory}: {err}; the finished slots are kept, and the same command resumes the run"
            ) from None
    return run.finish()


class _Run:
    """The state of one generation run in its directory: ``.generation/run.json`` (what is being
    generated), ``slots/<slot>.json`` (the outcome of every finished slot) and ``staging/`` (the
    slot being worked on; discarded on resume)."""

    def __init__(
        self, directory: Path, request: GenerationRequest, config: OvmanConfig, progress: ProgressCallback | None
    ) -> None:
        self.directory = directory
        self.request = request
        self.config = config
        self.progress = progress
        self.state = directory / STATE
        self.staging = self.state / STAGING
        self.slots = plan_slots(request)
        self.done: dict[str, dict[str, Any]] = {}
        self.records: dict[str, list[EpisodeRecord]] = {}
        self.resumed = 0
        self.started = time.monotonic()
        self.previous_wall_s = 0.0
        self.revision = code_revision()

    def identity(self) -> dict[str, Any]:
        return {
            "format_version": MANIFEST_VERSION,
            "request": self.request.to_dict(),
            "config": to_document(self.config),
        }

    # ------------------------------------------------------------------ open / resume

    def open(self) -> list[Slot]:
        """Create the directory or resume the run in it; returns the slots still to fill."""
        directory = self.directory
        run_file = self.state / RUN_FILE
        if directory.exists() and not directory.is_dir():
            raise DatasetError(f"{directory}: exists and is not a directory")
        if run_file.is_file():
            self._check_identity(run_file)
        elif directory.exists() and any(directory.iterdir()):
            raise DatasetError(
                f"{directory}: not empty and holds no generation state ({STATE}/{RUN_FILE}); "
                "choose a new --out directory"
            )
        else:
            atomic_write_text(run_file, _json(self.identity()))
        if self.staging.exists():
            shutil.rmtree(self.staging)
        self.staging.mkdir(parents=True)
        self._load_slots()
        self._remove_orphans()
        manifest = directory / MANIFEST
        if manifest.is_file():
            try:
                self.previous_wall_s = float(json.loads(manifest.read_text(encoding="utf-8"))["timings"]["wall_s"])
            except (ValueError, KeyError, TypeError):
                self.previous_wall_s = 0.0
        self.resumed = len(self.done)
        self._write_outputs(complete=False)
        return [slot for slot in self.slots if slot.key not in self.done]

    def _check_identity(self, run_file: Path) -> None:
        try:
            stored = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise DatasetError(f"{run_file}: unreadable generation state: {err}") from err
        mine = self.identity()
        if stored == mine:
            return
        differences = []
        if stored.get("request") != mine["request"]:
            old, new = stored.get("request") or {}, mine["request"]
            keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            differences.extend(f"request.{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in keys)
        if stored.get("config") != mine["config"]:
            differences.append("the configuration differs")
        if stored.get("format_version") != MANIFEST_VERSION:
            differences.append(f"format_version {stored.get('format_version')!r} (this code writes {MANIFEST_VERSION})")
        raise DatasetError(
            f"{self.directory}: holds a different generation run ({'; '.join(differences)}); resume it with the "
            "same arguments and configuration, or choose a new --out directory"
        )

    def _load_slots(self) -> None:
        folder = self.state / SLOTS
        known = {slot.key for slot in self.slots}
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            if path.name.startswith("."):
                path.unlink()  # an interrupted atomic write
                continue
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                records = [episode_from_dict(episode) for episode in doc["episodes"]]
            except (OSError, json.JSONDecodeError, KeyError, TypeError, EpisodeFormatError) as err:
                raise DatasetError(f"{path}: damaged slot record ({err}); remove it to regenerate that slot") from err
            if path.stem not in known:
                raise DatasetError(f"{path}: slot {path.stem!r} is not part of this run's plan")
            self.done[path.stem] = doc
            self.records[path.stem] = records
        for leftover in folder.glob(".*") if folder.is_dir() else []:
            leftover.unlink()

    def _remove_orphans(self) -> None:
        """Recordings of slots that never finished committing are half episodes: remove them."""
        recordings = self.directory / RECORDINGS
        if not recordings.is_dir():
            return
        kept = {episode["group_id"] for doc in self.done.values() for episode in doc["episodes"]}
        for entry in sorted(recordings.iterdir()):
            if entry.name not in kept:
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()

    # ------------------------------------------------------------------ commit

    def commit(self, outcome: SlotOutcome) -> None:
        """Move a finished slot's recordings into place and record its outcome, in this order:
        recordings renamed into ``recordings/``, outcome written to ``slots/``, then ``episodes.jsonl``
        and ``manifest.json`` rewritten from all finished slots."""
        slot = outcome.slot
        if outcome.filled:
            assert outcome.recordings is not None
            group = outcome.episodes[0].group_id
            target = self.directory / RECORDINGS / group
            if target.exists():
                shutil.rmtree(target)  # left by a commit that was interrupted before its slot record
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(outcome.recordings, target)
        doc = {
            "slot": slot.key,
            "index": slot.index,
            "relation": slot.relation.value,
            "attempts": outcome.attempts,
            "filled": outcome.filled,
            "rejections": outcome.rejections,
            "timings": {k: round(outcome.timings.get(k, 0.0), 3) for k in TIMING_KEYS},
            "episodes": [episode_to_dict(e) for e in outcome.episodes],
        }
        atomic_write_text(self.state / SLOTS / f"{slot.key}.json", _json(doc))
        self.done[slot.key] = doc
        self.records[slot.key] = list(outcome.episodes)
        shutil.rmtree(self.staging / slot.key, ignore_errors=True)
        self._write_outputs(complete=False)
        if self.progress is not None:
            self.progress(self._progress(slot.key))

    def finish(self) -> GenerationSummary:
        manifest = self._write_outputs(complete=len(self.done) == len(self.slots))
        shutil.rmtree(self.staging, ignore_errors=True)
        return GenerationSummary(self.directory, manifest)

    def _progress(self, last: str) -> Progress:
        elapsed = time.monotonic() - self.started
        new = len(self.done) - self.resumed
        left = len(self.slots) - len(self.done)
        return Progress(
            done=len(self.done),
            total=len(self.slots),
            resumed=self.resumed,
            episodes=sum(len(doc["episodes"]) for doc in self.done.values()),
            given_up=sum(not doc["filled"] for doc in self.done.values()),
            attempts=sum(doc["attempts"] for doc in self.done.values()),
            elapsed_s=elapsed,
            eta_s=elapsed / new * left if new else None,
            last=last,
        )

    # ------------------------------------------------------------------ outputs

    def _ordered_docs(self) -> list[dict[str, Any]]:
        return [self.done[slot.key] for slot in self.slots if slot.key in self.done]

    def _write_outputs(self, complete: bool) -> dict[str, Any]:
        docs = self._ordered_docs()
        records = [r for slot in self.slots if slot.key in self.records for r in self.records[slot.key]]
        text = episodes_to_jsonl(records)
        atomic_write_text(self.directory / EPISODES, text)
        manifest = self._manifest(docs, records, text, complete)
        atomic_write_text(self.directory / MANIFEST, _json(manifest))
        return manifest

    def _manifest(
        self, docs: list[dict[str, Any]], records: list[EpisodeRecord], text: str, complete: bool
    ) -> dict[str, Any]:
        relations = [r.value for r in self.request.relations]
        per_relation = dict.fromkeys(relations, 0)
        for record in records:
            per_relation[record.query.relation.value] = per_relation.get(record.query.relation.value, 0) + 1
        rejections: dict[str, dict[str, int]] = {r: {} for r in relations}
        attempts = dict.fromkeys(relations, 0)
        shortfall = dict.fromkeys(relations, 0)
        timings = dict.fromkeys(TIMING_KEYS, 0.0)
        for doc in docs:
            attempts[doc["relation"]] += doc["attempts"]
            shortfall[doc["relation"]] += not doc["filled"]
            for relation, reasons in doc["rejections"].items():
                table = rejections.setdefault(relation, {})
                for reason, count in reasons.items():
                    table[reason] = table.get(reason, 0) + count
            for key in TIMING_KEYS:
                timings[key] += doc["timings"][key]
        timings = {k: round(v, 3) for k, v in timings.items()}
        timings["slots_s"] = round(sum(timings[k] for k in TIMING_KEYS), 3)
        timings["wall_s"] = round(self.previous_wall_s + time.monotonic() - self.started, 3)
        return {
            "kind": DATASET_KIND,
            "format_version": MANIFEST_VERSION,
            "complete": complete,
            "request": self.request.to_dict(),
            "split": self.request.split,
            "code_revision": self.revision,
            "counts": {
                "episodes": len(records),
                "per_relation": per_relation,
                "slots": len(self.slots),
                "slots_done": len(docs),
                "slots_given_up": sum(not doc["filled"] for doc in docs),
                "attempts": sum(attempts.values()),
                "attempts_per_relation": attempts,
                "recordings": len({r.group_id for r in records}),
            },
            "shortfall": shortfall,
            "rejections": {r: dict(sorted(t.items())) for r, t in rejections.items()},
            "timings": timings,
            "episodes_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "config": to_document(self.config),
        }


# ---- reading -------------------------------------------------------------------------------------


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a dataset; DatasetError when missing or not JSON."""
    path = Path(directory) / MANIFEST
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing; not an episode dataset (or its generation never started)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DatasetError(f"{path}: unreadable: {err}") from err
    if not isinstance(document, dict):
        raise DatasetError(f"{path}: must hold a JSON object")
    return document


def read_episodes(directory: str | os.PathLike[str]) -> list[EpisodeRecord]:
    """Every episode of a dataset, validated; DatasetError naming the line and episode otherwise."""
    path = Path(directory) / EPISODES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetError(f"{path}: unreadable: {err}") from err
    if text and not text.endswith("\n"):
        raise DatasetError(f"{path}: truncated: the last line has no newline")
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            records.append(episode_from_json(line))
        except EpisodeFormatError as err:
            raise DatasetError(f"{path} line {number}: {err}") from err
    return records


@dataclasses.dataclass(frozen=True)
class RecordedStates:
    """The ground truth of an episode's recordings (AI2-THOR world frame).

    ``visit1``: the objects of visit 1; ``visit2_start`` / ``visit2_end``: at the first and last
    frame of visit 2 (the evaluated world is ``visit2_end``); ``carried``: the mover's instance at
    every visit-2 frame (empty without a mover).
    """

    visit1: WorldState
    visit2_start: WorldState
    visit2_end: WorldState
    carried: tuple[ObjectState, ...]


def recorded_states(directory: str | os.PathLike[str], record: EpisodeRecord) -> RecordedStates:
    """Read both recordings of ``record`` completely (every frame decoded and checked); raises
    ovman_sim.recording.RecordingError for a missing, corrupt or truncated recording."""
    directory = Path(directory)
    visit1 = [frame.objects for frame in read_visit(directory / record.recordings.visit1)]
    first2: WorldState | None = None
    last2: WorldState | None = None
    carried: list[ObjectState] = []
    moving = record.moving_id
    for frame in read_visit(directory / record.recordings.visit2):
        first2 = frame.objects if first2 is None else first2
        last2 = frame.objects
        if moving is not None and moving in frame.objects:
            carried.append(frame.objects[moving])
    if not visit1 or first2 is None or last2 is None:
        raise RecordingError(f"{directory}: episode {record.episode_id}: a recording holds no frames")
    return RecordedStates(visit1[0], first2, last2, tuple(carried))


__all__ = [
    "EPISODES",
    "MANIFEST",
    "RECORDINGS",
    "DatasetError",
    "GenerationSummary",
    "Progress",
    "RecordedStates",
    "code_revision",
    "generate_dataset",
    "read_episodes",
    "read_manifest",
    "recorded_states",
]
