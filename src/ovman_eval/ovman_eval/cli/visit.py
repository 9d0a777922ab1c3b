"""``ovman visit start 1|2`` and ``ovman visit finish``: open and close a visit on a running
mapping_node (its ``mapping/start_visit`` and ``mapping/finish_visit`` services), as a person or a
script does on a robot. ``finish`` needs no frame count: it fuses what arrived and says how many
frames were fused and skipped, and where the map was stored. ``ROS_DOMAIN_ID`` is honoured.
Exit codes: 0 done, 1 refused or no mapping_node within ``--timeout``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

SETTLE_S = 0.5
"""(s): spun after the service is seen, so that it also sees this client's response reader (a
response sent before that is lost)."""


def add(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="open visit 1 or 2")
    start.add_argument("visit", type=int, choices=(1, 2), help="the visit to open")
    finish = actions.add_parser("finish", help="finish the open visit: build, publish and store its map")
    finish.add_argument("--json", action="store_true", help="print JSON")
    for action in (start, finish):
        action.add_argument(
            "--timeout", type=float, default=30.0, help="seconds to wait for mapping_node, and for finish to build (30)"
        )
        action.add_argument("--namespace", default="", help="mapping_node's namespace (default: none)")
    return run


def run(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        print(f"ovman visit: --timeout must be positive seconds, got {args.timeout}")
        return 2
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from ovman_interfaces.srv import MapVisit
    from ovman_ros import names

    service = names.MAPPING_START_VISIT if args.action == "start" else names.MAPPING_FINISH_VISIT
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = rclpy.create_node("ovman_visit", namespace=args.namespace or "/", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        client = node.create_client(MapVisit, service)
        where = node.resolve_service_name(service)
        deadline = time.monotonic() + args.timeout
        while not client.service_is_ready():
            if time.monotonic() > deadline:
                print(
                    f"ovman visit: no mapping_node answers {where} within {args.timeout:g} s (is it running, "
                    "in that namespace and ROS_DOMAIN_ID?)"
                )
                return 1
            executor.spin_once(timeout_sec=0.1)
        settle = time.monotonic() + SETTLE_S
        while time.monotonic() < settle:
            executor.spin_once(timeout_sec=0.05)
        visit = args.visit if args.action == "start" else 0  # finish: whichever is open
        request = MapVisit.Request(visit=visit, expected_frames=0, timeout_s=float(args.timeout))
        future = client.call_async(request)
        deadline = time.monotonic() + 2 * args.timeout
        while not future.done():
            if time.monotonic() > deadline:
                print(f"ovman visit: {where} gave no answer within {2 * args.timeout:g} s")
                return 1
            executor.spin_once(timeout_sec=0.1)
        response = future.result()
    finally:
        executor.remove_node(node)
        node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown(context=context)
    if args.action == "finish" and args.json:  # start has no --json
        print(json.dumps(_finished(response)))
    else:
        print(response.message)
    return 0 if response.success else 1


def _finished(response: Any) -> dict[str, Any]:
    return {
        "success": response.success,
        "fused": response.frames,
        "skipped": response.skipped,
        "instances": response.instances,
        "map_id": response.map_id,
        "message": response.message,
    }
