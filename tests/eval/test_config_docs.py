"""``ovman config --markdown`` and ``--explain``: the reference page docs/configuration.md is what the
typed config generates, and one key's text is found by any name a node or the loader gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ovman_core.config import describe, load_config
from ovman_eval.cli import config as config_command
from ovman_eval.cli.main import main
from ovman_eval.graph import description

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / config_command.DOCS_PAGE
CONFIG_FILE = ROOT / config_command.SHIPPED_CONFIG


def test_the_reference_page_is_what_the_typed_config_generates():
    expected = config_command.markdown(load_config(CONFIG_FILE), config_command.SHIPPED_CONFIG)
    actual = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
    assert actual == expected, f"{config_command.DOCS_PAGE} is out of date: run `{config_command.REGENERATE}`"


def test_the_page_has_an_entry_for_every_key_and_section():
    config = load_config(CONFIG_FILE)
    page = config_command.markdown(config)
    headings = {line for line in page.splitlines() if line.startswith("#")}
    for section in describe(config):
        if section.name:
            assert f"### `{section.name}`" in headings
        for key in section.keys:
            assert f"#### `{key.name}`" in headings


def test_markdown_prints_the_page(capsys):
    assert main(["config", "--config", str(CONFIG_FILE), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Configuration reference\n")
    assert "#### `task.success_radius`" in out
    assert "**Type** `float` · **Range** `> 0` · **Default** `1.0` · **Declared by** every node (`/**`)" in out


def test_explain_prints_a_keys_node_type_range_default_and_explanation(capsys):
    assert main(["config", "--explain", "task.success_radius"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:6] == [
        "task.success_radius",
        "  node:        every node (/**)",
        "  in the file: /**.ros__parameters.task.success_radius",
        "  type:        float",
        "  range:       > 0",
        "  default:     1.0",
    ]
    assert "embodied success when the agent issues Stop" in out
    for name in ("nav_node.task.success_radius", "/**.ros__parameters.task.success_radius", "/**.task.success_radius"):
        assert main(["config", "--explain", name]) == 0
        assert capsys.readouterr().out == out


def test_explain_accepts_the_node_qualified_names_and_shows_every_node_that_declares_a_key(capsys):
    assert main(["config", "--explain", "mapping_node.ros__parameters.mapping.pixel_stride"]) == 0
    assert "range:       in [1, 16384]" in capsys.readouterr().out
    assert main(["config", "--explain", "query_node.encoder.kind"]) == 0
    assert "node:        mapping_node, query_node" in capsys.readouterr().out
    assert main(["config", "--explain", "node.step_dt"]) == 0
    out = capsys.readouterr().out
    assert "node:        sim_node" in out and "node:        mapping_node" in out


def test_explain_of_a_section_lists_its_keys(capsys):
    assert main(["config", "--explain", "sim_node.world.appearance"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("world.appearance (a section of sim_node)\n")
    assert "  world.appearance.home_share" in out


def test_explain_of_an_unknown_key_names_close_matches_and_exits_2(capsys):
    assert main(["config", "--explain", "task.succes_radius"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "unknown key 'task.succes_radius'; did you mean task.success_radius" in captured.err
    assert main(["config", "--explain", "step_dt"]) == 2
    assert "did you mean node.step_dt" in capsys.readouterr().err
    assert main(["config", "--explain", "qqqq"]) == 2
    assert "no key is close" in capsys.readouterr().err


def test_only_one_view_at_a_time(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "--node", "nav_node", "--markdown"])
    assert exit_info.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_the_keys_a_second_node_declares_are_those_the_graph_gives_it():
    """query_node declares mapping_node's encoder keys and its map store (the graph description passes them)."""
    assert config_command.ALSO_DECLARED == {
        (description.MAPPING_NODE, description.ENCODER_PREFIX): ("query_node",),
        (description.MAPPING_NODE, description.STORE_DIR_KEY): ("query_node",),
    }
    assert description.QUERY_NODE == "query_node"
