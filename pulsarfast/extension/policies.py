"""The official C extension's policy objects, ``_pulsar.BatchReceivePolicy``,
``_pulsar.KeySharedPolicy``, ``_pulsar.DeadLetterPolicyBuilder`` and
``_pulsar.DeadLetterPolicy`` (the first three are also top-level ``pulsar``
names). They are what the official ``Consumer*Policy`` classes wrap
(``policy()``), and what ``_pulsar.ConsumerConfiguration`` holds.

As in the official client, ``subscribe()`` takes none of them: it takes the
``ConsumerBatchReceivePolicy``, ``ConsumerKeySharedPolicy`` and
``ConsumerDeadLetterPolicy`` wrappers (``ValueError`` otherwise). Each one
here has the official methods, defaults and checks:

- ``BatchReceivePolicy(max_num_messages, max_num_bytes, timeout_ms)``, with
  ``getMaxNumMessages()``, ``getMaxNumBytes()``, ``getTimeoutMs()`` and the
  checks of ``ConsumerBatchReceivePolicy``.
- ``KeySharedPolicy()``: AutoSplit, in order, no ranges; ``set_*`` return the
  policy. ``set_sticky_ranges`` checks the list it is given (empty, bounds,
  overlap: ``ValueError``) and *adds* it to the ranges already set, as the
  official one does.
- ``DeadLetterPolicyBuilder()``: ``maxRedeliverCount``, ``deadLetterTopic``,
  ``initialSubscriptionName`` (each returns the builder; only the types are
  checked there) and ``build()``, which refuses a count below 1
  (``ValueError``) and gives a ``DeadLetterPolicy`` (``getMaxRedeliverCount()``
  2147483647 when never set, ``getDeadLetterTopic()``,
  ``getInitialSubscriptionName()``, "" when unset).

Wrong argument types raise ``TypeError``, as the extension's conversions do.
"""
from __future__ import annotations

from typing import Any, Sequence

from pulsarfast.base.enums import KeySharedMode
from pulsarfast.options.batchreceive import ConsumerBatchReceivePolicy
from pulsarfast.options.keyshared import check_sticky_ranges

__all__ = ["BatchReceivePolicy", "KeySharedPolicy", "DeadLetterPolicy", "DeadLetterPolicyBuilder"]

_INT32_MAX = (1 << 31) - 1


def _incompatible(method: str, expected: str, value: Any) -> TypeError:
    return TypeError("%s(): incompatible function arguments: expected %s, not %r" % (method, expected, value))


def _int32(method: str, value: Any) -> int:
    if not isinstance(value, int) or not -_INT32_MAX - 1 <= value <= _INT32_MAX:
        raise _incompatible(method, "an int", value)
    return int(value)


def _text(method: str, value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise _incompatible(method, "a str", value)
    return value


class BatchReceivePolicy:
    """``_pulsar.BatchReceivePolicy(max_num_messages, max_num_bytes, timeout_ms)`` (see the module docstring)."""

    def __init__(self, max_num_messages: int, max_num_bytes: int, timeout_ms: int) -> None:
        self._checked = ConsumerBatchReceivePolicy(max_num_messages, max_num_bytes, timeout_ms)

    def getMaxNumMessages(self) -> int:  # noqa: N802 - the official names
        return self._checked.max_num_message

    def getMaxNumBytes(self) -> int:  # noqa: N802
        return self._checked.max_num_bytes

    def getTimeoutMs(self) -> int:  # noqa: N802
        return self._checked.timeout_ms

    def consumer_policy(self) -> ConsumerBatchReceivePolicy:
        """The same limits as the ``ConsumerBatchReceivePolicy`` that ``subscribe()`` takes."""
        return self._checked


class KeySharedPolicy:
    """``_pulsar.KeySharedPolicy()`` (see the module docstring)."""

    def __init__(self) -> None:
        self._mode = KeySharedMode.AutoSplit
        self._allow_out_of_order_delivery = False
        self._ranges: list[tuple[int, int]] = []

    def set_key_shared_mode(self, mode: KeySharedMode) -> "KeySharedPolicy":
        if isinstance(mode, KeySharedMode):
            self._mode = mode
        elif type(mode).__name__ == "KeySharedMode" and getattr(mode, "name", None) in KeySharedMode.__members__:
            self._mode = KeySharedMode[mode.name]  # (the official module's enum)
        else:
            raise _incompatible("set_key_shared_mode", "a KeySharedMode", mode)
        return self

    def get_key_shared_mode(self) -> KeySharedMode:
        return self._mode

    def set_allow_out_of_order_delivery(self, allow: bool) -> "KeySharedPolicy":
        if allow is not None and not isinstance(allow, (bool, int, float)):
            raise _incompatible("set_allow_out_of_order_delivery", "a bool", allow)
        self._allow_out_of_order_delivery = bool(allow)
        return self

    def is_allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order_delivery

    def set_sticky_ranges(self, ranges: Sequence[tuple[int, int]]) -> "KeySharedPolicy":
        if isinstance(ranges, (str, bytes)) or not isinstance(ranges, Sequence):
            raise _incompatible("set_sticky_ranges", "a list of (int, int)", ranges)
        pairs = []
        for pair in ranges:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise _incompatible("set_sticky_ranges", "a list of (int, int)", ranges)
            pairs.append((_int32("set_sticky_ranges", pair[0]), _int32("set_sticky_ranges", pair[1])))
        check_sticky_ranges(pairs)
        self._ranges.extend(pairs)
        return self

    def get_sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)


class DeadLetterPolicy:
    """``_pulsar.DeadLetterPolicy``: what ``DeadLetterPolicyBuilder.build()`` gives (read-only)."""

    def __init__(self, max_redeliver_count: int = _INT32_MAX, dead_letter_topic: str = "",
                 initial_subscription_name: str = "") -> None:
        self._max_redeliver_count = max_redeliver_count
        self._dead_letter_topic = dead_letter_topic
        self._initial_subscription_name = initial_subscription_name

    def getMaxRedeliverCount(self) -> int:  # noqa: N802 - the official names
        return self._max_redeliver_count

    def getDeadLetterTopic(self) -> str:  # noqa: N802
        return self._dead_letter_topic

    def getInitialSubscriptionName(self) -> str:  # noqa: N802
        return self._initial_subscription_name


class DeadLetterPolicyBuilder:
    """``_pulsar.DeadLetterPolicyBuilder()`` (see the module docstring)."""

    def __init__(self) -> None:
        self._max_redeliver_count = _INT32_MAX
        self._dead_letter_topic = ""
        self._initial_subscription_name = ""

    def maxRedeliverCount(self, max_redeliver_count: int) -> "DeadLetterPolicyBuilder":  # noqa: N802
        self._max_redeliver_count = _int32("maxRedeliverCount", max_redeliver_count)
        return self

    def deadLetterTopic(self, dead_letter_topic: str) -> "DeadLetterPolicyBuilder":  # noqa: N802
        self._dead_letter_topic = _text("deadLetterTopic", dead_letter_topic)
        return self

    def initialSubscriptionName(self, initial_subscription_name: str) -> "DeadLetterPolicyBuilder":  # noqa: N802
        self._initial_subscription_name = _text("initialSubscriptionName", initial_subscription_name)
        return self

    def build(self) -> DeadLetterPolicy:
        if self._max_redeliver_count < 1:
            raise ValueError("maxRedeliverCount must be > 0.")
        return DeadLetterPolicy(self._max_redeliver_count, self._dead_letter_topic, self._initial_subscription_name)
