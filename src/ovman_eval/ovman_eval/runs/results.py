"""The benchmark's results: one record per (episode, arm, seed, condition), one JSON line each, and the run files.

Every line ends in a sha256 of the rest (:data:`CHECKSUM`), which detects damage and hand edits (it
is no signature); readers return the intact items and the damaged lines (:class:`DamagedLine`) and
never raise on one. The files of a run directory are named below. Frames and units: AI2-THOR
world, metres; points are floor (x, z).

Why one module: the record types and their one JSON form, written and read back with checks, change
together; a field added to a record is added, written and read here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ovman_core.files import plain
from ovman_eval.task.episodes import CONDITIONS

FORMAT_VERSION = 2
"""Version of the result line layout (2: lines carry a checksum); readers reject others."""

CHECKSUM = "sha256"
"""The last member of every line: the hex sha256 of the line's UTF-8 bytes without that member
(``,"sha256":"…"`` removed), i.e. of the canonical JSON of the rest."""

FLOAT_DECIMALS = 6
"""Floats are written rounded to this many decimals (deterministic bytes across processes)."""

# A run directory runs/<stamp>/ (written by ovman_eval.benchmark.runner): run.json (its identity: request,
# configuration, code revision, dataset hash, encoder, format); benchmark.lock (an fcntl.flock the kernel
# releases when the process ends, so a file left behind is no stale lock); *.partial.jsonl, one fsync'ed
# line per finished record while running; results.jsonl / sketches.jsonl in a fixed order at the end,
# byte-identical whatever the workers; timings.json; finished.json (the clean-finish marker); the report.
RUN_FILE = "run.json"
RESULTS = "results.jsonl"
SKETCHES = "sketches.jsonl"
PARTIAL_RESULTS = "results.partial.jsonl"
PARTIAL_SKETCHES = "sketches.partial.jsonl"
TIMINGS = "timings.json"
FINISHED = "finished.json"
LOCK = "benchmark.lock"
MULTI_CHANGE_PART = "multi_change"
"""Sub-directory of a run holding its multi-change part: a run directory of the same layout
(without a report), finished before the run is."""

EMBODIED_ERROR = "error"
"""EmbodiedResult.failure of an embodied run that could not be made (its ``message`` says why): a
failed run, beside the classes of :class:`ovman_eval.task.failures.FailureClass`, which classify runs
that were made."""

Point = tuple[float, float]

ARM_ORDER: tuple[str, ...] = (
    "two_visit",
    "two_visit_text",
    "sim_perception",
    "single_visit",
    "oracle_grounding",
    "oracle_positions",
    "given_answer",
    "category_only",
    "maintained_map",
    "external",
)
"""Arms (ovman_query.arms.Arm values) in the order of tables and results files: the agent, its
sim_perception diagnostic, the single-visit arm, the rungs of the error budget, the
category-only baseline, the maintained map, then an external agent evaluated through the graph."""
EXTERNAL_ARM = "external"
"""The arm of an agent outside OVMAN (ovman_query.arms.Arm.EXTERNAL), evaluated through the graph only."""
SIM_PERCEPTION_ARM = "sim_perception"
"""The arm on maps of the simulator's segments (ovman_query.arms.Arm.SIM_PERCEPTION)."""


BASELINE = "baseline"
"""The condition of records without a stress condition."""
CONDITION_ORDER: tuple[str, ...] = CONDITIONS
"""Conditions (ovman_sim.world.Condition values) in the order of results files: the baseline first."""


def parse_seeds(text: str) -> tuple[int, ...]:
    """Run seeds as the command line and the launch arguments give them: ``N`` (one number) means
    the N seeds 0..N-1, ``a,b,c`` lists them (``5,`` is seed 5 alone). ValueError otherwise."""
    text = text.strip()
    try:
        if "," not in text:
            count = int(text)
            if count < 1:
                raise ValueError(f"expected a number of seeds >= 1 (for seed 0 alone write '0,'), got {text!r}")
            return tuple(range(count))
        seeds = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        if "number of seeds" in str(err):
            raise
        raise ValueError(
            f"expected a number of seeds (3 = seeds 0,1,2) or comma-separated seeds, got {text!r}"
        ) from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"expected distinct non-negative comma-separated seeds, got {text!r}")
    return seeds


class ResultsError(ValueError):
    """A results or run file that cannot be read, or does not belong to this run."""


@dataclasses.dataclass(frozen=True)
class StaticResult:
    """The static gate of one arm on one episode.

    ``point``: the predicted point (None = abstained); ``distance``: from it to the answer point
    (m); ``failure``: the :class:`ovman_eval.task.failures.FailureClass` value; ``category_success``:
    within the gate radius of the point of any instance of the queried category at the end of
    visit 2; ``success_probability``: the exact per-episode success probability of a stochastic
    arm (single visit), else None; ``instance_ids``: what the answer rests on (map uids or
    ground-truth ids); ``confidence`` and ``explanation`` as the arm gave them.
    """

    point: Point | None
    success: bool
    distance: float | None
    failure: str
    category_success: bool
    success_probability: float | None
    instance_ids: tuple[str, ...]
    confidence: float
    explanation: str


@dataclasses.dataclass(frozen=True)
class EmbodiedResult:
    """The embodied run of one arm on one episode.

    ``stop``: where the agent issued Stop (None when it abstained or navigation ended otherwise);
    ``stop_distance``: from it to the answer footprint at the moment of Stop (m); ``spl``:
    ``S · l / max(p, l)`` with ``shortest_path`` l (m) from the start to the nearest position that
    passes the test (None when unreachable) and ``path_length`` p (m); ``error``: the executor's
    NavError name (``NONE`` when it stopped by itself, ``ABSTAINED`` when it never navigated,
    ``SETUP`` when the run could not be made);
    ``answer_point``: the answer point at Stop (differs from the static one for moving answers);
    ``trajectory``: floor positions visited, start first; ``retargets``: target estimates taken
    from the agent's own sightings while following a moving target; ``message``: why the run
    could not be made (failure :data:`EMBODIED_ERROR`: no stop, no path, SPL 0), else empty.
    """

    stop: Point | None
    success: bool
    stop_distance: float | None
    failure: str
    category_success: bool
    spl: float
    path_length: float
    shortest_path: float | None
    steps: int
    collisions: int
    error: str
    answer_point: Point
    trajectory: tuple[Point, ...]
    retargets: int
    message: str = ""


@dataclasses.dataclass(frozen=True)
class ResultRecord:
    """One (episode, arm, seed, condition): the static gate, the embodied run (None when
    static-only) and the diagnostics of the maps the arm used (None for arms without maps), under
    the stress ``condition`` (``baseline``: the recordings as they are).

    The episode is described for tables and figures: its recorded group, scene, relation,
    category, the number of instances of the category in W1 ∪ W2, the query phrase, the answer
    (instance, point a, region A as (x_min, z_min, x_max, z_max)) and the start position.
    """

    format_version: int
    episode_id: str
    group_id: str
    split: str
    scene: str
    relation: str
    category: str
    instances: int
    phrase: str
    answer_instance: str
    answer_point: Point
    answer_region: tuple[float, float, float, float]
    start: Point
    arm: str
    seed: int
    static: StaticResult
    embodied: EmbodiedResult | None
    diagnostics: dict[str, Any] | None
    condition: str = BASELINE

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.episode_id, self.arm, self.seed, self.condition)


@dataclasses.dataclass(frozen=True)
class SketchInstance:
    """A map instance (uid, majority label, floor centre, floor footprint, motion attribute) or a
    ground-truth object (id, category, floor centre, footprint; ``moving`` False)."""

    uid: str
    label: str
    point: Point
    footprint: tuple[float, float, float, float]
    moving: bool


@dataclasses.dataclass(frozen=True)
class SketchPair:
    """An association pair: visit-1 uid, visit-2 uid, stage (1 stayed, 2 relocated), floor displacement (m)."""

    uid1: str
    uid2: str
    stage: int
    displacement: float


@dataclasses.dataclass(frozen=True)
class EpisodeSketch:
    """What the top-down figure of one recorded group draws: both visits' map instances, the
    association, the ground truth and the reachable grid of the evaluated world.

    ``reachable``: free grid positions of the evaluated world (empty for static-only runs);
    ``truth1``/``truth2``: ground-truth objects of visit 1 and at the end of visit 2.
    """

    format_version: int
    group_id: str
    scene: str
    map1: tuple[SketchInstance, ...]
    map2: tuple[SketchInstance, ...]
    pairs: tuple[SketchPair, ...]
    removed: tuple[str, ...]
    appeared: tuple[str, ...]
    truth1: tuple[SketchInstance, ...]
    truth2: tuple[SketchInstance, ...]
    reachable: tuple[Point, ...]
    grid_size: float


# ---- JSON ------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    return plain(value, FLOAT_DECIMALS, "a result line")


def to_json_line(value: ResultRecord | EpisodeSketch) -> str:
    """One line (no newline): sorted keys, compact, floats rounded, then the checksum member
    (:data:`CHECKSUM`); deterministic bytes. A record's ``condition`` is left out when it is the
    baseline, so baseline records carry no condition field on disk."""
    document = _plain(value)
    if isinstance(value, ResultRecord) and value.condition == BASELINE:
        del document["condition"]
    body = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return f'{body[:-1]},"{CHECKSUM}":"{hashlib.sha256(body.encode()).hexdigest()}"}}'


def _point(value: Any) -> Point | None:
    return None if value is None else (float(value[0]), float(value[1]))


def _static_from(doc: dict[str, Any]) -> StaticResult:
    return StaticResult(
        point=_point(doc["point"]),
        success=bool(doc["success"]),
        distance=None if doc["distance"] is None else float(doc["distance"]),
        failure=str(doc["failure"]),
        category_success=bool(doc["category_success"]),
        success_probability=None if doc["success_probability"] is None else float(doc["success_probability"]),
        instance_ids=tuple(str(u) for u in doc["instance_ids"]),
        confidence=float(doc["confidence"]),
        explanation=str(doc["explanation"]),
    )


def _embodied_from(doc: dict[str, Any] | None) -> EmbodiedResult | None:
    if doc is None:
        return None
    return EmbodiedResult(
        stop=_point(doc["stop"]),
        success=bool(doc["success"]),
        stop_distance=None if doc["stop_distance"] is None else float(doc["stop_distance"]),
        failure=str(doc["failure"]),
        category_success=bool(doc["category_success"]),
        spl=float(doc["spl"]),
        path_length=float(doc["path_length"]),
        shortest_path=None if doc["shortest_path"] is None else float(doc["shortest_path"]),
        steps=int(doc["steps"]),
        collisions=int(doc["collisions"]),
        error=str(doc["error"]),
        answer_point=_point(doc["answer_point"]),  # type: ignore[arg-type]
        trajectory=tuple(_point(p) for p in doc["trajectory"]),  # type: ignore[misc]
        retargets=int(doc["retargets"]),
        message=str(doc["message"]),
    )


def record_from_dict(doc: dict[str, Any]) -> ResultRecord:
    """A record from its JSON document; ResultsError naming the field on a bad one."""
    if not isinstance(doc, dict) or doc.get("format_version") != FORMAT_VERSION:
        version = doc.get("format_version") if isinstance(doc, dict) else None
        raise ResultsError(f"result line has format_version {version!r}; this reader understands {FORMAT_VERSION}")
    try:
        return ResultRecord(
            format_version=FORMAT_VERSION,
            episode_id=str(doc["episode_id"]),
            group_id=str(doc["group_id"]),
            split=str(doc["split"]),
            scene=str(doc["scene"]),
            relation=str(doc["relation"]),
            category=str(doc["category"]),
            instances=int(doc["instances"]),
            phrase=str(doc["phrase"]),
            answer_instance=str(doc["answer_instance"]),
            answer_point=_point(doc["answer_point"]),  # type: ignore[arg-type]
            answer_region=tuple(float(v) for v in doc["answer_region"]),  # type: ignore[arg-type]
            start=_point(doc["start"]),  # type: ignore[arg-type]
            arm=str(doc["arm"]),
            seed=int(doc["seed"]),
            static=_static_from(doc["static"]),
            embodied=_embodied_from(doc["embodied"]),
            diagnostics=doc["diagnostics"],
            condition=_condition_from(doc.get("condition", BASELINE)),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ResultsError(
            f"result line of episode {doc.get('episode_id', '?')!r}: bad or missing field: {err}"
        ) from err


def _condition_from(value: Any) -> str:
    if value not in CONDITION_ORDER:
        raise ValueError(f"condition {value!r} is not one of {', '.join(CONDITION_ORDER)}")
    return str(value)


def _instance_from(doc: dict[str, Any]) -> SketchInstance:
    return SketchInstance(
        str(doc["uid"]),
        str(doc["label"]),
        _point(doc["point"]),  # type: ignore[arg-type]
        tuple(float(v) for v in doc["footprint"]),  # type: ignore[arg-type]
        bool(doc["moving"]),
    )


def sketch_from_dict(doc: dict[str, Any]) -> EpisodeSketch:
    """A sketch from its JSON document; ResultsError on a bad one."""
    try:
        return EpisodeSketch(
            format_version=int(doc["format_version"]),
            group_id=str(doc["group_id"]),
            scene=str(doc["scene"]),
            map1=tuple(_instance_from(d) for d in doc["map1"]),
            map2=tuple(_instance_from(d) for d in doc["map2"]),
            pairs=tuple(
                SketchPair(str(d["uid1"]), str(d["uid2"]), int(d["stage"]), float(d["displacement"]))
                for d in doc["pairs"]
            ),
            removed=tuple(str(u) for u in doc["removed"]),
            appeared=tuple(str(u) for u in doc["appeared"]),
            truth1=tuple(_instance_from(d) for d in doc["truth1"]),
            truth2=tuple(_instance_from(d) for d in doc["truth2"]),
            reachable=tuple(_point(p) for p in doc["reachable"]),  # type: ignore[misc]
            grid_size=float(doc["grid_size"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ResultsError(f"sketch line of group {doc.get('group_id', '?')!r}: bad or missing field: {err}") from err


# ---- files -----------------------------------------------------------------------------------------


_CHECKSUM_TAIL = re.compile(rb',"' + CHECKSUM.encode() + rb'":"([0-9a-f]{64})"\}$')

Item = TypeVar("Item")


@dataclasses.dataclass(frozen=True)
class DamagedLine:
    """A line of a results or sketches file that was not used: the file, its 1-based line number, why."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path} line {self.line}: {self.reason}"


def _verified(line: bytes) -> dict[str, Any]:
    """The JSON document of one line whose checksum matches; ResultsError saying why not."""
    if not line.strip():
        raise ResultsError("blank line")
    match = _CHECKSUM_TAIL.search(line)
    if match is None:
        raise ResultsError(_unchecked(line))
    body = line[: match.start()] + b"}"
    if hashlib.sha256(body).hexdigest() != match.group(1).decode():
        raise ResultsError("checksum mismatch: the line was changed after it was written")
    try:
        document = json.loads(body)
    except ValueError as err:
        raise ResultsError(f"not valid JSON ({err})") from None
    if not isinstance(document, dict):
        raise ResultsError("not a JSON object")
    return document


def _unchecked(line: bytes) -> str:
    """Why a line without a checksum is damaged (not JSON, an older format, or an edit)."""
    try:
        document = json.loads(line)
    except ValueError as err:
        return f"not valid JSON ({err})"
    version = document.get("format_version") if isinstance(document, dict) else None
    if version is not None and version != FORMAT_VERSION:
        return (
            f"result format {version!r} without a checksum (written by an older OVMAN); this reader understands "
            f"format {FORMAT_VERSION}: run the benchmark again into a new run directory"
        )
    return f"no {CHECKSUM} checksum (edited, or not written by `ovman benchmark`)"


def read_checked_lines(
    path: Path, parse: Callable[[dict[str, Any]], Item], *, partial: bool = False
) -> tuple[list[Item], list[DamagedLine]]:
    """The items of a JSON-lines file written with :func:`to_json_line`, in file order, and its
    damaged lines (missing file: neither).

    A line is damaged when its checksum is missing or does not match, when it is blank or not a
    JSON object, or when ``parse`` raises ResultsError on it. A last line without its newline is
    never used: in a ``partial`` file (one an interrupted run was appending to) it is a torn append
    and dropped silently; in a final file it is damaged (truncated).
    """
    if not path.is_file():
        return [], []
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    items: list[Item] = []
    damaged: list[DamagedLine] = []
    for number, line in enumerate(lines, start=1):
        try:
            items.append(parse(_verified(line)))
        except ResultsError as err:
            damaged.append(DamagedLine(path, number, str(err)))
    if tail and not partial:
        damaged.append(DamagedLine(path, len(lines) + 1, "truncated: the last line has no newline"))
    return items, damaged


class ResultLines(list[ResultRecord]):
    """The intact records of a results file, in file order (a list), and ``damaged``: the lines skipped."""

    def __init__(self, records: Iterable[ResultRecord] = (), damaged: Iterable[DamagedLine] = ()) -> None:
        super().__init__(records)
        self.damaged = tuple(damaged)


class SketchLines(dict[str, EpisodeSketch]):
    """The intact sketches of a sketches file by group id (a dict), and ``damaged``: the lines skipped."""

    def __init__(self, sketches: Iterable[EpisodeSketch] = (), damaged: Iterable[DamagedLine] = ()) -> None:
        super().__init__((s.group_id, s) for s in sketches)
        self.damaged = tuple(damaged)


def read_results(run_dir: str | os.PathLike[str]) -> ResultLines:
    """The intact records of a finished run (``results.jsonl``), in file order, with its damaged
    lines (the caller says what it skipped). ResultsError when the file is missing (the run has not
    finished) or holds no intact line at all."""
    path = Path(run_dir) / RESULTS
    if not path.is_file():
        raise ResultsError(f"{path}: missing; the run has not finished (run `ovman benchmark` again to resume it)")
    records, damaged = read_checked_lines(path, record_from_dict)
    if damaged and not records:
        raise ResultsError(
            f"{path}: no intact result line ({len(damaged)} damaged; line {damaged[0].line}: {damaged[0].reason})"
        )
    return ResultLines(records, damaged)


def read_sketches(run_dir: str | os.PathLike[str]) -> SketchLines:
    """The intact sketches of a finished run by group id (none when the file is missing), with its damaged lines."""
    return SketchLines(*read_checked_lines(Path(run_dir) / SKETCHES, sketch_from_dict))


class LineAppender:
    """Appends JSON lines to a file, flushing and fsync'ing after each, so that a crash loses at
    most the line being written (which :func:`read_checked_lines` then drops)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._stream = open(path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115 - closed in close()

    def _repair(self) -> None:
        """Cut a torn last line left by an interrupted run, so appends start on a fresh line."""
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as stream:
                stream.truncate(cut)
                stream.flush()
                os.fsync(stream.fileno())

    def append(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._stream.write(line + "\n")
        self._stream.flush()
        os.fsync(self._stream.fileno())

    def close(self) -> None:
        self._stream.close()


def sort_key(
    record: ResultRecord, episode_order: dict[str, int], arm_order: Sequence[str]
) -> tuple[int, int, int, int]:
    """The fixed order of ``results.jsonl``: condition order, dataset order, arm order, then seed."""
    return (
        CONDITION_ORDER.index(record.condition),
        episode_order[record.episode_id],
        list(arm_order).index(record.arm),
        record.seed,
    )


def complete_episodes(records: Iterable[ResultRecord]) -> tuple[list[ResultRecord], list[str]]:
    """The records of the episodes that have one for every (arm, seed, condition) present, and the
    ids of the other episodes (in file order). Tables pair the arms episode by episode, so an
    episode that lost a record (to a damaged line) is left out of them whole."""
    records = list(records)
    keys = {(r.arm, r.seed, r.condition) for r in records}
    held: dict[str, set[tuple[str, int, str]]] = {}
    for r in records:
        held.setdefault(r.episode_id, set()).add((r.arm, r.seed, r.condition))
    incomplete = [episode for episode, present in held.items() if present != keys]
    left_out = set(incomplete)
    return [r for r in records if r.episode_id not in left_out], incomplete


def baseline_records(records: Iterable[ResultRecord]) -> list[ResultRecord]:
    """The records of the reference condition, for every table but the stress comparison: those of
    the baseline, or, in a run without any (a dataset recorded under one condition), those of the
    first condition present (in :data:`CONDITION_ORDER`)."""
    records = list(records)
    present = {r.condition for r in records}
    if not present or BASELINE in present:
        return [r for r in records if r.condition == BASELINE]
    first = next(c for c in CONDITION_ORDER if c in present)
    return [r for r in records if r.condition == first]


__all__ = [
    "ARM_ORDER",
    "BASELINE",
    "CHECKSUM",
    "CONDITION_ORDER",
    "EMBODIED_ERROR",
    "EXTERNAL_ARM",
    "FINISHED",
    "FORMAT_VERSION",
    "LOCK",
    "MULTI_CHANGE_PART",
    "PARTIAL_RESULTS",
    "PARTIAL_SKETCHES",
    "RESULTS",
    "RUN_FILE",
    "SIM_PERCEPTION_ARM",
    "SKETCHES",
    "TIMINGS",
    "DamagedLine",
    "EmbodiedResult",
    "EpisodeSketch",
    "LineAppender",
    "ResultLines",
    "ResultRecord",
    "ResultsError",
    "SketchInstance",
    "SketchLines",
    "SketchPair",
    "StaticResult",
    "baseline_records",
    "complete_episodes",
    "read_checked_lines",
    "read_results",
    "read_sketches",
    "record_from_dict",
    "sketch_from_dict",
    "to_json_line",
]
