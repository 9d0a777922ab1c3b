"""The fast test tier refuses worker processes, and parallel test workers get ROS domains of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import DOMAIN_IDS, worker_domain_id

TESTS = Path(__file__).resolve().parents[1]

A_TEST_THAT_STARTS_A_PROCESS = """
import multiprocessing

def test_starts_a_worker():
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    process.join()
"""


def _run(tmp_path: Path, tier: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_worker.py").write_text(A_TEST_THAT_STARTS_A_PROCESS)
    env = {k: v for k, v in os.environ.items() if k not in ("OVMAN_TEST_TIER", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    if tier:
        env["OVMAN_TEST_TIER"] = tier
    command = [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", str(tmp_path)]
    return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_the_fast_tier_fails_a_test_that_starts_a_worker_process_and_names_the_marker(tmp_path: Path) -> None:
    fast = _run(tmp_path, "fast")
    assert fast.returncode == 1, fast.stdout + fast.stderr
    assert "started worker processes (SpawnProcess) in the fast tier: mark it @pytest.mark.pool" in fast.stdout
    whole = _run(tmp_path, None)
    assert whole.returncode == 0, whole.stdout + whole.stderr


def test_each_xdist_worker_takes_another_ros_domain_in_the_private_range() -> None:
    for base in (DOMAIN_IDS.start, 150, DOMAIN_IDS.stop - 1):
        ids = [worker_domain_id(base, f"gw{k}") for k in range(8)]
        assert len(set(ids)) == len(ids) and base not in ids
        assert all(i in DOMAIN_IDS for i in ids)
