"""``pulsarfast.exceptions``: the official ``pulsar.exceptions`` module, the
exception classes one import away (``from pulsarfast.exceptions import
Timeout``). Each is the same class as ``pulsarfast.<name>`` and
``pulsarfast._pulsar.<name>`` (they are defined in ``results.py``).
"""
from __future__ import annotations

from pulsarfast.base.results import *  # noqa: F401,F403 - the classes: PulsarException and results.EXCEPTION_NAMES
from pulsarfast.base.results import EXCEPTION_NAMES

__all__ = ["PulsarException", *EXCEPTION_NAMES]
