"""``ovman validate DIR``: check an episode dataset and report every problem found.

Each problem is a :class:`Problem` naming the episode (or ``(dataset)``) and the field. Checked: the
manifest (finished, loadable, counts and checksum of ``episodes.jsonl``), every record (schema,
consistency, unique ids), each episode's certification and start pose, and, from the recordings,
both visits readable to the last frame, with the answer recomputed from the recorded ground truth
(TASK.md §1), the instance ids, the changes and the anti-shortcut rule (§2) matching the record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

from ovman_core.boxes import Footprint, Vec2
from ovman_core.config import ConfigError, OvmanConfig, TaskConfig, load_config, stored_config
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.generation.dataset import (
    DATASET_KIND,
    EPISODES,
    MANIFEST,
    MANIFEST_VERSION,
    DatasetError,
    RecordedStates,
    read_episodes,
    read_manifest,
    recorded_states,
)
from ovman_eval.task.admissibility import admissibility_violations
from ovman_eval.task.answers import NoAnswerError, compute_answer
from ovman_eval.task.episodes import EpisodeFormatError, EpisodeRecord, episode_from_json
from ovman_sim.recording import RecordingError, read_visit_info

DATASET = "(dataset)"
MAX_PROBLEMS_SHOWN = 20
"""A refused dataset's error lists at most this many problems."""
TOLERANCE = 2e-6
"""(m) Stored values are rounded to 1e-6; recomputed ones must agree to this."""

_ID_PATTERN = re.compile(r'"episode_id"\s*:\s*"([^"]*)"')


@dataclasses.dataclass(frozen=True)
class Problem:
    """One problem: the episode id (or ``(dataset)``), the field, what is wrong."""

    episode: str
    field: str
    message: str

    def __str__(self) -> str:
        who = "dataset" if self.episode == DATASET else f"episode {self.episode}"
        return f"{who}: {self.field}: {self.message}"


class OlderConfigWarning(UserWarning):
    """A dataset's manifest predates keys of the configuration; their current values were used."""


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """What was checked and every problem found."""

    directory: Path
    episodes: int
    recordings: int
    problems: tuple[Problem, ...]
    notes: tuple[str, ...] = ()
    """What the reader should know that is not a problem (keys of the configuration the manifest
    predates, taken from the current configuration)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_dataset(
    directory: str | Path, config: OvmanConfig | None = None, *, full: bool = True
) -> ValidationReport:
    """Check the dataset in ``directory``, collecting every problem. ``config`` overrides the
    configuration stored in the manifest (used when that one cannot be loaded). ``full`` false:
    the cheap checks only (what the benchmark always runs): everything but reading the recordings'
    frames, i.e. the manifest, every episode line, the certification, the start poses against the
    scene's structure and the recordings' metadata (scene, visit, frame count)."""
    directory = Path(directory)
    problems: list[Problem] = []
    notes: list[str] = []

    def problem(episode: str, field: str, message: str) -> None:
        problems.append(Problem(episode, field, message))

    if not directory.is_dir():
        problem(DATASET, str(directory), "not a directory")
        return ValidationReport(directory, 0, 0, tuple(problems))
    manifest, config = _check_manifest(directory, config, problem, notes.append)
    task = config.task
    text = _read_episodes_text(directory, problem)
    records = _parse_lines(text, problem) if text is not None else []
    if manifest is not None and text is not None:
        _check_counts(manifest, text, records, problem)
    states: dict[tuple[str, str], RecordedStates | None] = {}
    for record in records:
        _check_certification(record, task, problem)
        key = (record.recordings.visit1, record.recordings.visit2)
        if key not in states:
            states[key] = _read_recordings(directory, record, problem, full)
        recorded = states[key]
        if recorded is not None:
            _check_against_recordings(record, recorded, task, problem)
    places = _StartPoses(config)
    for record in sorted(records, key=lambda r: r.scene.name):  # one scene generated at a time
        places.check(record, None, problem)
        recorded = states[(record.recordings.visit1, record.recordings.visit2)]
        if recorded is not None:
            places.check(record, recorded.visit2_end, problem)
    return ValidationReport(directory, len(records), len(states), tuple(problems), tuple(notes))


def checked_episodes(directory: str | Path, *, full: bool = False) -> list[EpisodeRecord]:
    """The episodes of a dataset the benchmark may score: :func:`validate_dataset` (cheap checks,
    or every check with ``full``) must find no problem, else DatasetError listing them."""
    report = validate_dataset(directory, full=full)
    if not report.ok:
        shown = [str(p) for p in report.problems[:MAX_PROBLEMS_SHOWN]]
        more = len(report.problems) - len(shown)
        raise DatasetError(
            f"{report.directory}: the dataset fails validation ({len(report.problems)} problem(s)); the benchmark "
            f"scores only valid datasets (`ovman validate {report.directory}` lists them):\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more else "")
        )
    for note in report.notes:
        warnings.warn(f"{report.directory}: {note}", OlderConfigWarning, stacklevel=2)
    return read_episodes(directory)


class _StartPoses:
    """Whether each episode's start pose can hold the agent: finite, its yaw a multiple of
    ``world.rotate_step_deg`` and its horizon within range (any world); in the embedded world also
    a cell of the scene's grid clear of walls (the scene's structure alone), and, given the
    evaluated world (``visit2_end`` of the recordings), clear of its objects. One problem at most
    per episode."""

    def __init__(self, config: OvmanConfig) -> None:
        self.config = config
        self._world: Any = None
        self._refused: set[str] = set()

    def check(self, record: EpisodeRecord, evaluated: WorldState | None, problem) -> None:
        if record.episode_id in self._refused:
            return
        message = self._problem(record, evaluated)
        if message:
            self._refused.add(record.episode_id)
            problem(record.episode_id, "start_pose", message)

    def _problem(self, record: EpisodeRecord, evaluated: WorldState | None) -> str:
        pose, world = record.start_pose, self.config.sim_node.world
        values = (pose.x, pose.z, pose.yaw_deg, pose.horizon_deg)
        if not all(math.isfinite(v) for v in values):
            return f"{values}: expected finite metres and degrees"
        turns = pose.yaw_deg / world.rotate_step_deg
        if abs(turns - round(turns)) > 1e-6:
            return f"yaw {pose.yaw_deg} is not a multiple of world.rotate_step_deg = {world.rotate_step_deg}"
        if not world.horizon_min_deg - 1e-6 <= pose.horizon_deg <= world.horizon_max_deg + 1e-6:
            return f"horizon {pose.horizon_deg} is outside [{world.horizon_min_deg}, {world.horizon_max_deg}]"
        if record.scene.world != "embedded":
            return ""  # AI2-THOR's grid needs its controller: checked when the episode runs
        if self._world is None:
            from ovman_sim.embedded import EmbeddedWorld

            self._world = EmbeddedWorld(self.config.sim_node)
        try:
            self._world.reset(record.scene.name, evaluated if evaluated is not None else WorldState.of([]), pose)
        except ValueError as err:
            against = "the evaluated world (the last visit-2 frame)" if evaluated is not None else "the scene's walls"
            return f"not placeable in {against}: {err}"
        return ""


# ---- manifest and file ---------------------------------------------------------------------------


def _check_manifest(
    directory: Path, override: OvmanConfig | None, problem, note
) -> tuple[dict[str, Any] | None, OvmanConfig]:
    try:
        manifest = read_manifest(directory)
    except DatasetError as err:
        problem(DATASET, MANIFEST, str(err))
        return None, override or load_config()
    if manifest.get("kind") != DATASET_KIND:
        problem(DATASET, f"{MANIFEST}: kind", f"{manifest.get('kind')!r}, expected {DATASET_KIND!r}")
    if manifest.get("format_version") != MANIFEST_VERSION:
        problem(
            DATASET,
            f"{MANIFEST}: format_version",
            f"{manifest.get('format_version')!r}; this validator understands {MANIFEST_VERSION}",
        )
    if manifest.get("complete") is not True:
        problem(DATASET, f"{MANIFEST}: complete", "generation did not finish (resume it with `ovman generate`)")
    if override is not None:
        return manifest, override
    defaults = load_config()
    try:
        config, added = stored_config(manifest.get("config"), f"{directory / MANIFEST} (config)", defaults)
    except ConfigError as err:
        problem(DATASET, f"{MANIFEST}: config", f"{err}; validating with the default configuration")
        return manifest, defaults
    if added:
        note(
            f"{MANIFEST}: config: {len(added)} key(s) added to the configuration after this dataset was generated "
            f"({', '.join(added[:5])}{', ...' if len(added) > 5 else ''}) taken from {defaults.source}"
        )
    return manifest, config


def _read_episodes_text(directory: Path, problem) -> str | None:
    path = directory / EPISODES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problem(DATASET, EPISODES, "missing")
        return None
    except (OSError, UnicodeDecodeError) as err:
        problem(DATASET, EPISODES, f"unreadable: {err}")
        return None
    if text and not text.endswith("\n"):
        last = text.splitlines()[-1]
        match = _ID_PATTERN.search(last)
        who = match.group(1) if match else f"? (line {len(text.splitlines())})"
        problem(who, f"{EPISODES} line {len(text.splitlines())}", "truncated: the last line has no newline")
    return text


def _parse_lines(text: str, problem) -> list[EpisodeRecord]:
    records: list[EpisodeRecord] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{EPISODES} line {number}"
        if not line.strip():
            problem(f"? (line {number})", where, "empty line")
            continue
        try:
            record = episode_from_json(line)
        except EpisodeFormatError as err:
            who = err.episode_id
            if who.startswith("?"):
                match = _ID_PATTERN.search(line)
                who = match.group(1) if match else f"? (line {number})"
            for field, message in err.problems:
                problem(who, f"{field} ({where})", message)
            continue
        if record.episode_id in seen:
            problem(record.episode_id, f"episode_id ({where})", f"duplicate of line {seen[record.episode_id]}")
            continue
        seen[record.episode_id] = number
        records.append(record)
    return records


def _check_counts(manifest: dict[str, Any], text: str, records: list[EpisodeRecord], problem) -> None:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if manifest.get("episodes_sha256") != digest:
        problem(
            DATASET, f"{MANIFEST}: episodes_sha256", f"does not match {EPISODES} (edited or damaged after generation)"
        )
    counts = manifest.get("counts")
    stored = counts.get("episodes") if isinstance(counts, dict) else None
    lines = len(text.splitlines())
    if stored != lines:
        problem(DATASET, f"{MANIFEST}: counts.episodes", f"{stored!r}, but {EPISODES} has {lines} lines")


# ---- per episode ---------------------------------------------------------------------------------


def _check_certification(record: EpisodeRecord, task: TaskConfig, problem) -> None:
    runs = record.certification.runs
    wanted = 1 + task.certification_runs
    if len(runs) != wanted:
        problem(
            record.episode_id,
            "certification.runs",
            f"{len(runs)} oracle run(s); expected 1 feasibility + {task.certification_runs} certification runs",
        )
    if abs(record.certification.success_radius - task.success_radius) > TOLERANCE:
        problem(
            record.episode_id,
            "certification.success_radius",
            f"{record.certification.success_radius} m, configured task.success_radius is {task.success_radius}",
        )
    if abs(record.drift.tolerance - task.drift_tolerance) > TOLERANCE:
        problem(
            record.episode_id,
            "drift.tolerance",
            f"{record.drift.tolerance} m, the configuration's task.drift_tolerance is {task.drift_tolerance}",
        )


def _read_recordings(directory: Path, record: EpisodeRecord, problem, full: bool) -> RecordedStates | None:
    ok = True
    for visit in (1, 2):
        field = f"recordings.visit{visit}"
        path = directory / getattr(record.recordings, f"visit{visit}")
        try:
            info, frames = read_visit_info(path)
        except RecordingError as err:
            problem(record.episode_id, field, str(err))
            ok = False
            continue
        if info.scene != record.scene.name or info.visit != visit:
            problem(
                record.episode_id,
                field,
                f"holds visit {info.visit} of {info.scene!r}, expected visit {visit} of {record.scene.name!r}",
            )
            ok = False
        expected = getattr(record.recordings, f"visit{visit}_frames")
        if frames != expected:
            problem(record.episode_id, f"{field}_frames", f"{expected}, but the recording holds {frames} frames")
    if not (ok and full):
        return None
    try:
        return recorded_states(directory, record)
    except RecordingError as err:
        field = "recordings.visit2" if str(record.recordings.visit2) in str(err) else "recordings.visit1"
        problem(record.episode_id, field, str(err))
        return None


def _check_against_recordings(record: EpisodeRecord, states: RecordedStates, task: TaskConfig, problem) -> None:
    who = record.episode_id
    query = record.query
    moving = record.moving_id
    try:
        answer = compute_answer(
            states.visit1, states.visit2_start, query.category, query.relation, task, moving, states.visit2_end
        )
    except NoAnswerError as err:
        problem(who, "answer", f"the recorded ground truth gives no unique answer: {err}")
        return
    stored = record.answer
    if answer.instance_id != stored.instance_id:
        problem(
            who,
            "answer.instance_id",
            f"{stored.instance_id!r}, the recorded ground truth selects {answer.instance_id!r}",
        )
    if not _close(answer.point, stored.point):
        problem(who, "answer.point", f"{_fmt(stored.point)}, the recorded ground truth gives {_fmt(answer.point)}")
    if not _close(_corners(answer.region), _corners(stored.region)):
        problem(
            who,
            "answer.region",
            f"{_fmt(_corners(stored.region))}, the recorded ground truth gives {_fmt(_corners(answer.region))}",
        )
    for visit, state in (("visit1", states.visit1), ("visit2", states.visit2_start)):
        ids = tuple(o.instance_id for o in state.of_category(query.category))
        if ids != getattr(record.instances, visit):
            problem(
                who, f"instances.{visit}", f"{list(getattr(record.instances, visit))}, the recording holds {list(ids)}"
            )
    for k, change in enumerate(record.changes):
        for name, state in (("before", states.visit1), ("after", states.visit2_start)):
            value = getattr(change, name)
            present = change.instance_id in state
            if (value is None) == present or (
                value is not None and not _close(value, state[change.instance_id].position)
            ):
                got = _fmt(state[change.instance_id].position) if present else "absent"
                problem(who, f"changes[{k}].{name}", f"{_fmt(value) if value else None}, the recording has {got}")
    carried = list(states.carried)
    if moving is not None:
        for run in record.certification.runs:
            carried.extend(_at(states.visit2_end[moving], p) for p in run.target_path)
    violations = _separation(record, states, answer, task, carried)
    for message in dict.fromkeys(violations):
        problem(who, "answer", f"anti-shortcut rule: {message}")


def _separation(
    record: EpisodeRecord, states: RecordedStates, answer, task: TaskConfig, carried: list[ObjectState]
) -> list[str]:
    moving = record.moving_id
    if moving is not None and answer.instance_id == moving:
        regions = list(dict.fromkeys(o.box.footprint for o in carried))
        return admissibility_violations(states.visit1, states.visit2_start, answer, task, regions)
    if moving is not None and states.visit2_start[moving].category == answer.category:
        out: list[str] = []
        for obj in {o.box: o for o in carried}.values():
            objects = dict(states.visit2_start.objects)
            objects[moving] = obj
            out.extend(admissibility_violations(states.visit1, WorldState(objects), answer, task))
        return out
    return admissibility_violations(states.visit1, states.visit2_start, answer, task)


def _at(obj: ObjectState, floor: Vec2) -> ObjectState:
    """``obj`` translated on the floor so that its centre is over ``floor``."""
    delta = (floor[0] - obj.position[0], 0.0, floor[1] - obj.position[2])
    box = obj.box.translated(delta)
    return dataclasses.replace(obj, position=box.center, box=box)


def _corners(region: Footprint) -> tuple[float, float, float, float]:
    return (region.x_min, region.z_min, region.x_max, region.z_max)


def _close(a, b) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=0.0, abs_tol=TOLERANCE) for x, y in zip(a, b, strict=True)
    )


def _fmt(values) -> str:
    return "(" + ", ".join(f"{v:.6f}" for v in values) + ")"


def report_text(report: ValidationReport) -> str:
    """The human-readable report: every note and every problem on its own line, then a summary line."""
    lines = [f"note: {n}" for n in report.notes] + [str(p) for p in report.problems]
    if report.ok:
        lines.append(f"{report.directory}: OK ({report.episodes} episodes, {report.recordings} recorded groups)")
    else:
        lines.append(f"{report.directory}: {len(report.problems)} problem(s) in {report.episodes} readable episodes")
    return "\n".join(lines)


def report_json(report: ValidationReport) -> str:
    return json.dumps(
        {
            "directory": str(report.directory),
            "ok": report.ok,
            "episodes": report.episodes,
            "problems": [dataclasses.asdict(p) for p in report.problems],
            "notes": list(report.notes),
        },
        indent=1,
    )


__all__ = [
    "OlderConfigWarning",
    "Problem",
    "ValidationReport",
    "checked_episodes",
    "report_json",
    "report_text",
    "validate_dataset",
]
