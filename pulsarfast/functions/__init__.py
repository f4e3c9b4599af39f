"""``pulsarfast.functions``: the Pulsar Functions API's base classes, as the
official ``pulsar.functions`` package has them (and ``pulsar`` re-exports
them): ``Function`` (``process(input, context)``), ``Context`` (what the
Functions runtime tells a function), ``SerDe`` and its two implementations,
``PickleSerDe`` and ``IdentitySerDe``.

pulsarfast runs no function: these are the classes a function's module
subclasses and imports, so that it imports and its unit tests run with
pulsarfast installed in place of ``pulsar-client``. The sub-modules have the
official names (``function``, ``context``, ``serde``).
"""
from __future__ import annotations

from pulsarfast.functions.context import Context
from pulsarfast.functions.function import Function
from pulsarfast.functions.serde import IdentitySerDe, PickleSerDe, SerDe

__all__ = ["Function", "Context", "SerDe", "PickleSerDe", "IdentitySerDe"]
