"""Choosing where units run (ovman_eval.runs.backend) and the options that ask for it; the Ray side
itself runs against a real Ray head in test_ray_backend.py."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

from ovman_core.config import load_config
from ovman_eval.benchmark.request import Arm, BenchmarkRequest
from ovman_eval.cli import benchmark as benchmark_cli
from ovman_eval.cli.backend_options import add_backend_options, backend_of, backend_words
from ovman_eval.runs.backend import LOCAL_BACKEND, Backend, BackendError

CONFIG = load_config()


def options(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_backend_options(parser)
    return parser.parse_args(list(words))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "slurm"}, "unknown backend 'slurm'"),
        ({"address": "head:6379"}, "needs the ray backend"),
        ({"kind": "ray", "address": "  "}, "address is empty"),
        ({"kind": "ray", "retries": -1}, "retries must be at least 0"),
        ({"kind": "ray", "connect_timeout_s": 0.0}, "connect timeout must be positive"),
        ({"kind": "ray", "connect_timeout_s": float("nan")}, "connect timeout must be positive"),
    ],
)
def test_a_backend_that_cannot_work_is_refused_naming_why(kwargs, message):
    with pytest.raises(BackendError, match=message):
        Backend(**kwargs)


def test_only_the_local_backend_with_one_worker_or_one_unit_runs_in_this_process():
    assert LOCAL_BACKEND.in_process(1, 10) and LOCAL_BACKEND.in_process(4, 1)
    assert not LOCAL_BACKEND.in_process(2, 10)
    assert not Backend("ray").in_process(1, 1)  # Ray asked for: every unit is a Ray task


def test_the_options_take_the_configured_retries_and_timeout_and_ask_for_the_same_backend_again():
    params = CONFIG.benchmark_node.benchmark
    ray = backend_of(options("--backend", "ray", "--ray-address", "10.0.0.1:6379"), CONFIG)
    assert ray == Backend("ray", "10.0.0.1:6379", params.ray_task_retries, params.ray_connect_timeout_s)
    assert backend_words(ray) == ["--backend", "ray", "--ray-address", "10.0.0.1:6379"]
    assert backend_words(backend_of(options("--backend", "ray"), CONFIG)) == ["--backend", "ray"]
    assert backend_of(options(), CONFIG) == LOCAL_BACKEND and backend_words(LOCAL_BACKEND) == []
    with pytest.raises(BackendError, match="needs the ray backend"):
        backend_of(options("--ray-address", "10.0.0.1:6379"), CONFIG)


def test_the_resume_command_of_a_ray_run_resumes_it_on_ray(tmp_path):
    parser = argparse.ArgumentParser()
    benchmark_cli.add(parser)
    args = parser.parse_args(["--dataset", "ds", "--backend", "ray", "--ray-address", "head:6379"])
    request = BenchmarkRequest(Path("ds"), (Arm.TWO_VISIT,), (0,))
    backend = backend_of(args, CONFIG)
    words = shlex.split(benchmark_cli.resume_command(args, request, 8, tmp_path / "maps", tmp_path / "run", backend))
    assert words[words.index("--backend") + 1] == "ray" and words[words.index("--ray-address") + 1] == "head:6379"
    assert words[words.index("--workers") + 1] == "8" and words[words.index("--run-dir") + 1] == str(tmp_path / "run")
