"""The report's sections computed under a run's own configuration: the parser's accuracy and the
agent's segmenter on the held-out perception homes.

The configuration is the one the run recorded (``RUN/run.json``, identity.config); a run recorded
before a key was added gets that key at its current value (:func:`run_configuration` names them), so
older runs keep these sections. Each function returns its tables, or a sentence saying why there
are none, which the report prints in their place.
"""

from __future__ import annotations

import json
from pathlib import Path

from ovman_core.config import ConfigError, OvmanConfig, load_config, stored_config
from ovman_eval.analysis.table import Table
from ovman_eval.analysis.tables import parser_confusion_table, parser_table
from ovman_eval.runs.results import RUN_FILE
from ovman_mapping.encoders import make_encoder
from ovman_query.parser import QueryParser, evaluate_parser, held_out_report, training_cases
from ovman_query.surface_forms import development_phrasings


def run_configuration(run_dir: Path) -> tuple[OvmanConfig, list[str]] | str:
    """The configuration the run recorded (``RUN/run.json``, identity.config), completed by
    :func:`ovman_core.config.stored_config` with the keys added to the code's configuration since
    (their current values; returned by dotted name), or why there is none that loads."""
    path = run_dir / RUN_FILE
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        return f"{path} does not read ({err})"
    identity = run.get("identity") if isinstance(run, dict) else None
    document = identity.get("config") if isinstance(identity, dict) else None
    if document is None:
        return f"{path} holds no configuration"
    try:
        return stored_config(document, f"{path} (identity.config)", load_config())
    except ConfigError as err:
        return f"the run's configuration does not load with this code ({err})"


def parser_tables(run_dir: Path) -> list[Table] | str:
    """The parser's accuracy and held-out confusion under the run's own configuration (with the
    sentence-model fallback on the run's encoder, as the agent parses), or why it cannot be computed."""
    loaded = run_configuration(run_dir)
    if isinstance(loaded, str):
        return f"not computed: {loaded}"
    config = loaded[0]
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
    ``ovman train-perception`` measured: :func:`ovman_eval.perception.training.held_out_figures`), or why
    there is nothing to show."""
    from ovman_mapping.learned_segmenter import model_directory, read_manifest
    from ovman_mapping.segmenter import SegmenterError

    loaded = run_configuration(run_dir)
    if isinstance(loaded, str):
        return f"unavailable: {loaded}"
    segmenter = loaded[0].mapping_node.segmenter
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
