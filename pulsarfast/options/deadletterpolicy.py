"""``ConsumerDeadLetterPolicy``, the official ``pulsar.ConsumerDeadLetterPolicy``: where a
consumer sends the messages redelivered too often (``subscribe(dead_letter_policy=...)``). The
consumer's side of it, the dead-letter topic's producer and what goes there, is
``pulsarfast.consuming.deadletter``'s.
"""
from __future__ import annotations


class ConsumerDeadLetterPolicy:
    """Where a consumer sends messages redelivered too often, as the official client's::

        ConsumerDeadLetterPolicy(max_redeliver_count, dead_letter_topic=None, initial_subscription_name=None)

    ``max_redeliver_count`` (at least 1): a message delivered again after this many
    redeliveries goes to the dead-letter topic instead. ``dead_letter_topic``: by
    default ``<topic>-<subscription>-DLQ``. ``initial_subscription_name``: a
    subscription created on the dead-letter topic with its producer.
    """

    def __init__(self, max_redeliver_count: int, dead_letter_topic: str | None = None,
                 initial_subscription_name: str | None = None) -> None:
        if (not isinstance(max_redeliver_count, int) or isinstance(max_redeliver_count, bool)
                or max_redeliver_count < 1):
            raise ValueError("max_redeliver_count must be greater than 0")
        for name, value in (("dead_letter_topic", dead_letter_topic),
                            ("initial_subscription_name", initial_subscription_name)):
            if value is not None and not isinstance(value, str):
                raise ValueError("Argument %s is expected to be of type 'str' and not '%s'"
                                 % (name, type(value).__name__))
        self._max_redeliver_count = max_redeliver_count
        self._dead_letter_topic = dead_letter_topic or ""
        self._initial_subscription_name = initial_subscription_name or ""

    @property
    def max_redeliver_count(self) -> int:
        return self._max_redeliver_count

    @property
    def dead_letter_topic(self) -> str:
        """The dead-letter topic given ("" for the default, ``<topic>-<subscription>-DLQ``)."""
        return self._dead_letter_topic

    @property
    def initial_subscription_name(self) -> str:
        """The subscription created on the dead-letter topic ("" for none)."""
        return self._initial_subscription_name

    def policy(self) -> "ConsumerDeadLetterPolicy":
        return self

    def __repr__(self) -> str:
        return "ConsumerDeadLetterPolicy(max_redeliver_count=%d, dead_letter_topic=%r, initial_subscription_name=%r)" \
            % (self._max_redeliver_count, self._dead_letter_topic, self._initial_subscription_name)
