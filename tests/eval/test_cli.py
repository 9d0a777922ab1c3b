"""The ``ovman`` command line: help, subcommand dispatch, the config command."""

import subprocess
import sys

import pytest

from ovman_eval.cli import COMMANDS, main


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_console_script_runs_in_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, "-m", "ovman_eval.cli", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "open-vocabulary motion-aware navigation" in result.stdout


def test_unknown_subcommand_fails(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fly"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_config_command_prints_node_parameters(capsys):
    assert main(["config", "--node", "query_node"]) == 0
    out = capsys.readouterr().out
    assert "grounding.delta_g: 0.05" in out
    assert "task.success_radius: 1.0" in out


def test_config_command_reports_a_bad_file(tmp_path, capsys):
    bad = tmp_path / "ovman.yaml"
    bad.write_text("sim_node: {}\n")
    assert main(["config", "--config", str(bad)]) == 1
    assert str(bad) in capsys.readouterr().err
