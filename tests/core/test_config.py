"""The typed config: the shipped file loads, bad files fail naming the file and the key."""

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from ovman_core.config import (
    INT64,
    ConfigError,
    OvmanConfig,
    Range,
    default_config_path,
    load_config,
    node_parameters,
    stored_config,
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


def test_a_stored_document_gets_the_keys_added_since_and_keeps_its_own(document):
    """A config written by an earlier version (a dataset's manifest): missing keys, at any depth,
    come from the defaults and are named; the values it holds are its own and still checked; a
    file loaded with load_config gets no such help (test_missing_key_is_rejected)."""
    defaults = load_config()
    complete, added = stored_config(document, "doc", defaults)
    assert added == [] and to_document(complete) == to_document(defaults)
    del document["/**"]["ros__parameters"]["task"]["success_radius"]
    del document["mapping_node"]["ros__parameters"]["segmenter"]
    document["nav_node"]["ros__parameters"]["navigation"]["sim_timeout_s"] = 3.5
    config, added = stored_config(document, "doc", defaults)
    assert added == ["/**.ros__parameters.task.success_radius", "mapping_node.ros__parameters.segmenter"]
    assert config.task.success_radius == defaults.task.success_radius
    assert config.mapping_node.segmenter == defaults.mapping_node.segmenter
    assert config.nav_node.navigation.sim_timeout_s == 3.5
    document["nav_node"]["ros__parameters"]["navigation"]["speed"] = 1.0
    with pytest.raises(ConfigError, match=r"doc: unknown key.*navigation\.speed"):
        stored_config(document, "doc", defaults)
    with pytest.raises(ConfigError, match="doc: expected a mapping"):
        stored_config(["not", "a", "mapping"], "doc", defaults)


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


# ------------------------------------------------------------------------------------ ranges


def numeric_fields(cls: type, prefix: str = "") -> list[tuple[str, typing.Any]]:
    """(dotted name, type hint) of every int or float field, or list of them, under ``cls``."""
    out = []
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
        if dataclasses.is_dataclass(base):
            out += numeric_fields(base, f"{prefix}{name}.")
        elif typing.get_origin(base) is list:
            (item,) = typing.get_args(base)
            out.append((f"{prefix}{name}[]", item))
        elif base in (int, float):
            out.append((prefix + name, hint))
    return [(name, hint) for name, hint in out if name != "source"]


def test_every_numeric_field_and_list_item_declares_its_range():
    fields = numeric_fields(OvmanConfig)
    assert len(fields) > 150
    for name, hint in fields:
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
        if base in (str, bool):
            continue
        ranges = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Range)]
        assert len(ranges) == 1, f"{name}: declare its range, e.g. Positive or Annotated[float, Range(...)]"
        (bounds,) = ranges
        if base is int:
            assert bounds.low is not None and bounds.high is not None, f"{name}: an int needs both bounds"
            assert bounds.low in INT64 and bounds.high in INT64, f"{name}: bounds beyond a ROS int64"


def set_value(document: dict, dotted: str, value: object) -> None:
    """Set ``dotted`` (``section.ros__parameters.a.b``) of the YAML document."""
    *parents, leaf = dotted.split(".")
    node = document[parents[0]]
    for part in parents[1:]:
        node = node[part]
    node[leaf] = value


def load_error(tmp_path: Path, document: dict) -> str:
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value).removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("/**.ros__parameters.task.success_radius", -1.0, "-1.0: expected > 0"),
        ("/**.ros__parameters.task.success_radius", float("nan"), "nan: expected a finite number > 0"),
        ("/**.ros__parameters.task.success_radius", float("inf"), "inf: expected a finite number > 0"),
        ("/**.ros__parameters.task.success_radius", float("-inf"), "-inf: expected a finite number > 0"),
        ("mapping_node.ros__parameters.mapping.pixel_stride", 0, "0: expected in [1, 16384]"),
        ("/**.ros__parameters.task.max_steps", -5, "-5: expected in [1, 1000000]"),
        (
            "/**.ros__parameters.task.max_steps",
            100000000000000000000000000000,
            "100000000000000000000000000000: expected in [1, 1000000]",
        ),
        ("query_node.ros__parameters.grounding.delta_g", -1.0, "-1.0: expected >= 0"),
        ("mapping_node.ros__parameters.mapping.voxel_size", 0.0, "0.0: expected > 0"),
        ("mapping_node.ros__parameters.mapping.voxel_size", -0.05, "-0.05: expected > 0"),
        ("sim_node.ros__parameters.physics.knock_probability", 1.5, "1.5: expected in [0, 1]"),
        ("sim_node.ros__parameters.world.horizon_min_deg", -91.0, "-91.0: expected in [-90, 90]"),
        ("sim_node.ros__parameters.camera.vertical_fov_deg", 180.0, "180.0: expected in (0, 180)"),
        ("query_node.ros__parameters.seed", -1, "-1: expected in [0, 9223372036854775807]"),
        ("benchmark_node.ros__parameters.perception.decoder_stages", 4, "4: expected in [1, 3]"),
    ],
)
def test_a_value_out_of_range_is_rejected_naming_file_key_and_range(tmp_path, document, key, value, expected):
    set_value(document, key, value)
    assert load_error(tmp_path, document) == f"'{key}' = {expected}"


def test_nan_written_in_yaml_is_rejected(tmp_path):
    path = tmp_path / "ovman.yaml"
    path.write_text(default_config_path().read_text().replace("success_radius: 1.0 ", "success_radius: .nan "))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: '/**.ros__parameters.task.success_radius' = nan: expected a finite number > 0"


def test_list_items_are_range_checked(tmp_path, document):
    set_value(document, "benchmark_node.ros__parameters.benchmark.seeds", [0, -1])
    assert load_error(tmp_path, document) == (
        "'benchmark_node.ros__parameters.benchmark.seeds[1]' = -1: expected in [0, 9223372036854775807]"
    )
    set_value(document, "benchmark_node.ros__parameters.benchmark.seeds", [0])
    set_value(document, "sim_node.ros__parameters.embedded.light_direction", [0.35, float("nan"), 0.2])
    assert load_error(tmp_path, document) == (
        "'sim_node.ros__parameters.embedded.light_direction[1]' = nan: expected a finite number in [-1, 1]"
    )


@pytest.mark.parametrize(
    ("section", "low", "high", "low_value", "high_value", "relation"),
    [
        ("sim_node.ros__parameters.embedded", "rooms_min", "rooms_max", 4, 3, ">="),
        ("sim_node.ros__parameters.embedded", "room_size_min", "room_size_max", 5.0, 4.0, ">="),
        ("sim_node.ros__parameters.embedded", "furniture_per_room_min", "furniture_per_room_max", 5, 4, ">="),
        ("sim_node.ros__parameters.embedded", "small_objects_per_room_min", "small_objects_per_room_max", 9, 8, ">="),
        ("sim_node.ros__parameters.world", "horizon_min_deg", "horizon_max_deg", 30.0, 0.0, ">="),
        ("sim_node.ros__parameters.conditions", "texture_period_min", "texture_period_max", 0.3, 0.2, ">="),
        ("benchmark_node.ros__parameters.generation", "multi_change_min", "multi_change_max", 3, 2, ">="),
        ("sim_node.ros__parameters.camera", "near", "far", 1.0, 1.0, ">"),
        ("/**.ros__parameters.task", "stable_tolerance", "min_displacement", 1.0, 1.0, ">"),
    ],
)
def test_a_maximum_below_its_minimum_is_rejected_naming_both_keys(
    tmp_path, document, section, low, high, low_value, high_value, relation
):
    set_value(document, f"{section}.{low}", low_value)
    set_value(document, f"{section}.{high}", high_value)
    assert load_error(tmp_path, document) == (
        f"'{section}.{high}' = {high_value!r}: expected {relation} '{section}.{low}' ({low_value!r})"
    )


def test_weights_that_share_one_whole_are_rejected_above_it_naming_both_keys(tmp_path, document):
    section = "query_node.ros__parameters.association"
    set_value(document, f"{section}.colour_weight", 0.75)
    set_value(document, f"{section}.extent_weight", 0.5)
    assert load_error(tmp_path, document) == (
        f"'{section}.extent_weight' (0.5) + '{section}.colour_weight' (0.75) = 1.25: expected <= 1"
    )


def test_a_duplicate_key_is_rejected_naming_file_line_and_key(tmp_path):
    lines = default_config_path().read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("voxel_size:"))
    lines.insert(first + 1, "      voxel_size: 0.1\n")
    path = tmp_path / "ovman.yaml"
    path.write_text("".join(lines))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: line {first + 2}: duplicate key 'voxel_size' (first at line {first + 1})"


def test_yaml_tags_that_would_run_code_are_refused(tmp_path):
    path = tmp_path / "ovman.yaml"
    path.write_text("x: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_a_file_that_is_not_utf8_is_rejected_naming_the_byte_offset(tmp_path):
    data = default_config_path().read_bytes()
    offset = data.index(b"# ", data.index(b"success_radius:")) + 2  # inside the key's comment
    path = tmp_path / "ovman.yaml"
    path.write_bytes(data[:offset] + b"\xff" + data[offset:])
    line = data.count(b"\n", 0, offset) + 1
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: not UTF-8 text: byte 0xff at byte offset {offset} (line {line})"


def test_a_parameter_override_out_of_range_names_the_parameter():
    config = load_config()
    with pytest.raises(ConfigError) as err:
        with_parameters(config, "query_node", {"grounding.delta_g": -1.0})
    assert str(err.value) == (
        f"{config.source} + parameters of query_node: 'query_node.ros__parameters.grounding.delta_g' = -1.0: "
        "expected >= 0"
    )
    with pytest.raises(ConfigError, match=r"'/\*\*\.ros__parameters\.task\.max_steps' = 0: expected in \[1, 1000000\]"):
        with_parameters(config, "nav_node", {"task.max_steps": 0})
