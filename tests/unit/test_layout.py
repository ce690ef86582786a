"""The package keeps its architecture: no import cycles, and imports only go down the layers.

docs/architecture.md explains the layers. Imports are read with `ast`, at module level and
inside functions (a lazy import is still a dependency, and can still close a cycle);
imports under `if TYPE_CHECKING:` are left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PACKAGE = "pytest_nodeval"
ENTRY_MODULE = "pytest_nodeval.plugin"

# Lowest first. A unit is a subpackage or a top-level module of pytest_nodeval. A module
# may import modules of its own unit and of units in lower layers; units that share a
# layer do not know each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The root __init__: __version__ and the table of lazily imported public names
    ("pytest_nodeval",),
    ("errors",),
    ("modes", "text", "shared_db", "provider_keys", "paths"),
    ("yamlfiles",),
    ("journal", "world", "stats"),
    ("agent",),
    ("people",),
    ("checks",),
    ("case",),
    ("runner", "report"),
    ("plugin",),
    ("sampling", "protocol"),
    ("commands",),
    # The command line and the public faces of the gate and the sampler
    (
        "cli",
        "gate",
        "sampler",
        "schemas",
    ),
)


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under root."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    modules = module_names(root, package)
    return {name: _imports_of(name, path, modules) for name, path in modules.items()}


def _imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(here, node)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    found.add(target)  # a module: from . import scenario
                elif base in modules:
                    found.add(base)  # a name defined in a module
    return found - {name}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:`."""
    nodes: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            if not (isinstance(child, ast.If) and _is_type_checking(child.test)):
                pending.append(child)
    return nodes


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:` (not `if not TYPE_CHECKING:`)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(here: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = here.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Some import cycle, as the modules along it with the first repeated at the end; None if
    there is none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def unit_of(module: str, package: str) -> str:
    return module.split(".")[1] if "." in module else package


def layer_violations(
    graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...], package: str
) -> list[str]:
    """Imports that go up the layers or sideways, and modules of a unit no layer lists."""
    rank = {unit: number for number, units in enumerate(layers) for unit in units}
    problems = []
    for module, targets in sorted(graph.items()):
        unit = unit_of(module, package)
        if unit not in rank:
            problems.append(
                f"{module}: its unit {unit!r} is in no layer; "
                "add it to LAYERS and docs/architecture.md"
            )
            continue
        for target in sorted(targets):
            other = unit_of(target, package)
            if other != unit and rank.get(other, len(layers)) >= rank[unit]:
                problems.append(f"{module} imports {target}: {other!r} is not below {unit!r}")
    return problems


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(REPO, PACKAGE)


def test_the_package_has_no_import_cycle(graph: dict[str, set[str]]) -> None:
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_only_go_down_the_layers(graph: dict[str, set[str]]) -> None:
    assert layer_violations(graph, LAYERS, PACKAGE) == []


def test_no_module_imports_the_entry_module(graph: dict[str, set[str]]) -> None:
    # The pytest layer shares its names through plugin/keys.py; the entry module stays a leaf.
    assert [module for module, targets in graph.items() if ENTRY_MODULE in targets] == []


def test_the_fakes_stand_alone() -> None:
    # The SDKs talk to the fakes as to the real services; they must not know the plugin.
    problems = []
    for path in sorted((REPO / "fakes").rglob("*.py")):
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            )
            problems += [
                f"{path.relative_to(REPO)} imports {n}" for n in names if n.split(".")[0] == PACKAGE
            ]
    assert problems == []


# -- the checks themselves, on a synthetic package ------------------------------------


def _write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


SYNTHETIC_LAYERS = (("pkg",), ("base",), ("low",), ("high",))


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    _write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/a.py": "from ..base import thing\nfrom . import b\n",
            "pkg/low/b.py": "",
            "pkg/high/__init__.py": "",
            "pkg/high/c.py": "from ..low.a import x\n\ndef lazy():\n    from ..low import b\n",
        },
    )
    return tmp_path


def test_a_clean_synthetic_package_passes(synthetic: Path) -> None:
    graph = import_graph(synthetic, "pkg")
    assert graph["pkg.low.a"] == {"pkg.base", "pkg.low.b"}
    assert graph["pkg.high.c"] == {"pkg.low.a", "pkg.low.b"}
    assert find_cycle(graph) is None
    assert layer_violations(graph, SYNTHETIC_LAYERS, "pkg") == []


def test_a_cycle_is_found_even_through_a_lazy_import(synthetic: Path) -> None:
    (synthetic / "pkg/low/b.py").write_text("def later():\n    from .a import y\n")
    assert find_cycle(import_graph(synthetic, "pkg")) == ["pkg.low.a", "pkg.low.b", "pkg.low.a"]


def test_an_import_up_the_layers_is_named(synthetic: Path) -> None:
    (synthetic / "pkg/low/b.py").write_text("from ..high.c import lazy\n")
    graph = import_graph(synthetic, "pkg")
    assert layer_violations(graph, SYNTHETIC_LAYERS, "pkg") == [
        "pkg.low.b imports pkg.high.c: 'high' is not below 'low'"
    ]
    assert find_cycle(graph) == ["pkg.high.c", "pkg.low.a", "pkg.low.b", "pkg.high.c"]


def test_type_checking_imports_are_not_dependencies(synthetic: Path) -> None:
    (synthetic / "pkg/low/b.py").write_text(
        "import typing\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..high.c import lazy\n"
        "if typing.TYPE_CHECKING:\n    from ..high import c\n"
    )
    assert layer_violations(import_graph(synthetic, "pkg"), SYNTHETIC_LAYERS, "pkg") == []


def test_an_import_under_not_type_checking_runs_and_counts(synthetic: Path) -> None:
    (synthetic / "pkg/low/b.py").write_text(
        "from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    from ..high.c import lazy\n"
    )
    assert layer_violations(import_graph(synthetic, "pkg"), SYNTHETIC_LAYERS, "pkg") == [
        "pkg.low.b imports pkg.high.c: 'high' is not below 'low'"
    ]


def test_a_unit_in_no_layer_is_named(synthetic: Path) -> None:
    _write_package(synthetic, {"pkg/stray.py": ""})
    assert layer_violations(import_graph(synthetic, "pkg"), SYNTHETIC_LAYERS, "pkg") == [
        "pkg.stray: its unit 'stray' is in no layer; add it to LAYERS and docs/architecture.md"
    ]
