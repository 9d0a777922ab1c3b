"""``ovman config``: validate a configuration file and show it, one node's ROS parameters, one key's
explanation (``--explain``), or the whole reference page docs/configuration.md (``--markdown``).

The page and the explanations come from the typed config (:func:`ovman_core.config.describe`): the
types and ranges its dataclasses declare, the attribute docstring of each field, and the values of
the file; tests/eval/test_config_docs.py keeps the committed page equal to what this prints.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterable
from typing import Any

import yaml

from ovman_core.config import (
    CONFIG_ENV,
    NODE_NAMES,
    PARAMS_KEY,
    SHARED_KEY,
    ConfigError,
    KeyDoc,
    OvmanConfig,
    SectionDoc,
    describe,
    load_config,
    node_parameters,
    to_document,
)
from ovman_mapping.map_store import STORE_DIR_KEY

DOCS_PAGE = "docs/configuration.md"
SHIPPED_CONFIG = "config/ovman.yaml"
REGENERATE = f"ovman config --config {SHIPPED_CONFIG} --markdown > {DOCS_PAGE}"
"""The command that rewrites the reference page from the shipped file."""

ALSO_DECLARED: dict[tuple[str, str], tuple[str, ...]] = {
    ("mapping_node", "encoder."): ("query_node",),
    ("mapping_node", STORE_DIR_KEY): ("query_node",),
}
"""(node, dotted prefix) -> the other nodes that declare those keys as well: query_node embeds query
texts with the encoder that built the maps (ovman_eval.graph.description.ENCODER_PREFIX) and loads
stored visits from mapping_node's map store."""

EXIT_UNKNOWN_KEY = 2
WIDTH = 100
"""Columns of ``--explain``'s text."""


class UnknownKeyError(LookupError):
    """``--explain`` was given a name that is no key or section of the configuration."""


def add(parser: argparse.ArgumentParser) -> object:
    parser.add_argument("--config", help="configuration file (default: $OVMAN_CONFIG or config/ovman.yaml)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--node", choices=NODE_NAMES, help="print this node's flat ROS parameters instead")
    shown.add_argument(
        "--explain",
        metavar="KEY",
        help="print one key's node, type, range, default and explanation: a dotted ROS parameter name "
        "(task.success_radius), optionally after its node (mapping_node.mapping.voxel_size), or a section",
    )
    shown.add_argument(
        "--markdown",
        action="store_true",
        help=f"print the configuration reference page ({DOCS_PAGE}; regenerate it with `{REGENERATE}`)",
    )
    return run


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"ovman config: {err}", file=sys.stderr)
        return 1
    if args.node:
        for name, value in node_parameters(config, args.node).items():
            print(f"{name}: {value!r}")
    elif args.explain:
        try:
            print(explain(config, args.explain), end="")
        except UnknownKeyError as err:
            print(f"ovman config: {err}", file=sys.stderr)
            return EXIT_UNKNOWN_KEY
    elif args.markdown:
        print(markdown(config, args.config or os.environ.get(CONFIG_ENV) or SHIPPED_CONFIG), end="")
    else:
        print(f"# valid: {config.source}")
        print(yaml.safe_dump(to_document(config), sort_keys=False), end="")
    return 0


# ------------------------------------------------------------------------------ the facts of a key


def declared_by(node: str, name: str) -> tuple[str, ...]:
    """The nodes that declare the key ``name`` of block ``node`` as a ROS parameter."""
    if node == SHARED_KEY:
        return NODE_NAMES
    also = [
        n
        for (owner, prefix), nodes in ALSO_DECLARED.items()
        if owner == node and name.startswith(prefix)
        for n in nodes
    ]
    return (node, *also)


def nodes_text(node: str, name: str) -> str:
    return "every node (/**)" if node == SHARED_KEY else ", ".join(declared_by(node, name))


def value_text(value: Any) -> str:
    """A value as YAML (and JSON) writes it in flow style: ``1.0``, ``true``, ``""``, ``[0.2, 0.5]``."""
    return json.dumps(value, ensure_ascii=False)


def aliases(node: str, name: str) -> list[str]:
    """Every name ``--explain`` finds the key or section ``name`` of block ``node`` by: the dotted
    name, and that name after each node that declares it, with or without ``ros__parameters``."""
    if not name:
        return [node]
    out = [name]
    for owner in (node, *declared_by(node, name)):
        out += [f"{owner}.{name}", f"{owner}.{PARAMS_KEY}.{name}"]
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------------------ --explain


def explain(config: OvmanConfig, key: str) -> str:
    """The full text of every key or section that ``key`` names (a dotted name such as
    ``node.step_dt`` may name one in several nodes). UnknownKeyError naming close matches otherwise."""
    sections = describe(config)
    key = key.strip()
    found = [_explain_key(k) for s in sections for k in s.keys if key in aliases(k.node, k.name)]
    found += [_explain_section(s, sections) for s in sections if key in aliases(s.node, s.name)]
    if found:
        return "\n".join(found)
    raise UnknownKeyError(_unknown(key, sections))


def _explain_key(key: KeyDoc) -> str:
    facts = [
        ("node", nodes_text(key.node, key.name)),
        ("in the file", key.path),
        ("type", key.type),
        ("range", "; ".join(key.constraints) or "any"),
        ("default", value_text(key.value)),
    ]
    lines = [key.name, *(f"  {label + ':':<13}{text}" for label, text in facts), ""]
    return "\n".join(lines) + "\n" + _wrapped(key.explanation)


def _explain_section(section: SectionDoc, sections: list[SectionDoc]) -> str:
    title = f"{section.name} (a section of {section.node})" if section.name else f"{section.node} (a node's block)"
    prefix = f"{section.name}." if section.name else ""
    keys = [k for s in sections if s.node == section.node for k in s.keys if k.name.startswith(prefix)]
    width = max(len(k.name) for k in keys) + 2
    listing = "".join(f"  {k.name:<{width}}{value_text(k.value)}\n" for k in keys)
    return f"{title}\n\n{_wrapped(section.explanation)}\nkeys (ovman config --explain KEY for one):\n{listing}"


def _wrapped(text: str) -> str:
    return "".join(
        textwrap.fill(paragraph, WIDTH, break_long_words=False, break_on_hyphens=False) + "\n\n"
        for paragraph in _paragraphs(_plain(text))
    ).removesuffix("\n")


def _unknown(key: str, sections: list[SectionDoc]) -> str:
    names = [k.name for s in sections for k in s.keys] + [s.name for s in sections if s.name]
    qualified = [f"{k.node}.{k.name}" for s in sections for k in s.keys if k.node != SHARED_KEY]
    leaf = key.rpartition(".")[2]
    close = [n for n in names if n.rpartition(".")[2] == leaf]
    close += difflib.get_close_matches(key, names + qualified, n=5, cutoff=0.6)
    close = list(dict.fromkeys(close))[:6]
    hint = f"; did you mean {', '.join(close)}?" if close else "; no key is close"
    return f"unknown key {key!r}{hint} (every key: ovman config --markdown; one node's: ovman config --node NODE)"


# ------------------------------------------------------------------------------ --markdown


def markdown(config: OvmanConfig, source: str = SHIPPED_CONFIG) -> str:
    """docs/configuration.md: every node's block, section and key of ``config`` with the dotted
    parameter name, the nodes that declare it, its type, range, value in ``source`` and explanation."""
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from the typed config (src/ovman_core/ovman_core/config.py) and {source} by "
        f"`{REGENERATE}`; do not edit by hand. -->",
        "",
        "Every constant of the task and of the reference agent lives in `config/ovman.yaml`, in the ROS 2 "
        "parameters layout: `/**` holds the keys every node shares, and each node has its own top-level key "
        "with `ros__parameters`. The typed configuration (`ovman_core.config`) loads it and rejects unknown, "
        "missing and duplicate keys, values of the wrong type and values out of range, naming the file and the "
        "key. Floats are written with a decimal point, since ROS parameters are typed (1 is an integer, 1.0 a "
        "double), and must be finite.",
        "",
        "Each node declares every key of `/**` and of its own block as a ROS parameter under the dotted name "
        "shown here, so a value can be overridden when the node starts (`--ros-args -p task.max_steps:=300`) "
        "or in a launch file; overrides are checked the same way. `ovman config --explain KEY` prints one "
        "entry of this page, `ovman config --node NODE` a node's parameters with their values.",
        "",
        f"Defaults are the values in `{source}`.",
    ]
    for section in describe(config):
        out += ["", _heading(section), "", *_md_paragraphs(section.explanation)]
        for key in section.keys:
            facts = [
                f"**Type** `{key.type}`",
                f"**Range** {', '.join(f'`{c}`' for c in key.constraints)}" if key.constraints else "",
                f"**Default** `{value_text(key.value)}`",
                f"**Declared by** {_md_nodes(key)}",
            ]
            out += [
                "",
                f"#### `{key.name}`",
                "",
                " · ".join(f for f in facts if f),
                "",
                *_md_paragraphs(key.explanation),
            ]
    return "\n".join(out) + "\n"


def _heading(section: SectionDoc) -> str:
    if section.name:
        return f"### `{section.name}`"
    return "## Shared by every node (`/**`)" if section.node == SHARED_KEY else f"## `{section.node}`"


def _md_nodes(key: KeyDoc) -> str:
    if key.node == SHARED_KEY:
        return "every node (`/**`)"
    return ", ".join(f"`{n}`" for n in declared_by(key.node, key.name))


def _md_paragraphs(text: str) -> list[str]:
    """A docstring as Markdown paragraphs, one line each (so no wrapped line starts a list or a
    heading), blank lines between them; ``code`` and roles become code spans, and outside them ``<``
    and ``*`` are escaped."""
    out: list[str] = []
    for paragraph in _paragraphs(_plain(text)):
        parts = re.split(r"(`[^`]*`)", paragraph)
        escaped = "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace("*", r"\*") for p in parts)
        out += [escaped, ""]
    return out[:-1]


def _plain(text: str) -> str:
    """reST markup of the docstrings as Markdown code spans: ``x`` and :role:`x` become `x`."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)


def _paragraphs(text: str) -> Iterable[str]:
    for block in re.split(r"\n\s*\n", text.strip()):
        if block.strip():
            yield " ".join(line.strip() for line in block.splitlines())
