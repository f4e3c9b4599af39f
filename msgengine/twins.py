"""Choosing between a compiled module and its pure-Python twin.

Both clients keep their codec twice: a compiled Cython module (``nsq._frame``,
``pulsarfast.wire._codec``) and a pure-Python twin that behaves the same
(``nsq._frame_py``, ``pulsarfast.wire._codec_py``). ``load_twins`` picks one for a
chooser module (``nsq.codec``, ``pulsarfast.wire.codec``): the compiled module when it
is importable, else the twin, with a WARNING through the client's logger, once,
saying the compiled module is missing.

One environment variable forces every twin pure on purpose (no warning then):
``NSQFAST_PURE_PYTHON``, set to anything but empty or ``0``. Its older names
``NSQ_PURE_PYTHON`` and ``PULSARFAST_PURE_PYTHON`` are aliases that do the same
(each forces both clients' codecs pure): any of the three set forces it.
"""
from __future__ import annotations

import importlib
import logging
import os
import threading
from types import ModuleType
from typing import Literal, Mapping, NamedTuple

__all__ = ["PURE_PYTHON_ENV", "PURE_PYTHON_ALIASES", "Twins", "pure_python_forced", "load_twins"]

#: the environment variable that forces the pure-Python twins
PURE_PYTHON_ENV = "NSQFAST_PURE_PYTHON"
#: older names of the same switch, still honoured
PURE_PYTHON_ALIASES: tuple[str, ...] = ("NSQ_PURE_PYTHON", "PULSARFAST_PURE_PYTHON")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def pure_python_forced(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment (os.environ unless told) forces the pure twins:
    the switch or one of its aliases set to anything but empty or ``0``."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip() not in ("", "0") for name in (PURE_PYTHON_ENV, *PURE_PYTHON_ALIASES))


class Twins(NamedTuple):
    """What a chooser module re-exports: the module in use and how it was chosen
    (a tuple, so that a chooser can unpack it into its module-level names)."""

    #: the module whose names the chooser re-exports
    module: ModuleType
    #: "cython" or "python": which of the two ``module`` is
    implementation: Literal["cython", "python"]
    #: the compiled module, None when it could not be imported
    compiled_impl: ModuleType | None
    #: why the compiled module could not be imported (None when it was)
    compiled_import_error: ImportError | None
    #: the pure-Python twin
    python_impl: ModuleType


def load_twins(
    compiled_name: str, python_impl: ModuleType, logger_name: str, missing_message: str, warn: bool = True
) -> Twins:
    """Import the compiled module compiled_name (its absolute name) and choose
    between it and python_impl: the pure twin when the environment forces it
    (see the module docstring) or the compiled one is missing.

    A missing compiled module not asked for is logged as a WARNING on the
    logger logger_name, once per compiled_name: missing_message is the log
    message, its one ``%s`` the ImportError. ``warn=False``: no warning (a
    chooser whose missing module another chooser's warning already covers).
    """
    compiled_impl: ModuleType | None
    error: ImportError | None = None
    try:
        compiled_impl = importlib.import_module(compiled_name)
    except ImportError as exc:  # not built (pure install, no compiler)
        compiled_impl = None
        error = exc
    forced = pure_python_forced()
    if compiled_impl is None and not forced and warn:
        with _warned_lock:
            first = compiled_name not in _warned
            _warned.add(compiled_name)
        if first:
            logging.getLogger(logger_name).warning(missing_message, error)
    if forced or compiled_impl is None:
        return Twins(python_impl, "python", compiled_impl, error, python_impl)
    return Twins(compiled_impl, "cython", compiled_impl, error, python_impl)
