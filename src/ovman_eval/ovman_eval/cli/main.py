"""The ``ovman`` command line: one entry point, one subcommand per job.

Subcommands register in :data:`COMMANDS` as ``name -> (help, "module:function")``; the module is
imported only when its subcommand runs, so ``ovman --help`` stays fast and needs no ROS or torch.
Each registered function takes the subparser to fill and returns the handler ``(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]

COMMANDS: dict[str, tuple[str, str]] = {
    "config": (
        "validate the configuration and print it, a node's ROS parameters, a key's explanation or the reference",
        "ovman_eval.cli.config:add",
    ),
    "show-world": (
        "draw an embedded home from above and a strip of its camera frames",
        "ovman_eval.cli.show_world:add",
    ),
    "record-visit": ("record a scene's coverage tour as a rosbag2/MCAP visit", "ovman_sim.record_command:add"),
    "generate": ("generate a certified episode dataset (Algorithm 1)", "ovman_eval.cli.generate:add"),
    "validate": ("check an episode dataset and report every problem", "ovman_eval.cli.validate:add"),
    "benchmark": ("run the benchmark: static gate and embodied runs of every arm", "ovman_eval.cli.benchmark:add"),
    "report": ("(re)write the report of a benchmark run", "ovman_eval.cli.benchmark:add_report"),
    "show": ("draw one episode from above: maps, answer, predictions, path", "ovman_eval.cli.benchmark:add_show"),
    "fit-appearance": (
        "fit the association's appearance cues on a run, score them on another, measure each variant",
        "ovman_eval.cli.appearance:add",
    ),
    "sweep": ("static memory margin of a run over a grid of admissibility settings", "ovman_eval.cli.sweep:add"),
    "train-perception": (
        "train the learned segmenter on renders of the perception homes",
        "ovman_eval.cli.perception:add_train",
    ),
    "eval-perception": (
        "the segmenter's precision, recall and accuracy on held-out perception homes",
        "ovman_eval.cli.perception:add_eval",
    ),
    "parse": ("parse a change query into noun phrase, relation and confidence", "ovman_eval.cli.query:add_parse"),
    "ask": ("answer one episode's query text from its maps, as /ovman/query would", "ovman_eval.cli.query:add_ask"),
    "launch": ("start the ROS 2 benchmark graph as processes (no ros2 launch needed)", "ovman_eval.cli.launch:add"),
    "maps": ("list, show or remove the visits in the map store", "ovman_mapping.maps_command:add"),
    "visit": ("open a visit on the running mapping_node, or finish the open one", "ovman_eval.cli.visit:add"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ovman",
        description="OVMAN: open-vocabulary motion-aware navigation. Generate certified two-visit "
        "episodes, run the reference agent and the benchmark, and start the ROS 2 graph.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, _target) in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv)  # prints help or an "invalid choice" error and exits
        parser.print_help()
        return 2
    name = argv[0]
    help_text, target = COMMANDS[name]
    module_name, function_name = target.split(":")
    subparser = argparse.ArgumentParser(prog=f"ovman {name}", description=help_text)
    handler: Handler = getattr(importlib.import_module(module_name), function_name)(subparser)
    return handler(subparser.parse_args(argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
