"""OpenTelemetry tracing and metrics for pulsarfast (the ``otel`` extra: opentelemetry-api), in the
shape of OpenTelemetry's own instrumentors: ``pulsarfast.otel.instrument(tracer_provider=None,
meter_provider=None)`` and ``uninstrument()``, following the messaging semantic conventions.

Spans (``messaging.system`` = ``pulsar``, ``messaging.destination.name``, ``messaging.operation.name``
and ``.type``, ``messaging.message.id``, ``messaging.message.body.size``; an error recorded on the
span with status ERROR and ``error.type``):

- ``send <topic>`` (PRODUCER) for ``Producer.send`` and ``send_async`` (until the broker's receipt),
  sync and ``pulsarfast.asyncio``. The W3C trace context of the send is written into the message's
  properties (``traceparent``, ``tracestate``, with the globally configured propagator), which
  other clients' instrumentations read too;
- ``receive <topic>`` (CONSUMER) for ``Consumer.receive``, ``batch_receive`` and ``Reader.read_next``
  (sync and asyncio): its parent is the producer's context read from the message's properties, so
  a consumer's spans continue the producer's trace (a batch's span links to each message's);
- ``process <topic>`` (CONSUMER) around each call of a ``message_listener`` / ``reader_listener``
  (the handler's run), with the producer's context as parent; ``pulsarfast.otel.process(message)``
  makes the same span around a block of a receive loop.

Metrics (beside the Prometheus collectors of ``pulsarfast.metrics``): ``messaging.client.sent.messages``,
``messaging.client.consumed.messages``, ``messaging.client.operation.duration``.

``instrument()`` patches the methods above and ``uninstrument()`` puts them back, so an
uninstrumented program runs exactly the code it runs without this module (nothing is imported
until ``instrument()``). On the gevent and threads backends and on asyncio alike.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import time
from typing import Any, Iterator

from msgengine.telemetry import BATCH_COUNT, BODY_SIZE, CONSUMER_GROUP, MESSAGE_ID, Instrumentation

from pulsarfast import asyncio as pulsar_asyncio
from pulsarfast.base.results import Result, Timeout
from pulsarfast.client import Client
from pulsarfast.consuming.consumer import Consumer
from pulsarfast.consuming.reader import Reader
from pulsarfast.producing.producer import Producer
from pulsarfast.version import __version__

__all__ = ["instrument", "uninstrument", "is_instrumented", "process"]

_otel = Instrumentation("pulsar", "pulsarfast", __version__)


def is_instrumented() -> bool:
    return _otel.active


def instrument(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Trace and measure every producer, consumer and reader (see the module docstring); a second
    call does nothing until ``uninstrument()``."""
    if not _otel.start(tracer_provider, meter_provider):
        return
    _otel.patch(Producer, "send", _sync_send)
    _otel.patch(Producer, "send_async", _sync_send_async)
    _otel.patch(Consumer, "receive", _sync_receive)
    _otel.patch(Consumer, "batch_receive", _sync_batch_receive)
    _otel.patch(Reader, "read_next", _sync_receive)
    _otel.patch(Client, "subscribe", functools.partial(_with_listener, "message_listener"))
    _otel.patch(Client, "create_reader", functools.partial(_with_listener, "reader_listener"))
    _otel.patch(pulsar_asyncio.Producer, "send", _async_send)
    _otel.patch(pulsar_asyncio.Consumer, "receive", _async_receive)
    _otel.patch(pulsar_asyncio.Reader, "read_next", _async_receive)


def uninstrument() -> None:
    """Put the original methods back."""
    _otel.stop()


# -- contexts in message properties -----------------------------------------------------------

def _inject(properties: Any) -> dict[str, str]:
    from opentelemetry import propagate

    carrier = dict(properties) if properties else {}
    propagate.inject(carrier)
    return carrier


def _extract(message: Any) -> Any:
    from opentelemetry import propagate

    try:
        properties = message.properties()
    except Exception:
        properties = {}
    return propagate.extract(properties or {})


def _size(content: Any) -> int | None:
    return len(content) if isinstance(content, (bytes, bytearray, memoryview, str)) else None


def _asyncio_backed(obj: Any) -> bool:
    """A sync object working for pulsarfast.asyncio (its own wrapper makes the span)."""
    backend = getattr(obj, "backend", None)
    return getattr(backend, "name", None) == "asyncio"


# -- sending ----------------------------------------------------------------------------------

def _send_attributes(topic: str, content: Any) -> dict[str, Any]:
    return _otel.attributes(topic, "send", "send", **{BODY_SIZE: _size(content)})


def _with_properties(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's arguments with its properties (the first after the content, or ``properties=``)
    replaced by the same properties and the trace context."""
    if args:
        return (_inject(args[0]),) + args[1:], kwargs
    kwargs = dict(kwargs)
    kwargs["properties"] = _inject(kwargs.get("properties"))
    return args, kwargs


def _sent(span: Any, attributes: dict[str, Any], started: float, message_id: Any = None,
          error: BaseException | str | None = None) -> None:
    """A send's outcome on its span (the message id, or the error) and in the metrics."""
    kind = None
    if error is not None:
        kind = _otel.failed(span, error)
    else:
        span.set_attribute(MESSAGE_ID, str(message_id))
    _otel.count(_otel.sent, 1, attributes, kind)
    _otel.measure(started, attributes, kind)


def _sync_send(original: Any) -> Any:
    @functools.wraps(original)
    def send(self: Any, content: Any, *args: Any, **kwargs: Any) -> Any:
        if _asyncio_backed(self):
            return original(self, content, *args, **kwargs)
        attributes = _send_attributes(self.topic(), content)
        started = time.perf_counter()
        with _otel.tracer.start_as_current_span("send " + self.topic(), kind=_otel.span_kind("PRODUCER"),
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False) as span:
            args, kwargs = _with_properties(args, kwargs)
            try:
                message_id = original(self, content, *args, **kwargs)
            except BaseException as exc:
                _sent(span, attributes, started, error=exc)
                raise
            _sent(span, attributes, started, message_id)
            return message_id
    return send


def _sync_send_async(original: Any) -> Any:
    @functools.wraps(original)
    def send_async(self: Any, content: Any, callback: Any, *args: Any, **kwargs: Any) -> Any:
        if _asyncio_backed(self):
            return original(self, content, callback, *args, **kwargs)
        attributes = _send_attributes(self.topic(), content)
        started = time.perf_counter()
        span = _otel.tracer.start_span("send " + self.topic(), kind=_otel.span_kind("PRODUCER"), attributes=attributes)
        with _otel.trace.use_span(span, end_on_exit=False):
            args, kwargs = _with_properties(args, kwargs)

        def ended(result: Any, message_id: Any) -> None:
            if result == Result.Ok:
                _sent(span, attributes, started, message_id)
            else:
                _sent(span, attributes, started, error=getattr(result, "name", str(result)))
            span.end()
            if callback is not None:
                callback(result, message_id)

        try:
            return original(self, content, ended, *args, **kwargs)
        except BaseException as exc:
            if span.is_recording():  # (refused before queueing: the callback never ran)
                error = _otel.failed(span, exc)
                _otel.count(_otel.sent, 1, attributes, error)
                span.end()
            raise
    return send_async


def _async_send(original: Any) -> Any:
    @functools.wraps(original)
    async def send(self: Any, content: Any, *args: Any, **kwargs: Any) -> Any:
        attributes = _send_attributes(self.topic(), content)
        started = time.perf_counter()
        with _otel.tracer.start_as_current_span("send " + self.topic(), kind=_otel.span_kind("PRODUCER"),
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False) as span:
            args, kwargs = _with_properties(args, kwargs)
            try:
                message_id = await original(self, content, *args, **kwargs)
            except BaseException as exc:
                _sent(span, attributes, started, error=exc)
                raise
            _sent(span, attributes, started, message_id)
            return message_id
    return send


# -- receiving --------------------------------------------------------------------------------

def _group(consumer: Any) -> str | None:
    try:
        return consumer.subscription_name()
    except Exception:
        return None


def _received(consumer: Any, message: Any, started: float, started_ns: int) -> None:
    """A receive span ending now, begun at started_ns, child of the message's producer context."""
    topic = message.topic_name() or consumer.topic()
    attributes = _otel.attributes(topic, "receive", "receive", **{
        MESSAGE_ID: str(message.message_id()), BODY_SIZE: len(message.data()), CONSUMER_GROUP: _group(consumer)})
    span = _otel.tracer.start_span("receive " + topic, context=_extract(message), kind=_otel.span_kind("CONSUMER"),
                                   attributes=attributes, start_time=started_ns)
    span.end()
    _otel.count(_otel.consumed, 1, attributes)
    _otel.measure(started, attributes)


def _receive_failed(consumer: Any, exc: BaseException, started: float, started_ns: int) -> None:
    if isinstance(exc, Timeout) or getattr(exc, "error", lambda: None)() == Result.Timeout:
        return  # (nothing came within the caller's timeout: no operation to report)
    attributes = _otel.attributes(consumer.topic(), "receive", "receive", **{CONSUMER_GROUP: _group(consumer)})
    span = _otel.tracer.start_span("receive " + consumer.topic(), kind=_otel.span_kind("CONSUMER"),
                                   attributes=attributes, start_time=started_ns)
    _otel.measure(started, attributes, _otel.failed(span, exc))
    span.end()


def _sync_receive(original: Any) -> Any:
    @functools.wraps(original)
    def receive(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _asyncio_backed(self):
            return original(self, *args, **kwargs)
        started, started_ns = time.perf_counter(), time.time_ns()
        try:
            message = original(self, *args, **kwargs)
        except BaseException as exc:
            _receive_failed(self, exc, started, started_ns)
            raise
        _received(self, message, started, started_ns)
        return message
    return receive


def _async_receive(original: Any) -> Any:
    @functools.wraps(original)
    async def receive(self: Any, *args: Any, **kwargs: Any) -> Any:
        started, started_ns = time.perf_counter(), time.time_ns()
        try:
            message = await original(self, *args, **kwargs)
        except BaseException as exc:
            _receive_failed(self, exc, started, started_ns)
            raise
        _received(self, message, started, started_ns)
        return message
    return receive


def _sync_batch_receive(original: Any) -> Any:
    @functools.wraps(original)
    def batch_receive(self: Any, *args: Any, **kwargs: Any) -> Any:
        started, started_ns = time.perf_counter(), time.time_ns()
        messages = original(self, *args, **kwargs)
        if messages:
            links = [_otel.trace.Link(_otel.trace.get_current_span(_extract(message)).get_span_context())
                     for message in messages]
            attributes = _otel.attributes(self.topic(), "receive", "receive", **{
                BATCH_COUNT: len(messages), CONSUMER_GROUP: _group(self)})
            span = _otel.tracer.start_span("receive " + self.topic(), kind=_otel.span_kind("CONSUMER"),
                                           attributes=attributes, links=links, start_time=started_ns)
            span.end()
            _otel.count(_otel.consumed, len(messages), attributes)
            _otel.measure(started, attributes)
        return messages
    return batch_receive


# -- processing -------------------------------------------------------------------------------

@contextlib.contextmanager
def process(message: Any, subscription: str | None = None) -> Iterator[Any]:
    """A ``process <topic>`` span around a block handling message, child of its producer's context
    (the current span inside the block); an exception is recorded on it. A no-op (yields None)
    when pulsarfast is not instrumented."""
    if not _otel.active:
        yield None
        return
    topic = message.topic_name()
    attributes = _otel.attributes(topic, "process", "process", **{
        MESSAGE_ID: str(message.message_id()), BODY_SIZE: len(message.data()), CONSUMER_GROUP: subscription})
    started = time.perf_counter()
    with _otel.tracer.start_as_current_span("process " + topic, context=_extract(message),
                                            kind=_otel.span_kind("CONSUMER"), attributes=attributes,
                                            record_exception=False, set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            _otel.measure(started, attributes, _otel.failed(span, exc))
            raise
        _otel.measure(started, attributes)


def _traced_listener(listener: Any, subscription: str | None) -> Any:
    @functools.wraps(listener)
    def traced(owner: Any, message: Any) -> Any:
        with process(message, subscription):
            return listener(owner, message)
    return traced


def _with_listener(argument: str, original: Any) -> Any:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def make(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        listener = bound.arguments.get(argument)
        if listener is not None and callable(listener):
            subscription = bound.arguments.get("subscription_name") if argument == "message_listener" else None
            bound.arguments[argument] = _traced_listener(listener, subscription)
        return original(*bound.args, **bound.kwargs)
    return make
