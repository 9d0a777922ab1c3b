"""The ``ovman`` command line: help, subcommand dispatch, the config command."""

import subprocess
import sys

import pytest

from ovman_eval.cli.main import COMMANDS, main


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_console_script_runs_in_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, "-m", "ovman_eval.cli.main", "--help"], capture_output=True, text=True, check=False
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


def test_parse_prints_the_reading_and_json(capsys):
    import json

    assert main(["parse", "Go to the box that wasn't here last time", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "noun_phrase": "box",
        "relation": "appeared",
        "confidence": 1.0,
        "category": "Box",
        "source": "cues",
    }
    assert main(["parse", "the moving toy car"]) == 0
    out = capsys.readouterr().out
    assert "noun phrase: toy car" in out and "relation:    moving" in out


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no words"),
        ("   ", "no words"),
        ("🙂🙂", "no words"),
        ("go to the sofa", "change"),
        ("x" * 5000, "max_text_length"),
    ],
)
def test_parse_fails_with_status_2_and_the_reason(capsys, text, reason):
    assert main(["parse", text]) == 2
    assert reason in capsys.readouterr().err


def test_ask_answers_an_episode_as_the_query_service_would(tmp_path, capsys):
    import json

    from ovman_core.relations import Relation
    from ovman_eval.generation.dataset import read_episodes

    from .generation_setup import config_file, generate, request, small_config

    config = small_config()
    dataset = tmp_path / "ds"
    generate(dataset, request((Relation.MOVED,), scenes=("embedded-0",)), config)
    record = read_episodes(dataset)[0]
    path = config_file(config, tmp_path)
    args = ["ask", record.query.phrase, "--dataset", str(dataset), "--episode", record.episode_id]
    args += ["--config", str(path), "--cache", str(tmp_path / "cache"), "--json"]
    assert main(args) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["status"] in ("ANSWERED", "ABSTAINED") and answer["explanation"]
    assert answer["relation"] == "moved" and answer["episode"]["id"] == record.episode_id
    assert answer["episode"]["answer_point"] == list(record.answer.point)
    assert list((tmp_path / "cache").glob("*.maps")), "the maps went to the cache"
    assert main([*args[:1], "flibber jabberwock", *args[2:]]) == 2
    assert "PARSE_FAILED" in capsys.readouterr().out
    assert main(["ask", "the moved vase", "--dataset", str(dataset), "--episode", "nope", "--config", str(path)]) == 1
    assert "no episode 'nope'" in capsys.readouterr().err
