"""The benchmark's tables from its result records (pure: records in, tables out).

One function per table of the report, each a :class:`Table` (markdown, HTML, plain text), after the
paper's (TASK.md §6-8). Paired comparisons use one run seed (``seed``, default the smallest), so each
episode has one outcome per arm; the single-visit arm enters by its seeded pick, except in the
Poisson–binomial test, which uses its probabilities (static gate only, where they are exact).

Why one module: one short function per table, all on the same index of the records
(:class:`Outcomes`) and formats; split by table, the pieces would import each other's helpers.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence
from statistics import stdev

from ovman_core.relations import Relation
from ovman_eval.analysis.diagnostics import auroc
from ovman_eval.analysis.remember import remember_table
from ovman_eval.analysis.stats import holm, mcnemar_exact, poisson_binomial_sf
from ovman_eval.analysis.stress import stress_tables
from ovman_eval.analysis.table import EMBODIED, GATES, STATIC, Table, TableError, fmt_ci, fmt_num, fmt_p, fmt_rate
from ovman_eval.generation.plan import REASONS
from ovman_eval.runs.results import ARM_ORDER, ResultRecord, baseline_records
from ovman_eval.task.failures import FailureClass
from ovman_query.arms import PARSE_FAILED
from ovman_query.parser import FAILED, ParserReport

RUNGS = ("two_visit", "oracle_grounding", "oracle_positions", "given_answer")
"""The rungs of the error budget, in order (TASK.md §6)."""
INSTANCE_BINS = ((2, 2, "2"), (3, 3, "3"), (4, 10**9, "4+"))
"""Fig. 3: number of same-category instances in W1 ∪ W2, as (low, high, label)."""
FAILURE_LABELS = {
    FailureClass.SUCCESS: "success",
    FailureClass.WRONG_INSTANCE: "wrong instance",
    FailureClass.ABSTAINED: "abstained",
    FailureClass.FAR: "far (> far_miss_distance)",
    FailureClass.OTHER: "the rest",
}
FAILURE_ROWS = (
    FailureClass.SUCCESS,
    FailureClass.WRONG_INSTANCE,
    FailureClass.ABSTAINED,
    FailureClass.FAR,
    FailureClass.OTHER,
)
"""Table V's rows, in the paper's order."""


# ---- indexing the records ------------------------------------------------------------------------


class Outcomes:
    """The records of one run seed, indexed by arm and episode; checks that arms are paired.
    Only the baseline condition's records count (:func:`ovman_eval.runs.results.baseline_records`);
    stress conditions are compared in :mod:`ovman_eval.analysis.stress`."""

    def __init__(self, records: Iterable[ResultRecord], seed: int | None = None) -> None:
        records = baseline_records(records)
        if not records:
            raise TableError("no result records to tabulate")
        seeds = sorted({r.seed for r in records})
        self.seed = seeds[0] if seed is None else seed
        if self.seed not in seeds:
            raise TableError(f"no records for seed {self.seed}; the run has seeds {seeds}")
        chosen = [r for r in records if r.seed == self.seed]
        self.arms = [a for a in ARM_ORDER if any(r.arm == a for r in chosen)]
        self.arms += sorted({r.arm for r in chosen} - set(self.arms))
        self.by_arm: dict[str, dict[str, ResultRecord]] = {a: {} for a in self.arms}
        self.episodes: list[str] = []
        for record in chosen:
            if record.episode_id not in self.by_arm[self.arms[0]] and record.episode_id not in self.episodes:
                self.episodes.append(record.episode_id)
            self.by_arm[record.arm][record.episode_id] = record
        for arm in self.arms:
            if set(self.by_arm[arm]) != set(self.episodes):
                raise TableError(f"arm {arm} has results for {len(self.by_arm[arm])} of {len(self.episodes)} episodes")
        first = self.by_arm[self.arms[0]]
        self.info = {e: first[e] for e in self.episodes}
        self.relations = [r.value for r in Relation if any(i.relation == r.value for i in self.info.values())]
        self.embodied = all(r.embodied is not None for r in chosen)

    def episodes_where(self, keep: Callable[[ResultRecord], bool]) -> list[str]:
        return [e for e in self.episodes if keep(self.info[e])]

    def success(self, arm: str, gate: str, episodes: Sequence[str] | None = None) -> list[bool]:
        """Per episode (in ``episodes`` order, default all): the arm's success under ``gate``."""
        records = self.by_arm[arm]
        chosen = self.episodes if episodes is None else episodes
        if gate == STATIC:
            return [records[e].static.success for e in chosen]
        if not self.embodied:
            raise TableError("the run is static-only: no embodied outcomes")
        return [records[e].embodied.success for e in chosen]  # type: ignore[union-attr]

    def count(self, arm: str, gate: str, episodes: Sequence[str] | None = None) -> tuple[int, int]:
        outcomes = self.success(arm, gate, episodes)
        return sum(outcomes), len(outcomes)

    def probabilities(self, arm: str, episodes: Sequence[str] | None = None) -> list[float] | None:
        """The static per-episode success probabilities of a stochastic arm, or None."""
        records = self.by_arm[arm]
        chosen = self.episodes if episodes is None else episodes
        probs = [records[e].static.success_probability for e in chosen]
        return None if any(p is None for p in probs) else [float(p) for p in probs]  # type: ignore[arg-type]

    def relation_episodes(self, relation: str) -> list[str]:
        return self.episodes_where(lambda r: r.relation == relation)


def _gates(outcomes: Outcomes) -> tuple[str, ...]:
    return GATES if outcomes.embodied else (STATIC,)


def _seed_note(outcomes: Outcomes) -> str:
    return f"Run seed {outcomes.seed}; {len(outcomes.episodes)} episodes."


# ---- headline, Table III, Table IV -------------------------------------------------------------


def headline_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table:
    """Every arm: static and embodied success with Wilson 95% intervals, SPL and SPL given success."""
    o = Outcomes(records, seed)
    header = ["arm", "static success [95% CI]"]
    if o.embodied:
        header += ["embodied success [95% CI]", "SPL", "SPL | success"]
    rows = []
    for arm in o.arms:
        row = [arm, fmt_ci(*o.count(arm, STATIC))]
        if o.embodied:
            spl_all, spl_success = spl_means(o, arm, o.episodes)
            row += [fmt_ci(*o.count(arm, EMBODIED)), fmt_num(spl_all), fmt_num(spl_success)]
        rows.append(tuple(row))
        probs = o.probabilities(arm)
        if probs is not None and arm == "single_visit":
            rows.append(
                (
                    f"{arm} (expected)",
                    f"{sum(probs) / len(probs):.3f} (Σp = {sum(probs):.1f})",
                    *[""] * (len(header) - 2),
                )
            )
    return Table("headline", "Headline: every arm", tuple(header), tuple(rows), (_seed_note(o),))


def spl_means(o: Outcomes, arm: str, episodes: Sequence[str]) -> tuple[float | None, float | None]:
    """The arm's mean SPL over ``episodes`` and over its successes among them (None: no such run)."""
    embodied = [o.by_arm[arm][e].embodied for e in episodes]
    values = [e.spl for e in embodied if e is not None]
    successes = [e.spl for e in embodied if e is not None and e.success]
    return (
        sum(values) / len(values) if values else None,
        sum(successes) / len(successes) if successes else None,
    )


def action_means(o: Outcomes, arm: str, episodes: Sequence[str]) -> tuple[float | None, float | None]:
    """The arm's mean number of actions per embodied run over ``episodes`` and over its successes
    among them (temporal efficiency; None: no such run)."""
    embodied = [o.by_arm[arm][e].embodied for e in episodes]
    steps = [e.steps for e in embodied if e is not None]
    successes = [e.steps for e in embodied if e is not None and e.success]
    return (
        sum(steps) / len(steps) if steps else None,
        sum(successes) / len(successes) if successes else None,
    )


def _per_relation_row(o: Outcomes, arm: str, gate: str) -> list[str]:
    cells = [fmt_rate(*o.count(arm, gate, o.relation_episodes(rel))) for rel in o.relations]
    return [*cells, fmt_ci(*o.count(arm, gate))]


def static_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table:
    """Table III analogue: the static gate per relation and overall, the rungs marked."""
    o = Outcomes(records, seed)
    header = ("arm", *o.relations, "overall [95% CI]")
    rows = []
    for arm in o.arms:
        label = f"{arm} (rung {RUNGS.index(arm) + 1})" if arm in RUNGS else arm
        if arm == "single_visit":
            probs = o.probabilities(arm)
            if probs is not None:
                cells = []
                for rel in o.relations:
                    p = o.probabilities(arm, o.relation_episodes(rel)) or []
                    cells.append(f"{sum(p) / len(p):.3f}" if p else "–")
                rows.append((f"{arm} (expected)", *cells, f"{sum(probs) / len(probs):.3f} (Σp = {sum(probs):.1f})"))
            label = f"{arm} (seeded pick)"
        rows.append((label, *_per_relation_row(o, arm, STATIC)))
    notes = (
        "Static gate: the predicted point within task.static_gate_radius of the answer point; abstaining fails.",
        "single_visit (expected) is the mean of its exact per-episode success probabilities.",
        _seed_note(o),
    )
    return Table("static", "Table III analogue: static gate", header, tuple(rows), notes)


def embodied_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """Table IV: embodied success per relation and overall, SPL and SPL given success (None when static-only)."""
    o = Outcomes(records, seed)
    if not o.embodied:
        return None
    header = ("arm", *o.relations, "overall [95% CI]", "SPL", "SPL | success", "actions", "actions | success")
    rows = []
    for arm in o.arms:
        spl_all, spl_success = spl_means(o, arm, o.episodes)
        actions_all, actions_success = action_means(o, arm, o.episodes)
        rows.append(
            (
                arm,
                *_per_relation_row(o, arm, EMBODIED),
                fmt_num(spl_all),
                fmt_num(spl_success),
                fmt_num(actions_all, 1),
                fmt_num(actions_success, 1),
            )
        )
    notes = (
        "Embodied: Stop within task.success_radius of the answer footprint (at the moment of Stop for moving "
        "answers), from the episode's start pose with the reference primitives.",
        "SPL = S · l / max(p, l), l the shortest path from the start to any position that passes the test.",
        "Temporal efficiency: actions (primitives executed) per episode, over every episode (an abstention "
        "executes none) and over the arm's successes.",
        _seed_note(o),
    )
    return Table("embodied", "Table IV: embodied evaluation", header, tuple(rows), notes)


def anti_shortcut_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table:
    """Every arm on the OVMAN test and on the category-only test (reach any instance of the category)."""
    o = Outcomes(records, seed)
    header = ["arm", "static: OVMAN", "static: any instance"]
    if o.embodied:
        header += ["embodied: OVMAN", "embodied: any instance"]
    rows = []
    n = len(o.episodes)
    for arm in o.arms:
        recs = [o.by_arm[arm][e] for e in o.episodes]
        row = [arm, fmt_rate(sum(r.static.success for r in recs), n)]
        row.append(fmt_rate(sum(r.static.category_success for r in recs), n))
        if o.embodied:
            row.append(fmt_rate(sum(r.embodied.success for r in recs), n))  # type: ignore[union-attr]
            row.append(fmt_rate(sum(r.embodied.category_success for r in recs), n))  # type: ignore[union-attr]
        rows.append(tuple(row))
    notes = (
        "Any instance: the point (static: within the gate radius of an instance's point; embodied: within R of an "
        "instance's footprint at Stop) reaches any instance of the queried category. The gap between the two "
        "columns of category_only is what the anti-shortcut rule removes.",
        _seed_note(o),
    )
    return Table("anti_shortcut", "The OVMAN test against reaching any instance", tuple(header), tuple(rows), notes)


# ---- Table V ---------------------------------------------------------------------------------------


def failure_counts(o: Outcomes, arm: str, episodes: Sequence[str]) -> dict[FailureClass, int]:
    """Static failure class → how many of ``episodes`` the arm ends in it (Table V's partition)."""
    counts = dict.fromkeys(FAILURE_ROWS, 0)
    for e in episodes:
        counts[FailureClass(o.by_arm[arm][e].static.failure)] += 1
    return counts


def lost_in_navigation(o: Outcomes, arm: str, episodes: Sequence[str]) -> int:
    """Static successes among ``episodes`` that the arm's embodied run failed."""
    records = [o.by_arm[arm][e] for e in episodes]
    return sum(r.static.success and not r.embodied.success for r in records)  # type: ignore[union-attr]


def failure_table(records: Iterable[ResultRecord], arm: str = "two_visit", seed: int | None = None) -> Table:
    """Table V: how ``arm`` fails at the static gate, overall and per relation; lost in navigation."""
    o = Outcomes(records, seed)
    if arm not in o.arms:
        raise TableError(f"no results of arm {arm}; the run has {', '.join(o.arms)}")
    header = ("class", "episodes", "fraction", *o.relations)
    overall = failure_counts(o, arm, o.episodes)
    per_relation = {rel: failure_counts(o, arm, o.relation_episodes(rel)) for rel in o.relations}
    n = len(o.episodes)
    rows = [
        (FAILURE_LABELS[c], str(overall[c]), f"{overall[c] / n:.3f}", *(str(per_relation[r][c]) for r in o.relations))
        for c in FAILURE_ROWS
    ]
    if o.embodied:
        lost = lost_in_navigation(o, arm, o.episodes)
        rows.append(
            (
                "lost in navigation (subset of success)",
                str(lost),
                f"{lost / n:.3f}",
                *(str(lost_in_navigation(o, arm, o.relation_episodes(r))) for r in o.relations),
            )
        )
    notes = (
        "The first five rows partition the episodes (static gate). Wrong instance: within R of the footprint of "
        "another instance of the category in visit 2. Lost in navigation: static successes failed when executed.",
        _seed_note(o),
    )
    return Table(f"failures_{arm}", f"Table V: how {arm} fails", header, tuple(rows), notes)


def failure_by_arm_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table:
    """The static failure partition of every arm (counts), and lost in navigation."""
    o = Outcomes(records, seed)
    counts = {arm: failure_counts(o, arm, o.episodes) for arm in o.arms}
    rows = [(FAILURE_LABELS[c], *(str(counts[a][c]) for a in o.arms)) for c in FAILURE_ROWS]
    if o.embodied:
        rows.append(("lost in navigation", *(str(lost_in_navigation(o, a, o.episodes)) for a in o.arms)))
    return Table(
        "failures_by_arm",
        "Failure partition of every arm (static gate)",
        ("class", *o.arms),
        tuple(rows),
        (_seed_note(o),),
    )


# ---- the error budget (Fig. 5a) -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ErrorBudget:
    """The rungs' success rates and the gaps between them (fractions of episodes).

    ``static``/``embodied``: rung → rate (embodied None when static-only; rungs missing from the run
    are left out); ``gaps``: name → (from rung, to rung, rate difference), including ``navigation``
    = oracle positions static − embodied; ``tests``: name → (wins, losses, p) McNemar of the upper
    rung against the lower one on the static gate.
    """

    static: dict[str, float]
    embodied: dict[str, float] | None
    gaps: dict[str, tuple[str, str, float]]
    tests: dict[str, tuple[int, int, float]]
    episodes: int


GAP_NAMES = {
    ("two_visit", "oracle_grounding"): "grounding",
    ("oracle_grounding", "oracle_positions"): "mapping (localisation and association)",
    ("oracle_positions", "given_answer"): "answer selection",
}
PERCEPTION_GAP = "perception (sim_perception: the simulator's segments)"
"""Beside the rungs: what the simulator's segments buy the agent over its own segmenter."""


def error_budget(records: Iterable[ResultRecord], seed: int | None = None) -> ErrorBudget:
    """The budget of Fig. 5a from the rungs present in the records."""
    o = Outcomes(records, seed)
    rungs = [r for r in RUNGS if r in o.arms]
    n = len(o.episodes)
    static = {r: o.count(r, STATIC)[0] / n for r in rungs}
    embodied = {r: o.count(r, EMBODIED)[0] / n for r in rungs} if o.embodied else None
    gaps: dict[str, tuple[str, str, float]] = {}
    tests: dict[str, tuple[int, int, float]] = {}
    for lower, upper in itertools.pairwise(rungs):
        name = GAP_NAMES.get((lower, upper), f"{lower} → {upper}")
        gaps[name] = (lower, upper, static[upper] - static[lower])
        wins = sum(a and not b for a, b in zip(o.success(upper, STATIC), o.success(lower, STATIC), strict=True))
        losses = sum(b and not a for a, b in zip(o.success(upper, STATIC), o.success(lower, STATIC), strict=True))
        tests[name] = (wins, losses, mcnemar_exact(wins, losses))
    if "two_visit" in rungs and "sim_perception" in o.arms:
        seen = o.count("sim_perception", STATIC)[0] / n
        gaps[PERCEPTION_GAP] = ("two_visit", "sim_perception", seen - static["two_visit"])
        tests[PERCEPTION_GAP] = _mcnemar(o, "sim_perception", "two_visit", STATIC, o.episodes)
    if embodied is not None and "oracle_positions" in rungs:
        gaps["navigation"] = (
            "oracle_positions",
            "oracle_positions",
            static["oracle_positions"] - embodied["oracle_positions"],
        )
    return ErrorBudget(static, embodied, gaps, tests, n)


def error_budget_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table:
    budget = error_budget(records, seed)
    rows = []
    for rung, rate in budget.static.items():
        embodied = "–" if budget.embodied is None else f"{budget.embodied[rung]:.3f}"
        rows.append((f"rung: {rung}", f"{rate:.3f}", embodied, "", ""))
    for name, (_lower, _upper, gap) in budget.gaps.items():
        if name in budget.tests:
            wins, losses, p = budget.tests[name]
            rows.append((f"gap: {name}", f"{gap:+.3f}", "", f"{wins}:{losses}", fmt_p(p)))
        else:
            rows.append((f"gap: {name}", f"{gap:+.3f}", "", "", ""))
    notes = (
        "Each gap is what the next rung's ground truth buys on the static gate (wins:losses of the upper rung, "
        "exact McNemar). Navigation = oracle positions static − embodied. Perception (beside the rungs) = "
        "sim_perception − two_visit: the same agent on the simulator's segments instead of its own segmenter's.",
    )
    return Table(
        "error_budget",
        "Error budget (Fig. 5a)",
        ("rung / gap", "static", "embodied", "wins:losses", "p"),
        tuple(rows),
        notes,
    )


# ---- paired comparisons -----------------------------------------------------------------------------


def _mcnemar(o: Outcomes, a: str, b: str, gate: str, episodes: Sequence[str]) -> tuple[int, int, float]:
    sa, sb = o.success(a, gate, episodes), o.success(b, gate, episodes)
    wins = sum(x and not y for x, y in zip(sa, sb, strict=True))
    losses = sum(y and not x for x, y in zip(sa, sb, strict=True))
    return wins, losses, mcnemar_exact(wins, losses)


def relation_comparisons_table(
    records: Iterable[ResultRecord], gate: str = STATIC, reference: str = "two_visit", seed: int | None = None
) -> Table | None:
    """Per relation: ``reference`` against every other arm, wins:losses and exact McNemar p,
    Holm-adjusted over the relations (one family per pair of arms). None when static-only and
    ``gate`` is embodied, or without the reference arm."""
    o = Outcomes(records, seed)
    if reference not in o.arms or (gate == EMBODIED and not o.embodied):
        return None
    rows = []
    for other in (a for a in o.arms if a != reference):
        tests = [_mcnemar(o, reference, other, gate, o.relation_episodes(rel)) for rel in o.relations]
        adjusted = holm([p for _, _, p in tests])
        for rel, (wins, losses, p), p_holm in zip(o.relations, tests, adjusted, strict=True):
            episodes = o.relation_episodes(rel)
            rows.append(
                (
                    other,
                    rel,
                    fmt_rate(*o.count(reference, gate, episodes)),
                    fmt_rate(*o.count(other, gate, episodes)),
                    f"{wins}:{losses}",
                    fmt_p(p),
                    fmt_p(float(p_holm)),
                )
            )
    header = ("against", "relation", reference, "other", "wins:losses", "p (McNemar)", "p (Holm)")
    notes = (f"{gate} gate; Holm over the {len(o.relations)} relations of each pair of arms.", _seed_note(o))
    return Table(
        f"relations_{gate}", f"Per relation: {reference} against each arm ({gate})", header, tuple(rows), notes
    )


def single_vs_two_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """The two-visit agent's static successes against the single-visit arm's exact Poisson–binomial
    upper tail, overall and per relation (Holm over relations); None without both arms."""
    o = Outcomes(records, seed)
    if "two_visit" not in o.arms or "single_visit" not in o.arms or o.probabilities("single_visit") is None:
        return None
    rows = []

    def row(label: str, episodes: Sequence[str]) -> tuple[str, str, str, float]:
        k, n = o.count("two_visit", STATIC, episodes)
        probs = o.probabilities("single_visit", episodes) or []
        return (
            label,
            fmt_rate(k, n),
            f"{sum(probs):.1f} ({sum(probs) / n:.3f})" if n else "–",
            poisson_binomial_sf(k, probs),
        )

    overall = row("overall", o.episodes)
    per_relation = [row(rel, o.relation_episodes(rel)) for rel in o.relations]
    adjusted = holm([p for *_, p in per_relation])
    rows.append((*overall[:3], fmt_p(overall[3]), "–"))
    for (label, two, single, p), p_holm in zip(per_relation, adjusted, strict=True):
        rows.append((label, two, single, fmt_p(p), fmt_p(float(p_holm))))
    notes = (
        "P(X ≥ k): X the single-visit arm's successes (independent Bernoulli with its per-episode probabilities), "
        "k the two-visit agent's successes; exact Poisson–binomial tail. Holm over the relations.",
        _seed_note(o),
    )
    header = ("episodes", "two_visit successes", "single_visit expected", "P(X ≥ k)", "p (Holm)")
    return Table(
        "single_vs_two", "Single visit against two visits (static, Poisson–binomial)", header, tuple(rows), notes
    )


def pairwise_table(records: Iterable[ResultRecord], gate: str = STATIC, seed: int | None = None) -> Table | None:
    """wins:losses (exact McNemar p) of the row arm against the column arm, every pair."""
    o = Outcomes(records, seed)
    if gate == EMBODIED and not o.embodied:
        return None
    rows = []
    for a in o.arms:
        cells = []
        for b in o.arms:
            if a == b:
                cells.append("–")
                continue
            wins, losses, p = _mcnemar(o, a, b, gate, o.episodes)
            cells.append(f"{wins}:{losses} (p {fmt_p(p)})")
        rows.append((a, *cells))
    notes = ("Row arm against column arm on the same episodes: wins:losses, exact two-sided McNemar.", _seed_note(o))
    return Table(f"pairwise_{gate}", f"Every pair of arms ({gate})", ("arm", *o.arms), tuple(rows), notes)


# ---- breakdowns -------------------------------------------------------------------------------------


def _breakdown(
    o: Outcomes, groups: Sequence[tuple[str, list[str]]], gate: str, key: str, title: str, first: str
) -> Table | None:
    if gate == EMBODIED and not o.embodied:
        return None
    rows = [
        (label, str(len(episodes)), *(fmt_rate(*o.count(a, gate, episodes)) for a in o.arms))
        for label, episodes in groups
    ]
    return Table(f"{key}_{gate}", f"{title} ({gate})", (first, "episodes", *o.arms), tuple(rows), (_seed_note(o),))


def scene_groups(o: Outcomes) -> list[tuple[str, list[str]]]:
    scenes = sorted({i.scene for i in o.info.values()}, key=_natural)
    return [(s, o.episodes_where(lambda r, s=s: r.scene == s)) for s in scenes]


def instance_groups(o: Outcomes) -> list[tuple[str, list[str]]]:
    return [
        (label, o.episodes_where(lambda r, lo=lo, hi=hi: lo <= r.instances <= hi)) for lo, hi, label in INSTANCE_BINS
    ]


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1)


def per_scene_table(records: Iterable[ResultRecord], gate: str = STATIC, seed: int | None = None) -> Table | None:
    """Success of every arm per scene (None for the embodied gate of a static-only run)."""
    o = Outcomes(records, seed)
    return _breakdown(o, scene_groups(o), gate, "per_scene", "Success per scene", "scene")


def by_instances_table(records: Iterable[ResultRecord], gate: str = STATIC, seed: int | None = None) -> Table | None:
    """Fig. 3: success by the number of same-category instances in W1 ∪ W2."""
    o = Outcomes(records, seed)
    return _breakdown(
        o, instance_groups(o), gate, "by_instances", "Success by same-category instances (Fig. 3)", "instances"
    )


def seeds_table(records: Iterable[ResultRecord]) -> Table | None:
    """Overall success per run seed and arm, and its spread over the seeds: the range (max − min)
    and the sample standard deviation of the success rate (None with one seed)."""
    records = list(records)
    seeds = sorted({r.seed for r in records})
    if len(seeds) < 2:
        return None
    per_seed = {s: Outcomes(records, s) for s in seeds}
    arms = per_seed[seeds[0]].arms
    header = ["arm"]
    gates = _gates(per_seed[seeds[0]])
    for gate in gates:
        header += [*(f"seed {s} ({gate})" for s in seeds), f"range ({gate})", f"sd ({gate})"]
    rows = []
    for arm in arms:
        row = [arm]
        for gate in gates:
            counts = [per_seed[s].count(arm, gate) for s in seeds]
            rates = [k / n for k, n in counts]
            row += [*(fmt_rate(k, n) for k, n in counts), f"{max(rates) - min(rates):.3f}", f"{stdev(rates):.3f}"]
        rows.append(tuple(row))
    notes = ("Run seeds reseed the agents' stochastic choices (the single-visit pick); deterministic arms agree.",)
    return Table("seeds", "Success per run seed", tuple(header), tuple(rows), notes)


def _range(values: Sequence[float]) -> str:
    return f"{min(values):+.3f} … {max(values):+.3f}"


def sign_verdict(values: Sequence[float]) -> str:
    """Whether a set of margins keeps one sign: positive, negative, reaches zero, or changes sign."""
    if min(values) > 0:
        return "positive throughout"
    if max(values) < 0:
        return "negative throughout"
    return "sign changes" if min(values) < 0 < max(values) else "reaches zero"


def margin_table(records: Iterable[ResultRecord]) -> Table | None:
    """The memory margin per run seed (TASK.md §7; the paper's §III-C validity check): two-visit
    success minus single-visit success, static (its expected success: the mean of its exact
    per-episode probabilities) and embodied (its seeded pick), with the range over the seeds and
    whether the sign ever changes. None without both arms."""
    records = list(records)
    seeds = sorted({r.seed for r in records})
    per_seed = {s: Outcomes(records, s) for s in seeds}
    first = per_seed[seeds[0]]
    if "two_visit" not in first.arms or "single_visit" not in first.arms:
        return None
    margins: dict[str, list[float]] = {gate: [] for gate in _gates(first)}
    rows = []
    for s, o in per_seed.items():
        n = len(o.episodes)
        probs = o.probabilities("single_visit")
        static_single = sum(probs) / n if probs is not None else o.count("single_visit", STATIC)[0] / n
        row = [str(s)]
        for gate in margins:
            two = o.count("two_visit", gate)[0] / n
            single = static_single if gate == STATIC else o.count("single_visit", gate)[0] / n
            margins[gate].append(two - single)
            row.append(f"{two - single:+.3f} ({two:.3f} − {single:.3f})")
        rows.append(tuple(row))
    summary = ["range"]
    for values in margins.values():
        summary.append(f"{_range(values)} ({sign_verdict(values)})")
    rows.append(tuple(summary))
    notes = (
        "Margin = two_visit success − single_visit success on the same episodes; static: the single-visit "
        "arm's expected success (exact); embodied: its seeded pick. Run seeds reseed the agents' stochastic "
        "choices only.",
    )
    header = ("seed", *(f"{gate} margin" for gate in margins))
    return Table("margin", "Memory margin per run seed", header, tuple(rows), notes)


def text_query_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """The relation supplied versus inferred from the query's text: two_visit (given category and
    relation) against two_visit_text (given the text; a parse failure abstains), per gate, with
    wins:losses and the exact McNemar p. None without both arms."""
    o = Outcomes(records, seed)
    if "two_visit" not in o.arms or "two_visit_text" not in o.arms:
        return None
    rows = []
    for gate in _gates(o):
        wins, losses, p = _mcnemar(o, "two_visit", "two_visit_text", gate, o.episodes)
        supplied, inferred = fmt_ci(*o.count("two_visit", gate)), fmt_ci(*o.count("two_visit_text", gate))
        rows.append((gate, supplied, inferred, f"{wins}:{losses}", fmt_p(p)))
    failed = sum(o.by_arm["two_visit_text"][e].static.explanation.startswith(PARSE_FAILED) for e in o.episodes)
    notes = (
        f"{failed} of {len(o.episodes)} query texts failed to parse (counted as failures, never a default).",
        _seed_note(o),
    )
    header = ("gate", "relation supplied (two_visit)", "inferred from text (two_visit_text)", "wins:losses", "p")
    return Table("text_queries", "Relation supplied versus inferred from text", header, tuple(rows), notes)


def parser_table(reports: Sequence[tuple[str, ParserReport]]) -> Table:
    """The query parser on sets of phrasings (training, development, held-out): a text counts when
    both its noun phrase and its relation are right."""
    rows = [
        (
            label,
            fmt_ci(report.correct, report.total),
            fmt_rate(report.relation_correct, report.total),
            fmt_rate(report.noun_correct, report.total),
            str(report.failures),
        )
        for label, report in reports
    ]
    notes = (
        "Training phrasings filled with one noun; the development sets are earlier held-out sets, each run once "
        "and then used to fix the parser; the held-out set was run once after the parser was finished "
        "(ovman_query/phrasings, each file states its provenance).",
    )
    header = ("phrasings", "accuracy [95% CI]", "relation right", "noun phrase right", "parse failures")
    return Table("parser", "Query parser accuracy", header, tuple(rows), notes)


def parser_confusion_table(report: ParserReport) -> Table:
    """Per relation asked (rows), how the parser read it (columns; ``failed``: a parse failure)."""
    read = [r.value for r in Relation] + [FAILED]
    rows = tuple(
        (asked, *(str(report.confusion[asked].get(column, 0)) for column in read))
        for asked in (r.value for r in Relation)
    )
    notes = ("Rows: the relation a held-out phrasing asks about; columns: what the parser read.",)
    return Table("parser_confusion", "Query parser: per-relation confusion (held-out)", ("asked", *read), rows, notes)


# ---- map and memory --------------------------------------------------------------------------------

MAP_COLUMNS = (
    ("aec", "AEC"),
    ("matched_coverage", "matched coverage"),
    ("pa", "PA"),
    ("rmse_m", "RMSE (m)"),
    ("tbs", "TBS"),
    ("instances", "instances"),
    ("discoverable", "discoverable"),
    ("duplicated", "duplicated"),
    ("hallucinated", "hallucinated"),
)
RATIO_KEYS = {"aec", "matched_coverage", "pa", "rmse_m", "tbs"}
"""Map columns shown with three decimals; the others are counts (mean per group, one decimal)."""
CHANGE_KINDS = ("stayed", "moved", "removed", "appeared")


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def map_table(records: Iterable[ResultRecord]) -> Table | None:
    """Per visit: the map diagnostics averaged over recorded groups (each group once)."""
    per_group: dict[str, dict] = {}
    for record in records:
        if record.diagnostics and "visit1" in record.diagnostics:
            per_group.setdefault(record.group_id, record.diagnostics)
    if not per_group:
        return None
    rows = []
    for visit in ("visit1", "visit2"):
        summaries = [d[visit] for d in per_group.values()]
        cells = [fmt_num(_mean(s.get(key) for s in summaries), 3 if key in RATIO_KEYS else 1) for key, _ in MAP_COLUMNS]
        rows.append((visit, *cells))
    notes = (
        f"Means over {len(per_group)} recorded groups. AEC: coverage of the discoverable instances (per category "
        "capped); PA: exp(−RMSE/L)·K/|G| after a rigid alignment; TBS: temporal belief stability.",
    )
    return Table("maps", "Map diagnostics per visit", ("visit", *(name for _, name in MAP_COLUMNS)), tuple(rows), notes)


def memory_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """Per arm that associates the agent's maps: mean SIR and change-kind precision/recall
    (pooled over episodes: Σ correct / Σ predicted, Σ correct / Σ relevant)."""
    records = [r for r in records if r.seed == (seed if seed is not None else min(x.seed for x in records))]
    arms = [a for a in ARM_ORDER if any(r.arm == a and r.diagnostics and "memory" in r.diagnostics for r in records)]
    if not arms:
        return None
    header = ["arm", "SIR", "identity ratio"]
    for kind in CHANGE_KINDS:
        header += [f"{kind} P", f"{kind} R"]
    rows = []
    for arm in arms:
        per_group: dict[str, dict] = {}
        for record in records:
            if record.arm == arm and record.diagnostics and "memory" in record.diagnostics:
                per_group.setdefault(record.group_id, record.diagnostics["memory"])
        memories = list(per_group.values())
        row = [arm, fmt_num(_mean(m["sir"] for m in memories)), fmt_num(_mean(m["identity_ratio"] for m in memories))]
        for kind in CHANGE_KINDS:
            predicted = sum(m["changes"][kind]["predicted"] for m in memories)
            correct = sum(m["changes"][kind]["correct"] for m in memories)
            relevant = sum(m["changes"][kind]["relevant"] for m in memories)
            row += [
                fmt_num(correct / predicted if predicted else None),
                fmt_num(correct / relevant if relevant else None),
            ]
        rows.append(tuple(row))
    notes = (
        "SIR: coverage-anchored spatial identity resolution (mean over groups). Change kinds: precision (P) and "
        "recall (R) of the association's implied change set, pooled over groups.",
    )
    return Table("memory", "Memory diagnostics per arm", tuple(header), tuple(rows), notes)


CUE_LABELS = {
    "embedding": "feature cosine (the encoder's embedding)",
    "colour": "hue–saturation histogram (Bhattacharyya)",
    "extent": "back-projected extent (box sizes)",
}
"""How the appearance table names each cue of :data:`ovman_query.association.CUES`."""


@dataclasses.dataclass(frozen=True)
class CuePairs:
    """One recorded group's same-category pairs: the cue ``names`` and, per pair, its row of cue
    values, for the same object seen in both visits (``same``) and for two objects (``different``)."""

    names: tuple[str, ...]
    same: tuple[tuple[float, ...], ...]
    different: tuple[tuple[float, ...], ...]

    def column(self, cue: str) -> tuple[list[float], list[float]] | None:
        """One cue's scores of the same-object and the different-object pairs (None: not recorded)."""
        if cue not in self.names:
            return None
        k = self.names.index(cue)
        return [row[k] for row in self.same], [row[k] for row in self.different]


def appearance_cue_pairs(records: Iterable[ResultRecord]) -> dict[str, CuePairs]:
    """Per recorded group (each once, from the maps of the arms that associate them), its cue pairs
    (:func:`ovman_eval.analysis.diagnostics.appearance_pairs`); a run from before the embedding and
    extent cues recorded the colour cue alone."""
    per_group: dict[str, CuePairs] = {}
    for record in records:
        pairs = ((record.diagnostics or {}).get("memory") or {}).get("appearance")
        if pairs is None or record.group_id in per_group:
            continue
        names = tuple(pairs.get("cues", ("colour",)))

        def rows(kind: str, pairs: dict = pairs) -> tuple[tuple[float, ...], ...]:
            return tuple(tuple(row) if isinstance(row, list) else (row,) for row in pairs[kind])

        per_group[record.group_id] = CuePairs(names, rows("same"), rows("different"))
    return per_group


def appearance_table(records: Iterable[ResultRecord]) -> Table | None:
    """The association's appearance cues on same-category pairs (TASK.md §10): each cue's AUROC,
    pooled over the recorded groups (each group once, from the maps of the arms that associate them)."""
    per_group = appearance_cue_pairs(records)
    if not per_group:
        return None
    rows = []
    for cue, label in CUE_LABELS.items():
        same: list[float] = []
        different: list[float] = []
        for pairs in per_group.values():
            column = pairs.column(cue)
            if column is not None:
                same += column[0]
                different += column[1]
        if same or different:
            rows.append(
                (
                    label,
                    str(len(same)),
                    str(len(different)),
                    fmt_num(auroc(same, different)),
                    fmt_num(_mean(same)),
                    fmt_num(_mean(different)),
                )
            )
    notes = (
        f"Pairs of a visit-1 and a visit-2 map instance matched to ground-truth objects of one category, pooled over "
        f"{len(per_group)} recorded groups: the same object (positive) against two different objects (negative). "
        "AUROC 0.5 is chance; the OVMAN paper measures 0.588 in-sample and 0.500 held-out for its best cue. "
        "`ovman fit-appearance` fits their weights on one run and scores them on another.",
    )
    header = ("cue", "same-object pairs", "different-object pairs", "AUROC", "mean same", "mean different")
    return Table("appearance", "Same-category appearance cues of the association", header, tuple(rows), notes)


def rejection_table(generation: dict) -> Table:
    """The generation's candidates and rejections per relation and reason (Algorithm 1), from a
    dataset manifest's ``request``, ``counts``, ``rejections`` and ``shortfall``."""
    table = generation["rejections"]
    reasons = [r for r in REASONS if any(t.get(r) for t in table.values())]
    reasons += sorted({r for t in table.values() for r in t} - set(reasons))
    counts = generation["counts"]
    rows = []
    for relation in generation["request"]["relations"]:
        rejected = table.get(relation, {})
        rows.append(
            (
                relation,
                str(counts["per_relation"].get(relation, 0)),
                str(counts["attempts_per_relation"].get(relation, 0)),
                str(generation["shortfall"].get(relation, 0)),
                *(str(rejected.get(r, 0)) for r in reasons),
            )
        )
    notes = (
        "Candidates drawn per relation and why each rejected one failed, in the order the generator checks them "
        "(drift: an object still settling after the change moved more than task.drift_tolerance while recorded).",
    )
    header = ("relation", "episodes", "candidates", "shortfall", *reasons)
    return Table("rejections", "Generation: candidates and rejections per relation", header, tuple(rows), notes)


# ---- the multi-change split ---------------------------------------------------------------------


def multi_change_tables(records: Iterable[ResultRecord], seed: int | None = None) -> list[Table]:
    """The run's multi-change part (2-3 changed instances of the queried category): every arm per
    relation (static) with its overall static and embodied success; and the ``oracle_grounding`` rung
    (the paper's "grounding handed over") against ``two_visit`` per relation and overall, with exact
    McNemar (its table only when both arms ran)."""
    o = Outcomes(records, seed)
    groups = len({o.info[e].group_id for e in o.episodes})
    header = ["arm", *o.relations, "static overall [95% CI]"]
    if o.embodied:
        header.append("embodied overall [95% CI]")
    rows = []
    for arm in o.arms:
        row = _per_relation_row(o, arm, STATIC)
        if o.embodied:
            row.append(fmt_ci(*o.count(arm, EMBODIED)))
        rows.append((arm, *row))
    notes = (
        f"{len(o.episodes)} episodes in {groups} groups; each group changes 2-3 instances of the queried category "
        "(moved, removed, added, set moving) and asks one query per relation its changes answer.",
        "Static gate per relation; the overall columns as in the headline.",
        _seed_note(o),
    )
    tables = [Table("multi_change", "Multi-change split: every arm", tuple(header), tuple(rows), notes)]
    rung = _paired_by_relation(
        o,
        RUNGS[0],
        RUNGS[1],
        "multi_change_rung",
        "Multi-change split: grounding handed over (the oracle_grounding rung)",
        f"{RUNGS[1]}: the agent's own maps, each instance's category taken from ground truth.",
    )
    return tables if rung is None else [*tables, rung]


def _paired_by_relation(o: Outcomes, lower: str, upper: str, key: str, title: str, note: str) -> Table | None:
    """Per relation and overall, ``lower`` against ``upper`` under every gate of the run: both
    success rates, wins:losses of ``upper`` and the exact McNemar p (not adjusted); None unless both
    arms ran."""
    if lower not in o.arms or upper not in o.arms:
        return None
    rows = []
    for relation, episodes in [*((rel, o.relation_episodes(rel)) for rel in o.relations), ("overall", o.episodes)]:
        row = [relation]
        for gate in _gates(o):
            wins, losses, p = _mcnemar(o, upper, lower, gate, episodes)
            row += [fmt_rate(*o.count(lower, gate, episodes)), fmt_rate(*o.count(upper, gate, episodes))]
            row += [f"{wins}:{losses}", fmt_p(p)]
        rows.append(tuple(row))
    header = ["relation"]
    for gate in _gates(o):
        header += [f"{lower} ({gate})", f"{upper} ({gate})", f"wins:losses ({gate})", f"p ({gate})"]
    notes = (
        f"{note} wins:losses of {upper} over {lower}, exact McNemar on the discordant episodes (not adjusted).",
        _seed_note(o),
    )
    return Table(key, title, tuple(header), tuple(rows), notes)


def maintained_table(records: Iterable[ResultRecord], seed: int | None = None) -> Table | None:
    """Fig. 4: per relation, one map maintained across both visits (``maintained_map``, DualMap's
    reading) against the two-visit reading of the same maps (``oracle_grounding``), both with
    grounding handed over; None unless both arms ran."""
    return _paired_by_relation(
        Outcomes(records, seed),
        "maintained_map",
        "oracle_grounding",
        "maintained",
        "Fig. 4: a maintained map against two visits, grounding handed over",
        "The same per-visit maps, read as one map maintained across both visits (maintained_map: re-observed "
        "instances updated, superseded positions dropped, instances seen gone removed; former and removed answered "
        "only from what it retains) or as two visits (oracle_grounding); both ground by the true category of "
        "each map instance.",
    )


def all_tables(records: Sequence[ResultRecord], seed: int | None = None) -> list[Table]:
    """Every table that the records support, in report order: the baseline condition's records
    in every table, then the stress conditions against the baseline (:mod:`ovman_eval.analysis.stress`)."""

    conditioned, records = records, baseline_records(records)
    tables: list[Table | None] = [
        headline_table(records, seed),
        static_table(records, seed),
        embodied_table(records, seed),
        error_budget_table(records, seed) if any(r.arm in RUNGS for r in records) else None,
        failure_table(records, "two_visit", seed) if any(r.arm == "two_visit" for r in records) else None,
        failure_by_arm_table(records, seed),
        anti_shortcut_table(records, seed),
        single_vs_two_table(records, seed),
        text_query_table(records, seed),
        maintained_table(records, seed),
        relation_comparisons_table(records, STATIC, "two_visit", seed),
        relation_comparisons_table(records, EMBODIED, "two_visit", seed),
        pairwise_table(records, STATIC, seed),
        pairwise_table(records, EMBODIED, seed),
        per_scene_table(records, STATIC, seed),
        per_scene_table(records, EMBODIED, seed),
        by_instances_table(records, STATIC, seed),
        by_instances_table(records, EMBODIED, seed),
        seeds_table(records),
        margin_table(records),
        map_table(records),
        memory_table(records, seed),
        remember_table(records),
        appearance_table(records),
        *stress_tables(conditioned, seed),
    ]
    return [t for t in tables if t is not None]
