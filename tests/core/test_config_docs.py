"""Every key of the configuration is explained: a short comment beside it in config/ovman.yaml and
a full explanation in the typed config, from which docs/configuration.md is generated."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from ovman_core.config import (
    NODE_NAMES,
    SHARED_KEY,
    OvmanConfig,
    Positive,
    describe,
    explanations,
    load_config,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILE = ROOT / "config" / "ovman.yaml"
MAX_COMMENT = 90
"""Characters of a key's comment in config/ovman.yaml (the text after ``# ``)."""
MAX_HEADER_LINES = 6

KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>\"[^\"]*\"|[^\s:#][^:]*):(?P<rest>.*)$")


def yaml_comments(text: str) -> dict[str, str]:
    """Dotted path (``/**.ros__parameters.task.success_radius``, as the loader names keys) -> the
    comment on that key's line ("" when it has none), for every key of a block-style YAML file."""
    stack: list[tuple[int, str]] = []
    out = {}
    for line in text.splitlines():
        match = KEY_LINE.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent, key, rest = len(match["indent"]), match["key"].strip('"'), match["rest"]
        comment = ""
        for hash_ in re.finditer(r"\s#", rest):
            if rest.count('"', 0, hash_.start()) % 2 == 0:  # not inside a quoted value
                comment = rest[hash_.start() + 2 :].strip()
                break
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        out[".".join(k for _, k in stack)] = comment
    return out


@pytest.fixture(scope="module")
def keys():
    return [key for section in describe(load_config(CONFIG_FILE)) for key in section.keys]


def test_the_comment_reader_finds_keys_sections_and_comments():
    text = '# header\na:  # section\n  b: 1.0  # (m) > 0: a length\n  c: "x # y"\n  d: [1, 2]  # list\n'
    assert yaml_comments(text) == {"a": "section", "a.b": "(m) > 0: a length", "a.c": "", "a.d": "list"}


def test_describe_lists_every_key_of_every_block_once(keys):
    config = load_config(CONFIG_FILE)
    assert len(keys) > 250
    assert len({key.path for key in keys}) == len(keys)
    assert {key.node for key in keys} == {SHARED_KEY, *NODE_NAMES}
    by_path = {key.path: key for key in keys}
    radius = by_path["/**.ros__parameters.task.success_radius"]
    assert (radius.name, radius.type, radius.constraints, radius.value) == (
        "task.success_radius",
        "float",
        ("> 0",),
        1.0,
    )
    assert radius.value == config.task.success_radius


@pytest.mark.parametrize(
    ("path", "type_name", "constraints"),
    [
        ("sim_node.ros__parameters.embedded.rooms_max", "int", ("in [1, 1000000]", ">= embedded.rooms_min")),
        ("sim_node.ros__parameters.camera.far", "float", ("> 0", "> camera.near")),
        ("sim_node.ros__parameters.embedded.light_direction", "list[float]", ("each in [-1, 1]",)),
        ("sim_node.ros__parameters.world.appearance.size_jitter", "float", ("in [0, 1)",)),
        ("benchmark_node.ros__parameters.benchmark.arms", "list[str]", ()),
        ("sim_node.ros__parameters.node.scene", "str", ()),
        ("/**.ros__parameters.ros.qos_event_warnings", "bool", ()),
        (
            "query_node.ros__parameters.association.extent_weight",
            "float",
            ("in [0, 1]", "association.extent_weight + association.colour_weight <= 1"),
        ),
    ],
)
def test_describe_gives_each_keys_type_and_declared_constraints(keys, path, type_name, constraints):
    (key,) = [k for k in keys if k.path == path]
    assert (key.type, key.constraints) == (type_name, constraints)


def test_every_key_has_a_short_comment_in_the_file(keys):
    comments = yaml_comments(CONFIG_FILE.read_text(encoding="utf-8"))
    missing = [key.path for key in keys if not comments.get(key.path)]
    assert missing == [], "give each key a comment: (unit) range: what it does"
    long = [f"{path}: {len(text)}" for path, text in comments.items() if len(text) > MAX_COMMENT]
    assert long == [], f"a key's comment has at most {MAX_COMMENT} characters; the rest goes into ovman_core.config"


def test_the_files_header_is_short():
    lines = CONFIG_FILE.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines[: lines.index("")] if line.startswith("#")]
    assert 0 < len(header) <= MAX_HEADER_LINES


def test_every_key_has_a_full_explanation(keys):
    unexplained = [key.path for key in keys if not re.search(r"\w.*[.)]$", key.explanation, re.S)]
    assert unexplained == [], "write an attribute docstring (at least one sentence) under each field"


def test_every_section_has_its_own_docstring():
    def sections(cls: type) -> list[type]:
        nested = [t for t in typing.get_type_hints(cls).values() if dataclasses.is_dataclass(t)]
        return [cls, *(c for t in nested for c in sections(t))]

    classes = sections(OvmanConfig)
    assert len(classes) > 30
    generated = [cls.__name__ for cls in classes if (cls.__doc__ or "").startswith(cls.__name__ + "(")]
    assert generated == [], "give each section's dataclass a docstring: it is the section's explanation"


def test_explanations_carry_no_dated_measurements(keys):
    dated = [key.path for key in keys if re.search(r"\b20\d\d-\d\d", key.explanation)]
    assert dated == [], "state the fact or figure; its history belongs in the commit message"


@dataclasses.dataclass(frozen=True)
class Example:
    """A section."""

    length: Positive
    """(m): the first line.

    A second paragraph."""
    plain: str
    weight: float = 0.0
    """A field with a default."""


def test_explanations_are_the_attribute_docstrings_under_the_fields():
    assert explanations(Example) == {
        "length": "(m): the first line.\n\nA second paragraph.",
        "weight": "A field with a default.",
    }
