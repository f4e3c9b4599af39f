"""The layout's rules, read from the source with ``ast``: the import graph of
``msgengine``, ``nsq`` and ``pulsarfast`` (every import statement, those under
``TYPE_CHECKING`` and inside functions too) has no circle, the engine imports
neither client, the two clients never import each other, and no module
imports another module's underscored name."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("msgengine", "nsq", "pulsarfast")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, pathlib.Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imports(name: str, path: pathlib.Path, modules: set[str]) -> list[tuple[str, str | None, int]]:
    """(module imported, name imported from it or None, line) for each import of our packages."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = "%s.%s" % (target, alias.name)
                if submodule in modules:
                    found.append((submodule, None, node.lineno))
                else:
                    found.append((target, alias.name, node.lineno))
    return [(module, imported, line) for module, imported, line in found if module.split(".")[0] in PACKAGES]


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, str | None, int]]]]:
    sources = _sources()
    compiled = {_module_name(path) for package in PACKAGES for path in (ROOT / package).rglob("*.pyx")}
    modules = set(sources) | compiled
    imports = {name: _imports(name, path, modules) for name, path in sources.items()}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, found in imports.items():
        for module, _imported, _line in found:
            while module not in modules and "." in module:
                module = module.rpartition(".")[0]
            if module in modules and module != name:
                graph[name].add(module)
    return graph, imports


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_import_graph_has_no_circle():
    graph, _imports_found = _graph()
    # A module importing from its own package's __init__ (which imports its modules) is how
    # Python packages re-export; that edge up to an enclosing package is not counted.
    trimmed = {
        name: {target for target in targets if not name.startswith(target + ".")}
        for name, targets in graph.items()
    }
    assert _circles(trimmed) == []


@pytest.mark.parametrize("importer, forbidden", [
    ("msgengine", ("nsq", "pulsarfast")),
    ("nsq", ("pulsarfast",)),
    ("pulsarfast", ("nsq",)),
])
def test_layers_import_only_downwards(importer, forbidden):
    _graph_found, imports = _graph()
    wrong = [
        "%s:%d imports %s" % (name, line, module)
        for name, found in imports.items() if name.split(".")[0] == importer
        for module, _imported, line in found if module.split(".")[0] in forbidden
    ]
    assert wrong == []


def test_no_module_imports_another_modules_underscored_name():
    _graph_found, imports = _graph()
    wrong = [
        "%s:%d imports %s from %s" % (name, line, imported, module)
        for name, found in imports.items()
        for module, imported, line in found
        if imported is not None and imported.startswith("_") and not imported.startswith("__") and module != name
    ]
    assert wrong == []


def test_the_checker_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
