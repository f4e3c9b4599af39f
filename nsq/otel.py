"""OpenTelemetry tracing and metrics for nsq (the ``otel`` extra: opentelemetry-api), in the shape
of OpenTelemetry's own instrumentors: ``nsq.otel.instrument(tracer_provider=None,
meter_provider=None)`` and ``uninstrument()``, following the messaging semantic conventions
(``messaging.system`` = ``nsq``).

Spans:

- ``publish <topic>`` (PRODUCER) for ``Writer.pub``, ``mpub`` (``messaging.batch.message_count``)
  and ``dpub``, until nsqd's answer (the callback's, when one is given, or the returned
  awaitable's); an error answer is recorded on the span (status ERROR, ``error.type``);
- ``process <topic>`` (CONSUMER) around each run of a Reader's handler (``process_message``), with
  ``messaging.message.id``, ``messaging.message.body.size``, ``messaging.consumer.group.name`` (the
  channel) and ``messaging.nsq.message.attempts``; an exception is recorded on it.

NSQ messages have no headers, so no trace context travels with them: a consumer's process span
starts a trace of its own (or continues the handler caller's current span). Message bodies are
never changed.

Metrics: ``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
``messaging.client.operation.duration``. ``instrument()`` patches the methods above and
``uninstrument()`` puts them back: an uninstrumented program runs exactly the code it runs without
this module. On the gevent and threads runtimes, and on tornado/asyncio loops alike.
"""
from __future__ import annotations

import functools
import inspect
import time
from typing import Any

from msgengine.telemetry import BATCH_COUNT, BODY_SIZE, CONSUMER_GROUP, MESSAGE_ID, Instrumentation

from nsq.errors import Error
from nsq.reader import Reader
from nsq.version import __version__
from nsq.writer import Writer

__all__ = ["instrument", "uninstrument", "is_instrumented"]

ATTEMPTS = "messaging.nsq.message.attempts"

_otel = Instrumentation("nsq", "nsqfast.nsq", __version__)


def is_instrumented() -> bool:
    return _otel.active


def instrument(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Trace and measure every Writer's publishes and every Reader's handler runs (see the module
    docstring); a second call does nothing until ``uninstrument()``."""
    if not _otel.start(tracer_provider, meter_provider):
        return
    _otel.patch(Writer, "pub", functools.partial(_publish, "pub", 1))
    _otel.patch(Writer, "mpub", functools.partial(_publish, "mpub", 0))
    _otel.patch(Writer, "dpub", functools.partial(_publish, "dpub", 2))
    _otel.patch(Reader, "process_message", _process)


def uninstrument() -> None:
    """Put the original methods back."""
    _otel.stop()


def _bodies(command: str, body_at: int, args: tuple, kwargs: dict) -> tuple[int, int | None]:
    """(message count, body size) of a pub/dpub/mpub call."""
    if command == "mpub":
        bodies = args[0] if args else kwargs.get("msg", kwargs.get("msgs"))
        if isinstance(bodies, (bytes, str)):
            return 1, len(bodies)
        try:
            listed = list(bodies or ())
        except TypeError:
            return 0, None
        return len(listed), sum(len(body) for body in listed if isinstance(body, (bytes, str)))
    body = args[body_at - 1] if len(args) >= body_at else kwargs.get("msg")
    return 1, len(body) if isinstance(body, (bytes, bytearray, str)) else None


def _publish(command: str, body_at: int, original: Any) -> Any:
    @functools.wraps(original)
    def publish(self: Any, topic: str, *args: Any, **kwargs: Any) -> Any:
        count, size = _bodies(command, body_at, args, kwargs)
        extra: dict[str, Any] = {BATCH_COUNT: count} if command == "mpub" else {BODY_SIZE: size}
        attributes = _otel.attributes(str(topic), command, "send", **extra)
        started = time.perf_counter()
        span = _otel.tracer.start_span("publish %s" % topic, kind=_otel.span_kind("PRODUCER"), attributes=attributes)

        def end(error: Any) -> None:
            kind = _otel.failed(span, error) if error is not None else None
            _otel.count(_otel.sent, count, attributes, kind)
            _otel.measure(started, attributes, kind)
            span.end()

        callback_at = {"pub": 1, "dpub": 2, "mpub": 1}[command]
        callback = args[callback_at] if len(args) > callback_at else kwargs.get("callback")
        if callback is not None:
            def answered(conn: Any, data: Any) -> None:
                end(data if isinstance(data, Error) else None)
                callback(conn, data)

            if len(args) > callback_at:
                args = args[:callback_at] + (answered,) + args[callback_at + 1:]
            else:
                kwargs = dict(kwargs, callback=answered)
        try:
            with _otel.trace.use_span(span, end_on_exit=False):
                result = original(self, topic, *args, **kwargs)
        except BaseException as exc:
            if span.is_recording():
                end(exc)
            raise
        if callback is None:
            done = getattr(result, "add_done_callback", None)
            if done is not None:  # (an awaitable of a loop: ends when nsqd answers)
                done(lambda future: end(future.exception() if not future.cancelled() else "cancelled"))
            else:
                end(None)
        return result
    return publish


def _process(original: Any) -> Any:
    @functools.wraps(original)
    def process_message(self: Any, message: Any) -> Any:
        message_id = message.id.decode("ascii", "replace") if isinstance(message.id, bytes) else str(message.id)
        attributes = _otel.attributes(self.topic, "process", "process", **{
            MESSAGE_ID: message_id, BODY_SIZE: len(message.body), CONSUMER_GROUP: self.channel,
            ATTEMPTS: message.attempts})
        started = time.perf_counter()
        span = _otel.tracer.start_span("process %s" % self.topic, kind=_otel.span_kind("CONSUMER"),
                                       attributes=attributes)

        def end(error: BaseException | None) -> None:
            kind = _otel.failed(span, error) if error is not None else None
            _otel.count(_otel.consumed, 1, attributes, kind)
            _otel.measure(started, attributes, kind)
            span.end()

        try:
            with _otel.trace.use_span(span, end_on_exit=False):
                result = original(self, message)
        except BaseException as exc:
            end(exc)
            raise
        if not inspect.isawaitable(result):
            end(None)
            return result

        async def handled() -> Any:  # (a coroutine handler: the span lasts until it has run)
            try:
                with _otel.trace.use_span(span, end_on_exit=False):
                    value = await result
            except BaseException as exc:
                end(exc)
                raise
            end(None)
            return value
        return handled()
    return process_message
