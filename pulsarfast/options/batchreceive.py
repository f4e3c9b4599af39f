"""``Consumer.batch_receive()``'s limits: ``ConsumerBatchReceivePolicy`` (the
official ``pulsar.ConsumerBatchReceivePolicy``) and the rule that decides
when a batch is complete.

A batch ends when it holds ``max_num_message`` messages, or when the next
message would take it past ``max_num_bytes`` of payload (that message stays
for the next call; a batch always takes its first message whatever its size),
or when ``timeout_ms`` has passed since the call: then it is returned with
what it has, possibly nothing (an empty list, not an exception). A value of
0 or less means no limit of that kind; with no timeout the call waits until
the count or the size is reached. A batch never waits for more messages than
the consumer may hold unread: ``max_num_message`` is capped at the
receiver queue's size, as in the official client.

The checks are the official C++ library's: all three 0 or less is refused
(``ValueError``); no count and no size limit falls back to the defaults'
(no count, 10 MiB); each value is an int of the C type the extension takes
(the count and the size 32-bit, the timeout 64-bit), else ``TypeError``.
Without a policy a consumer uses ``DEFAULT`` (no count, 10 MiB, 100 ms).
"""
from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["ConsumerBatchReceivePolicy", "DEFAULT", "batch_receive_policy_arg"]

DEFAULT_MAX_NUM_BYTES = 10 * 1024 * 1024
_INT32 = 1 << 31
_INT64 = 1 << 63


def _c_int(value: Any, bound: int) -> int:
    if not isinstance(value, int) or not -bound <= value < bound:
        raise TypeError("__init__(): incompatible constructor arguments: BatchReceivePolicy(int, int, int), "
                        "not %r" % (value,))
    return int(value)


class ConsumerBatchReceivePolicy:
    """How much one ``Consumer.batch_receive()`` returns, as the official client's::

        ConsumerBatchReceivePolicy(max_num_message, max_num_bytes, timeout_ms)

    (each 0 or less: no limit of that kind; see the module docstring).
    """

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int) -> None:
        max_num_message = _c_int(max_num_message, _INT32)
        max_num_bytes = _c_int(max_num_bytes, _INT32)
        timeout_ms = _c_int(timeout_ms, _INT64)
        if max_num_message <= 0 and max_num_bytes <= 0 and timeout_ms <= 0:
            raise ValueError("At least one of maxNumMessages, maxNumBytes and timeoutMs must be specified.")
        if max_num_message <= 0 and max_num_bytes <= 0:
            logger.warning("BatchReceivePolicy maxNumMessages and maxNumBytes is less than 0. Reset to default: "
                           "maxNumMessage(-1), maxNumBytes(10 * 1024 * 1024)")
            max_num_message, max_num_bytes = -1, DEFAULT_MAX_NUM_BYTES
        self._max_num_message = max_num_message
        self._max_num_bytes = max_num_bytes
        self._timeout_ms = timeout_ms

    @property
    def max_num_message(self) -> int:
        return self._max_num_message

    @property
    def max_num_bytes(self) -> int:
        return self._max_num_bytes

    @property
    def timeout_ms(self) -> int:
        return self._timeout_ms

    # the official policy() object's getters (``_pulsar.BatchReceivePolicy``)
    def getMaxNumMessages(self) -> int:  # noqa: N802 - the official name
        return self._max_num_message

    def getMaxNumBytes(self) -> int:  # noqa: N802
        return self._max_num_bytes

    def getTimeoutMs(self) -> int:  # noqa: N802
        return self._timeout_ms

    def policy(self) -> "ConsumerBatchReceivePolicy":
        return self

    def capped(self, queue_size: int) -> "ConsumerBatchReceivePolicy":
        """This policy for a consumer that holds at most queue_size messages unread (the count capped)."""
        if self._max_num_message <= queue_size:
            return self
        logger.warning("batch_receive_policy's max_num_message %d is above the receiver queue's %d: %d is used",
                       self._max_num_message, queue_size, queue_size)
        return ConsumerBatchReceivePolicy(queue_size, self._max_num_bytes, self._timeout_ms)

    def __repr__(self) -> str:
        return "ConsumerBatchReceivePolicy(max_num_message=%d, max_num_bytes=%d, timeout_ms=%d)" % (
            self._max_num_message, self._max_num_bytes, self._timeout_ms)


#: what a consumer without a batch_receive_policy uses (the official defaults)
DEFAULT = ConsumerBatchReceivePolicy(-1, DEFAULT_MAX_NUM_BYTES, 100)


def batch_receive_policy_arg(name: str, value: Any) -> ConsumerBatchReceivePolicy | None:
    """subscribe()'s batch_receive_policy: None, or a ConsumerBatchReceivePolicy (the official
    module's too, read through its policy()), kept as pulsarfast's."""
    if value is None or isinstance(value, ConsumerBatchReceivePolicy):
        return value
    if type(value).__name__ != "ConsumerBatchReceivePolicy":
        raise ValueError("Argument %s is expected to be either None or of type 'ConsumerBatchReceivePolicy'" % name)
    policy = value.policy()
    return ConsumerBatchReceivePolicy(policy.getMaxNumMessages(), policy.getMaxNumBytes(), policy.getTimeoutMs())
