# The message object handed to handlers: its data (id, body, timestamp,
# attempts) and the one-shot response (FIN, REQ, TOUCH) it owes nsqd, which
# it delegates to whoever received it (a Reader, or a bare connection).
from __future__ import annotations

import math
from typing import Any, Protocol

from .errors import Error, InvalidArgumentError


class AlreadyRespondedError(Error, AssertionError):
    """finish() or requeue() called on a message that was already answered.

    Also an AssertionError, which is what pynsq raises in this case.
    """


class Responder(Protocol):
    def _finish_message(self, message: "Message") -> None: ...

    def _requeue_message(self, message: "Message", delay: float, backoff: bool) -> None: ...

    def _touch_message(self, message: "Message") -> None: ...


class Message:
    """A message received from nsqd.

    ``id`` is the 16-byte hex id (bytes), ``body`` the payload, ``timestamp``
    nanoseconds since the epoch when nsqd accepted it, ``attempts`` how many
    times it has been delivered (starting at 1).
    """

    __slots__ = ("id", "body", "timestamp", "attempts", "_responder", "_async", "_responded", "__weakref__")

    def __init__(
        self,
        id: bytes,
        body: bytes,
        timestamp: int,
        attempts: int,
        responder: Responder | None = None,
    ) -> None:
        self.id = id
        self.body = body
        self.timestamp = timestamp
        self.attempts = attempts
        self._responder = responder
        self._async = False
        self._responded = False

    def __repr__(self) -> str:
        return "<nsq.Message id=%s attempts=%d body=%d bytes>" % (
            self.id.decode("ascii", "replace") if isinstance(self.id, bytes) else self.id,
            self.attempts,
            len(self.body),
        )

    def enable_async(self) -> None:
        """Take over responding: the handler's return value is then ignored."""
        self._async = True

    def is_async(self) -> bool:
        return self._async

    def has_responded(self) -> bool:
        return self._responded

    def _claim_response(self) -> Responder:
        if self._responded:
            raise AlreadyRespondedError("message %r has already been finished or requeued" % (self.id,))
        responder = self._responder
        if responder is None:
            raise Error("message %r was not received from a connection; it cannot be answered" % (self.id,))
        self._responded = True
        return responder

    def finish(self) -> None:
        """Tell nsqd the message was handled (FIN)."""
        self._claim_response()._finish_message(self)

    def requeue(self, backoff: bool = True, delay: float = -1, **kwargs: Any) -> None:
        """Give the message back to nsqd (REQ).

        ``delay`` in seconds, as in pynsq; -1 computes it as requeue_delay x
        attempts (capped by max_requeue_delay). ``backoff`` also puts the
        reader into backoff.
        """
        if kwargs:
            raise TypeError("requeue() got unexpected keyword arguments: %s" % ", ".join(sorted(kwargs)))
        if (
            isinstance(delay, bool)
            or not isinstance(delay, (int, float))
            or not math.isfinite(delay)
            or (delay < 0 and delay != -1)
        ):
            raise InvalidArgumentError("requeue delay must be a number of seconds >= 0 (or -1), not %r" % (delay,))
        self._claim_response()._requeue_message(self, delay, backoff)

    def touch(self) -> None:
        """Ask nsqd for more time before it times the message out (TOUCH)."""
        if self._responded:
            raise AlreadyRespondedError("message %r has already been finished or requeued" % (self.id,))
        if self._responder is None:
            raise Error("message %r was not received from a connection; it cannot be touched" % (self.id,))
        self._responder._touch_message(self)
