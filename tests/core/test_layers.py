"""Who may import whom (docs/ARCHITECTURE.md): the robot side never needs the simulator.

Every import of every module is read from its syntax tree, at any depth (a function-level import
counts as much as a top-level one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
ALLOWED = {
    "ovman_core": set(),
    "ovman_ros": {"ovman_core"},
    "ovman_sim": {"ovman_core", "ovman_ros"},
    "ovman_mapping": {"ovman_core", "ovman_ros"},
    "ovman_query": {"ovman_core", "ovman_ros", "ovman_mapping"},
    "ovman_nav": {"ovman_core", "ovman_ros"},
    "ovman_eval": {"ovman_core", "ovman_ros", "ovman_sim", "ovman_mapping", "ovman_query", "ovman_nav"},
}
"""Package → the OVMAN packages it may import (ovman_interfaces, the generated messages, is free)."""
KNOWN: set[tuple[str, str, str]] = set()
"""(package, module, imported) pairs still to move (issue 24): none."""


def imports(path: Path) -> set[str]:
    """Top-level package names ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_the_layers_below_it(package):
    modules = sorted((SRC / package / package).rglob("*.py"))
    assert modules, f"no modules under {SRC / package / package}"
    wrong = []
    for module in modules:
        for imported in imports(module):
            if not imported.startswith("ovman_") or imported in (package, "ovman_interfaces"):
                continue
            if imported not in ALLOWED[package] and (package, module.name, imported) not in KNOWN:
                wrong.append(f"{module.relative_to(SRC)} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_every_package_is_listed():
    packages = {p.name for p in SRC.iterdir() if (p / p.name / "__init__.py").is_file()}
    assert packages == set(ALLOWED)


def test_the_core_and_the_robot_side_never_import_rclpy_outside_their_nodes():
    for package in ("ovman_core", "ovman_mapping", "ovman_query", "ovman_nav"):
        for module in (SRC / package / package).rglob("*.py"):
            # Nodes and the DDS clients (OvmanCommander, sim_node's world as nav_node drives it, Nav2's).
            if module.name.endswith("_node.py") or module.name in ("commander.py", "sim_client.py", "nav2_backend.py"):
                continue
            assert "rclpy" not in imports(module), module
