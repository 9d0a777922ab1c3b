"""The benchmark report of a run directory: ``report.md`` and ``report.html`` with tables and figures.

Written from the run's files alone (``results.jsonl``, ``sketches.jsonl``, ``run.json``,
``timings.json``, and ``sweep.json`` / ``appearance_fit.json`` when present), so ``ovman report RUN``
regenerates it at any time. Above the headline, the run's facts, led by what the report could not
use (damaged lines it skipped, embodied runs that could not be made). ``report.html`` is one file
with the summary figures embedded (base64 PNG). Coordinates: AI2-THOR world floor (x, z) in metres,
drawn with x to the right and z up.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from ovman_core.files import atomic_write_text
from ovman_eval.analysis.appearance_fit import FIT_FILE, fit_tables
from ovman_eval.analysis.configured_sections import parser_tables, perception_tables, run_configuration
from ovman_eval.analysis.figures import (
    draw_episode,
    figure_error_budget,
    figure_instances,
    figure_maintained,
    figure_map_quality,
    figure_relations,
    figure_scenes,
)
from ovman_eval.analysis.paper import side_by_side_table
from ovman_eval.analysis.sweep import read_sweep, sweep_table
from ovman_eval.analysis.table import Table
from ovman_eval.analysis.tables import (
    all_tables,
    multi_change_tables,
    rejection_table,
)
from ovman_eval.runs.results import (
    ARM_ORDER,
    BASELINE,
    EMBODIED_ERROR,
    MULTI_CHANGE_PART,
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

FIGURES = "figures"
EPISODE_FIGURES = "episodes"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"


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


def _multi_change_part(run_dir: Path) -> tuple[tuple[str, str], list[ResultRecord]] | str | None:
    """The run's multi-change part (``RUN/multi_change``): a fact and its intact records; why it
    cannot be tabulated (unfinished, or no intact episode); None when the run has no such part."""
    part = run_dir / MULTI_CHANGE_PART
    if not part.is_dir():
        return None
    if not (part / RESULTS).is_file():
        return f"unfinished: {part} has no {RESULTS} yet; {RECOMPUTE}"
    read = read_results(part)
    records, incomplete = complete_episodes(read)
    if not records:
        return f"unavailable: no episode of {part / RESULTS} has an intact line for every arm and seed; {RECOMPUTE}"
    request = _read_json(part / RUN_FILE).get("identity", {}).get("request", {})
    wall = _read_json(part / TIMINGS).get("wall_s", float("nan"))
    skipped = f"; {len(read.damaged)} damaged lines skipped, left out: {', '.join(incomplete)}" if read.damaged else ""
    fact = (
        "multi-change part",
        f"{request.get('dataset', '?')}: {len({r.episode_id for r in records})} episodes in "
        f"{len({r.group_id for r in records})} groups, baseline; wall time {wall:.1f} s (tables under "
        f'"Multi-change split"){skipped}',
    )
    return fact, records


def _embed(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def write_report(run_dir: str | Path, *, episode_figures: bool = True, workers: int = 1) -> tuple[Path, Path]:
    """Write ``report.md``, ``report.html`` and the figures of a finished run; returns both reports.
    ``workers``: processes drawing the per-episode figures (the same files whatever the number).
    Damaged lines of the run's files are skipped and named at the top of the report, with the
    episodes they leave out of the tables (:func:`ovman_eval.runs.results.complete_episodes`; the caller
    may say so too: :func:`ovman_eval.runs.results.read_results` returns them). ResultsError when no
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
        ("A maintained map against two visits, grounding handed over (Fig. 4)", figure_maintained, "maintained.png"),
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
    loaded = run_configuration(run_dir)
    if not isinstance(loaded, str) and loaded[1]:
        facts.append(
            (
                "configuration",
                f"{len(loaded[1])} key(s) came into the configuration after this run; its parser and "
                f"perception sections read them at the current values: {', '.join(loaded[1])}",
            )
        )
    parser = parser_tables(run_dir)
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
    part = _multi_change_part(run_dir)
    part_records: list[ResultRecord] = []
    if isinstance(part, str):
        facts.append(("multi-change part", part))
    elif part is not None:
        facts.append(part[0])
        part_records = part[1]
        tables.extend(multi_change_tables(part_records))
    tables.append(side_by_side_table(records, part_records))
    fitted = _read_json(run_dir / FIT_FILE)
    if fitted:
        tables.extend(fit_tables(fitted))
    md_path = run_dir / REPORT_MD
    html_path = run_dir / REPORT_HTML
    content = ReportContent(run_dir, facts, tables, summary, episodes, by_episode)
    atomic_write_text(md_path, _markdown(content))
    atomic_write_text(html_path, _html(content))
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
    ("Multi-change split", ("multi_change", "multi_change_rung"), ()),
    ("Side by side with the paper", ("paper",), ()),
    ("Perception", ("perception", "perception_confusions"), ()),
    (
        "Map and memory",
        (
            "maps",
            "memory",
            "remember",
            "appearance",
            "appearance_fit",
            "appearance_variants",
            "stress_success",
            "stress_maps",
        ),
        ("map_quality.png",),
    ),
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


@dataclasses.dataclass(frozen=True)
class ReportContent:
    """What both renderings of a report hold: the run's facts, its tables (the headline first), the
    summary figures (title, path), each episode's first record and figure, and the records by episode."""

    run_dir: Path
    facts: list[tuple[str, str]]
    tables: list[Table]
    summary: list[tuple[str, Path]]
    episodes: list[tuple[ResultRecord, Path | None]]
    by_episode: dict[str, list[ResultRecord]]


def _markdown(content: ReportContent) -> str:
    run_dir, facts, tables, summary = content.run_dir, content.facts, content.tables, content.summary
    episodes, by_episode = content.episodes, content.by_episode
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


def _html(content: ReportContent) -> str:
    run_dir, facts, tables, summary = content.run_dir, content.facts, content.tables, content.summary
    episodes, by_episode = content.episodes, content.by_episode
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
