"""The stress-condition comparison: each condition against the baseline on the same episodes (pure).

A run with ``--condition low_light|texture`` holds the baseline's and every condition's records
for the same (episode, arm, seed); the success table and the map table compare them with exact
paired tests. Both use one run seed (``seed``, default the smallest in the records). Baseline
records carry no condition field on disk (:mod:`ovman_eval.runs.results`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import fmean
from typing import Any

from ovman_eval.analysis.stats import mcnemar_exact, paired_counts
from ovman_eval.analysis.table import GATES, STATIC, Table, fmt_num, fmt_p, fmt_rate
from ovman_eval.runs.results import ARM_ORDER, BASELINE, CONDITION_ORDER, ResultRecord

MAP_METRICS: tuple[tuple[str, str, str, int], ...] = (
    ("visit1", "aec", "visit 1 AEC", 3),
    ("visit1", "pa", "visit 1 PA", 3),
    ("visit1", "rmse_m", "visit 1 RMSE (m)", 3),
    ("visit1", "tbs", "visit 1 TBS", 3),
    ("visit1", "duplicated", "visit 1 duplicated", 2),
    ("visit1", "hallucinated", "visit 1 hallucinated", 2),
    ("visit2", "aec", "visit 2 AEC", 3),
    ("visit2", "pa", "visit 2 PA", 3),
    ("visit2", "rmse_m", "visit 2 RMSE (m)", 3),
    ("visit2", "tbs", "visit 2 TBS", 3),
    ("visit2", "duplicated", "visit 2 duplicated", 2),
    ("visit2", "hallucinated", "visit 2 hallucinated", 2),
    ("memory", "sir", "SIR", 3),
    ("memory", "identity_ratio", "identity ratio", 3),
)
"""The compared diagnostics: (section of ``ResultRecord.diagnostics``, key, label, decimals)."""


def stress_conditions(records: Iterable[ResultRecord]) -> list[str]:
    """The stress conditions present besides the baseline, in :data:`CONDITION_ORDER`."""
    present = {r.condition for r in records}
    return [c for c in CONDITION_ORDER if c != BASELINE and c in present]


def _chosen_seed(records: Sequence[ResultRecord], seed: int | None) -> int:
    return min(r.seed for r in records) if seed is None else seed


def _by_episode(records: Sequence[ResultRecord], condition: str, arm: str, seed: int) -> dict[str, ResultRecord]:
    return {r.episode_id: r for r in records if r.condition == condition and r.arm == arm and r.seed == seed}


def _success(record: ResultRecord, gate: str) -> bool:
    if gate == STATIC:
        return record.static.success
    assert record.embodied is not None
    return record.embodied.success


def condition_success_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """Per stress condition, arm and gate: baseline and condition success on the same episodes,
    lost:gained (solved only under the baseline : only under the condition) and the exact McNemar p
    (:func:`ovman_eval.analysis.stats.mcnemar_exact`). None without a condition or without baseline
    records."""
    records = list(records)
    conditions = stress_conditions(records)
    if not conditions or not any(r.condition == BASELINE for r in records):
        return None
    seed = _chosen_seed(records, seed)
    arms = [a for a in ARM_ORDER if any(r.arm == a for r in records)]
    arms += sorted({r.arm for r in records} - set(arms))
    rows = []
    paired = set()
    for condition in conditions:
        for arm in arms:
            base = _by_episode(records, BASELINE, arm, seed)
            other = _by_episode(records, condition, arm, seed)
            episodes = [e for e in base if e in other]
            if not episodes:
                continue
            paired.add(len(episodes))
            embodied = all(base[e].embodied is not None and other[e].embodied is not None for e in episodes)
            for gate in GATES if embodied else (STATIC,):
                before = [_success(base[e], gate) for e in episodes]
                after = [_success(other[e], gate) for e in episodes]
                counts = paired_counts(before, after)
                rows.append(
                    (
                        condition,
                        arm,
                        gate,
                        fmt_rate(sum(before), len(episodes)),
                        fmt_rate(sum(after), len(episodes)),
                        f"{counts.wins}:{counts.losses}",
                        fmt_p(mcnemar_exact(counts.wins, counts.losses)),
                    )
                )
    if not rows:
        return None
    notes = (
        "The same episodes, arms and run seed under the baseline and re-rendered under each condition (the same "
        "worlds, changes and tour poses; the embodied run renders under the condition too). lost:gained = episodes "
        "solved only under the baseline : only under the condition; exact two-sided McNemar on them.",
        f"Run seed {seed}; {', '.join(str(n) for n in sorted(paired))} paired episodes.",
    )
    header = ("condition", "arm", "gate", BASELINE, "under condition", "lost:gained", "p (McNemar)")
    return Table(
        "stress_success", "Stress conditions: success against the baseline (same episodes)", header, tuple(rows), notes
    )


def _group_diagnostics(records: Sequence[ResultRecord], condition: str, seed: int) -> dict[str, dict[str, Any]]:
    """Per recorded group, the diagnostics of the agent's maps and association under ``condition``
    (those of the first record carrying all three sections; every such arm has the same)."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        diagnostics = record.diagnostics
        if record.condition != condition or record.seed != seed or not diagnostics:
            continue
        if all(section in diagnostics for section in ("visit1", "visit2", "memory")):
            out.setdefault(record.group_id, diagnostics)
    return out


def _value(diagnostics: dict[str, Any], section: str, key: str) -> float | None:
    value = diagnostics.get(section, {}).get(key)
    return None if value is None else float(value)


def _fmt_difference(value: float, digits: int) -> str:
    """A signed difference; one significant digit in scientific notation when it rounds to zero."""
    if value != 0.0 and abs(value) < 0.5 * 10.0**-digits:
        return f"{value:+.1e}"
    return f"{value:+.{digits}f}"


def condition_map_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """Per stress condition and map/memory metric: the baseline and condition means, the mean
    difference condition − baseline over the groups where both are defined, lower:higher and the
    exact sign test p (the same binomial test as McNemar's) over the recorded groups of the agent's
    maps. None without a condition or diagnostics."""
    records = list(records)
    conditions = stress_conditions(records)
    if not conditions:
        return None
    seed = _chosen_seed(records, seed)
    base = _group_diagnostics(records, BASELINE, seed)
    rows = []
    for condition in conditions:
        other = _group_diagnostics(records, condition, seed)
        groups = [g for g in base if g in other]
        for section, key, label, digits in MAP_METRICS:
            pairs = [
                (b, c)
                for b, c in ((_value(base[g], section, key), _value(other[g], section, key)) for g in groups)
                if b is not None and c is not None
            ]
            if not pairs:
                continue
            lower = sum(c < b for b, c in pairs)
            higher = sum(c > b for b, c in pairs)
            rows.append(
                (
                    condition,
                    label,
                    fmt_num(fmean(b for b, _ in pairs), digits),
                    fmt_num(fmean(c for _, c in pairs), digits),
                    _fmt_difference(fmean(c - b for b, c in pairs), digits),
                    str(len(pairs)),
                    f"{lower}:{higher}",
                    fmt_p(mcnemar_exact(lower, higher)),
                )
            )
    if not rows:
        return None
    notes = (
        "Diagnostics of the agent's maps per recorded group (AEC against the instances the unperturbed tour could "
        "discover), means over the groups where the metric is defined under both; Δ = condition − baseline. "
        "lower:higher = groups where the condition's value is lower : higher; p: exact two-sided sign test.",
        f"Run seed {seed}.",
    )
    header = ("condition", "metric", BASELINE, "under condition", "mean Δ", "groups", "lower:higher", "p (sign)")
    return Table("stress_maps", "Stress conditions: map and memory against the baseline", header, tuple(rows), notes)


def stress_tables(records: Sequence[ResultRecord], seed: int | None = None) -> list[Table]:
    """The stress comparison tables the records support (none without a stress condition)."""
    tables = [condition_success_table(records, seed), condition_map_table(records, seed)]
    return [t for t in tables if t is not None]


__all__ = [
    "MAP_METRICS",
    "condition_map_table",
    "condition_success_table",
    "stress_conditions",
    "stress_tables",
]
