"""The typed config: the shipped file loads, bad files fail naming the file and the key."""

from pathlib import Path

import pytest
import yaml

from ovman_core.config import (
    ConfigError,
    default_config_path,
    load_config,
    node_parameters,
    to_document,
    with_parameters,
)


@pytest.fixture
def document() -> dict:
    return yaml.safe_load(default_config_path().read_text())


def write(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "ovman.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_shipped_config_loads_with_the_task_constants():
    config = load_config()
    assert config.task.success_radius == 1.0
    assert config.task.static_gate_radius == 1.0
    assert config.task.separation_radius >= 2 * config.task.success_radius
    assert config.sim_node.world.grid_size == 0.25


def test_round_trip_through_the_document_is_identity(tmp_path, document):
    config = load_config(write(tmp_path, document))
    again = load_config(write(tmp_path, to_document(config)))
    assert to_document(again) == to_document(config)


def test_unknown_key_is_rejected_naming_file_and_key(tmp_path, document):
    document["nav_node"]["ros__parameters"]["navigation"]["speed"] = 1.0
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value)
    assert "navigation.speed" in str(err.value)


def test_missing_key_is_rejected(tmp_path, document):
    del document["/**"]["ros__parameters"]["task"]["success_radius"]
    with pytest.raises(ConfigError, match=r"task\.success_radius"):
        load_config(write(tmp_path, document))


def test_integer_for_a_float_is_rejected_with_a_hint(tmp_path, document):
    document["/**"]["ros__parameters"]["task"]["success_radius"] = 1
    with pytest.raises(ConfigError, match=r"task\.success_radius' must be float.*decimal point"):
        load_config(write(tmp_path, document))


def test_string_for_an_int_is_rejected(tmp_path, document):
    document["sim_node"]["ros__parameters"]["camera"]["width"] = "320"
    with pytest.raises(ConfigError, match=r"camera\.width' must be int"):
        load_config(write(tmp_path, document))


def test_bool_is_not_an_int(tmp_path, document):
    document["/**"]["ros__parameters"]["task"]["max_steps"] = True
    with pytest.raises(ConfigError, match="max_steps"):
        load_config(write(tmp_path, document))


def test_list_items_are_type_checked(tmp_path, document):
    document["benchmark_node"]["ros__parameters"]["benchmark"]["seeds"] = [0, "one"]
    with pytest.raises(ConfigError, match=r"benchmark.seeds\[1\]"):
        load_config(write(tmp_path, document))


def test_unknown_node_section_is_rejected(tmp_path, document):
    document["planner_node"] = {"ros__parameters": {}}
    with pytest.raises(ConfigError, match="planner_node"):
        load_config(write(tmp_path, document))


def test_missing_file_and_bad_yaml_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_env_var_selects_the_config(tmp_path, document, monkeypatch):
    document["/**"]["ros__parameters"]["task"]["max_steps"] = 77
    monkeypatch.setenv("OVMAN_CONFIG", str(write(tmp_path, document)))
    assert load_config().task.max_steps == 77


def test_node_parameters_hold_shared_and_own_dotted_names():
    params = node_parameters(load_config(), "nav_node")
    assert params["task.success_radius"] == 1.0
    assert params["frames.map"] == "map"
    assert "navigation.backend" in params
    assert not any(name.startswith("camera.") for name in params)


def test_parameter_overrides_are_applied_and_type_checked():
    config = load_config()
    changed = with_parameters(config, "nav_node", {"task.max_steps": 10, "navigation.max_replans": 3})
    assert changed.task.max_steps == 10
    assert changed.nav_node.navigation.max_replans == 3
    with pytest.raises(ConfigError, match="max_replans"):
        with_parameters(config, "nav_node", {"navigation.max_replans": 2.5})
    with pytest.raises(ConfigError, match="unknown key"):
        with_parameters(config, "nav_node", {"navigation.warp": 1})


def test_ros_array_parameters_read_back_as_config_lists():
    import array

    from ovman_core.config import parameter_value

    assert parameter_value(array.array("q", [0, 1])) == [0, 1]
    assert parameter_value(("a", "b")) == ["a", "b"]
    assert parameter_value(1.5) == 1.5
