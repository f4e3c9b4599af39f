"""``Function``: the base class of a Pulsar Function (the official
``pulsar.functions.function.Function``). The runtime calls
``process(input, context)`` once per input message, with the input already
deserialized by the function's SerDe; what it returns (if not None) is
serialized and published to the output topic.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Any

from pulsarfast.functions.context import Context

__all__ = ["Function"]


class Function:
    """Subclass it and override ``process``."""

    @abstractmethod
    def process(self, input: Any, context: Context) -> Any:  # noqa: A002 - the official parameter name
        """Handle one input; return the output (None for none)."""
