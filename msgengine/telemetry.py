"""OpenTelemetry plumbing that both clients' instrumentations share (``nsq.otel``,
``pulsarfast.otel``): an ``Instrumentation`` holds a tracer and the messaging metrics of one system
(``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
``messaging.client.operation.duration``, as the OpenTelemetry messaging semantic conventions name
them), patches the methods it instruments on instrument() and puts the originals back on
uninstrument(), so that an uninstrumented program runs the very code it ran before: no check, no
call, no cost.

Only ``opentelemetry-api`` is needed (the ``otel`` extra), imported when instrument() is called;
without a tracer or meter provider given, the global ones are used (no-ops until an SDK is set up).
"""
from __future__ import annotations

import time
from typing import Any, Callable

#: attribute names of the messaging semantic conventions
SYSTEM = "messaging.system"
DESTINATION = "messaging.destination.name"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
MESSAGE_ID = "messaging.message.id"
BODY_SIZE = "messaging.message.body.size"
CONSUMER_GROUP = "messaging.consumer.group.name"
BATCH_COUNT = "messaging.batch.message_count"
ERROR_TYPE = "error.type"


class OTelMissing(ImportError):
    """instrument() without opentelemetry-api installed (pip install 'nsqfast[otel]')."""


def _api() -> Any:
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:  # (the extra is optional)
        raise OTelMissing("OpenTelemetry instrumentation needs opentelemetry-api: pip install 'nsqfast[otel]'") from exc
    return trace, metrics


class Instrumentation:
    """One system's tracer, metrics and patched methods (see the module docstring)."""

    def __init__(self, system: str, scope: str, version: str) -> None:
        self.system = system
        self.scope = scope
        self.version = version
        self._patched: list[tuple[Any, str, Any]] = []
        self.tracer: Any = None
        self.trace: Any = None  # (the opentelemetry.trace module)
        self.sent: Any = None
        self.consumed: Any = None
        self.duration: Any = None

    @property
    def active(self) -> bool:
        return bool(self._patched)

    def start(self, tracer_provider: Any = None, meter_provider: Any = None) -> bool:
        """Get the tracer and the instruments; False when already instrumented (nothing to do)."""
        if self._patched:
            return False
        trace, metrics = _api()
        self.trace = trace
        self.tracer = trace.get_tracer(self.scope, self.version, tracer_provider=tracer_provider)
        meter = metrics.get_meter(self.scope, self.version, meter_provider=meter_provider)
        self.sent = meter.create_counter("messaging.client.sent.messages", unit="{message}",
                                         description="Messages a producer attempted to send")
        self.consumed = meter.create_counter("messaging.client.consumed.messages", unit="{message}",
                                             description="Messages delivered to the application")
        self.duration = meter.create_histogram("messaging.client.operation.duration", unit="s",
                                               description="Duration of a messaging operation")
        return True

    def patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        """Replace owner.name by make(original), until stop()."""
        original = owner.__dict__[name]
        self._patched.append((owner, name, original))
        setattr(owner, name, make(original))

    def stop(self) -> None:
        """Put every original back."""
        while self._patched:
            owner, name, original = self._patched.pop()
            setattr(owner, name, original)

    # -- what the wrappers share ------------------------------------------------------------

    def attributes(self, destination: str, operation: str, operation_type: str, **more: Any) -> dict[str, Any]:
        found = {SYSTEM: self.system, DESTINATION: destination, OPERATION_NAME: operation,
                 OPERATION_TYPE: operation_type}
        found.update((key, value) for key, value in more.items() if value is not None)
        return found

    def span_kind(self, name: str) -> Any:
        return getattr(self.trace.SpanKind, name)

    def failed(self, span: Any, error: BaseException | str) -> str:
        """Mark span failed: the exception recorded (or the error's name), status ERROR; the error.type."""
        trace = self.trace
        if isinstance(error, BaseException):
            span.record_exception(error)
            kind = type(error).__qualname__
            description = "%s: %s" % (kind, error)
        else:
            kind = description = str(error)
        span.set_attribute(ERROR_TYPE, kind)
        span.set_status(trace.Status(trace.StatusCode.ERROR, description))
        return kind

    def measure(self, started: float, attributes: dict[str, Any], error_type: str | None = None) -> None:
        """The operation's duration in the histogram (only the metric attributes: no message id)."""
        metric = {key: attributes[key] for key in (SYSTEM, DESTINATION, OPERATION_NAME, OPERATION_TYPE, CONSUMER_GROUP)
                  if key in attributes}
        if error_type is not None:
            metric[ERROR_TYPE] = error_type
        self.duration.record(time.perf_counter() - started, metric)

    def count(self, counter: Any, amount: int, attributes: dict[str, Any], error_type: str | None = None) -> None:
        metric = {key: attributes[key] for key in (SYSTEM, DESTINATION, OPERATION_NAME, CONSUMER_GROUP)
                  if key in attributes}
        if error_type is not None:
            metric[ERROR_TYPE] = error_type
        counter.add(amount, metric)
