"""``ovman fit-appearance RUN``: fit the association's appearance cues on a run's same-category
pairs, score them on another run's, and measure each association variant on that run's episodes.

The fit is :mod:`ovman_eval.analysis.appearance_fit`; the result goes to ``RUN/appearance_fit.json``,
which ``ovman report RUN`` tabulates.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from ovman_core.config import ConfigError, OvmanConfig, config_from_document
from ovman_core.files import atomic_write_text
from ovman_eval.runs.results import MULTI_CHANGE_PART, RUN_FILE, ResultsError, read_results

VARIANT_ARMS = ("two_visit", "oracle_grounding")
"""The arms each variant is scored with: the agent, and the agent with grounding handed over."""


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("run", help="a finished run directory: the cues are fitted on its pairs")
    parser.add_argument("--held-out", help="the run whose pairs and episodes score the fit (default RUN/multi_change)")
    parser.add_argument("--no-variants", action="store_true", help="fit and score the cues only")
    parser.add_argument("--cache", help="map cache directory (default: .cache/maps beside the run directory)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return run


def run_config(run_dir: Path) -> OvmanConfig:
    """The configuration a run ran with (its ``run.json``); ResultsError when it has none that loads."""
    path = run_dir / RUN_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))["identity"]["config"]
        return config_from_document(document, f"{path} (identity.config)")
    except (OSError, ValueError, KeyError, TypeError, ConfigError) as err:
        raise ResultsError(f"{path}: no configuration of the run that loads ({err})") from err


def run_dataset(run_dir: Path) -> Path:
    path = run_dir / RUN_FILE
    try:
        return Path(json.loads(path.read_text(encoding="utf-8"))["identity"]["request"]["dataset"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ResultsError(f"{path}: no dataset in the run's identity ({err})") from err


def variant_success(dataset: Path, config: OvmanConfig, weights: dict[str, tuple[float, float]], cache: Path | None):
    """Per variant (name → (colour_weight, extent_weight)): its colour and extent weights and, per
    arm of :data:`VARIANT_ARMS`, [successes, episodes] on the static gate over ``dataset``."""
    from ovman_eval.benchmark.evaluator import GroupEvaluator
    from ovman_eval.benchmark.map_cache import MapCache
    from ovman_eval.benchmark.request import dataset_hash
    from ovman_eval.generation.dataset import read_episodes
    from ovman_query import arms
    from ovman_query.agent import ReferenceAgent, query_of

    records = read_episodes(dataset)
    evaluator = GroupEvaluator(config, dataset, records, MapCache(cache), dataset_hash(dataset), static_only=True)
    agents = {}
    for name, (colour, extent) in weights.items():
        association = dataclasses.replace(
            evaluator.config.query_node.association, colour_weight=colour, extent_weight=extent
        )
        query_node = dataclasses.replace(evaluator.config.query_node, association=association)
        agents[name] = ReferenceAgent(dataclasses.replace(evaluator.config, query_node=query_node), evaluator.encoder)
    out: dict[str, Any] = {
        name: {"colour_weight": c, "extent_weight": x, "success": {arm: [0, 0] for arm in VARIANT_ARMS}}
        for name, (c, x) in weights.items()
    }
    groups: dict[str, list] = {}
    for record in records:
        groups.setdefault(record.group_id, []).append(record)
    timings = dict.fromkeys(("maps_build_s", "maps_load_s"), 0.0)
    try:
        for members in groups.values():
            maps = evaluator.group_maps(members, timings)
            for name, agent in agents.items():
                for record in members:
                    query = query_of(record.query.noun_phrase, record.query.relation, record.query.category)
                    predictions = {
                        "two_visit": arms.two_visit(agent, maps.map1, maps.map2, query),
                        "oracle_grounding": arms.oracle_grounding(
                            agent, maps.map1, maps.map2, query, maps.shares[1], maps.shares[2]
                        ),
                    }
                    for arm, prediction in predictions.items():
                        tally = out[name]["success"][arm]
                        tally[0] += int(evaluator.static_result(record, maps, prediction).success)
                        tally[1] += 1
    finally:
        evaluator.close()
    return out


def fit_run(run_dir: Path, held_out: Path | None = None, cache: Path | None = None, variants: bool = True) -> dict:
    """Fit on ``run_dir``'s pairs, score on ``held_out``'s (default its multi-change part), measure
    the variants on ``held_out``'s dataset unless ``variants`` is false, write ``RUN/appearance_fit.json``
    and return its document. ResultsError when a run cannot be read; CueFitError when the pairs
    cannot be fitted."""
    from ovman_eval.analysis.appearance_fit import FIT_FILE, FITTED, VARIANTS, fit_cues
    from ovman_eval.analysis.tables import appearance_cue_pairs

    run_dir = Path(run_dir)
    held_out = Path(held_out) if held_out is not None else run_dir / MULTI_CHANGE_PART
    fit = fit_cues(appearance_cue_pairs(read_results(run_dir)), appearance_cue_pairs(read_results(held_out)))
    document: dict[str, Any] = {"fitting": str(run_dir), "held_out": str(held_out), "fit": fit.to_dict()}
    if variants:
        config = run_config(held_out)
        configured = config.query_node.association
        weights = {"configured": (configured.colour_weight, configured.extent_weight)}
        weights |= {
            name: w if w is not None else (fit.colour_weight, fit.extent_weight) for name, w in VARIANTS.items()
        }
        assert FITTED in weights
        dataset = run_dataset(held_out)
        document["held_out_dataset"] = str(dataset)
        document["variants"] = variant_success(dataset, config, weights, cache)
    atomic_write_text(run_dir / FIT_FILE, json.dumps(document, indent=1, sort_keys=True) + "\n")
    return document


def run(args: argparse.Namespace) -> int:
    from ovman_eval.analysis.appearance_fit import CueFitError, fit_tables
    from ovman_eval.generation.dataset import DatasetError
    from ovman_sim.recording import RecordingError

    run_dir = Path(args.run)
    cache = Path(args.cache) if args.cache else run_dir.parent / ".cache" / "maps"
    try:
        document = fit_run(run_dir, Path(args.held_out) if args.held_out else None, cache, not args.no_variants)
    except (ResultsError, CueFitError, DatasetError, RecordingError) as err:
        print(f"ovman fit-appearance: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(document, sort_keys=True))
    else:
        print("\n\n".join(t.text() for t in fit_tables(document)))
    return 0
