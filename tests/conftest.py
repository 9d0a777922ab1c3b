"""The test tiers and parallel runs. ``make test`` runs every test; ``make test-fast``
(``OVMAN_TEST_TIER=fast``, ``-m "not ros and not pool"``) runs the pure-core ones, and fails any of
them that starts worker processes, so the tier stays what it says: mark such a test ``pool`` (or
``ros`` for a DDS graph). Under pytest-xdist each worker process takes a ROS domain of its own."""

from __future__ import annotations

import multiprocessing.process
import os
from collections.abc import Iterator

import pytest

TIER_ENV = "OVMAN_TEST_TIER"
FAST = "fast"
DOMAIN_IDS = range(100, 200)
"""Where the Makefile's private ROS domain ids lie; each xdist worker shifts its run's id in it."""


def worker_domain_id(base: int, worker: str) -> int:
    """The ROS domain of xdist worker ``gw<k>`` of a run on domain ``base``: another id in
    :data:`DOMAIN_IDS` for every k below 99 (37 and 100 are coprime), so the workers' graphs never see each other."""
    k = int(worker.removeprefix("gw"))
    span = len(DOMAIN_IDS)
    return DOMAIN_IDS.start + (base - DOMAIN_IDS.start + 37 * (k + 1) % span) % span


# Before any rclpy context exists in this process (and is inherited by every node it starts).
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["ROS_DOMAIN_ID"] = str(
        worker_domain_id(int(os.environ.get("ROS_DOMAIN_ID", DOMAIN_IDS.start)), os.environ["PYTEST_XDIST_WORKER"])
    )


@pytest.fixture(autouse=True)
def _pure_core_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In the fast tier, a test that starts a worker process fails, naming the marker it lacks."""
    if os.environ.get(TIER_ENV) != FAST:
        yield
        return
    started: list[str] = []

    def refuse(process: multiprocessing.process.BaseProcess) -> None:
        started.append(type(process).__name__)
        raise RuntimeError("the fast test tier starts no worker processes")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    yield
    if started:
        pytest.fail(
            f"{request.node.nodeid} started worker processes ({', '.join(sorted(set(started)))}) in the fast "
            "tier: mark it @pytest.mark.pool",
            pytrace=False,
        )
