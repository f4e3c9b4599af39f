"""The layout's rules, read from the source with ``ast``: the import graph of
``msgengine``, ``nsq`` and ``pulsarfast`` (every import statement, those under
``TYPE_CHECKING`` and inside functions too) has no circle, the engine imports
neither client, the two clients never import each other, and no module
imports another module's underscored name; and, a level up, each package's folders (and
top-level modules) import each other without a circle, pulsarfast's only down the picture of
docs/architecture.md, every import is absolute, and every top-level entry of pulsarfast/ is
placed in that picture."""
from __future__ import annotations

import ast
import pathlib
import re

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


# -- folders ----------------------------------------------------------------------------------
# A level up from the modules: each folder (sub-package) and each top-level module of a package is
# one room, and an import from a module of one room to a module of another is an edge between
# them. Every import counts, as in the module graph above: at module level, inside functions and
# under TYPE_CHECKING (an import a function makes late is still a dependency of its room).

#: pulsarfast's picture (docs/architecture.md), from the bottom up: each entry holds folders and
#: top-level modules ("__init__": the package's own module) that sit side by side, none importing
#: another; each imports only rooms of the entries before its own
PULSARFAST_LAYERS = (
    ("base",),
    ("wire", "endpoints", "schema", "functions", "version"),
    ("options",),
    ("network",),
    ("transactions",),
    ("producing", "consuming"),
    ("tableview",),
    ("client",),
    ("extension",),
    ("spark", "cli", "metrics"),
    ("_pulsar", "asyncio", "exceptions"),
    ("__init__",),
    ("otel",),
)


def _room(module: str) -> str:
    """The folder or top-level module a module belongs to: pulsarfast.wire.proto -> wire."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _room_graph(package: str) -> dict[str, set[str]]:
    """Which rooms of package import which (an import of an enclosing package, the way Python
    packages re-export, is not counted, as in the module graph)."""
    graph, _imports_found = _graph()
    rooms: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name.split(".")[0] != package:
            continue
        found = rooms.setdefault(_room(name), set())
        found.update(_room(target) for target in targets
                     if target.split(".")[0] == package and not name.startswith(target + ".")
                     and _room(target) != _room(name))
    return rooms


def _upward(rooms: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """The edges that do not go down the layers (within one layer: between its rooms)."""
    level = {room: index for index, entry in enumerate(layers) for room in entry}
    return sorted("%s imports %s" % (room, target) for room, targets in rooms.items() for target in targets
                  if level.get(target, len(layers)) >= level.get(room, -1))


@pytest.mark.parametrize("package", PACKAGES)
def test_the_folders_of_a_package_import_each_other_without_a_circle(package):
    assert _circles(_room_graph(package)) == []


def test_pulsarfast_folders_import_only_down_the_picture():
    assert _upward(_room_graph("pulsarfast"), PULSARFAST_LAYERS) == []


def test_every_top_level_entry_of_pulsarfast_is_in_the_picture():
    if not (ROOT / "pulsarfast").is_dir():
        pytest.skip("no source tree here: the packages are installed from a wheel (make test-pythons)")
    placed = {room for entry in PULSARFAST_LAYERS for room in entry}
    on_disk = {_room(name) for name in _graph()[0] if name.split(".")[0] == "pulsarfast"}
    assert sorted(on_disk - placed) == [], "place it in PULSARFAST_LAYERS and in docs/architecture.md"
    assert sorted(placed - on_disk) == []


def test_docs_architecture_md_draws_the_picture_checked_here():
    text = (ROOT / "docs" / "architecture.md").read_text()
    picture = text.split("```\n")[1]  # the first block: one line per entry, the top first
    drawn = [sorted(name.removesuffix(".py").rstrip("/") for name in re.findall(r"\w+(?:\.py|/)", line))
             for line in picture.splitlines()]
    assert [entry for entry in drawn if entry] == [sorted(entry) for entry in reversed(PULSARFAST_LAYERS)]


def test_every_import_inside_the_packages_is_absolute():
    relative = ["%s:%d" % (path.relative_to(ROOT), node.lineno)
                for path in _sources().values() for node in ast.walk(ast.parse(path.read_text(), str(path)))
                if isinstance(node, ast.ImportFrom) and node.level]
    relative += ["%s:%d" % (path.relative_to(ROOT), number)
                 for package in PACKAGES for path in sorted((ROOT / package).rglob("*.pyx"))
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if re.match(r"\s*from\s+\.", line)]
    assert relative == []


def test_the_checker_finds_an_upward_import_and_one_between_neighbours():
    layers = (("low",), ("left", "right"), ("top",))
    rooms = {"top": {"left", "low"}, "left": {"right"}, "right": {"low"}, "low": {"top"}}
    assert _room("pulsarfast.wire.proto") == "wire" and _room("pulsarfast") == "__init__"
    assert _upward(rooms, layers) == ["left imports right", "low imports top"]
