"""The episode record: one certified episode of the benchmark, versioned, as one JSON line.

A record holds everything needed to replay and score an episode (scene, start pose, changes, query,
answer, seeds, certification runs, recording paths, drift checks). The evaluated world is the world
at the **end** of the visit-2 recording with the agent at ``start_pose`` (a mover restarts there with
``seeds.navigation_mover``). Serialisation is deterministic; reading validates strictly and raises
:class:`EpisodeFormatError` naming the episode id and every bad field. Frames and units: AI2-THOR
world (metres, y up; floor points (x, z)); yaw and horizon in degrees.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from ovman_core.boxes import Footprint, Vec2, Vec3
from ovman_core.files import plain
from ovman_core.relations import Relation
from ovman_core.world_state import AgentPose
from ovman_query.surface_forms import PHRASINGS, phrase
from ovman_sim.homes import is_perception_scene

FORMAT_VERSION = 1
"""Version of the record layout below; readers reject other versions."""

FLOAT_DECIMALS = 6
"""Floats are written rounded to this many decimals (micrometres for positions)."""

SPLITS = ("single", "multi_change")
"""``single``: one change per episode; ``multi_change``: 2-3 instances of the category changed."""

WORLDS = ("embedded", "ai2thor")
CONDITIONS = ("baseline", "low_light", "texture")
PHRASE_SPLITS = ("train", "held_out")
CHANGE_KINDS = ("move", "remove", "add", "moving")


class EpisodeFormatError(ValueError):
    """A record that is not a valid episode; ``problems`` lists ``(field, message)`` pairs."""

    def __init__(self, episode_id: str, problems: list[tuple[str, str]]) -> None:
        self.episode_id = episode_id
        self.problems = problems
        lines = "; ".join(f"field {name}: {message}" for name, message in problems)
        super().__init__(f"episode {episode_id}: {lines}")


@dataclasses.dataclass(frozen=True)
class SceneSpec:
    """Which world and scene (``embedded-3``, ``FloorPlan1``), under which stress condition; the
    condition's draws (noise, textures) use ``condition_seed``."""

    world: str
    name: str
    condition: str
    condition_seed: int


@dataclasses.dataclass(frozen=True)
class ChangeRecord:
    """One change between the visits.

    ``kind``: ``move``, ``remove``, ``add`` or ``moving`` (the mover carries the instance during
    visit 2). ``before``: box centre in visit 1 (None for add); ``after``: box centre at the start
    of visit 2 (None for remove; for moving, where the mover set it down). ``size``: box size (m).
    ``mover_seed``: the seed the mover ran with during visit 2 (moving only).
    """

    kind: str
    instance_id: str
    category: str
    before: Vec3 | None
    after: Vec3 | None
    size: Vec3
    mover_seed: int | None


@dataclasses.dataclass(frozen=True)
class QueryRecord:
    """The query: ``phrase`` is ``template`` filled with ``noun_phrase`` (a surface name of
    ``category``); ``phrase_split`` says whether the template is a training or a held-out form."""

    category: str
    relation: Relation
    noun_phrase: str
    template: str
    phrase: str
    phrase_split: str


@dataclasses.dataclass(frozen=True)
class AnswerRecord:
    """Answer point a (x, z) and region A (floor footprint) of the selected instance; ``vacated``
    when nothing is there at the end (former, removed). Moving answers are taken at the end of
    the visit-2 recording (the static gate's a)."""

    instance_id: str
    point: Vec2
    region: Footprint
    vacated: bool


@dataclasses.dataclass(frozen=True)
class InstanceIds:
    """Ground-truth ids of the queried category in visit 1 and at the start of visit 2 (sorted)."""

    visit1: tuple[str, ...]
    visit2: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class SeedRecord:
    """``episode``: the seed of the candidate's draws; ``navigation_mover``: the mover seed of the
    evaluated navigation (the feasibility run's; None without a mover)."""

    episode: int
    navigation_mover: int | None


@dataclasses.dataclass(frozen=True)
class OracleRun:
    """One oracle run (given the true answer, the reference navigation primitives and Eq. 4).

    ``error``: the executor's NavError name (``NONE`` when it stopped by itself); ``stop``: where
    it stopped (None when it never issued Stop); ``stop_distance``: floor distance from ``stop`` to
    the answer region at the moment of Stop (m); ``target_path``: floor positions of the carried
    instance during the run (mover episodes; empty otherwise), first position first.
    """

    kind: str
    mover_seed: int | None
    success: bool
    error: str
    steps: int
    path_length: float
    shortest_path_length: float | None
    stop: Vec2 | None
    stop_distance: float | None
    target_path: tuple[Vec2, ...]


@dataclasses.dataclass(frozen=True)
class Certification:
    """The feasibility run followed by the certification runs, judged with ``success_radius`` (m)."""

    success_radius: float
    runs: tuple[OracleRun, ...]

    @property
    def passed(self) -> bool:
        return bool(self.runs) and all(run.success for run in self.runs)


@dataclasses.dataclass(frozen=True)
class Recordings:
    """The recorded visits: rosbag2 directories relative to the dataset directory, and their frame counts."""

    visit1: str
    visit2: str
    visit1_frames: int
    visit2_frames: int


@dataclasses.dataclass(frozen=True)
class DriftCheck:
    """Largest drifts found (m, 3-D box-centre distance; the mover's instance excluded):
    ``visit1``/``visit2`` within each recording, ``reread`` between the last visit-2 frame and the
    poses re-read from the simulator after it, ``reset`` between that frame and the world reset for
    the oracle. All are at most ``tolerance`` (task.drift_tolerance) in an emitted episode."""

    tolerance: float
    visit1: float
    visit2: float
    reread: float
    reset: float


@dataclasses.dataclass(frozen=True)
class EpisodeRecord:
    """One certified episode (see the module docstring)."""

    format_version: int
    episode_id: str
    split: str
    group_id: str
    scene: SceneSpec
    start_pose: AgentPose
    changes: tuple[ChangeRecord, ...]
    query: QueryRecord
    answer: AnswerRecord
    instances: InstanceIds
    seeds: SeedRecord
    certification: Certification
    recordings: Recordings
    drift: DriftCheck

    @property
    def moving_id(self) -> str | None:
        """The instance the mover carries (None when the episode has no mover)."""
        for change in self.changes:
            if change.kind == "moving":
                return change.instance_id
        return None

    @property
    def relation(self) -> Relation:
        return self.query.relation


# ---- writing -------------------------------------------------------------------------------------


def episode_to_dict(record: EpisodeRecord) -> dict[str, Any]:
    """The JSON document of a record (floats rounded to FLOAT_DECIMALS)."""
    return _plain(record)


def episode_to_json(record: EpisodeRecord) -> str:
    """One line of JSON (no newline), deterministic: sorted keys, compact separators."""
    problems = check_episode(record)
    if problems:
        raise EpisodeFormatError(record.episode_id, problems)
    return json.dumps(episode_to_dict(record), sort_keys=True, separators=(",", ":"), allow_nan=False)


def episodes_to_jsonl(records: Iterable[EpisodeRecord]) -> str:
    """The content of an ``episodes.jsonl`` file: one record per line, each line ending in a newline."""
    return "".join(episode_to_json(record) + "\n" for record in records)


def _plain(value: Any) -> Any:
    return plain(value, FLOAT_DECIMALS, "an episode record")


# ---- reading -------------------------------------------------------------------------------------


def episode_from_json(line: str, where: str = "") -> EpisodeRecord:
    """Parse and validate one JSON line; ``where`` (e.g. ``episodes.jsonl line 3``) prefixes errors
    about unreadable JSON."""
    try:
        document = json.loads(line)
    except json.JSONDecodeError as err:
        raise EpisodeFormatError(_unknown_id(where), [("(line)", f"not valid JSON: {err}")]) from None
    return episode_from_dict(document)


def episode_from_dict(document: Any) -> EpisodeRecord:
    """Build and validate a record from its JSON document; raises EpisodeFormatError listing
    every problem (field path and message)."""
    episode_id = "?"
    if isinstance(document, dict) and isinstance(document.get("episode_id"), str):
        episode_id = document["episode_id"]
    problems: list[tuple[str, str]] = []
    if isinstance(document, dict) and document.get("format_version") != FORMAT_VERSION:
        problems.append(
            ("format_version", f"{document.get('format_version')!r}; this reader understands {FORMAT_VERSION}")
        )
        raise EpisodeFormatError(episode_id, problems)
    record = _parse(EpisodeRecord, document, "", problems)
    if record is not None and not problems:
        problems.extend(check_episode(record))
    if problems:
        raise EpisodeFormatError(episode_id, problems)
    return record


def _unknown_id(where: str) -> str:
    return f"? ({where})" if where else "?"


_MISSING = object()


def _parse(tp: Any, value: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    """``value`` as type ``tp``; on a mismatch, appends ``(path, message)`` and returns _MISSING."""
    name = path or "(record)"
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            problems.append((name, f"expected an object, got {_describe(value)}"))
            return _MISSING
        hints = typing.get_type_hints(tp)
        fields = {f.name for f in dataclasses.fields(tp)}
        for key in sorted(set(value) - fields):
            problems.append((_join(path, key), "unknown field"))
        values = {}
        for field in sorted(fields):
            if field not in value:
                problems.append((_join(path, field), "missing"))
                continue
            values[field] = _parse(hints[field], value[field], _join(path, field), problems)
        if len(values) != len(fields) or any(v is _MISSING for v in values.values()):
            return _MISSING
        try:
            return tp(**values)
        except ValueError as err:  # e.g. a footprint with min above max
            problems.append((name, str(err)))
            return _MISSING
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        options = [t for t in typing.get_args(tp) if t is not type(None)]
        if value is None:
            return None
        return _parse(options[0], value, path, problems)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            problems.append((name, f"expected a list, got {_describe(value)}"))
            return _MISSING
        if len(args) == 2 and args[1] is Ellipsis:
            items = [_parse(args[0], v, f"{name}[{i}]", problems) for i, v in enumerate(value)]
        else:
            if len(value) != len(args):
                problems.append((name, f"expected {len(args)} values, got {len(value)}"))
                return _MISSING
            items = [_parse(t, v, f"{name}[{i}]", problems) for i, (t, v) in enumerate(zip(args, value, strict=True))]
        return _MISSING if any(v is _MISSING for v in items) else tuple(items)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            valid = ", ".join(str(m.value) for m in tp)
            problems.append((name, f"{value!r} is not one of {valid}"))
            return _MISSING
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append((name, f"expected a number, got {_describe(value)}"))
            return _MISSING
        if not math.isfinite(value):
            problems.append((name, f"expected a finite number, got {value!r}"))
            return _MISSING
        return float(value)
    if tp in (int, str, bool):
        if type(value) is not tp:
            problems.append((name, f"expected {tp.__name__}, got {_describe(value)}"))
            return _MISSING
        return value
    raise TypeError(f"episode schema: unsupported field type {tp!r} at {name}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


# ---- consistency ---------------------------------------------------------------------------------


def check_episode(record: EpisodeRecord) -> list[tuple[str, str]]:
    """Problems with a well-typed record's own consistency, as ``(field, message)`` pairs."""
    problems: list[tuple[str, str]] = []

    def need(ok: bool, field: str, message: str) -> None:
        if not ok:
            problems.append((field, message))

    need(record.format_version == FORMAT_VERSION, "format_version", f"must be {FORMAT_VERSION}")
    need(bool(record.episode_id.strip()), "episode_id", "empty")
    need(bool(record.group_id.strip()), "group_id", "empty")
    need(record.split in SPLITS, "split", f"{record.split!r} is not one of {', '.join(SPLITS)}")
    need(record.scene.world in WORLDS, "scene.world", f"{record.scene.world!r} is not one of {', '.join(WORLDS)}")
    need(bool(record.scene.name), "scene.name", "empty")
    need(
        not is_perception_scene(record.scene.name),
        "scene.name",
        f"{record.scene.name!r} is a perception home, held out for training the segmenter",
    )
    need(
        record.scene.condition in CONDITIONS,
        "scene.condition",
        f"{record.scene.condition!r} is not one of {', '.join(CONDITIONS)}",
    )
    _check_changes(record, need)
    _check_query(record.query, need)
    answer = record.answer
    need(
        answer.vacated == record.query.relation.vacated,
        "answer.vacated",
        f"{answer.vacated} but relation {record.query.relation.value} is "
        f"{'' if record.query.relation.vacated else 'not '}a vacated answer",
    )
    need(all(math.isfinite(v) for v in answer.point), "answer.point", "not finite")
    visit = record.instances.visit1 if answer.vacated else record.instances.visit2
    need(
        answer.instance_id in visit,
        "answer.instance_id",
        f"{answer.instance_id!r} is not among instances.visit{1 if answer.vacated else 2}",
    )
    for name in ("visit1", "visit2"):
        ids = getattr(record.instances, name)
        need(list(ids) == sorted(set(ids)), f"instances.{name}", "must be sorted and without repeats")
    moving = record.moving_id
    need(
        (record.seeds.navigation_mover is None) == (moving is None),
        "seeds.navigation_mover",
        "must be set exactly when the episode has a moving change",
    )
    _check_certification(record, need)
    for name in ("visit1", "visit2"):
        path = getattr(record.recordings, name)
        pure = PurePosixPath(path)
        need(
            bool(path) and not pure.is_absolute() and ".." not in pure.parts,
            f"recordings.{name}",
            f"{path!r} must be a relative path inside the dataset directory",
        )
        need(getattr(record.recordings, f"{name}_frames") > 0, f"recordings.{name}_frames", "must be positive")
    drift = record.drift
    for name in ("visit1", "visit2", "reread", "reset"):
        value = getattr(drift, name)
        need(
            0.0 <= value <= drift.tolerance + 10.0**-FLOAT_DECIMALS,
            f"drift.{name}",
            f"{value} m is outside [0, tolerance {drift.tolerance} m]",
        )
    return problems


def _check_changes(record: EpisodeRecord, need) -> None:
    need(bool(record.changes), "changes", "an episode has at least one change")
    movers = 0
    seen: set[str] = set()
    for k, change in enumerate(record.changes):
        where = f"changes[{k}]"
        need(change.kind in CHANGE_KINDS, f"{where}.kind", f"{change.kind!r} is not one of {', '.join(CHANGE_KINDS)}")
        need(change.instance_id not in seen, f"{where}.instance_id", f"{change.instance_id!r} changes twice")
        seen.add(change.instance_id)
        need(
            (change.before is None) == (change.kind == "add"),
            f"{where}.before",
            f"inconsistent with kind {change.kind}",
        )
        need(
            (change.after is None) == (change.kind == "remove"),
            f"{where}.after",
            f"inconsistent with kind {change.kind}",
        )
        need(
            (change.mover_seed is None) == (change.kind != "moving"),
            f"{where}.mover_seed",
            "set exactly for a moving change",
        )
        need(all(s >= 0.0 for s in change.size), f"{where}.size", "negative size")
        movers += change.kind == "moving"
    need(movers <= 1, "changes", f"{movers} moving changes; the world has one mover")
    if record.split == "single":
        need(len(record.changes) == 1, "changes", f"a single-change episode has one change, got {len(record.changes)}")


def _check_query(query: QueryRecord, need) -> None:
    if query.phrase_split not in PHRASE_SPLITS:
        need(False, "query.phrase_split", f"{query.phrase_split!r} is not one of {', '.join(PHRASE_SPLITS)}")
        return
    forms = PHRASINGS[query.relation]
    templates = forms.train if query.phrase_split == "train" else forms.held_out
    need(
        query.template in templates,
        "query.template",
        f"{query.template!r} is not a {query.phrase_split} phrasing of relation {query.relation.value}",
    )
    try:
        filled = phrase(query.template, query.noun_phrase)
    except ValueError as err:
        need(False, "query.template", str(err))
        return
    need(query.phrase == filled, "query.phrase", f"{query.phrase!r} is not the template filled: {filled!r}")


def _check_certification(record: EpisodeRecord, need) -> None:
    runs = record.certification.runs
    need(len(runs) >= 1, "certification.runs", "no oracle run recorded")
    for k, run in enumerate(runs):
        where = f"certification.runs[{k}]"
        expected = "feasibility" if k == 0 else "certification"
        need(run.kind == expected, f"{where}.kind", f"{run.kind!r}; run {k} must be {expected!r}")
        need(run.success, f"{where}.success", "the oracle failed this run; an emitted episode passes every run")
        need(run.steps >= 0, f"{where}.steps", "negative")
        need(
            (run.mover_seed is None) == (record.moving_id is None),
            f"{where}.mover_seed",
            "set exactly when the episode has a mover",
        )
    if runs:
        need(
            runs[0].mover_seed == record.seeds.navigation_mover,
            "seeds.navigation_mover",
            "must equal the feasibility run's mover seed",
        )


__all__ = [
    "FORMAT_VERSION",
    "AnswerRecord",
    "Certification",
    "ChangeRecord",
    "DriftCheck",
    "EpisodeFormatError",
    "EpisodeRecord",
    "InstanceIds",
    "OracleRun",
    "QueryRecord",
    "Recordings",
    "SceneSpec",
    "SeedRecord",
    "check_episode",
    "episode_from_dict",
    "episode_from_json",
    "episode_to_dict",
    "episode_to_json",
    "episodes_to_jsonl",
]
