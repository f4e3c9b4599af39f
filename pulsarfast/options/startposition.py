"""Where a subscription starts reading, and which delivered messages lie
before that point.

A ``StartPosition`` is a message id and whether the message at that id is
itself wanted (``inclusive``). It serves two ends:

- the ``start_message_id`` of a non-durable subscription (a reader): the
  broker positions the new cursor on that id's entry, whole (it delivers
  entries, and an id inside a batch names one message of an entry), so
- the client drops what the broker delivers from before the position: the
  messages of the start entry's batch before the start index, and the start
  message itself unless inclusive (``before``).

A durable consumer's ``seek`` to a message id leaves a position too, with
the official client's rule rather than ``before`` (``seek_skips``): what is
dropped is never acknowledged, and the rule holds until the next seek.

``MessageId.earliest`` and ``MessageId.latest`` are positions too; nothing
lies before either (the broker places the cursor itself). A position the
broker chose (the latest message, a publish time) is pinned to the first
message that arrives from it (``pins_on_arrival``), so that a subscription
made again starts there rather than at a later "latest".
"""
from __future__ import annotations

from pulsarfast.wire.message import MessageId

def is_earliest(message_id: MessageId) -> bool:
    return message_id.ledger_id() < 0 or message_id.entry_id() < 0


def is_latest(message_id: MessageId) -> bool:
    return message_id.entry_key() == MessageId.latest.entry_key()


class StartPosition:
    """A message id to start from; see the module docstring."""

    __slots__ = ("message_id", "inclusive", "pins_on_arrival", "_bound")

    def __init__(self, message_id: MessageId, inclusive: bool, pins_on_arrival: bool = False) -> None:
        self.message_id = message_id
        self.inclusive = inclusive
        #: the broker chose where the subscription starts: the first message to arrive is the position
        self.pins_on_arrival = pins_on_arrival or is_latest(message_id)
        if is_earliest(message_id) or is_latest(message_id):
            self._bound: tuple[int, int, int] | None = None  # (nothing lies before it)
        else:
            self._bound = (message_id.ledger_id(), message_id.entry_id(), message_id.batch_index())

    @classmethod
    def after(cls, message_id: MessageId) -> "StartPosition":
        """The position just after a message handed out (a concrete id: neither earliest nor
        latest), made without the general constructor's checks: a reader makes one per message."""
        made = cls.__new__(cls)
        made.message_id = message_id
        made.inclusive = False
        made.pins_on_arrival = False
        ledger, entry = message_id.entry_key()
        made._bound = (ledger, entry, message_id.batch_index())
        return made

    def __repr__(self) -> str:
        return "StartPosition(%s, inclusive=%s)" % (self.message_id, self.inclusive)

    @property
    def is_latest(self) -> bool:
        return is_latest(self.message_id)

    @property
    def is_earliest(self) -> bool:
        return is_earliest(self.message_id)

    def subscribe_id(self) -> bytes:
        """MessageIdData for CommandSubscribe.start_message_id (with the batch
        index, when there is one, so that the broker starts at that entry)."""
        message_id = self.message_id
        return message_id.to_proto()

    def before(self, message_id: MessageId) -> bool:
        """The message lies before this position: not to be handed out."""
        bound = self._bound
        if bound is None:
            return False
        ledger, entry = message_id.entry_key()
        if (ledger, entry) != bound[:2]:
            return (ledger, entry) < bound[:2]
        start_index = bound[2]
        index = message_id.batch_index()
        if start_index < 0 or index < 0:  # (the whole entry is the start message)
            return not self.inclusive
        return index < start_index or (index == start_index and not self.inclusive)

    def seek_skips(self, message_id: MessageId) -> bool:
        """A durable consumer's seek target (the official client's ``startMessageId`` after
        ``seek``, kept until the next seek): the message is dropped unread, and not acknowledged,
        wherever it comes from. In the target's ledger, an unbatched message of an earlier entry
        or of the target's own entry unless inclusive; a batch message of the target's entry
        before the target's index, or at it unless inclusive (an index of -1 keeps the batch)."""
        bound = self._bound
        if bound is None:
            return False
        ledger, entry = message_id.entry_key()
        if ledger != bound[0]:
            return False
        index = message_id.batch_index()
        if index < 0:
            return entry < bound[1] or (entry == bound[1] and not self.inclusive)
        return entry == bound[1] and (index < bound[2] or (index == bound[2] and not self.inclusive))

    def entry_passed(self, ledger: int, entry: int) -> bool:
        """An entry after the start entry (nothing of it, nor later, lies before the position)."""
        bound = self._bound
        return bound is None or (ledger, entry) > bound[:2]


def has_after(last: MessageId, position: StartPosition | None, mark_delete: MessageId | None) -> bool:
    """Whether the topic's last message (``last``, with its batch index when it
    ends a batch) is one a reader at ``position`` has still to read; where the
    broker chose the position (latest, a publish time) and nothing arrived
    yet, whether it lies after the subscription's mark-delete position."""
    if last.ledger_id() < 0 or last.entry_id() < 0:
        return False  # (an empty topic)
    if position is None:
        return True
    if position.pins_on_arrival:
        if mark_delete is not None:
            return last.entry_key() > mark_delete.entry_key()
        return not position.is_latest
    if position.is_earliest:
        return True
    return not position.before(last)
