"""``ovman train-perception --out DIR`` and ``ovman eval-perception``: the learned segmenter's
training and its held-out figures (:mod:`ovman_eval.perception.training`).

``ovman train-perception --workers N [--backend ray [--ray-address HOST:PORT]]`` renders the
training homes, and evaluates the held-out ones, one home a unit on this machine's worker
processes or as Ray tasks (:mod:`ovman_eval.runs.backend`; with Ray, ``--out`` on a filesystem
every node shares); the training itself runs in this process, so the weights are the same."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from ovman_core.config import ConfigError, load_config
from ovman_eval.cli.backend_options import add_backend_options, backend_of
from ovman_eval.cli.progress import ProgressDisplay
from ovman_eval.runs.backend import BackendError
from ovman_eval.runs.pool import PoolBrokenError
from ovman_mapping.segmenter import SegmenterError, make_segmenter

CONDITIONS = ("baseline", "low_light", "texture")


def add_train(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("--out", required=True, help="directory to write segmenter.safetensors and segmenter.json into")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or the packaged one)")
    parser.add_argument(
        "--workers", type=int, help="processes rendering and evaluating the homes (default: benchmark.workers)"
    )
    add_backend_options(parser)
    return run_train


def run_train(args: argparse.Namespace) -> int:
    from ovman_eval.perception import training as perception

    try:
        config = load_config(args.config) if args.config else load_config()
        backend = backend_of(args, config)
        workers = args.workers if args.workers is not None else config.benchmark_node.benchmark.workers
        if workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {workers}")
    except (ConfigError, BackendError) as err:
        print(f"ovman train-perception: {err}", file=sys.stderr)
        return 2
    display = ProgressDisplay(sys.stderr)

    def progress(step: perception.Step) -> None:
        display.update(
            step.stage, step.done, step.total, step.unit, step.message, f"ovman train-perception: {step.message}"
        )

    try:
        manifest = perception.train_perception(
            config, Path(args.out), progress=progress, workers=workers, backend=backend
        )
    except (ConfigError, SegmenterError, OSError) as err:
        print(f"ovman train-perception: {err}", file=sys.stderr)
        return 2
    except (BackendError, PoolBrokenError) as err:
        print(f"ovman train-perception: {err}", file=sys.stderr)
        return 1
    finally:
        display.close()
    held_out = manifest["held_out"]
    print(
        f"wrote {Path(args.out) / 'segmenter.json'}: {manifest['training']['frames']} training frames, "
        f"{manifest['parameters']} parameters, {manifest['training']['cpu_s']} s CPU; held out "
        f"({held_out['frames']} frames, {held_out['segments']} segments): precision {held_out['precision']:.3f}, "
        f"recall {held_out['recall']:.3f}, accuracy {held_out['accuracy']:.3f}"
    )
    return 0


def add_eval(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("--condition", choices=CONDITIONS, default="baseline", help="render the held-out homes so")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--figures", help="draw a few held-out frames (RGB, predicted and true segments) here")
    parser.add_argument(
        "--model", help="model directory (default: mapping_node.segmenter.model, else the packaged one)"
    )
    parser.add_argument(
        "--segmenter", choices=("learned", "simulator"), default="learned", help="backend to evaluate (default learned)"
    )
    parser.add_argument("--homes", type=int, help="held-out homes (default benchmark_node.perception.test_homes)")
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or the packaged one)")
    return run_eval


def run_eval(args: argparse.Namespace) -> int:
    from ovman_eval.perception import training as perception

    try:
        config = load_config(args.config) if args.config else load_config()
        segmenter_config = dataclasses.replace(config.mapping_node.segmenter, kind=args.segmenter)
        if args.model:
            segmenter_config = dataclasses.replace(segmenter_config, model=args.model)
        segmenter = make_segmenter(segmenter_config, perception.VOCABULARY)
        homes = args.homes if args.homes is not None else config.benchmark_node.perception.test_homes
        if homes < 1:
            raise ConfigError(f"--homes must be at least 1, got {homes}")
        frames = list(perception.perception_frames(config, "test", homes, args.condition))
        figures = perception.evaluate(segmenter, frames, config)
        figures.update({"condition": args.condition, "segmenter": segmenter.description, "homes": homes})
        if args.figures:
            perception.draw_frames(segmenter, frames, Path(args.figures))
    except (ConfigError, SegmenterError, OSError) as err:
        print(f"ovman eval-perception: {err}", file=sys.stderr)
        return 2
    print(json.dumps(figures, sort_keys=True) if args.json else summary_text(figures))
    return 0


def summary_text(figures: dict[str, Any]) -> str:
    lines = [
        f"{figures['segmenter']} on {figures['homes']} held-out homes ({figures['frames']} frames, condition "
        f"{figures['condition']}), mask IoU >= {figures['iou_threshold']}:",
        f"  precision {figures['precision']:.3f} ({figures['matched']}/{figures['predicted']} predicted segments)",
        f"  recall    {figures['recall']:.3f} ({figures['matched']}/{figures['segments']} true segments)",
        f"  accuracy  {figures['accuracy']:.3f} (top-1 label of the matched segments)",
        "  per category (accuracy, matched):",
    ]
    for name, row in figures["per_category"].items():
        lines.append(f"    {name:<14} {row['accuracy']:.3f} ({row['matched']})")
    if figures["confusions"]:
        lines.append("  most frequent confusions (true -> predicted: count):")
        lines.extend(f"    {c['true']} -> {c['predicted']}: {c['count']}" for c in figures["confusions"])
    return "\n".join(lines)
