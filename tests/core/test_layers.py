"""Who may import whom (docs/ARCHITECTURE.md): the robot side never needs the simulator.

Every import of every module is read from its syntax tree, at any depth (a function-level import
counts as much as a top-level one).
"""

from __future__ import annotations

import ast
import re
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


EVAL_ALLOWED = {
    "task": set(),
    "runs": {"task"},
    "generation": {"task", "runs"},
    "analysis": {"task", "runs", "generation"},
    "benchmark": {"task", "runs", "generation", "analysis"},
    "perception": {"task", "runs", "generation"},
    "graph": {"task", "runs", "generation", "analysis", "benchmark"},
    "cli": {"task", "runs", "generation", "analysis", "benchmark", "perception", "graph"},
}
"""ovman_eval's subpackages → the subpackages they may import (docs/ARCHITECTURE.md)."""
EVAL = SRC / "ovman_eval" / "ovman_eval"
LONG_MODULE = 550
"""Lines above which a module states why it is one module (a docstring paragraph "Why one module")."""


def eval_imports(path: Path) -> set[str]:
    """The ovman_eval modules ``path`` imports, at any depth, as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ovman_eval."):
            names = [f"{node.module}.{a.name}" for a in node.names]
            # `from ovman_eval.graph import description` imports a module; `from m import name` the module m.
            found.update(
                n if (EVAL / (n.removeprefix("ovman_eval.").replace(".", "/") + ".py")).is_file() else node.module
                for n in names
            )
    return found


def module_name(path: Path) -> str:
    return ".".join(("ovman_eval", *path.relative_to(EVAL).with_suffix("").parts)).removesuffix(".__init__")


def test_ovman_evals_subpackages_import_only_those_below_them():
    folders = {p.name for p in EVAL.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(EVAL_ALLOWED), "every subpackage is layered"
    assert not [p.name for p in EVAL.glob("*.py") if p.name != "__init__.py"], "every module is in a subpackage"
    wrong = []
    for path in EVAL.rglob("*.py"):
        own = path.relative_to(EVAL).parts[0]
        for imported in eval_imports(path):
            other = imported.split(".")[1]
            if other != own and other not in EVAL_ALLOWED.get(own, set()):
                wrong.append(f"{module_name(path)} imports {imported}")
    assert not wrong, "\n".join(sorted(wrong))


def test_ovman_eval_has_no_import_cycles():
    graph = {module_name(p): eval_imports(p) for p in EVAL.rglob("*.py")}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_long_module_says_why_it_is_one_module(package):
    long = []
    for path in sorted((SRC / package / package).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG_MODULE and "Why one module" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
    assert not long, "\n".join(long)


def test_tests_reach_no_private_names_of_other_modules():
    """A test uses what a module offers: no ``thing._name`` (other than its own ``self``/``cls``) and no
    ``from ovman_x import _name``."""
    tests = Path(__file__).resolve().parents[1]
    reached = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    reached.append(f"{path.relative_to(tests)}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ovman"):
                reached += [f"{path.relative_to(tests)}:{node.lineno} {a.name}" for a in node.names if a.name[0] == "_"]
    assert not reached, "\n".join(reached)


MODULE_DOCSTRING_LINES = 10
"""Most lines of a module docstring: what the module is for and what it must not do, no history."""


def test_every_module_docstring_is_short_and_names_no_issue() -> None:
    long, historical = [], []
    for path in sorted(SRC.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False) or ""
        if doc.count("\n") + 1 > MODULE_DOCSTRING_LINES:
            long.append(f"{path.relative_to(SRC)}: {doc.count(chr(10)) + 1} lines")
        if re.search(r"\bissue\s+#?\d+|\b20\d\d-\d\d-\d\d\b", doc, re.I):
            historical.append(str(path.relative_to(SRC)))
    assert not long, f"module docstrings over {MODULE_DOCSTRING_LINES} lines (measurements go to docs/measurements.md)"
    assert not historical, "module docstrings that name an issue or a date"
