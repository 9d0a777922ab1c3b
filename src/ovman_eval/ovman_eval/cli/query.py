"""``ovman parse TEXT`` and ``ovman ask TEXT --dataset DIR --episode ID``: the query parser and one
``/ovman/query`` answer from the command line, exactly as query_node answers
(:func:`ovman_query.query_requests.answer_query`).

Exit status: 0 parsed (ANSWERED or ABSTAINED for ``ask``), 2 on a parse failure or an invalid
request, 1 when the dataset or episode cannot be used.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from ovman_core.config import ConfigError, load_config

CLI_FAILURE = 2
"""Exit status of a query that cannot be parsed or is refused."""


def add_parse(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("text", help='the query, e.g. "go to the box that wasn\'t here last time"')
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or the packaged one)")
    return run_parse


def run_parse(args: argparse.Namespace) -> int:
    from ovman_mapping.encoders import make_encoder
    from ovman_query.parser import ParseError, QueryParser

    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"ovman parse: {err}", file=sys.stderr)
        return CLI_FAILURE
    # The sentence model loads only when no cue says which change is meant.
    parser = QueryParser(config.query_node.parser, embed=make_encoder(config.mapping_node.encoder).embed_text)
    try:
        query = parser.parse(args.text)
    except ParseError as err:
        if args.json:
            print(json.dumps({"error": str(err)}))
        print(f"ovman parse: {err}", file=sys.stderr)
        return CLI_FAILURE
    fields = {
        "noun_phrase": query.noun_phrase,
        "relation": query.relation.value,
        "confidence": query.confidence,
        "category": query.category,
        "source": query.source,
    }
    if args.json:
        print(json.dumps(fields))
    else:
        print(f"noun phrase: {query.noun_phrase}")
        print(f"relation:    {query.relation.value} (confidence {query.confidence:.3f}, read by {query.source})")
        print(f"category:    {query.category or '(none: grounded by its own words)'}")
    return 0


def add_ask(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("text", help="the query text")
    parser.add_argument("--dataset", required=True, help="episode dataset directory (from `ovman generate`)")
    parser.add_argument("--episode", required=True, help="episode id whose recordings are mapped")
    parser.add_argument(
        "--arm",
        default="two_visit",
        help="arm query_node serves: two_visit (default), two_visit_text, single_visit or category_only",
    )
    parser.add_argument("--cache", default="runs/.cache/maps", help="map cache directory (default runs/.cache/maps)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (the single-visit arm's pick)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    return run_ask


def run_ask(args: argparse.Namespace) -> int:
    from ovman_eval.benchmark.evaluator import GroupEvaluator
    from ovman_eval.benchmark.map_cache import MapCache
    from ovman_eval.benchmark.request import TIMING_KEYS, dataset_hash
    from ovman_eval.generation.dataset import DatasetError, read_episodes
    from ovman_query.query_requests import QueryRequest, Status, VisitMap, answer_query
    from ovman_sim.recording import RecordingError

    try:
        config = load_config(args.config)
        dataset = Path(args.dataset)
        records = read_episodes(dataset)
    except (ConfigError, DatasetError, OSError) as err:
        print(f"ovman ask: {err}", file=sys.stderr)
        return 1
    record = next((r for r in records if r.episode_id == args.episode), None)
    if record is None:
        print(f"ovman ask: {dataset}: no episode {args.episode!r}", file=sys.stderr)
        return 1
    group = [r for r in records if r.group_id == record.group_id]
    try:
        evaluator = GroupEvaluator(config, dataset, records, MapCache(Path(args.cache)), dataset_hash(dataset))
        maps = evaluator.group_maps(group, dict.fromkeys(TIMING_KEYS, 0.0))
    except (RecordingError, OSError, ValueError) as err:
        print(f"ovman ask: {err}", file=sys.stderr)
        return 1
    visits = [
        VisitMap(m, {i.uid: k for k, i in enumerate(m.instances)}, stamp)
        for stamp, m in ((1, maps.map1), (2, maps.map2))
    ]
    outcome = answer_query(evaluator.agent, visits[0], visits[1], QueryRequest(text=args.text, arm=args.arm), args.seed)
    answer = record.answer.point
    distance = None if outcome.point is None else math.dist(outcome.point, answer)
    gate = evaluator.config.task.static_gate_radius
    fields: dict[str, Any] = {
        "status": outcome.status.name,
        "explanation": outcome.explanation,
        "arm": outcome.arm,
        "noun_phrase": outcome.noun_phrase,
        "relation": outcome.relation,
        "point": None if outcome.point is None else list(outcome.point),
        "confidence": outcome.confidence,
        "episode": {
            "id": record.episode_id,
            "phrase": record.query.phrase,
            "relation": record.query.relation.value,
            "category": record.query.category,
            "answer_point": list(answer),
        },
        "distance_m": distance,
        "within_static_gate": distance is not None and distance <= gate,
    }
    if args.json:
        print(json.dumps(fields))
    else:
        print(f"{outcome.status.name}: {outcome.explanation}")
        if outcome.point is not None:
            print(f"point (x, z): ({outcome.point[0]:.2f}, {outcome.point[1]:.2f}) m, AI2-THOR world frame")
        print(
            f"episode {record.episode_id} asks {record.query.relation.value} {record.query.category} "
            f"({record.query.phrase!r}); its answer is ({answer[0]:.2f}, {answer[1]:.2f})"
            + ("" if distance is None else f", {distance:.2f} m away ({'within' if distance <= gate else 'outside'} "
               f"the static gate of {gate} m)")
        )  # fmt: skip
    return CLI_FAILURE if outcome.status in (Status.PARSE_FAILED, Status.INVALID_REQUEST) else 0
