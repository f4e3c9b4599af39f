"""Checks the API reference of the documentation site (`make docs` runs it after `mkdocs build`):
every public name (``__all__``) of each documented module is on a page of the built site.

mkdocstrings lists every object it rendered in the site's ``objects.inv`` (Sphinx's inventory
format, version 2). A name counts as documented when the inventory has it under its module
(``pulsarfast.Client``), or, for a class or a function, when the same object is documented under
another of its names: its home (``nsq.spark.datasource.NsqDataSource``) or another public module
(``pulsarfast.Timeout`` is ``pulsarfast.exceptions.Timeout``). A value that is neither (a constant,
a schema) must be documented under a name that holds that very object.

    python ci/check_docs_api.py build/site/objects.inv
"""
from __future__ import annotations

import importlib
import inspect
import sys
import zlib
from types import ModuleType

#: the modules whose public names the site documents (docs/api/)
MODULES = (
    "nsq", "nsq.spark", "nsq.metrics", "nsq.otel",
    "pulsarfast", "pulsarfast.asyncio", "pulsarfast.schema", "pulsarfast._pulsar", "pulsarfast.exceptions",
    "pulsarfast.tableview", "pulsarfast.functions", "pulsarfast.spark", "pulsarfast.metrics", "pulsarfast.otel",
)


def read_inventory(path: str) -> set[str]:
    """The object names of a Sphinx inventory (version 2: four header lines, then zlib'd lines)."""
    with open(path, "rb") as f:
        data = f.read()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    if not data.startswith(b"# Sphinx inventory version 2"):
        raise SystemExit("%s: not a version 2 inventory" % path)
    lines = zlib.decompress(data[header_end:]).decode("utf-8").splitlines()
    return {line.split(" ", 1)[0] for line in lines if line.strip()}


def resolve(name: str) -> tuple[bool, object]:
    """The object a dotted name stands for (the longest importable module, then attributes)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            return False, None
        return True, value
    return False, None


def holds(name: str, value: object) -> bool:
    found, held = resolve(name)
    return found and held is value


def undocumented(module: ModuleType, documented: set[str], by_identity: dict[int, object]) -> list[str]:
    missing = []
    for name in module.__all__:
        if "%s.%s" % (module.__name__, name) in documented:
            continue
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
            if id(value) in by_identity:
                continue
        elif any(entry.endswith("." + name) and holds(entry, value) for entry in documented):
            continue
        missing.append(name)
    return missing


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    documented = read_inventory(argv[1])
    by_identity: dict[int, object] = {}
    for entry in documented:
        found, value = resolve(entry)
        if found and (inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value)):
            by_identity[id(value)] = value  # (the value is kept so that its id stays its own)
    failures = 0
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        missing = undocumented(module, documented, by_identity)
        if missing:
            failures += 1
            print("check_docs_api: %s: not on any page of the site: %s" % (module_name, ", ".join(missing)),
                  file=sys.stderr)
    total = sum(len(importlib.import_module(name).__all__) for name in MODULES)
    if failures:
        return 1
    print("check_docs_api: the %d public names of %d modules are documented" % (total, len(MODULES)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
