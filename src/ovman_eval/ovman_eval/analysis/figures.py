"""The report's figures, drawn with matplotlib (Agg) from result records and episode sketches.

One function per summary figure (error budget, relations, maintained map, scenes, instances, map
quality), and :func:`draw_episode`: one episode from above (maps, association, truth, answer,
predictions, path). Coordinates: AI2-THOR world floor (x, z) in metres, drawn with x to the right
and z up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ovman_eval.analysis.stats import wilson_interval
from ovman_eval.analysis.table import EMBODIED, STATIC
from ovman_eval.analysis.tables import (
    RUNGS,
    Outcomes,
    error_budget,
    instance_groups,
    scene_groups,
)
from ovman_eval.runs.results import (
    ARM_ORDER,
    EpisodeSketch,
    ResultRecord,
)

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
    "maintained_map": "#8c564b",
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
    "maintained_map": "h",
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


def figure_relations(records: Sequence[ResultRecord], path: Path, title: str = "") -> Path:
    """Success per relation (and overall) of every arm, Wilson 95% intervals; one panel per gate
    (``title``: what the panels' titles begin with)."""
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
        ax.set_title(f"{title}{gate} success per relation (95% Wilson intervals)")
        ax.axvline(len(groups) - 1.5, color="#999999", linewidth=0.6)
    axes[0, 0].legend(fontsize=7, ncol=3, loc="upper left", bbox_to_anchor=(0.0, -0.12 if len(gates) == 1 else 1.25))
    fig.tight_layout()
    return _save(fig, path)


FIG4_ARMS = ("maintained_map", "oracle_grounding")
"""Fig. 4's pair: one maintained map against the two-visit reading, both with grounding handed over."""


def figure_maintained(records: Sequence[ResultRecord], path: Path) -> Path | None:
    """Fig. 4: per relation, the maintained map against the two-visit reading of the same maps,
    both with grounding handed over (Wilson 95% intervals); None unless both arms ran."""
    chosen = [r for r in records if r.arm in FIG4_ARMS]
    if {r.arm for r in chosen} != set(FIG4_ARMS):
        return None
    return figure_relations(chosen, path, "Fig. 4, grounding handed over: ")


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
