"""The ray backend against a real Ray head: the same datasets and results as the local pool.

A Ray head is started here with ``ray start --head`` on 127.0.0.1 only, without a dashboard, with
2 CPUs and a private temporary directory, and stopped at the end. ``ovman generate`` and ``ovman
benchmark`` run as commands (each its own Ray driver) with ``--backend ray --ray-address`` and
with the local pool; their files must be byte-identical. A Ray worker process is killed with
SIGKILL while it computes a unit: Ray retries the unit and the run completes with the local
pool's results, no line lost or repeated. The local backend never imports Ray.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ovman_core.config import load_config
from ovman_eval.analysis.sweep import SWEEP_FILE
from ovman_eval.runs.results import RESULTS, SKETCHES
from ovman_mapping.learned_segmenter import MANIFEST_FILE, WEIGHTS_FILE

from .generation_setup import config_file, small_config

pytestmark = pytest.mark.pool  # a real Ray head and its worker processes

RAY = Path(sys.executable).with_name("ray")
TASK_TITLE = b"ray::_do_unit"
"""What a Ray worker process calls itself while it runs a unit (ovman_eval.runs.ray_pool._do_unit)."""
START_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 900.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


RAY_LOCALHOST = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # Ray's single-machine mode: every server on 127.0.0.1 only
    "RAY_AUTH_MODE": "disabled",  # no token: nothing outside this machine can reach the test cluster
    "RAY_USAGE_STATS_ENABLED": "0",
}


def environment() -> dict[str, str]:
    return {**os.environ, **RAY_LOCALHOST, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths have a length limit
    port = free_port()
    command = [
        str(RAY),
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]
    started = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert started.returncode == 0, started.stdout + started.stderr
    assert "Local node IP: 127.0.0.1" in started.stdout + started.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(RAY), "stop", "--force"], env=environment(), capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return config_file(small_config(), tmp_path_factory.mktemp("config"))


def ovman(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ovman_eval.cli", *args],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, f"ovman {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


GENERATE = ("generate", "--world", "embedded", "--scenes", "embedded-0,embedded-1", "--per-relation", "1", "--quiet")


def dataset_files(directory: Path) -> dict[str, bytes]:
    """Every file of a dataset but its generation state, the manifest without its cost split."""
    files = {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".generation" not in p.parts and p.name != "manifest.json"
    }
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.pop("timings")
    files["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    return files


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, config_path: Path) -> tuple[Path, Path]:
    """A dataset and a run made by the local pool of two workers."""
    root = tmp_path_factory.mktemp("local")
    ovman(*GENERATE, "--seed", "0", "--out", str(root / "ds"), "--workers", "2", "--config", str(config_path))
    ovman(
        "benchmark", "--dataset", str(root / "ds"), "--arms", "all", "--workers", "2", "--run-dir", str(root / "run"),
        "--cache", str(root / "cache"), "--no-report", "--quiet", "--config", str(config_path),
    )  # fmt: skip
    return root / "ds", root / "run"


def test_generation_on_ray_writes_the_local_pools_dataset(head, local, config_path, tmp_path):
    out = tmp_path / "ds"
    ovman(*GENERATE, "--seed", "0", "--out", str(out), "--workers", "2", "--config", str(config_path),
          "--backend", "ray", "--ray-address", head)  # fmt: skip
    assert dataset_files(out) == dataset_files(local[0])


def test_the_benchmark_on_ray_writes_the_local_pools_results_and_resumes(head, local, config_path, tmp_path):
    dataset, reference = local
    args = ("benchmark", "--dataset", str(dataset), "--arms", "all", "--workers", "2", "--run-dir",
            str(tmp_path / "run"), "--cache", str(tmp_path / "cache"), "--no-report", "--quiet",
            "--config", str(config_path), "--backend", "ray", "--ray-address", head)  # fmt: skip
    ovman(*args)
    for name in (RESULTS, SKETCHES):
        assert (tmp_path / "run" / name).read_bytes() == (reference / name).read_bytes(), name
    ovman(*args)  # resumes the finished run: nothing is computed again, nothing changes
    assert (tmp_path / "run" / RESULTS).read_bytes() == (reference / RESULTS).read_bytes()


def test_the_sweep_on_ray_writes_the_local_sweep(head, local, config_path, tmp_path):
    _, reference = local
    for name, backend in (("here", ()), ("ray", ("--backend", "ray", "--ray-address", head))):
        shutil.copytree(reference, tmp_path / name)
        ovman("sweep", str(tmp_path / name), "--quiet", "--workers", "2", "--config", str(config_path), *backend)
    swept = [json.loads((tmp_path / name / SWEEP_FILE).read_text()) for name in ("here", "ray")]
    assert [s.pop("run") for s in swept] == [str(tmp_path / "here"), str(tmp_path / "ray")]  # where each was run
    assert swept[0] == swept[1]


def test_perception_training_on_ray_writes_the_local_model(head, tmp_path):
    config = load_config()
    params = dataclasses.replace(
        config.benchmark_node.perception,
        train_homes=2, test_homes=2, frame_stride=8, epochs=1, batch_size=4, widths=[4, 4, 4], threads=1,
    )  # fmt: skip
    path = config_file(
        dataclasses.replace(config, benchmark_node=dataclasses.replace(config.benchmark_node, perception=params)),
        tmp_path,
    )
    for name, backend in (("here", ()), ("ray", ("--backend", "ray", "--ray-address", head, "--workers", "2"))):
        ovman("train-perception", "--out", str(tmp_path / name), "--config", str(path), *backend)
    assert (tmp_path / "ray" / WEIGHTS_FILE).read_bytes() == (tmp_path / "here" / WEIGHTS_FILE).read_bytes()
    manifests = [json.loads((tmp_path / name / MANIFEST_FILE).read_text()) for name in ("here", "ray")]
    assert manifests[0]["held_out"] == manifests[1]["held_out"]


def task_processes() -> list[int]:
    """PIDs of Ray worker processes running a unit now."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes().startswith(TASK_TITLE):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_killed_ray_worker_is_retried_and_the_run_loses_and_repeats_nothing(head, local, config_path, tmp_path):
    dataset, reference = local
    run = tmp_path / "run"
    command = [sys.executable, "-m", "ovman_eval.cli", "benchmark", "--dataset", str(dataset), "--arms", "all",
               "--workers", "2", "--run-dir", str(run), "--cache", str(tmp_path / "cache"), "--no-report", "--quiet",
               "--config", str(config_path), "--backend", "ray", "--ray-address", head]  # fmt: skip
    driver = subprocess.Popen(command, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while killed is None and driver.poll() is None and time.monotonic() < deadline:
        for pid in task_processes():
            os.kill(pid, signal.SIGKILL)
            killed = pid
            break
        time.sleep(0.005)
    _, err = driver.communicate(timeout=RUN_TIMEOUT_S)
    assert killed is not None, "no Ray worker was seen running a unit"
    assert driver.returncode == 0, err[-4000:]
    lines = (run / RESULTS).read_text().splitlines()
    keys = [(r["episode_id"], r["arm"], r["seed"]) for r in map(json.loads, lines)]
    assert len(keys) == len(set(keys))
    for name in (RESULTS, SKETCHES):
        assert (run / name).read_bytes() == (reference / name).read_bytes(), name


def test_the_local_backend_never_imports_ray(local, config_path, tmp_path):
    dataset, _ = local
    script = (
        "import sys\n"
        "from ovman_eval.cli.main import main\n"
        f"code = main(['benchmark', '--dataset', {str(dataset)!r}, '--arms', 'two_visit', '--workers', '2',"
        f" '--static-only', '--run-dir', {str(tmp_path / 'run')!r}, '--no-report', '--quiet',"
        f" '--config', {str(config_path)!r}])\n"
        "assert code == 0, code\n"
        "assert 'ray' not in sys.modules, 'the local backend imported ray'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=environment(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]


def test_a_bad_ray_address_is_a_clear_error(local, config_path, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ovman_eval.cli", "benchmark", "--dataset", str(local[0]), "--arms", "two_visit",
         "--static-only", "--run-dir", str(tmp_path / "run"), "--no-report", "--quiet", "--config", str(config_path),
         "--backend", "ray", "--ray-address", f"127.0.0.1:{free_port()}", "--workers", "2"],
        env=environment(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 1 and "cannot connect to the Ray cluster at 127.0.0.1:" in done.stderr
    local_with_address = subprocess.run(
        [sys.executable, "-m", "ovman_eval.cli", "benchmark", "--dataset", str(local[0]), "--ray-address", "h:1"],
        env=environment(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert local_with_address.returncode == 2 and "needs the ray backend" in local_with_address.stderr
    not_an_address = subprocess.run(
        [sys.executable, "-m", "ovman_eval.cli", "generate", *GENERATE[1:], "--out", str(tmp_path / "ds"),
         "--backend", "ray", "--ray-address", "head-without-port", "--workers", "2"],
        env=environment(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert not_an_address.returncode == 1 and "is not HOST:PORT" in not_an_address.stderr
