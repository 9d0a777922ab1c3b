"""``ovman config``: validate a configuration file and show it, or one node's ROS parameters."""

from __future__ import annotations

import argparse
import sys

import yaml

from ovman_core.config import NODE_NAMES, ConfigError, load_config, node_parameters, to_document


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    parser.add_argument("--node", choices=NODE_NAMES, help="print this node's flat ROS parameters instead")
    return run


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"ovman config: {err}", file=sys.stderr)
        return 1
    if args.node:
        for name, value in node_parameters(config, args.node).items():
            print(f"{name}: {value!r}")
    else:
        print(f"# valid: {config.source}")
        print(yaml.safe_dump(to_document(config), sort_keys=False), end="")
    return 0
