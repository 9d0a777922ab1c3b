"""The ``--backend`` and ``--ray-address`` options of ``ovman generate``, ``ovman benchmark``,
``ovman sweep`` and ``ovman train-perception``."""

from __future__ import annotations

import argparse

from ovman_core.config import OvmanConfig
from ovman_eval.runs.backend import BACKENDS, LOCAL, RAY, Backend


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=LOCAL,
        help="where the work runs: local (this machine's worker processes, the default) or ray (one task per unit "
        "on a Ray cluster; results identical; the data must be on a filesystem every node shares)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="with --backend ray: the cluster's head (ray start --head), or auto; default: a Ray instance started "
        "on this machine for this command",
    )


def backend_of(args: argparse.Namespace, config: OvmanConfig) -> Backend:
    """The backend the options ask for (BackendError when they do not fit together)."""
    params = config.benchmark_node.benchmark
    if args.backend != RAY:
        return Backend(args.backend, args.ray_address)
    return Backend(args.backend, args.ray_address, params.ray_task_retries, params.ray_connect_timeout_s)


def backend_words(backend: Backend) -> list[str]:
    """The options that ask for ``backend`` again (a resume command)."""
    if backend.kind == LOCAL:
        return []
    return ["--backend", RAY, *(["--ray-address", backend.address] if backend.address else [])]
