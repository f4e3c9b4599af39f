"""The compiled-or-pure twins in tests: a twin by name for a fixture's parameter, and the compiled one
or a skip (a failure when NSQ_REQUIRE_COMPILED=1, as CI's wheel runs set it)."""
from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import pytest


def compiled_or_skip(chooser: ModuleType, name: str, module_level: bool = False) -> Any:
    """chooser's compiled module (chooser: nsq.codec, nsq.publishing, msgengine.sockio, ...; name: the
    compiled module's name, for the reason), or skip the test (the module, with module_level)."""
    if chooser.compiled_impl is not None:
        return chooser.compiled_impl
    reason = "compiled %s is not importable: %s" % (name, chooser.compiled_import_error)
    if os.environ.get("NSQ_REQUIRE_COMPILED") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


def twin(chooser: ModuleType, name: str, which: str) -> Any:
    """The "python" or "cython" twin of chooser (a fixture's parameter)."""
    return chooser.python_impl if which == "python" else compiled_or_skip(chooser, name)
