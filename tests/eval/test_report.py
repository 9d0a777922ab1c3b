"""The report of a run directory: markdown and HTML with every table, the figures, `ovman report`."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from pathlib import Path

import pytest

from ovman_core.config import load_config, to_document
from ovman_eval.analysis.configured_sections import perception_tables
from ovman_eval.analysis.figures import draw_episode, figure_maintained, figure_map_quality
from ovman_eval.analysis.report import REPORT_HTML, REPORT_MD, write_report
from ovman_eval.analysis.tables import all_tables, headline_table
from ovman_eval.cli.main import main
from ovman_eval.runs.results import (
    ARM_ORDER,
    EMBODIED_ERROR,
    FINISHED,
    RESULTS,
    RUN_FILE,
    SKETCHES,
    TIMINGS,
    ResultsError,
    read_results,
    read_sketches,
    to_json_line,
)
from ovman_mapping.learned_segmenter import MANIFEST_FILE, PACKAGED_MODEL

from .benchmark_records import RELATIONS, map_summary, memory, record, sketch

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EPISODES = 6
ARMS = ARM_ORDER


def run_records() -> list:
    records = []
    for i in range(EPISODES):
        relation = RELATIONS[i % len(RELATIONS)]
        diagnostics = {"visit1": map_summary(0.9), "visit2": map_summary(0.8), "memory": memory(0.7, 4, 3, 5)}
        for arm in ARMS:
            success = arm in ("oracle_positions", "given_answer") or (i + ARMS.index(arm)) % 3 != 0
            records.append(
                record(
                    f"e{i}",
                    arm,
                    success,
                    success,
                    relation=relation,
                    scene=f"embedded-{i % 3}",
                    instances=2 + i % 4,
                    probability=0.4 if arm == "single_visit" else None,
                    diagnostics=diagnostics if arm in ("two_visit", "two_visit_text", "oracle_grounding") else None,
                )
            )
    return records


def make_run_dir(parent, with_config: bool = True):
    """A finished run directory written from hand-built records (its configuration stored or not)."""
    directory = parent / "20250101-000000"
    directory.mkdir()
    records = run_records()
    (directory / RESULTS).write_text("".join(to_json_line(r) + "\n" for r in records))
    (directory / SKETCHES).write_text("".join(to_json_line(sketch(f"e{i}")) + "\n" for i in range(EPISODES)))
    identity = {"request": {"dataset": "data/x", "arms": list(ARMS), "seeds": [0], "static_only": False}}
    if with_config:
        identity["config"] = to_document(load_config())
    (directory / RUN_FILE).write_text(
        json.dumps({"identity": {**identity, "code_revision": "abc", "encoder": "label"}})
    )
    (directory / TIMINGS).write_text(json.dumps({"wall_s": 12.5, "workers": 2, "work": {"static_s": 0.4}}))
    (directory / FINISHED).write_text("{}\n")
    return directory


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A run directory and its report (written once for the tests that only read it)."""
    directory = make_run_dir(tmp_path_factory.mktemp("run"))
    md_path, html_path = write_report(directory)
    return directory, md_path, html_path


@pytest.fixture
def run_dir(tmp_path):
    return make_run_dir(tmp_path)


def test_report_holds_every_table_and_the_figures(reported):
    run_dir, md_path, html_path = reported
    markdown = md_path.read_text()
    records = read_results(run_dir)
    for table in all_tables(records):
        assert f"### {table.title}" in markdown
    assert "### Query parser accuracy" in markdown
    assert "### Relation supplied versus inferred from text" in markdown
    for name in ("error_budget", "relations", "scenes", "instances", "map_quality"):
        figure = run_dir / "figures" / f"{name}.png"
        assert figure.read_bytes().startswith(PNG_MAGIC)
        assert f"(figures/{name}.png)" in markdown
    for i in range(EPISODES):
        assert (run_dir / "figures" / "episodes" / f"e{i}.png").read_bytes().startswith(PNG_MAGIC)
        assert f"[png](figures/episodes/e{i}.png)" in markdown
    assert md_path.name == REPORT_MD and html_path.name == REPORT_HTML


def test_html_report_embeds_the_summary_figures_and_links_the_episodes(reported):
    run_dir, _, html_path = reported
    page = html_path.read_text()
    embedded = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(embedded) == 6  # error budget, relations, Fig. 4, scenes, instances, map quality
    assert all(base64.b64decode(data).startswith(PNG_MAGIC) for data in embedded)
    assert "href='figures/episodes/e3.png'" in page
    # + the parser's accuracy and confusion, the side-by-side with the paper, the perception tables and the episodes
    perception = perception_tables(run_dir)
    assert page.count("<table>") == len(all_tables(read_results(run_dir))) + 4 + len(perception)
    assert "<h2>Side by side with the paper</h2>" in page
    assert "Query parser: per-relation confusion (held-out)" in page


def test_the_perception_section_scores_the_agents_segmenter_on_held_out_homes(reported):
    _, md_path, _ = reported
    markdown = md_path.read_text()
    section = markdown[markdown.index("## Perception") : markdown.index("## Map and memory")]
    assert "### Perception: the agent's segmenter on held-out homes" in section
    manifest = json.loads((PACKAGED_MODEL / MANIFEST_FILE).read_text())
    held = manifest["held_out"]
    assert f"| baseline | {held['precision']:.3f} | {held['recall']:.3f} | {held['accuracy']:.3f} |" in section
    for condition in ("low_light", "texture"):
        assert f"| {condition} | {held['conditions'][condition]['precision']:.3f} |" in section
    assert "### Perception: most frequent confusions" in section


def test_the_perception_section_says_why_when_there_is_no_segmenter_to_score(tmp_path):
    run_dir = make_run_dir(tmp_path)
    run = json.loads((run_dir / RUN_FILE).read_text())
    segmenter = run["identity"]["config"]["mapping_node"]["ros__parameters"]["segmenter"]
    segmenter["kind"] = "simulator"
    (run_dir / RUN_FILE).write_text(json.dumps(run))
    assert "no segmenter to score" in perception_tables(run_dir)
    segmenter.update(kind="learned", model=str(tmp_path / "nowhere"))
    (run_dir / RUN_FILE).write_text(json.dumps(run))
    assert perception_tables(run_dir).startswith("unavailable:") and "nowhere" in perception_tables(run_dir)
    md_path, _ = write_report(run_dir, episode_figures=False)
    assert "**perception**: unavailable" in md_path.read_text()


def test_report_says_why_the_parser_table_is_missing_without_the_runs_configuration(tmp_path):
    md_path, _ = write_report(make_run_dir(tmp_path, with_config=False), episode_figures=False)
    markdown = md_path.read_text()
    assert "Query parser accuracy" not in markdown
    assert "parser accuracy" in markdown and "holds no configuration" in markdown


def test_a_run_from_before_a_config_key_was_added_still_gets_its_parser_and_perception_sections(tmp_path):
    """A key the code's configuration gained after the run is read at its current value, and the
    report names it; a key the code does not know still refuses the run's configuration."""
    run_dir = make_run_dir(tmp_path)
    run = json.loads((run_dir / RUN_FILE).read_text())
    config = run["identity"]["config"]
    del config["mapping_node"]["ros__parameters"]["segmenter"]["precision"]
    del config["query_node"]["ros__parameters"]["parser"]["fallback_min_confidence"]
    (run_dir / RUN_FILE).write_text(json.dumps(run))
    markdown = write_report(run_dir, episode_figures=False)[0].read_text()
    assert "Query parser accuracy" in markdown
    assert "### Perception: the agent's segmenter on held-out homes" in markdown
    assert "2 key(s) came into the configuration after this run" in markdown
    assert "mapping_node.ros__parameters.segmenter.precision" in markdown
    assert "query_node.ros__parameters.parser.fallback_min_confidence" in markdown
    config["query_node"]["ros__parameters"]["parser"]["no_such_key"] = 1
    (run_dir / RUN_FILE).write_text(json.dumps(run))
    markdown = write_report(run_dir, episode_figures=False)[0].read_text()
    assert "Query parser accuracy" not in markdown and "does not load with this code" in markdown
    assert perception_tables(run_dir).startswith("unavailable: the run's configuration does not load")


def test_map_quality_figure_needs_the_agents_diagnostics(tmp_path):
    records = [r for r in run_records() if r.arm != "two_visit"]
    assert figure_map_quality(records, tmp_path / "none.png") is None
    assert figure_map_quality(run_records(), tmp_path / "m.png").read_bytes().startswith(PNG_MAGIC)


def test_fig_4_is_drawn_only_with_both_of_its_arms(tmp_path):
    records = run_records()
    assert {"maintained_map", "oracle_grounding"} <= {r.arm for r in records}
    assert figure_maintained(records, tmp_path / "f.png").read_bytes().startswith(PNG_MAGIC)
    without = [r for r in records if r.arm != "maintained_map"]
    assert figure_maintained(without, tmp_path / "none.png") is None


def test_report_without_episode_figures_writes_none(run_dir):
    md_path, _ = write_report(run_dir, episode_figures=False)
    assert not (run_dir / "figures" / "episodes").exists()
    assert "[png](" not in md_path.read_text()


def test_episode_figure_is_drawn_from_a_sketch_and_the_episode_records(tmp_path):
    records = [r for r in run_records() if r.episode_id == "e0"]
    out = draw_episode(read_sketch_back(tmp_path), records, tmp_path / "e0.png")
    assert out.read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="no result records"):
        draw_episode(sketch(), [], tmp_path / "none.png")


def read_sketch_back(tmp_path):
    """The sketch through its JSON line (what reports read)."""
    (tmp_path / SKETCHES).write_text(to_json_line(sketch()) + "\n")
    return read_sketches(tmp_path)["e0"]


def test_ovman_report_regenerates_the_report_and_prints_the_headline(run_dir, capsys):
    assert main(["report", str(run_dir), "--no-episode-figures"]) == 0
    out = capsys.readouterr().out
    assert "Headline: every arm" in out and "two_visit" in out
    assert (run_dir / REPORT_HTML).is_file()


def test_ovman_report_on_an_unfinished_run_says_how_to_finish_it(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    assert "run `ovman benchmark` again to resume" in capsys.readouterr().err
    with pytest.raises(ResultsError):
        read_results(tmp_path)


def test_ovman_report_skips_a_damaged_line_of_a_finished_run_and_says_which(run_dir, capsys):
    path = run_dir / RESULTS
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"success":true', '"success":false', 1)  # still valid JSON
    lines.insert(5, "")
    path.write_text("\n".join(lines) + "\n")
    damaged = path.read_bytes()
    assert main(["report", str(run_dir), "--no-episode-figures"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"ovman report: skipped {path} line 3: checksum mismatch: the line was changed after it was written",
        f"ovman report: skipped {path} line 6: blank line",
        "ovman report: 2 damaged line(s) skipped, 1 episode(s) left out of the tables: e0 (named at the top of "
        f"{run_dir / REPORT_MD})",
    ]
    markdown = (run_dir / REPORT_MD).read_text()
    assert markdown.splitlines()[2] == (  # the first fact, under the title
        "- **skipped damaged lines**: 2, not used in this report: results.jsonl line 3 (checksum mismatch: the "
        "line was changed after it was written), line 6 (blank line); episodes left out of the tables: e0; "
        "`ovman benchmark` with the run's arguments and `--run-dir` of this run computes them again"
    )
    assert "| e0 |" not in markdown and "| e1 |" in markdown
    assert "<li><b>skipped damaged lines</b>: 2, not used" in (run_dir / REPORT_HTML).read_text()
    assert (run_dir / FINISHED).is_file() and path.read_bytes() == damaged  # still finished, left as it was
    assert len(read_results(run_dir)) == len(run_records()) - 1


def test_ovman_report_refuses_a_run_where_every_episode_lost_a_line(run_dir, capsys):
    path = run_dir / RESULTS
    lines = path.read_text().splitlines()
    for i in range(EPISODES):  # episode i loses arm i's line
        lines[i * len(ARMS) + i] = "{}"
    path.write_text("\n".join(lines) + "\n")
    assert main(["report", str(run_dir), "--no-episode-figures"]) == 1
    assert capsys.readouterr().err == (
        f"ovman report: {path}: no episode has an intact result line for every arm and seed ({EPISODES} damaged "
        "lines); `ovman benchmark` with the run's arguments and `--run-dir` of this run computes them again\n"
    )


def test_the_report_lists_embodied_runs_that_could_not_be_made_and_counts_them_as_failures(run_dir):
    records = run_records()
    broken = [r for r in records if r.episode_id == "e1"]
    message = "reset('embedded-1'): cannot place the agent at (1.3, 2.0): yaw 45.0 is not a multiple of 90.0"
    error = dataclasses.replace(
        broken[0].embodied, success=False, failure=EMBODIED_ERROR, stop=None, spl=0.0, message=message
    )
    records = [dataclasses.replace(r, embodied=error) if r.episode_id == "e1" else r for r in records]
    (run_dir / RESULTS).write_text("".join(to_json_line(r) + "\n" for r in records))
    md_path, _ = write_report(run_dir, episode_figures=False)
    markdown = md_path.read_text()
    assert markdown.splitlines()[2] == (
        f"- **embodied errors**: {len(broken)} run(s) could not be made (counted as failures): e1, "
        f"{len(broken)} run(s): {message}"
    )
    row = next(line for line in markdown.splitlines() if line.startswith("| e1 |"))
    assert row.count(f" / {EMBODIED_ERROR}") == len(ARMS)
    given = headline_table(read_results(run_dir)).rows[ARMS.index("given_answer")]
    assert f"{EPISODES - 1}/{EPISODES}" in " ".join(given)  # the error is a failure of the embodied run


@pytest.mark.pool
def test_episode_figures_drawn_in_two_processes_are_the_same_files(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = make_run_dir(tmp_path / "one")
    two = make_run_dir(tmp_path / "two")
    write_report(one)
    write_report(two, workers=2)
    for i in range(EPISODES):
        name = Path("figures") / "episodes" / f"e{i}.png"
        assert (one / name).read_bytes() == (two / name).read_bytes()
    assert (one / REPORT_MD).read_text().replace(str(one), "") == (two / REPORT_MD).read_text().replace(str(two), "")
    with pytest.raises(ValueError, match="workers"):
        write_report(one, workers=0)
