"""Names a package shows at its top but loads when first used (PEP 562), so that importing the
package stays cheap: ``LazyNames`` gives a package its module-level ``__getattr__`` and
``__dir__``.

- ``names`` maps a public name to the module that defines it (``"Client": "pulsarfast.client"``).
  The object handed out is that module's own (``pulsarfast.Client is pulsarfast.client.Client``),
  and it is stored in the package's namespace at first use: ``__getattr__`` runs once per name,
  and ``from package import *`` (which looks up each name of ``__all__``) loads them all.
- ``submodules``: sub-modules shown as attributes of the package (``nsq.reader``), imported at
  first use; ``optional`` ones need a library that may be missing: without it the attribute is
  absent (AttributeError, so ``hasattr`` says False), and ``dir()`` does not list them.

A name must not be that of a sub-module it is not (``nsq.run``, the function, lives in the module
``nsq.run``): importing the sub-module binds the module to that name in the package, so such a
name is imported eagerly by its package instead.
"""
from __future__ import annotations

import importlib
from typing import Any, Iterable, Mapping


class LazyNames:
    """The lazily loaded names of one package (its ``__getattr__`` and ``__dir__``)."""

    def __init__(self, namespace: dict[str, Any], names: Mapping[str, str], submodules: Iterable[str] = (),
                 optional: Iterable[str] = ()) -> None:
        self._namespace = namespace
        self._package: str = namespace["__name__"]
        self._names = dict(names)
        self._submodules = frozenset(submodules)
        self._optional = frozenset(optional)

    def names(self) -> dict[str, str]:
        """Each lazily loaded name and the module that defines it."""
        return dict(self._names)

    def submodules(self) -> frozenset[str]:
        """The sub-modules shown as attributes (the optional ones not included)."""
        return self._submodules

    def getattr(self, name: str) -> Any:
        """The package's ``__getattr__``: load the name's module and keep the name."""
        home = self._names.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
        elif name in self._submodules:
            value = importlib.import_module("%s.%s" % (self._package, name))
        elif name in self._optional:
            try:
                value = importlib.import_module("%s.%s" % (self._package, name))
            except ImportError as exc:  # (a library it needs is missing: absent, as in the original package)
                raise AttributeError("module %r has no attribute %r (%s)" % (self._package, name, exc)) from exc
        else:
            raise AttributeError("module %r has no attribute %r" % (self._package, name))
        self._namespace[name] = value
        return value

    def dir(self) -> list[str]:
        """The package's ``__dir__``: what it holds now, and every name it can load."""
        return sorted(set(self._namespace) | set(self._names) | self._submodules)
