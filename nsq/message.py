"""The message object handed to handlers: its data (id, body, timestamp,
attempts) and the one-shot response (FIN, REQ, TOUCH) it owes nsqd, which it
delegates to whoever received it (a Reader, or a bare connection). Like
pynsq's, it triggers ``finish``/``requeue``/``touch`` events for listeners
added with ``on()``; a Message made by hand (in an application's unit tests)
can be answered too: only its listeners hear of it."""
from __future__ import annotations

import math
from typing import Any, Callable, Protocol

from nsq import hooks
from nsq.errors import Error, InvalidArgumentError


class AlreadyRespondedError(Error, AssertionError):
    """finish() or requeue() called on a message that was already answered.

    Also an AssertionError, which is what pynsq raises in this case.
    """


class MessageDelegate(Protocol):
    """What a Message needs from whoever received it (a Connection): the
    commands that answer nsqd. A Message made by hand has none."""

    def finish_message(self, message: "Message") -> None: ...

    def requeue_message(self, message: "Message", delay: float, backoff: bool) -> None: ...

    def touch_message(self, message: "Message") -> None: ...


Responder = MessageDelegate  # the name this protocol had before


class Message(hooks.EventedMixin):
    """A message received from nsqd.

    ``id`` is the 16-byte hex id (bytes), ``body`` the payload, ``timestamp``
    nanoseconds since the epoch when nsqd accepted it, ``attempts`` how many
    times it has been delivered (starting at 1).
    """

    # (__dict__: attributes of the application's own, and mock.patch.object(message, "finish")
    # in its unit tests, work as on pynsq's Message, which has no __slots__)
    __slots__ = (
        "id", "body", "timestamp", "attempts", "_responder", "_async", "_responded", "_callbacks", "__weakref__",
        "__dict__",
    )

    def __init__(
        self,
        id: bytes,
        body: bytes,
        timestamp: int,
        attempts: int,
        responder: MessageDelegate | None = None,
    ) -> None:
        self.id = id
        self.body = body
        self.timestamp = timestamp
        self.attempts = attempts
        self._responder = responder
        self._async = False
        self._responded = False
        self._callbacks: dict[str, list[Callable[..., Any]]] | None = None  # EventedMixin's listeners

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

    # -- answering nsqd ------------------------------------------------------------

    def _claim_response(self) -> MessageDelegate | None:
        if self._responded:
            raise AlreadyRespondedError("message %r has already been finished or requeued" % (self.id,))
        self._responded = True
        return self._responder

    def mark_finished(self) -> None:
        """Record that the receiver finished this message itself, in a batch
        of FINs (the Reader's fast path for handlers that return True): no
        command is sent from here, and finish listeners are told."""
        if self._responded:
            raise AlreadyRespondedError("message %r has already been finished or requeued" % (self.id,))
        self._responded = True
        if self._callbacks:
            self.trigger(hooks.FINISH, message=self)

    def finish(self) -> None:
        """Tell nsqd the message was handled (FIN)."""
        responder = self._claim_response()
        if responder is not None:
            responder.finish_message(self)
        if self._callbacks:
            self.trigger(hooks.FINISH, message=self)

    def requeue(
        self, backoff: bool | None = None, delay: float | None = None, time_ms: int | None = None, **kwargs: Any
    ) -> None:
        """Give the message back to nsqd (REQ).

        ``delay`` in seconds, as in pynsq; -1 (or not given) computes it as
        requeue_delay x attempts (capped by max_requeue_delay). ``time_ms``
        (pynsq's other spelling) gives it in milliseconds when ``delay`` is not
        given. ``backoff`` (default True) also puts the reader into backoff.
        ``requeue`` listeners get what pynsq passes them: ``message=`` and the
        keywords the caller gave, with ``time_ms`` added for a whole ``delay``
        (so a listener ``def on_requeue(message)`` works after ``requeue()``).
        """
        if kwargs:
            raise TypeError("requeue() got unexpected keyword arguments: %s" % ", ".join(sorted(kwargs)))
        told: dict[str, Any] = {}
        if backoff is not None:
            told["backoff"] = backoff
        if delay is not None:
            told["delay"] = delay
        if time_ms is not None:
            told["time_ms"] = time_ms
        seconds: float = -1 if delay is None else delay
        if time_ms is not None and seconds == -1:
            if isinstance(time_ms, bool) or not isinstance(time_ms, (int, float)) or not (time_ms >= 0 or time_ms == -1):
                raise InvalidArgumentError("requeue time_ms must be a number of milliseconds >= 0, not %r" % (time_ms,))
            seconds = time_ms / 1000.0 if time_ms >= 0 else -1
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds)
            or (seconds < 0 and seconds != -1)
        ):
            raise InvalidArgumentError("requeue delay must be a number of seconds >= 0 (or -1), not %r" % (seconds,))
        if isinstance(delay, int) and not isinstance(delay, bool) and delay >= 0:
            told["time_ms"] = delay * 1000  # (pynsq's conversion, which its listeners see)
        responder = self._claim_response()
        if responder is not None:
            responder.requeue_message(self, seconds, True if backoff is None else backoff)
        if self._callbacks:
            self.trigger(hooks.REQUEUE, message=self, **told)

    def touch(self) -> None:
        """Ask nsqd for more time before it times the message out (TOUCH)."""
        if self._responded:
            raise AlreadyRespondedError("message %r has already been finished or requeued" % (self.id,))
        if self._responder is not None:
            self._responder.touch_message(self)
        if self._callbacks:
            self.trigger(hooks.TOUCH, message=self)
