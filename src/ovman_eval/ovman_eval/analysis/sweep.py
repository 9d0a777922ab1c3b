"""Robustness of the static memory margin to the admissibility settings (the paper's §III-C check).

On a finished run, every episode is re-checked under each setting of a grid (drift tolerance, τ,
Δmin, R_sep, filters) in the generator's order, and the margin (two-visit static success minus the
single-visit arm's expected success) is computed on the episodes each admits. It re-filters only
(:data:`LIMITATION`) and leaves the records as they are. Frames: AI2-THOR world, metres; floor (x, z).

Why one module: re-deriving admissibility needs the recorded truth reader, the drop rules and the
margin over the grid together, and none of them is used elsewhere.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ovman_core.boxes import Vec2
from ovman_core.config import SweepParams, TaskConfig
from ovman_core.files import atomic_write_text
from ovman_core.world_state import ObjectState, WorldState
from ovman_eval.analysis.stats import poisson_binomial_sf
from ovman_eval.analysis.table import STATIC, Table, TableError, fmt_num
from ovman_eval.analysis.tables import Outcomes
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend
from ovman_eval.runs.results import ResultRecord
from ovman_eval.task.admissibility import separation_violations
from ovman_eval.task.answers import NoAnswerError, compute_answer
from ovman_eval.task.episodes import EpisodeRecord
from ovman_sim.recording import RecordingError, read_visit

FORMAT_VERSION = 1
"""Version of the layout of ``sweep.json``."""

SWEEP_FILE = "sweep.json"
TWO_VISIT = "two_visit"
SINGLE_VISIT = "single_visit"

ANTI_SHORTCUT = "anti_shortcut"
DRIFT = "drift"
FILTERS: tuple[str, ...] = (ANTI_SHORTCUT, DRIFT)
"""The filters a setting can switch off. The unique-answer rule (τ, Δmin) always applies: without
it an episode has no answer. The oracle certification is not among them: every episode of a
dataset passed it, and switching it off can only re-admit rejected candidates, which are not kept."""

NO_UNIQUE_ANSWER = "no_unique_answer"
ANSWER_CHANGED = "answer_changed"
"""Drop reasons besides the anti-shortcut codes of :mod:`ovman_eval.task.admissibility` and :data:`DRIFT`:
the relation selects no instance or several, or another instance than the one the run scored."""

# τ and Δmin can drop episodes in both directions: a smaller Δmin or a larger τ can make a second
# instance qualify, so that the relation no longer selects one.
LIMITATION = (
    "Re-filtering only: generation keeps no rejected candidates (only their counts per reason), so a "
    "setting looser than the dataset's own (a larger drift tolerance, a smaller R_sep, a filter switched "
    "off) admits no episode the generator rejected; each margin is over the generated episodes the "
    "setting keeps."
)


class SweepError(ValueError):
    """A grid, run or dataset the sweep cannot use; the message names the file or config key."""


# ---- settings ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SweepSetting:
    """One admissibility setting: thresholds in metres and the filters switched on (FILTERS order)."""

    drift_tolerance: float
    stable_tolerance: float
    min_displacement: float
    separation_radius: float
    filters: tuple[str, ...] = FILTERS

    def __post_init__(self) -> None:
        unknown = [f for f in self.filters if f not in FILTERS]
        if unknown:
            raise SweepError(f"unknown filter(s) {', '.join(unknown)}; expected some of {', '.join(FILTERS)}")
        if self.stable_tolerance >= self.min_displacement:
            raise SweepError(
                f"τ = {self.stable_tolerance} m must be below Δmin = {self.min_displacement} m "
                "(an instance cannot be both stable and moved)"
            )

    def applies(self, name: str) -> bool:
        return name in self.filters

    def task(self, base: TaskConfig) -> TaskConfig:
        """``base`` with this setting's thresholds."""
        return dataclasses.replace(
            base,
            drift_tolerance=self.drift_tolerance,
            stable_tolerance=self.stable_tolerance,
            min_displacement=self.min_displacement,
            separation_radius=self.separation_radius,
        )

    @property
    def label(self) -> str:
        """E.g. ``drift≤0.05 τ=0.10 Δmin=1.50 R_sep=2.00``, a switched-off filter shown as ``off``."""
        drift = f"drift≤{self.drift_tolerance:.2f}" if self.applies(DRIFT) else "drift off"
        sep = f"R_sep={self.separation_radius:.2f}" if self.applies(ANTI_SHORTCUT) else "anti-shortcut off"
        return f"{drift} τ={self.stable_tolerance:.2f} Δmin={self.min_displacement:.2f} {sep}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "drift_tolerance": self.drift_tolerance,
            "stable_tolerance": self.stable_tolerance,
            "min_displacement": self.min_displacement,
            "separation_radius": self.separation_radius,
            "filters": list(self.filters),
        }


def generation_setting(task: TaskConfig) -> SweepSetting:
    """The setting a dataset was generated under (its ``task`` constants, every filter on)."""
    return SweepSetting(task.drift_tolerance, task.stable_tolerance, task.min_displacement, task.separation_radius)


def settings_grid(params: SweepParams) -> list[SweepSetting]:
    """Every setting of ``benchmark_node.sweep``: the product of the value lists, each filter of
    ``toggled_filters`` both on and off (in that order). SweepError names the bad key."""
    axes = {
        "drift_tolerance": params.drift_tolerance,
        "stable_tolerance": params.stable_tolerance,
        "min_displacement": params.min_displacement,
        "separation_radius": params.separation_radius,
    }
    for key, values in axes.items():
        if not values:
            raise SweepError(f"config benchmark_node.sweep.{key}: needs at least one value")
        if len(set(values)) != len(values):
            raise SweepError(f"config benchmark_node.sweep.{key}: {values} lists a value twice")
        if any(not math.isfinite(v) or v <= 0.0 for v in values):
            raise SweepError(f"config benchmark_node.sweep.{key}: {values}: every value must be a positive length (m)")
    toggled = params.toggled_filters
    unknown = [f for f in toggled if f not in FILTERS]
    if unknown or len(set(toggled)) != len(toggled):
        raise SweepError(
            f"config benchmark_node.sweep.toggled_filters: {toggled}; "
            f"expected distinct names among {', '.join(FILTERS)}"
        )
    if max(params.stable_tolerance) >= min(params.min_displacement):
        raise SweepError(
            f"config benchmark_node.sweep: every stable_tolerance (τ, up to {max(params.stable_tolerance)} m) must be "
            f"below every min_displacement (Δmin, from {min(params.min_displacement)} m)"
        )
    switches = [(True, False) if f in toggled else (True,) for f in FILTERS]
    settings = []
    for drift, tau, dmin, sep, *on in itertools.product(*axes.values(), *switches):
        filters = tuple(f for f, flag in zip(FILTERS, on, strict=True) if flag)
        settings.append(SweepSetting(drift, tau, dmin, sep, filters))
    return settings


# ---- the recorded ground truth -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EpisodeTruth:
    """What re-deriving admissibility reads from an episode's recordings (AI2-THOR world frame).

    ``w1``: the objects at the first visit-1 frame; ``w2``: at the first visit-2 frame (where the
    generator computes the answers and the anti-shortcut rule); ``carried``: the mover's instance at
    every visit-2 frame (empty without a mover; the last one is the static gate's moving answer).
    """

    w1: WorldState
    w2: WorldState
    carried: tuple[ObjectState, ...] = ()


def _first_objects(path: Path) -> WorldState:
    """The ground truth of a recording's first frame (decodes only the first frame)."""
    frames = read_visit(path)
    try:
        frame = next(frames, None)
    finally:
        frames.close()
    if frame is None:
        raise RecordingError(f"{path}: the recording holds no frames")
    return frame.objects


def read_truth(dataset: str | os.PathLike[str], record: EpisodeRecord) -> EpisodeTruth:
    """The ground truth of ``record``'s recordings under ``dataset``; RecordingError for a missing
    or damaged recording, SweepError when a mover episode's recording lacks the carried instance."""
    dataset = Path(dataset)
    w1 = _first_objects(dataset / record.recordings.visit1)
    moving = record.moving_id
    if moving is None:
        return EpisodeTruth(w1, _first_objects(dataset / record.recordings.visit2))
    states = [frame.objects for frame in read_visit(dataset / record.recordings.visit2)]
    carried = tuple(state[moving] for state in states if moving in state)
    if not states or not carried or moving not in states[0]:
        raise SweepError(
            f"{dataset / record.recordings.visit2}: episode {record.episode_id}: the carried instance {moving} "
            "is missing from the visit-2 recording"
        )
    return EpisodeTruth(w1, states[0], carried)


def _truth_reader(dataset: str) -> Callable[[EpisodeRecord], tuple[str, EpisodeTruth]]:
    """A worker's reader of one recorded group's truth (:meth:`ovman_eval.runs.backend.Backend.run`)."""
    return lambda record: (record.group_id, read_truth(dataset, record))


def read_truths(
    dataset: str | os.PathLike[str],
    records: Sequence[EpisodeRecord],
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    backend: Backend = LOCAL_BACKEND,
) -> dict[str, EpisodeTruth]:
    """:func:`read_truth` of every record, by episode id; each recorded group is read once, a unit
    of ``backend`` with ``workers`` (the same truths wherever they are read). ``progress(done,
    total)`` is called after each group."""
    firsts: dict[str, EpisodeRecord] = {}
    for record in records:
        firsts.setdefault(record.group_id, record)
    first = list(firsts.values())
    by_group: dict[str, EpisodeTruth] = {}

    def commit(done: tuple[str, EpisodeTruth]) -> None:
        by_group[done[0]] = done[1]
        if progress is not None:
            progress(len(by_group), len(first))

    if backend.in_process(workers, len(first)):
        read = _truth_reader(str(dataset))
        for record in first:
            commit(read(record))
    else:
        backend.run(first, workers, _truth_reader, (str(dataset),), commit, label=lambda r: r.group_id)
    return {record.episode_id: by_group[record.group_id] for record in records}


# ---- re-deriving admissibility -------------------------------------------------------------------


def recorded_drift(record: EpisodeRecord) -> float:
    """The largest drift the generator measured for the episode (m, Algorithm 1 lines 6-7)."""
    d = record.drift
    return max(d.visit1, d.visit2, d.reread, d.reset)


def _placed_at(template: ObjectState, point: Vec2) -> ObjectState:
    """``template`` translated on the floor so that its floor point is ``point``."""
    delta = (point[0] - template.floor[0], 0.0, point[1] - template.floor[1])
    position = (template.position[0] + delta[0], template.position[1], template.position[2] + delta[2])
    return dataclasses.replace(template, position=position, box=template.box.translated(delta))


def carried_states(record: EpisodeRecord, truth: EpisodeTruth) -> list[ObjectState]:
    """Every distinct state of the mover's instance the generator checked: each visit-2 frame,
    then each position of the stored oracle runs (Algorithm 1 lines 8-9)."""
    if not truth.carried:
        return []
    template = truth.carried[-1]
    states = list(truth.carried)
    for run in record.certification.runs:
        states.extend(_placed_at(template, point) for point in run.target_path)
    return list({s.box: s for s in states}.values())


def drop_reason(record: EpisodeRecord, truth: EpisodeTruth, setting: SweepSetting, base: TaskConfig) -> str | None:
    """Why ``setting`` does not admit the episode (None when it does), checked in the generator's
    order: the unique answer under τ and Δmin (:data:`NO_UNIQUE_ANSWER`, :data:`ANSWER_CHANGED`),
    the anti-shortcut rule (its reason codes), the drift (:data:`DRIFT`). ``base`` supplies the
    other task constants (the dataset's)."""
    return _answer_reason(record, truth, setting, base) or _drift_reason(record, setting)


def _answer_reason(record: EpisodeRecord, truth: EpisodeTruth, setting: SweepSetting, base: TaskConfig) -> str | None:
    """The unique-answer and anti-shortcut part of :func:`drop_reason` (depends on τ, Δmin, R_sep
    and whether the anti-shortcut filter is on)."""
    task = setting.task(base)
    moving = record.moving_id
    at_end = truth.w2.with_object(truth.carried[-1]) if truth.carried else truth.w2
    try:
        answer = compute_answer(truth.w1, truth.w2, record.query.category, record.relation, task, moving, at_end)
    except NoAnswerError:
        return NO_UNIQUE_ANSWER
    if answer.instance_id != record.answer.instance_id:
        return ANSWER_CHANGED
    if setting.applies(ANTI_SHORTCUT):
        problems = separation_violations(
            truth.w1, truth.w2, answer, task, record.moving_id, carried_states(record, truth)
        )
        if problems:
            return problems[0].split(":", 1)[0]
    return None


def _drift_reason(record: EpisodeRecord, setting: SweepSetting) -> str | None:
    if setting.applies(DRIFT) and recorded_drift(record) > setting.drift_tolerance:
        return DRIFT
    return None


# ---- the margin over the grid --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SettingResult:
    """The static memory margin on the episodes one setting admits.

    ``two_visit``: its static success rate; ``single_visit``: the mean of the single-visit arm's
    per-episode success probabilities; ``margin``: their difference; ``p_value``: the exact
    Poisson–binomial ``P(X ≥ k)`` of the single-visit arm at the two-visit count k (all None when
    the setting admits nothing); ``dropped``: reason → episodes dropped; ``dropped_episodes``: their
    ids, in dataset order.
    """

    setting: SweepSetting
    admitted: int
    two_visit: float | None
    single_visit: float | None
    margin: float | None
    p_value: float | None
    dropped: dict[str, int]
    dropped_episodes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "setting": self.setting.to_dict(),
            "label": self.setting.label,
            "admitted": self.admitted,
            "two_visit": self.two_visit,
            "single_visit": self.single_visit,
            "margin": self.margin,
            "p_value": self.p_value,
            "dropped": dict(sorted(self.dropped.items())),
            "dropped_episodes": list(self.dropped_episodes),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SettingResult:
        s = doc["setting"]
        setting = SweepSetting(
            float(s["drift_tolerance"]),
            float(s["stable_tolerance"]),
            float(s["min_displacement"]),
            float(s["separation_radius"]),
            tuple(str(f) for f in s["filters"]),
        )

        def number(key: str) -> float | None:
            return None if doc[key] is None else float(doc[key])

        return cls(
            setting,
            int(doc["admitted"]),
            number("two_visit"),
            number("single_visit"),
            number("margin"),
            number("p_value"),
            {str(k): int(v) for k, v in doc["dropped"].items()},
            tuple(str(e) for e in doc["dropped_episodes"]),
        )


def _sign(value: float) -> int:
    return (value > 0.0) - (value < 0.0)


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """The margins over a grid of settings: their range and median, whether the sign ever differs
    from the sign at the dataset's own setting, and the settings at the extremes.

    ``reference``: the result at the dataset's own setting (computed even when the grid lacks it;
    ``reference_in_grid`` says whether it is one of ``rows``); ``episodes``: the dataset's count;
    ``seed``: the run seed whose records were used.
    """

    rows: tuple[SettingResult, ...]
    reference: SettingResult
    reference_in_grid: bool
    episodes: int
    seed: int

    @property
    def margins(self) -> list[float]:
        """The margins of the settings that admit at least one episode."""
        return [r.margin for r in self.rows if r.margin is not None]

    @property
    def empty(self) -> list[SettingResult]:
        return [r for r in self.rows if r.margin is None]

    @property
    def reference_sign(self) -> int:
        """The sign at the dataset's own setting (+1, 0, -1); the median's when that admits nothing."""
        if self.reference.margin is not None:
            return _sign(self.reference.margin)
        return _sign(statistics.median(self.margins)) if self.margins else 0

    @property
    def sign_changed(self) -> list[SettingResult]:
        """The settings whose margin has another sign than :attr:`reference_sign` (zero counts as a sign)."""
        return [r for r in self.rows if r.margin is not None and _sign(r.margin) != self.reference_sign]

    @property
    def distinct_sets(self) -> int:
        """How many different sets of episodes the settings admit."""
        return len({r.dropped_episodes for r in self.rows})

    @property
    def scored(self) -> list[SettingResult]:
        """The settings that admit at least one episode."""
        return [r for r in self.rows if r.margin is not None]

    @property
    def lowest(self) -> SettingResult | None:
        """The setting with the smallest margin (the first in grid order on a tie)."""
        return min(self.scored, key=lambda r: r.margin or 0.0, default=None)

    @property
    def highest(self) -> SettingResult | None:
        """The setting with the largest margin (the first in grid order on a tie)."""
        return max(self.scored, key=lambda r: r.margin or 0.0, default=None)

    def summary(self) -> dict[str, Any]:
        margins = self.margins
        low, high = self.lowest, self.highest
        return {
            "settings": len(self.rows),
            "scored_settings": len(margins),
            "empty_settings": [r.setting.label for r in self.empty],
            "distinct_admitted_sets": self.distinct_sets,
            "min": min(margins) if margins else None,
            "max": max(margins) if margins else None,
            "median": statistics.median(margins) if margins else None,
            "at_generation_setting": self.reference.margin,
            "generation_setting_admits": self.reference.admitted,
            "reference_sign": self.reference_sign,
            "sign_changes": bool(self.sign_changed),
            "sign_changed_settings": [r.setting.label for r in self.sign_changed],
            "lowest": None if low is None else low.to_dict(),
            "highest": None if high is None else high.to_dict(),
            "max_p_value": max((r.p_value for r in self.rows if r.p_value is not None), default=None),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "episodes": self.episodes,
            "seed": self.seed,
            "generation_setting": self.reference.to_dict(),
            "generation_setting_in_grid": self.reference_in_grid,
            "limitation": LIMITATION,
            "summary": self.summary(),
            "rows": [r.to_dict() for r in self.rows],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SweepResult:
        """The result of its :meth:`to_dict` document (``sweep.json``)."""
        rows = tuple(SettingResult.from_dict(r) for r in doc["rows"])
        reference = SettingResult.from_dict(doc["generation_setting"])
        if doc["generation_setting_in_grid"]:
            reference = next(r for r in rows if r.setting == reference.setting)
        return cls(rows, reference, bool(doc["generation_setting_in_grid"]), int(doc["episodes"]), int(doc["seed"]))


def write_sweep(run_dir: str | os.PathLike[str], result: SweepResult, dataset: str | os.PathLike[str]) -> Path:
    """Write ``sweep.json`` (the result, the run and the dataset it came from) into the run
    directory, atomically; returns its path."""
    document = {"run": str(run_dir), "dataset": str(dataset), **result.to_dict()}
    path = Path(run_dir) / SWEEP_FILE
    atomic_write_text(path, json.dumps(document, sort_keys=True, indent=1, allow_nan=False) + "\n")
    return path


def read_sweep(run_dir: str | os.PathLike[str]) -> SweepResult | None:
    """The sweep ``ovman sweep`` wrote into a run directory (None when it has not run there);
    SweepError for an unreadable or foreign file."""
    path = Path(run_dir) / SWEEP_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SweepError(f"{path}: unreadable ({err}); run `ovman sweep` again") from err
    if not isinstance(document, dict) or document.get("format_version") != FORMAT_VERSION:
        raise SweepError(f"{path}: not a sweep file of format_version {FORMAT_VERSION}; run `ovman sweep` again")
    try:
        return SweepResult.from_dict(document)
    except (KeyError, TypeError, ValueError, StopIteration) as err:
        raise SweepError(
            f"{path}: bad or missing field ({type(err).__name__}: {err}); run `ovman sweep` again"
        ) from err


def _evaluate(
    setting: SweepSetting,
    records: Sequence[EpisodeRecord],
    truths: dict[str, EpisodeTruth],
    base: TaskConfig,
    outcomes: Outcomes,
    cache: dict[tuple[Any, ...], str | None],
) -> SettingResult:
    """One setting; ``cache`` keeps the answer reasons of the episodes by the parameters they
    depend on, shared across the settings of a grid (which differ in a few of them)."""
    kept: list[str] = []
    left_out: list[str] = []
    dropped: Counter[str] = Counter()
    separation = setting.separation_radius if setting.applies(ANTI_SHORTCUT) else None
    for record in records:
        key = (record.episode_id, setting.stable_tolerance, setting.min_displacement, separation)
        if key not in cache:
            cache[key] = _answer_reason(record, truths[record.episode_id], setting, base)
        reason = cache[key] or _drift_reason(record, setting)
        if reason is None:
            kept.append(record.episode_id)
        else:
            dropped[reason] += 1
            left_out.append(record.episode_id)
    if not kept:
        return SettingResult(setting, 0, None, None, None, None, dict(dropped), tuple(left_out))
    successes = outcomes.success(TWO_VISIT, STATIC, kept)
    probabilities = outcomes.probabilities(SINGLE_VISIT, kept)
    assert probabilities is not None  # checked by sweep()
    two = sum(successes) / len(kept)
    single = math.fsum(probabilities) / len(kept)
    p = poisson_binomial_sf(sum(successes), probabilities)
    return SettingResult(setting, len(kept), two, single, two - single, p, dict(dropped), tuple(left_out))


def sweep(
    records: Sequence[EpisodeRecord],
    truths: dict[str, EpisodeTruth],
    results: Sequence[ResultRecord],
    settings: Sequence[SweepSetting],
    base: TaskConfig,
    seed: int | None = None,
) -> SweepResult:
    """The static memory margin under each of ``settings``, on the episodes each admits
    (:func:`drop_reason`), with the exact Poisson–binomial tail of the two-visit count (TASK.md §7).

    W1/W2 positions of the queried category, which τ, Δmin and R_sep test, are not in the records,
    so they come from the recorded ground truth (``truths``).

    ``records``: the dataset's episodes; ``truths``: their ground truth (:func:`read_truths`);
    ``results``: the run's result records (two_visit and single_visit on every episode; the run
    seed ``seed``, default the smallest); ``base``: the task constants the dataset was generated with.
    """
    if not settings:
        raise SweepError("the grid holds no settings")
    if not records:
        raise SweepError("the dataset holds no episodes")
    try:
        outcomes = Outcomes(results, seed)
    except TableError as err:
        raise SweepError(f"the run's results cannot be paired: {err}") from err
    for arm in (TWO_VISIT, SINGLE_VISIT):
        if arm not in outcomes.by_arm:
            raise SweepError(f"the run has no {arm} results; run the benchmark with --arms two_visit,single_visit")
    ids = [r.episode_id for r in records]
    missing = sorted(set(ids) - set(outcomes.episodes))
    if missing:
        raise SweepError(f"the run has no results for {len(missing)} episode(s) of the dataset, e.g. {missing[0]}")
    lacking = sorted(set(ids) - set(truths))
    if lacking:
        raise SweepError(f"no recorded ground truth for {len(lacking)} episode(s), e.g. {lacking[0]}")
    if outcomes.probabilities(SINGLE_VISIT, ids) is None:
        raise SweepError("the run's single_visit results lack their per-episode success probabilities")
    cache: dict[tuple[Any, ...], str | None] = {}
    rows = tuple(_evaluate(s, records, truths, base, outcomes, cache) for s in settings)
    own = generation_setting(base)
    reference = next((r for r in rows if r.setting == own), None)
    in_grid = reference is not None
    if reference is None:
        reference = _evaluate(own, records, truths, base, outcomes, cache)
    return SweepResult(rows, reference, in_grid, len(records), outcomes.seed)


# ---- presentation --------------------------------------------------------------------------------


def _range(rows: Sequence[SettingResult]) -> tuple[str, str]:
    admitted = [r.admitted for r in rows]
    margins = [r.margin for r in rows if r.margin is not None]
    n = f"{min(admitted)}–{max(admitted)}" if min(admitted) != max(admitted) else str(admitted[0])
    if not margins:
        return n, "–"
    return n, f"{fmt_num(min(margins))} – {fmt_num(max(margins))}"


def sweep_table(result: SweepResult) -> Table:
    """The margin range over all settings and per value of each setting (a threshold's rows count
    only the settings where its filter is on), with the sign result and the limitation as notes."""
    rows: list[tuple[str, ...]] = [("all settings", "", str(len(result.rows)), *_range(result.rows))]
    axes: list[tuple[str, Callable[[SweepSetting], float], str | None]] = [
        ("drift tolerance (m)", lambda s: s.drift_tolerance, DRIFT),
        ("τ (m)", lambda s: s.stable_tolerance, None),
        ("Δmin (m)", lambda s: s.min_displacement, None),
        ("R_sep (m)", lambda s: s.separation_radius, ANTI_SHORTCUT),
    ]
    for label, value_of, gate in axes:
        active = [r for r in result.rows if gate is None or r.setting.applies(gate)]
        for value in sorted({value_of(r.setting) for r in active}):
            chosen = [r for r in active if value_of(r.setting) == value]
            rows.append((label, f"{value:g}", str(len(chosen)), *_range(chosen)))
    for name in FILTERS:
        for on in (True, False):
            chosen = [r for r in result.rows if r.setting.applies(name) == on]
            if chosen:
                rows.append((f"{name} filter", "on" if on else "off", str(len(chosen)), *_range(chosen)))
    notes = [summary_line(result), LIMITATION]
    own = result.reference
    if own.admitted < result.episodes:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(own.dropped.items()))
        notes.append(
            f"The dataset's own setting drops {result.episodes - own.admitted} of its episodes ({reasons}): the "
            "re-derivation disagrees with generation there (a dataset generated by other code or configuration?)."
        )
    if result.empty:
        notes.append(f"{len(result.empty)} setting(s) admit no episode and are left out of the margin ranges.")
    return Table(
        key="sweep",
        title="Static memory margin over the admissibility settings (two-visit minus single-visit expected)",
        header=("setting", "value", "settings", "episodes admitted", "margin (min – max)"),
        rows=tuple(rows),
        notes=tuple(notes),
    )


def summary_line(result: SweepResult) -> str:
    """One sentence: the range, the median, the own setting's margin and the sign result."""
    summary = result.summary()
    if summary["min"] is None:
        return f"No setting of the {len(result.rows)} admits an episode."
    own = result.reference
    own_text = (
        f"{fmt_num(own.margin)} on {own.admitted}/{result.episodes} episodes"
        if own.margin is not None
        else f"undefined (it admits none of the {result.episodes} episodes)"
    )
    word = {1: "positive", 0: "zero", -1: "negative"}[result.reference_sign]
    changed = result.sign_changed
    sign = (
        f"the sign never changes (always {word})"
        if not changed
        else f"the sign differs from the dataset's own ({word}) under {len(changed)} setting(s), "
        f"e.g. {changed[0].setting.label} ({fmt_num(changed[0].margin)})"
    )
    return (
        f"Over {len(result.rows)} settings ({result.distinct_sets} distinct admitted sets; run seed {result.seed}) "
        f"the static memory margin lies in {fmt_num(summary['min'])}–{fmt_num(summary['max'])} "
        f"(median {fmt_num(summary['median'])}); at the dataset's own setting it is {own_text}; {sign}."
    )


__all__ = [
    "ANSWER_CHANGED",
    "ANTI_SHORTCUT",
    "DRIFT",
    "FILTERS",
    "LIMITATION",
    "NO_UNIQUE_ANSWER",
    "SWEEP_FILE",
    "EpisodeTruth",
    "SettingResult",
    "SweepError",
    "SweepResult",
    "SweepSetting",
    "drop_reason",
    "generation_setting",
    "read_sweep",
    "read_truth",
    "read_truths",
    "recorded_drift",
    "settings_grid",
    "summary_line",
    "sweep",
    "sweep_table",
    "write_sweep",
]
