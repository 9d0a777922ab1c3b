"""The second seed's Remember metrics (EMRD: forgetting, serial position, working memory) of a mapper.

Read from a visit's map as the mapper built it frame by frame (``InstanceMap.history`` and
``InstanceMap.aliases``). The memory items are the mapper's working tracks, whatever they hold:
what the agent remembers, not what is there. Times are the recording's steps.
:func:`visit_memory` reduces one visit to a JSON-able summary (kept in every result's map
diagnostics); :func:`remember_table` pools a run's summaries per kind of map.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ovman_eval.analysis.table import Table, fmt_num
from ovman_eval.runs.results import ResultRecord
from ovman_mapping.instances import MapSnapshot

SERIAL_BINS = ("early", "middle", "late")


@dataclasses.dataclass(frozen=True)
class MemoryItem:
    """One working track of a visit: discovered and last sighted at these steps; ``ttf``: steps
    from the last sighting to its forgetting (``forgotten``) or to the end of the visit (censored)."""

    uid: str
    discovered: int
    last_seen: int
    ttf: int
    forgotten: bool


def memory_items(history: Sequence[MapSnapshot], aliases: Mapping[str, str]) -> list[MemoryItem]:
    """Every working track of a visit's history, in discovery order (first frame held, then uid).

    A track is forgotten when it leaves the working map (at that frame's step), or when it became
    no final instance of the map built after the last frame (at the last step); one merged into
    another final instance is remembered through it. One remembered to the end is censored there."""
    if not history:
        return []
    first: dict[str, int] = {}
    last_seen: dict[str, int] = {}
    gone: dict[str, int] = {}
    held: set[str] = set()
    for snapshot in history:
        now = set(snapshot.positions)
        for uid in held - now:
            gone.setdefault(uid, snapshot.step)
        for uid in now:
            first.setdefault(uid, snapshot.step)
        for uid in snapshot.seen & now:
            last_seen[uid] = snapshot.step
        held = now
    end = history[-1].step
    for uid in held:
        if uid not in aliases:
            gone.setdefault(uid, end)  # the built map holds nothing of it
    items = []
    for uid in sorted(first, key=lambda u: (first[u], _natural_uid(u))):
        seen = last_seen.get(uid, first[uid])
        until = gone.get(uid, end)
        items.append(MemoryItem(uid, first[uid], seen, max(until - seen, 0), uid in gone))
    return items


def _natural_uid(uid: str) -> tuple[str, int]:
    head = uid.rstrip("0123456789")
    tail = uid[len(head) :]
    return (head, int(tail) if tail else -1)


def visit_memory(history: Sequence[MapSnapshot], aliases: Mapping[str, str], load_bin: int) -> dict[str, Any]:
    """One visit's Remember summary (JSON-able): ``tracks`` and ``forgotten`` counts; ``durations``,
    rows [TTF, forgotten, censored] by TTF (steps); ``serial``, per bin of :data:`SERIAL_BINS` [tracks,
    forgotten, Σ TTF]; ``load``, rows [lowest load of the bin, transitions, forgetting events] of the
    non-empty bins of ``load_bin`` tracks (also kept, as ``load_bin``)."""
    if load_bin < 1:
        raise ValueError(f"memory_load_bin must be at least 1 track, got {load_bin}")
    items = memory_items(history, aliases)
    durations: dict[int, list[int]] = {}
    for item in items:
        row = durations.setdefault(item.ttf, [0, 0])
        row[0 if item.forgotten else 1] += 1
    serial = []
    for part in np.array_split(np.arange(len(items)), len(SERIAL_BINS)):
        chosen = [items[k] for k in part]
        serial.append([len(chosen), sum(i.forgotten for i in chosen), sum(i.ttf for i in chosen)])
    loads: dict[int, list[int]] = {}
    transitions = [(set(a.positions), set(b.positions)) for a, b in itertools.pairwise(history)]
    if history:
        held = set(history[-1].positions)
        transitions.append((held, {u for u in held if u in aliases}))  # the build after the last frame
    for before, after in transitions:
        row = loads.setdefault(len(before) // load_bin * load_bin, [0, 0])
        row[0] += 1
        row[1] += int(bool(before - after))
    return {
        "tracks": len(items),
        "forgotten": sum(i.forgotten for i in items),
        "durations": [[ttf, *durations[ttf]] for ttf in sorted(durations)],
        "serial": serial,
        "load": [[low, *loads[low]] for low in sorted(loads)],
        "load_bin": load_bin,
    }


@dataclasses.dataclass(frozen=True)
class ForgettingCurve:
    """Pooled forgetting: ``retention`` [(δ steps, Kaplan–Meier R(δ))] at each distinct TTF; the
    MLE memory strength Ŝ (steps; None without a forgetting event) and the R² of exp(−δ/Ŝ) against
    the retention (None when undefined)."""

    tracks: int
    events: int
    retention: tuple[tuple[int, float], ...]
    strength: float | None
    r2: float | None


def forgetting_curve(rows: Iterable[Sequence[int]]) -> ForgettingCurve:
    """The curve of pooled [TTF, forgotten, censored] rows.

    Ŝ = Σ TTF / d is the closed-form MLE of an exponential under right-censoring (d: the forgetting
    events); a negative R² means a flat line at its mean fits better than an exponential decay."""
    counts: dict[int, list[int]] = {}
    for ttf, forgotten, censored in rows:
        row = counts.setdefault(int(ttf), [0, 0])
        row[0] += int(forgotten)
        row[1] += int(censored)
    times = sorted(counts)
    total = sum(f + c for f, c in counts.values())
    events = sum(f for f, _ in counts.values())
    at_risk, survival, retention = total, 1.0, []
    for t in times:
        forgotten, censored = counts[t]
        if at_risk:
            survival *= 1.0 - forgotten / at_risk
        retention.append((t, survival))
        at_risk -= forgotten + censored
    if not events:
        return ForgettingCurve(total, 0, tuple(retention), None, None)
    strength = sum(t * (f + c) for t, (f, c) in counts.items()) / events
    observed = np.array([r for _, r in retention])
    fitted = np.exp(-np.array(times, dtype=float) / strength) if strength > 0 else np.zeros(len(times))
    spread = float(((observed - observed.mean()) ** 2).sum())
    r2 = 1.0 - float(((observed - fitted) ** 2).sum()) / spread if spread > 0 else None
    return ForgettingCurve(total, events, tuple(retention), strength, r2)


def serial_position(visits: Iterable[Mapping[str, Any]]) -> list[tuple[str, float | None, float | None]]:
    """Per bin of :data:`SERIAL_BINS`: the mean over visits of the visit's mean TTF (steps), and the
    pooled share forgotten."""
    means: list[list[float]] = [[] for _ in SERIAL_BINS]
    tracks = [0] * len(SERIAL_BINS)
    forgotten = [0] * len(SERIAL_BINS)
    for visit in visits:
        for k, (n, lost, ttf_sum) in enumerate(visit["serial"]):
            if n:
                means[k].append(ttf_sum / n)
                tracks[k] += n
                forgotten[k] += lost
    return [
        (name, float(np.mean(means[k])) if means[k] else None, forgotten[k] / tracks[k] if tracks[k] else None)
        for k, name in enumerate(SERIAL_BINS)
    ]


def working_memory(visits: Iterable[Mapping[str, Any]]) -> list[tuple[int, int, int]]:
    """Pooled [(lowest load of the bin, transitions, forgetting events)] in load order."""
    pooled: dict[int, list[int]] = {}
    for visit in visits:
        for low, transitions, events in visit["load"]:
            row = pooled.setdefault(int(low), [0, 0])
            row[0] += int(transitions)
            row[1] += int(events)
    return [(low, *pooled[low]) for low in sorted(pooled)]  # type: ignore[misc]


MAP_KINDS = (("two_visit", "the agent's maps"), ("sim_perception", "maps of the simulator's segments"))
"""Whose maps the Remember table reads: the agent's (every map arm but sim_perception reads them)
and sim_perception's, each through its arm's records."""


def _visits_of(records: Iterable[ResultRecord], arm: str) -> list[Mapping[str, Any]]:
    per_group: dict[str, Mapping[str, Any]] = {}
    for record in records:
        if record.arm == arm and record.diagnostics and "remember" in record.diagnostics:
            per_group.setdefault(record.group_id, record.diagnostics["remember"])
    return [group[visit] for group in per_group.values() for visit in ("visit1", "visit2")]


def remember_table(records: Sequence[ResultRecord]) -> Table | None:
    """The Remember metrics of each kind of map in :data:`MAP_KINDS` the records hold (each
    recorded group once, both visits pooled)."""
    rows = []
    loads_note = []
    for arm, name in MAP_KINDS:
        visits = _visits_of(records, arm)
        if not visits:
            continue
        curve = forgetting_curve(row for visit in visits for row in visit["durations"])
        serial = {bin_name: (ttf, share) for bin_name, ttf, share in serial_position(visits)}
        memory = working_memory(visits)
        widths = {int(visit["load_bin"]) for visit in visits}
        if len(widths) != 1:
            raise ValueError(f"the records' Remember summaries bin loads differently: {sorted(widths)} tracks")
        load_bin = widths.pop()
        r50 = next((t for t, r in curve.retention if r <= 0.5), None)
        rows.append(
            (
                name,
                str(curve.tracks),
                str(curve.events),
                fmt_num(_retention_at(curve.retention, 10)),
                fmt_num(_retention_at(curve.retention, 50)),
                "none" if curve.strength is None else f"{curve.strength:.1f}",
                fmt_num(curve.r2),
                " / ".join(fmt_num(serial[b][0], 1) for b in SERIAL_BINS),
                " / ".join(fmt_num(serial[b][1]) for b in SERIAL_BINS),
                "—" if r50 is None else str(r50),
            )
        )
        events = [(low, n, e) for low, n, e in memory if e]
        during = sum(e for _, _, e in memory)
        loads_note.append(
            f"{name}: {sum(n for _, n, _ in memory)} transitions, {during} with a forgetting event"
            + (
                "; P(forget | load) " + ", ".join(f"{low}–{low + load_bin - 1}: {e}/{n}" for low, n, e in events)
                if events
                else ""
            )
        )
    if not rows:
        return None
    header = (
        "maps",
        "tracks",
        "forgotten",
        "R(10 steps)",
        "R(50 steps)",
        "Ŝ (steps)",
        "R² exp",
        "mean TTF early / middle / late",
        "forgotten early / middle / late",
        "half-life (steps)",
    )
    notes = (
        "EMRD's Remember metrics (ovman_eval.analysis.remember) of the mapper's working tracks, both visits of "
        "each recorded group pooled: R(δ) the Kaplan–Meier retention δ steps after the last sighting; Ŝ the MLE "
        "memory strength Σ TTF / forgetting events; R² of exp(−δ/Ŝ) against R(δ); the serial-position bins "
        "by discovery order; the half-life, the first δ where R(δ) ≤ 0.5. A track is forgotten when it "
        "leaves the working map, or becomes no instance of the map built after the visit's last frame.",
        "Working memory, per load bin of the tracks held before a frame (or the build): " + "; ".join(loads_note),
    )
    return Table("remember", "Remember: forgetting, serial position, working memory", header, tuple(rows), notes)


def _retention_at(retention: Sequence[tuple[int, float]], delta: int) -> float | None:
    """R(δ): the Kaplan–Meier step function at ``delta`` steps (1 before the first TTF)."""
    if not retention:
        return None
    value = 1.0
    for t, r in retention:
        if t > delta:
            break
        value = r
    return value


__all__ = [
    "MAP_KINDS",
    "SERIAL_BINS",
    "ForgettingCurve",
    "MemoryItem",
    "forgetting_curve",
    "memory_items",
    "remember_table",
    "serial_position",
    "visit_memory",
    "working_memory",
]
