"""``ovman validate DIR``: check an episode dataset and print every problem (exit 1 if any)."""

from __future__ import annotations

import argparse
import sys

from ovman_core.config import ConfigError, load_config
from ovman_eval.generation.validate import report_json, report_text, validate_dataset


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("directory", help="dataset directory written by `ovman generate`")
    parser.add_argument(
        "--config", help="validate with this configuration instead of the one stored in the dataset's manifest"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return run


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config) if args.config else None
    except ConfigError as err:
        print(f"ovman validate: {err}", file=sys.stderr)
        return 2
    report = validate_dataset(args.directory, config)
    print(report_json(report) if args.json else report_text(report))
    return 0 if report.ok else 1
