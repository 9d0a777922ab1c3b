"""The benchmark report of a run directory: ``report.md`` and ``report.html`` with tables and figures.

Written from the run's files alone (``results.jsonl``, ``sketches.jsonl``, ``run.json``,
``timings.json``, and ``sweep.json`` once ``ovman sweep`` has run), so ``ovman report RUN``
regenerates it at any time. Besides the tables of :mod:`ovman_eval.tables` it holds the parser's
accuracy under the run's configuration and the admissibility sweep's table:

- ``figures/error_budget.png``: the rungs of the error budget as bars (static and embodied) with
  the gaps between them (Fig. 5a);
- ``figures/relations.png``: success per relation and overall for every arm with Wilson 95%
  intervals (static and embodied panels);
- ``figures/scenes.png``: success per scene; ``figures/instances.png``: by same-category instances;
- ``figures/map_quality.png``: per relation, the map and memory metrics (SIR, AEC, PA, TBS) on the
  episodes the two-visit agent passed and on those it failed (where the error budget goes);
- ``figures/episodes/<episode>.png``: one top-down figure per episode (:func:`draw_episode`): the
  reachable grid of the evaluated world, both visits' map instances (the queried category
  emphasised), the association, the ground truth of the category, the answer, every arm's
  prediction and the two-visit agent's path.

Above the headline, the run's facts, led by what the report could not use: the damaged lines of
``results.jsonl``/``sketches.jsonl`` it skipped (file, line number, reason; see
:mod:`ovman_eval.results`) and the embodied runs that could not be made (failure ``error``, with
the world's message; counted as failures in every table).

Sections: the headline, Figures, Tables (the paper's), Perception (the agent's segmenter on the
held-out perception homes, from its model's manifest), Map and memory (map and memory tables,
the stress-condition comparison, ``map_quality.png``), Validity checks (seeds, memory margin,
admissibility sweep, text queries, parser), Episodes. ``report.md`` links the figures;
``report.html`` is one file with the summary figures embedded (base64 PNG) and the per-episode
figures linked. Coordinates: AI2-THOR world floor (x, z) in
metres, drawn with x to the right and z up.
"""

from __future__ import annotations

import base64
import html
import json
import math
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from ovman_core.config import ConfigError, config_from_document
from ovman_core.files import atomic_write_text
from ovman_eval.results import (
    ARM_ORDER,
    BASELINE,
    EMBODIED_ERROR,
    RESULTS,
    RUN_FILE,
    TIMINGS,
    DamagedLine,
    EpisodeSketch,
    ResultRecord,
    ResultsError,
    baseline_records,
    complete_episodes,
    read_results,
    read_sketches,
)
from ovman_eval.stats import wilson_interval
from ovman_eval.sweep import read_sweep, sweep_table
from ovman_eval.tables import (
    EMBODIED,
    RUNGS,
    STATIC,
    Outcomes,
    Table,
    all_tables,
    error_budget,
    headline_table,
    instance_groups,
    parser_confusion_table,
    parser_table,
    rejection_table,
    scene_groups,
)
from ovman_mapping.encoders import make_encoder
from ovman_query.parser import QueryParser, evaluate_parser, held_out_report, training_cases
from ovman_query.surface_forms import development_phrasings

FIGURES = "figures"
EPISODE_FIGURES = "episodes"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
DPI = 110

ARM_COLOURS = {
    "two_visit": "#1f77b4",
    "two_visit_text": "#17becf",
    "sim_perception": "#bcbd22",
    "single_visit": "#ff7f0e",
    "oracle_grounding": "#2ca02c",
    "oracle_positions": "#9467bd",
    "given_answer": "#7f7f7f",
    "category_only": "#d62728",
}
ARM_MARKERS = {
    "two_visit": "o",
    "two_visit_text": "P",
    "sim_perception": "X",
    "single_visit": "s",
    "oracle_grounding": "D",
    "oracle_positions": "^",
    "given_answer": "*",
    "category_only": "v",
}
VISIT_COLOURS = {1: "#4c72b0", 2: "#dd8452"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    _pyplot().close(fig)
    return path


# ---- summary figures -------------------------------------------------------------------------------


def figure_error_budget(records: Sequence[ResultRecord], path: Path) -> Path | None:
    """Fig. 5a: each rung's success (static, and embodied when run) with the gap to the next rung."""
    if not any(r.arm in RUNGS for r in records):
        return None
    budget = error_budget(records)
    plt = _pyplot()
    rungs = list(budget.static)
    fig, ax = plt.subplots(figsize=(1.6 * len(rungs) + 2.5, 4.0))
    xs = range(len(rungs))
    width = 0.38 if budget.embodied is not None else 0.6
    static_x = [x - width / 2 for x in xs] if budget.embodied is not None else list(xs)
    bars = ax.bar(static_x, [budget.static[r] for r in rungs], width, color="#4c72b0", label="static gate")
    for bar, rung in zip(bars, rungs, strict=True):
        ax.annotate(
            f"{budget.static[rung]:.3f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    if budget.embodied is not None:
        ebars = ax.bar(
            [x + width / 2 for x in xs], [budget.embodied[r] for r in rungs], width, color="#dd8452", label="embodied"
        )
        for bar, rung in zip(ebars, rungs, strict=True):
            ax.annotate(
                f"{budget.embodied[rung]:.3f}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    for name, (lower, upper, gap) in budget.gaps.items():
        if lower == upper or upper not in rungs:  # navigation, and perception (beside the rungs)
            continue
        i, j = rungs.index(lower), rungs.index(upper)
        y = max(budget.static[lower], budget.static[upper]) + 0.08
        ax.annotate(
            "",
            xy=(static_x[j], budget.static[upper]),
            xytext=(static_x[i], budget.static[lower]),
            arrowprops={"arrowstyle": "->", "color": "#555555"},
        )
        ax.text(
            (static_x[i] + static_x[j]) / 2,
            min(y, 1.12),
            f"{name}\n{gap:+.3f}",
            ha="center",
            fontsize=7,
            color="#333333",
        )
    if "navigation" in budget.gaps:
        ax.text(
            len(rungs) - 0.5,
            1.2,
            f"navigation (oracle positions static − embodied): {budget.gaps['navigation'][2]:+.3f}",
            ha="right",
            fontsize=7,
        )
    ax.set_xticks(list(xs), [r.replace("_", " ") for r in rungs])
    ax.set_ylim(0.0, 1.25)
    ax.set_ylabel("success rate")
    ax.set_title(f"Error budget over {budget.episodes} episodes (Fig. 5a)")
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def figure_relations(records: Sequence[ResultRecord], path: Path) -> Path:
    """Success per relation (and overall) of every arm, Wilson 95% intervals; one panel per gate."""
    o = Outcomes(records)
    plt = _pyplot()
    gates = [STATIC, EMBODIED] if o.embodied else [STATIC]
    groups = [*o.relations, "overall"]
    fig, axes = plt.subplots(
        len(gates), 1, figsize=(max(7.0, 0.35 * len(groups) * len(o.arms)), 3.3 * len(gates)), squeeze=False
    )
    width = 0.8 / len(o.arms)
    for ax, gate in zip(axes[:, 0], gates, strict=True):
        for k, arm in enumerate(o.arms):
            rates, lows, highs = [], [], []
            for group in groups:
                episodes = o.episodes if group == "overall" else o.relation_episodes(group)
                hits, n = o.count(arm, gate, episodes)
                low, high = wilson_interval(hits, n) if n else (0.0, 0.0)
                rate = hits / n if n else 0.0
                rates.append(rate)
                lows.append(rate - low)
                highs.append(high - rate)
            xs = [g + (k - (len(o.arms) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(
                xs,
                rates,
                width,
                yerr=[lows, highs],
                capsize=2,
                color=ARM_COLOURS.get(arm, "#333333"),
                label=arm,
                error_kw={"linewidth": 0.8},
            )
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylim(0.0, 1.05)
        ax.set_ylabel("success rate")
        ax.set_title(f"{gate} success per relation (95% Wilson intervals)")
        ax.axvline(len(groups) - 1.5, color="#999999", linewidth=0.6)
    axes[0, 0].legend(fontsize=7, ncol=3, loc="upper left", bbox_to_anchor=(0.0, -0.12 if len(gates) == 1 else 1.25))
    fig.tight_layout()
    return _save(fig, path)


MAP_QUALITY = (
    ("memory", "sir", "SIR (identity resolution)"),
    ("visit2", "aec", "AEC of the visit-2 map"),
    ("visit2", "pa", "PA of the visit-2 map"),
    ("visit1", "aec", "AEC of the visit-1 map"),
    ("visit2", "tbs", "TBS of the visit-2 map"),
)
"""The map and memory metrics set against task success: (diagnostics section, key, label)."""


def figure_map_quality(records: Sequence[ResultRecord], path: Path, arm: str = "two_visit") -> Path | None:
    """Where the error budget goes: per relation, the mean of each map/memory metric over the
    episodes ``arm`` passed and over those it failed (static gate), with the episode counts. A
    metric that is lower on failures points at the map (coverage, accuracy) or the memory
    (identity resolution) as the cause. None without ``arm`` records carrying diagnostics."""
    o = Outcomes(records)
    if arm not in o.arms:
        return None
    diagnosed = [e for e in o.episodes if o.by_arm[arm][e].diagnostics and "memory" in o.by_arm[arm][e].diagnostics]
    if not diagnosed:
        return None
    plt = _pyplot()
    groups = [*o.relations, "overall"]
    fig, axes = plt.subplots(len(MAP_QUALITY), 1, figsize=(max(7.0, 0.9 * len(groups)), 2.2 * len(MAP_QUALITY)))
    width = 0.38
    for ax, (section, key, label) in zip(axes, MAP_QUALITY, strict=True):
        for k, (passed, colour, name) in enumerate(((True, "#2ca02c", "success"), (False, "#d62728", "failure"))):
            means, counts = [], []
            for group in groups:
                episodes = [e for e in diagnosed if group == "overall" or o.info[e].relation == group]
                values = [
                    float(o.by_arm[arm][e].diagnostics[section][key])  # type: ignore[index]
                    for e in episodes
                    if o.by_arm[arm][e].static.success == passed
                    and o.by_arm[arm][e].diagnostics[section].get(key) is not None  # type: ignore[index]
                ]
                means.append(sum(values) / len(values) if values else math.nan)
                counts.append(len(values))
            xs = [g + (k - 0.5) * width for g in range(len(groups))]
            ax.bar(xs, [0.0 if math.isnan(m) else m for m in means], width, color=colour, label=name)
            for x, m, n in zip(xs, means, counts, strict=True):
                ax.text(x, 0.02 if math.isnan(m) else m + 0.02, f"n={n}", ha="center", fontsize=6)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylim(0.0, 1.15)
        ax.set_ylabel(label, fontsize=7)
        ax.axvline(len(groups) - 1.5, color="#999999", linewidth=0.6)
    axes[0].set_title(f"Map and memory quality on the episodes {arm} passed and failed (static gate)")
    axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _save(fig, path)


def _figure_groups(o: Outcomes, groups: Sequence[tuple[str, list[str]]], title: str, xlabel: str, path: Path) -> Path:
    plt = _pyplot()
    gates = [STATIC, EMBODIED] if o.embodied else [STATIC]
    labels = [label for label, _ in groups]
    fig, axes = plt.subplots(
        len(gates), 1, figsize=(max(6.0, 0.3 * len(labels) * len(o.arms)), 3.0 * len(gates)), squeeze=False
    )
    width = 0.8 / len(o.arms)
    for ax, gate in zip(axes[:, 0], gates, strict=True):
        for k, arm in enumerate(o.arms):
            rates = []
            for _, episodes in groups:
                hits, n = o.count(arm, gate, episodes)
                rates.append(hits / n if n else math.nan)
            xs = [g + (k - (len(o.arms) - 1) / 2) * width for g in range(len(labels))]
            ax.bar(xs, rates, width, color=ARM_COLOURS.get(arm, "#333333"), label=arm)
        ax.set_xticks(range(len(labels)), [f"{label}\n(n={len(e)})" for label, e in groups], fontsize=7)
        ax.set_ylim(0.0, 1.05)
        ax.set_ylabel("success rate")
        ax.set_xlabel(xlabel)
        ax.set_title(f"{title} ({gate})")
    axes[0, 0].legend(fontsize=7, ncol=3, loc="lower left", bbox_to_anchor=(0.0, 1.12))
    fig.tight_layout()
    return _save(fig, path)


def figure_scenes(records: Sequence[ResultRecord], path: Path) -> Path:
    o = Outcomes(records)
    return _figure_groups(o, scene_groups(o), "Success per scene", "scene", path)


def figure_instances(records: Sequence[ResultRecord], path: Path) -> Path:
    o = Outcomes(records)
    return _figure_groups(
        o,
        instance_groups(o),
        "Success by same-category instances (Fig. 3)",
        "instances of the category in W1 ∪ W2",
        path,
    )


# ---- the per-episode figure ------------------------------------------------------------------------


def _draw_reachable(ax: Any, cells: Sequence[tuple[float, float]], size: float) -> None:
    """The free grid cells as one light-grey raster (cell centres at ``cells``, edge ``size`` metres)."""
    if not cells:
        return
    import numpy as np

    x0 = min(c[0] for c in cells)
    z0 = min(c[1] for c in cells)
    cols = np.array([round((c[0] - x0) / size) for c in cells])
    rows = np.array([round((c[1] - z0) / size) for c in cells])
    raster = np.full((rows.max() + 1, cols.max() + 1), np.nan)
    raster[rows, cols] = 1.0
    extent = (x0 - size / 2, x0 + (cols.max() + 0.5) * size, z0 - size / 2, z0 + (rows.max() + 0.5) * size)
    ax.imshow(
        raster, extent=extent, origin="lower", cmap="Greys", vmin=0.0, vmax=8.0, zorder=0, interpolation="nearest"
    )


def draw_episode(sketch: EpisodeSketch, records: Sequence[ResultRecord], path: Path) -> Path:
    """The top-down figure of one episode (see the module docstring); ``records``: its arms, one seed."""
    if not records:
        raise ValueError(f"draw_episode: no result records for group {sketch.group_id}")
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    info = records[0]
    category = info.category
    by_arm = {r.arm: r for r in records}
    xs = [p[0] for p in sketch.reachable] + [i.point[0] for i in (*sketch.truth1, *sketch.truth2)]
    zs = [p[1] for p in sketch.reachable] + [i.point[1] for i in (*sketch.truth1, *sketch.truth2)]
    span_x, span_z = (max(xs) - min(xs) + 2.0, max(zs) - min(zs) + 2.0) if xs else (10.0, 10.0)
    scale = 0.62
    fig, ax = plt.subplots(
        figsize=(min(max(span_x * scale + 3.6, 7.0), 16.0), min(max(span_z * scale + 1.2, 5.0), 14.0))
    )
    _draw_reachable(ax, sketch.reachable, sketch.grid_size)

    def rect(fp: Sequence[float], **kwargs: Any) -> None:
        ax.add_patch(Rectangle((fp[0], fp[1]), fp[2] - fp[0], fp[3] - fp[1], **kwargs))

    # Ground truth of the queried category: visit 1 dashed blue, end of visit 2 dashed orange.
    for visit, objects in ((1, sketch.truth1), (2, sketch.truth2)):
        for obj in objects:
            if obj.label == category:
                rect(obj.footprint, fill=False, linestyle="--", linewidth=1.0, edgecolor=VISIT_COLOURS[visit], zorder=2)
                ax.annotate(
                    obj.uid,
                    obj.point,
                    fontsize=6,
                    color=VISIT_COLOURS[visit],
                    xytext=(3, -8 if visit == 1 else 4),
                    textcoords="offset points",
                )
    # The answer region (green) and point.
    rect(info.answer_region, facecolor="#2ca02c", alpha=0.35, edgecolor="#2ca02c", linewidth=1.5, zorder=3)
    ax.plot(
        *info.answer_point,
        marker="*",
        markersize=11,
        color="#2ca02c",
        markeredgecolor="black",
        zorder=9,
        linestyle="none",
        label="answer",
    )
    # Map instances: the category emphasised, everything else faint.
    by_uid: dict[int, dict[str, Any]] = {1: {i.uid: i for i in sketch.map1}, 2: {i.uid: i for i in sketch.map2}}
    for visit in (1, 2):
        others = [i for i in by_uid[visit].values() if i.label != category]
        mine = [i for i in by_uid[visit].values() if i.label == category]
        ax.scatter(
            [i.point[0] for i in others],
            [i.point[1] for i in others],
            s=6,
            color=VISIT_COLOURS[visit],
            alpha=0.25,
            zorder=2,
            linewidths=0,
        )
        ax.scatter(
            [i.point[0] for i in mine],
            [i.point[1] for i in mine],
            s=40,
            color=VISIT_COLOURS[visit],
            edgecolors="black",
            linewidths=0.6,
            zorder=4,
            label=f"visit-{visit} map: {category}",
        )
        for i in mine:
            if i.moving:
                ax.annotate("moving", i.point, fontsize=6, xytext=(4, 4), textcoords="offset points")
    # The association: every pair touching the category, and unmatched instances of the category.
    for pair in sketch.pairs:
        a, b = by_uid[1].get(pair.uid1), by_uid[2].get(pair.uid2)
        if a is None or b is None or category not in (a.label, b.label):
            continue
        style = "-" if pair.stage == 2 else ":"
        ax.annotate(
            "",
            xy=b.point,
            xytext=a.point,
            arrowprops={"arrowstyle": "->", "linestyle": style, "color": "#444444", "linewidth": 1.0},
            zorder=5,
        )
    for uid in sketch.removed:
        i = by_uid[1].get(uid)
        if i is not None and i.label == category:
            ax.plot(*i.point, marker="x", markersize=10, color=VISIT_COLOURS[1], zorder=5, linestyle="none")
    for uid in sketch.appeared:
        i = by_uid[2].get(uid)
        if i is not None and i.label == category:
            ax.plot(*i.point, marker="+", markersize=12, color=VISIT_COLOURS[2], zorder=5, linestyle="none")
    # The two-visit agent's path (or the first arm with one), the start and every prediction.
    ax.plot(*info.start, marker=">", markersize=10, color="black", linestyle="none", zorder=7, label="start")
    walker = next(
        (by_arm[a] for a in ("two_visit", *ARM_ORDER) if a in by_arm and by_arm[a].embodied is not None), None
    )
    if walker is not None and walker.embodied is not None and len(walker.embodied.trajectory) > 1:
        trajectory = walker.embodied.trajectory
        ax.plot(
            [p[0] for p in trajectory],
            [p[1] for p in trajectory],
            color=ARM_COLOURS.get(walker.arm, "black"),
            linewidth=1.6,
            alpha=0.8,
            zorder=6,
            label=f"{walker.arm} path",
        )
        if walker.embodied.answer_point != info.answer_point:  # a moving answer: where it was at Stop
            ax.plot(
                *walker.embodied.answer_point,
                marker="*",
                markersize=11,
                markerfacecolor="none",
                markeredgecolor="#2ca02c",
                markeredgewidth=1.5,
                linestyle="none",
                zorder=9,
                label="answer at stop",
            )
        if walker.embodied.stop is not None:
            ax.plot(
                *walker.embodied.stop,
                marker="o",
                markersize=9,
                markerfacecolor="none",
                markeredgecolor="black",
                zorder=7,
                linestyle="none",
                label=f"{walker.arm} stop",
            )
    # Predictions as rings of decreasing size, so that arms predicting the same point stay visible.
    shown = [a for a in ARM_ORDER if a in by_arm and by_arm[a].static.point is not None and a != "given_answer"]
    for k, arm in enumerate(shown):
        record = by_arm[arm]
        verdict = "pass" if record.static.success else record.static.failure
        ax.plot(
            *record.static.point,
            marker=ARM_MARKERS.get(arm, "o"),
            markersize=17 - 2.2 * k,
            markerfacecolor="none",
            markeredgecolor=ARM_COLOURS.get(arm, "black"),
            markeredgewidth=1.8,
            linestyle="none",
            zorder=8,
            label=f"{arm}: {verdict}",
        )
    abstained = [a for a in ARM_ORDER if a in by_arm and by_arm[a].static.point is None]
    two = by_arm.get("two_visit")
    outcome = ""
    if two is not None:
        embodied = (
            "" if two.embodied is None else f", embodied {'pass' if two.embodied.success else two.embodied.failure}"
        )
        outcome = f"two_visit: static {'pass' if two.static.success else two.static.failure}{embodied}"
    ax.set_title(
        f"{info.episode_id} ({info.scene}): {info.relation} {category}, '{info.phrase}'\n{outcome}"
        + (f"; abstained: {', '.join(abstained)}" if abstained else ""),
        fontsize=9,
    )
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("z (m)")
    if xs:
        ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)
        ax.set_ylim(min(zs) - 1.0, max(zs) + 1.0)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return _save(fig, path)


# ---- the report ------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _run_facts(run_dir: Path, records: Sequence[ResultRecord]) -> list[tuple[str, str]]:
    run = _read_json(run_dir / RUN_FILE).get("identity", {})
    timings = _read_json(run_dir / TIMINGS)
    request = run.get("request", {})
    work = timings.get("work", {})
    episodes = len({r.episode_id for r in records})
    facts = [
        (
            "dataset",
            f"{request.get('dataset', '?')} (episodes.jsonl sha256 {str(run.get('dataset_sha256', '?'))[:16]}…)",
        ),
        ("episodes", f"{episodes} in {len({r.scene for r in records})} scenes"),
        ("arms", ", ".join(request.get("arms", sorted({r.arm for r in records})))),
        ("seeds", ", ".join(str(s) for s in request.get("seeds", sorted({r.seed for r in records})))),
        ("mode", "static gate only" if request.get("static_only") else "static gate and embodied runs"),
        ("code revision", str(run.get("code_revision", "?"))),
        ("encoder", str(run.get("encoder", "?"))),
        ("wall time", f"{timings.get('wall_s', float('nan')):.1f} s with {timings.get('workers', '?')} worker(s)"),
    ]
    if request.get("conditions"):
        facts.append(("stress conditions", f"{', '.join(request['conditions'])} (re-rendered, same episodes)"))
    if work:
        facts.append(
            (
                "work split (summed over workers)",
                ", ".join(f"{k[:-2].replace('_', ' ')} {v:.1f} s" for k, v in work.items()),
            )
        )
        static_s, load_s = work.get("static_s"), work.get("maps_load_s")
        if static_s is not None and load_s is not None and episodes:
            facts.append(
                (
                    "static gate",
                    f"{static_s:.2f} s answering and {load_s:.2f} s loading cached maps for {episodes} episodes "
                    "(every arm and seed; summed over workers)",
                )
            )
    return facts


RECOMPUTE = "`ovman benchmark` with the run's arguments and `--run-dir` of this run computes them again"


def _skipped_lines(damaged: Sequence[DamagedLine], incomplete: Sequence[str]) -> tuple[str, str]:
    """The fact naming the damaged lines the report skipped (per file, the line numbers and reasons)
    and the episodes left out of the tables because a result of theirs was on one."""
    by_file: dict[str, list[str]] = {}
    for line in damaged:
        by_file.setdefault(line.path.name, []).append(f"line {line.line} ({line.reason})")
    listed = "; ".join(f"{name} {', '.join(lines)}" for name, lines in by_file.items())
    left_out = f"; episodes left out of the tables: {', '.join(incomplete)}" if incomplete else ""
    return ("skipped damaged lines", f"{len(damaged)}, not used in this report: {listed}{left_out}; {RECOMPUTE}")


def _embodied_errors(records: Sequence[ResultRecord]) -> tuple[str, str] | None:
    """The fact listing the embodied runs that could not be made, by episode and message (or None)."""
    errors: dict[tuple[str, str, str], int] = {}
    for r in records:
        if r.embodied is not None and r.embodied.failure == EMBODIED_ERROR:
            key = (r.episode_id, r.condition, r.embodied.message)
            errors[key] = errors.get(key, 0) + 1
    if not errors:
        return None
    listed = "; ".join(
        f"{episode}{'' if condition == BASELINE else f' ({condition})'}, {count} run(s): {message}"
        for (episode, condition, message), count in errors.items()
    )
    return ("embodied errors", f"{sum(errors.values())} run(s) could not be made (counted as failures): {listed}")


def _parser_tables(run_dir: Path) -> list[Table] | str:
    """The parser's accuracy and held-out confusion under the run's own configuration (with the
    sentence-model fallback on the run's encoder, as the agent parses), or why it cannot be computed."""
    document = _read_json(run_dir / RUN_FILE).get("identity", {}).get("config")
    if document is None:
        return f"not computed: {run_dir / RUN_FILE} holds no configuration"
    try:
        config = config_from_document(document, f"{run_dir / RUN_FILE} (identity.config)")
    except ConfigError as err:
        return f"not computed: the run's configuration does not load with this code ({err})"
    parser = QueryParser(config.query_node.parser, embed=make_encoder(config.mapping_node.encoder).embed_text)
    held_out = held_out_report(parser)
    reports = [
        ("training phrasings", evaluate_parser(parser, training_cases())),
        ("development sets", evaluate_parser(parser, development_phrasings())),
        ("held-out phrasings", held_out),
    ]
    return [parser_table(reports), parser_confusion_table(held_out)]


def perception_tables(run_dir: Path) -> list[Table] | str:
    """The agent's segmenter on the held-out perception homes, from its model's manifest (what
    ``ovman train-perception`` measured: :func:`ovman_eval.perception.held_out_figures`), or why
    there is nothing to show."""
    from ovman_mapping.learned_segmenter import model_directory, read_manifest
    from ovman_mapping.segmenter import SegmenterError

    document = _read_json(run_dir / RUN_FILE).get("identity", {}).get("config")
    if document is None:
        return f"unavailable: {run_dir / RUN_FILE} holds no configuration"
    try:
        segmenter = config_from_document(document, f"{run_dir / RUN_FILE} (identity.config)").mapping_node.segmenter
    except ConfigError as err:
        return f"unavailable: the run's configuration does not load with this code ({err})"
    if segmenter.kind == "simulator":
        return "the agent read the simulator's segments and labels (ground truth): no segmenter to score"
    try:
        manifest = read_manifest(model_directory(segmenter))
    except SegmenterError as err:
        return f"unavailable: {err}"
    held = manifest.get("held_out") or {}
    figures = {"baseline": held, **(held.get("conditions") or {})}
    if "precision" not in held:
        return f"unavailable: {model_directory(segmenter)} has no held-out figures in its manifest"
    rows = tuple(
        (
            name,
            f"{f['precision']:.3f}",
            f"{f['recall']:.3f}",
            f"{f['accuracy']:.3f}",
            str(f.get("predicted", "–")),
            str(f.get("segments", "–")),
            str(f.get("frames", "–")),
        )
        for name, f in figures.items()
        if "precision" in f
    )
    scenes = held.get("test_scenes") or []
    labels = "its proposals; the labels are open_clip's" if segmenter.kind == "clip" else "segments and labels"
    notes = (
        f"The agent's segmenter ({segmenter.kind}, model {manifest['weights_sha256'][:12]}…, {labels}) on "
        f"{len(scenes)} held-out perception homes ({', '.join(scenes[:2])}{', …' if len(scenes) > 2 else ''}), "
        "seeds disjoint from every benchmark scene; precision and recall of segments at mask IoU ≥ "
        f"{held.get('iou_threshold', 0.5)}, top-1 accuracy of the matched ones. From the model's manifest "
        "(`ovman eval-perception` measures any model anew).",
    )
    tables = [
        Table(
            "perception",
            "Perception: the agent's segmenter on held-out homes",
            ("condition", "precision", "recall", "accuracy", "predicted", "true segments", "frames"),
            rows,
            notes,
        )
    ]
    confusions = held.get("confusions") or []
    per_category = held.get("per_category") or {}
    if confusions or per_category:
        worst = sorted(per_category.items(), key=lambda item: (item[1]["accuracy"], item[0]))[:5]
        rows = tuple((f"{c['true']} → {c['predicted']}", str(c["count"]), "", "") for c in confusions[:8]) + tuple(
            (f"{name} (accuracy)", "", f"{row['accuracy']:.3f}", str(row["matched"])) for name, row in worst
        )
        tables.append(
            Table(
                "perception_confusions",
                "Perception: most frequent confusions and the least accurate categories (baseline)",
                ("true → predicted / category", "count", "accuracy", "matched"),
                rows,
            )
        )
    return tables


def _embed(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def write_report(run_dir: str | Path, *, episode_figures: bool = True, workers: int = 1) -> tuple[Path, Path]:
    """Write ``report.md``, ``report.html`` and the figures of a finished run; returns both reports.
    ``workers``: processes drawing the per-episode figures (the same files whatever the number).
    Damaged lines of the run's files are skipped and named at the top of the report, with the
    episodes they leave out of the tables (:func:`ovman_eval.results.complete_episodes`; the caller
    may say so too: :func:`ovman_eval.results.read_results` returns them). ResultsError when no
    episode is left."""
    if workers < 1:
        raise ValueError(f"write_report: workers must be at least 1, got {workers}")
    run_dir = Path(run_dir)
    read = read_results(run_dir)
    records, incomplete = complete_episodes(read)
    if not records:
        raise ResultsError(
            f"{run_dir / RESULTS}: no episode has an intact result line for every arm and seed "
            f"({len(read.damaged)} damaged lines); {RECOMPUTE}"
        )
    sketches = read_sketches(run_dir)
    figures = run_dir / FIGURES
    seed = min(r.seed for r in records)
    first_seed = [r for r in baseline_records(records) if r.seed == seed]  # stress conditions: their tables only
    summary: list[tuple[str, Path]] = []
    for title, make, name in (
        ("Error budget (Fig. 5a)", figure_error_budget, "error_budget.png"),
        ("Success per relation, Wilson 95% intervals", figure_relations, "relations.png"),
        ("Success per scene", figure_scenes, "scenes.png"),
        ("Success by same-category instances (Fig. 3)", figure_instances, "instances.png"),
        ("Map and memory quality against success per relation", figure_map_quality, "map_quality.png"),
    ):
        made = make(first_seed, figures / name)
        if made is not None:
            summary.append((title, made))
    by_episode: dict[str, list[ResultRecord]] = {}
    for record in first_seed:
        by_episode.setdefault(record.episode_id, []).append(record)
    drawn: dict[str, Path] = {}
    if episode_figures:
        jobs = [
            (sketches[recs[0].group_id], recs, figures / EPISODE_FIGURES / f"{episode_id}.png")
            for episode_id, recs in by_episode.items()
            if recs[0].group_id in sketches
        ]
        drawn = dict(zip((job[2].stem for job in jobs), _draw_episodes(jobs, workers), strict=True))
    episodes = [(recs[0], drawn.get(episode_id)) for episode_id, recs in by_episode.items()]
    tables = all_tables(records, seed)
    facts = _run_facts(run_dir, records)
    errors = _embodied_errors(records)
    if errors is not None:
        facts.insert(0, errors)
    damaged = (*read.damaged, *sketches.damaged)
    if damaged:
        facts.insert(0, _skipped_lines(damaged, incomplete))
    parser = _parser_tables(run_dir)
    if isinstance(parser, str):
        facts.append(("parser accuracy", parser))
    else:
        tables.extend(parser)
    perception = perception_tables(run_dir)
    if isinstance(perception, str):
        facts.append(("perception", perception))
    else:
        tables.extend(perception)
    swept = read_sweep(run_dir)
    if swept is not None:
        tables.append(sweep_table(swept))
    generation = _read_json(run_dir / RUN_FILE).get("generation")
    if generation:
        tables.append(rejection_table(generation))
    else:
        facts.append(("generation rejections", "unavailable: the run's dataset has no readable manifest"))
    md_path = run_dir / REPORT_MD
    html_path = run_dir / REPORT_HTML
    atomic_write_text(md_path, _markdown(run_dir, facts, tables, summary, episodes, by_episode))
    atomic_write_text(html_path, _html(run_dir, facts, tables, summary, episodes, by_episode))
    return md_path, html_path


def _draw_episodes(jobs: Sequence[tuple[EpisodeSketch, Sequence[ResultRecord], Path]], workers: int) -> list[Path]:
    """:func:`draw_episode` of every job, in ``workers`` processes (forked: matplotlib is loaded)."""
    if workers == 1 or len(jobs) < 2:
        return [draw_episode(*job) for job in jobs]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        return list(pool.map(_draw_job, jobs, chunksize=max(1, len(jobs) // (4 * workers))))


def _draw_job(job: tuple[EpisodeSketch, Sequence[ResultRecord], Path]) -> Path:
    return draw_episode(*job)


def _episode_row(recs: Sequence[ResultRecord]) -> list[str]:
    by_arm = {r.arm: r for r in recs}
    cells = []
    for arm in ARM_ORDER:
        r = by_arm.get(arm)
        if r is None:
            continue
        static = "✓" if r.static.success else r.static.failure
        embodied = "" if r.embodied is None else (" / ✓" if r.embodied.success else f" / {r.embodied.failure}")
        cells.append(f"{static}{embodied}")
    return cells


EPISODE_ERROR_NOTE = f"{EMBODIED_ERROR} = the embodied run could not be made, see embodied errors above"

SECTIONS = (
    ("Perception", ("perception", "perception_confusions"), ()),
    ("Map and memory", ("maps", "memory", "appearance", "stress_success", "stress_maps"), ("map_quality.png",)),
    ("Validity checks", ("seeds", "margin", "sweep", "rejections", "text_queries", "parser", "parser_confusion"), ()),
)
"""Report sections after "Figures" and "Tables": (heading, table keys, figure file names)."""


def _sections(
    tables: Sequence[Table], figures: Sequence[tuple[str, Path]]
) -> list[tuple[str, list[Table], list[tuple[str, Path]]]]:
    """Tables and figures grouped under their headings, in order; empty sections are left out."""
    claimed_tables = {key for _, keys, _ in SECTIONS for key in keys}
    claimed_figures = {name for _, _, names in SECTIONS for name in names}
    out = [
        ("Figures", [], [f for f in figures if f[1].name not in claimed_figures]),
        ("Tables", [t for t in tables if t.key not in claimed_tables], []),
    ]
    for heading, keys, names in SECTIONS:
        out.append((heading, [t for t in tables if t.key in keys], [f for f in figures if f[1].name in names]))
    return [section for section in out if section[1] or section[2]]


def _markdown(
    run_dir: Path,
    facts: list[tuple[str, str]],
    tables: list[Table],
    summary: list[tuple[str, Path]],
    episodes: list[tuple[ResultRecord, Path | None]],
    by_episode: dict[str, list[ResultRecord]],
) -> str:
    lines = [f"# OVMAN benchmark: {run_dir.name}", ""]
    lines += [f"- **{k}**: {v}" for k, v in facts]
    lines.append("")
    lines.append(tables[0].markdown())
    for heading, section_tables, figures in _sections(tables[1:], summary):
        lines.append(f"## {heading}\n")
        lines += [f"![{title}]({path.relative_to(run_dir).as_posix()})\n" for title, path in figures]
        lines += [t.markdown() for t in section_tables]
    arms = [a for a in ARM_ORDER if any(r.arm == a for recs in by_episode.values() for r in recs)]
    lines.append("## Episodes\n")
    lines.append(
        f"Each cell: static outcome / embodied outcome (✓ = success, else the failure class; {EPISODE_ERROR_NOTE}).\n"
    )
    lines.append("| episode | relation | category | " + " | ".join(arms) + " | figure |")
    lines.append("|" + "---|" * (len(arms) + 4))
    for record, figure in episodes:
        link = f"[png]({figure.relative_to(run_dir).as_posix()})" if figure is not None else "–"
        cells = _episode_row(by_episode[record.episode_id])
        lines.append(
            f"| {record.episode_id} | {record.relation} | {record.category} | " + " | ".join(cells) + f" | {link} |"
        )
    return "\n".join(lines) + "\n"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1400px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
p.note { font-size: 0.8em; color: #555; margin: 0.2em 0; }
img.figure { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0 1.5em; }
.gallery img { width: 420px; margin: 4px; border: 1px solid #ddd; }
"""


def _html(
    run_dir: Path,
    facts: list[tuple[str, str]],
    tables: list[Table],
    summary: list[tuple[str, Path]],
    episodes: list[tuple[ResultRecord, Path | None]],
    by_episode: dict[str, list[ResultRecord]],
) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>OVMAN benchmark {html.escape(run_dir.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>OVMAN benchmark: {html.escape(run_dir.name)}</h1><ul>",
        *(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in facts),
        "</ul>",
        tables[0].html(),
    ]
    for heading, section_tables, figures in _sections(tables[1:], summary):
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for title, path in figures:
            alt = html.escape(title)
            parts.append(f"<h3>{alt}</h3><img class='figure' alt='{alt}' src='{_embed(path)}'>")
        parts += [t.html() for t in section_tables]
    parts += [
        "<h2>Episodes</h2><p class='note'>Each cell: static outcome / embodied outcome (✓ = success, else the "
        f"failure class; {EPISODE_ERROR_NOTE}). Figures are linked (files under figures/episodes/).</p>",
    ]
    arms = [a for a in ARM_ORDER if any(r.arm == a for recs in by_episode.values() for r in recs)]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ("episode", "relation", "category", *arms, "figure"))
    rows = []
    for record, figure in episodes:
        link = f"<a href='{html.escape(figure.relative_to(run_dir).as_posix())}'>png</a>" if figure is not None else "–"
        cells = "".join(
            f"<td>{html.escape(c)}</td>"
            for c in (record.episode_id, record.relation, record.category, *_episode_row(by_episode[record.episode_id]))
        )
        rows.append(f"<tr>{cells}<td>{link}</td></tr>")
    parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    gallery = []
    for record, figure in episodes:
        if figure is not None:
            src = html.escape(figure.relative_to(run_dir).as_posix())
            gallery.append(
                f"<a href='{src}'><img loading='lazy' alt='{html.escape(record.episode_id)}' src='{src}'></a>"
            )
    if gallery:
        parts.append("<div class='gallery'>" + "".join(gallery) + "</div>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def headline_text(run_dir: str | Path) -> str:
    """The headline table of a finished run as plain text (printed at the end of ``ovman benchmark``)."""
    return headline_table(complete_episodes(read_results(run_dir))[0]).text()
