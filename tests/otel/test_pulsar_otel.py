"""pulsarfast.otel on the run's real broker: one trace from a producer's send to a consumer's
handler (a message_listener's process span) through the message's traceparent property, on both
backends and on pulsarfast.asyncio; span names, kinds and attributes as the messaging semantic
conventions say; errors recorded on the span; the metrics; and uninstrument() puts the original
methods back."""
from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

import pulsarfast
import pulsarfast.asyncio as pulsar_asyncio
import pulsarfast.otel as otel
from pulsarfast import InitialPosition
from tests.support.waiting import wait_for

RECEIVE_MS = 15000


def _topic(prefix: str) -> str:
    return "otel-%s-%s" % (prefix, uuid.uuid4().hex[:10])


@pytest.fixture
def instrumented(telemetry):
    otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    yield telemetry
    otel.uninstrument()


def _kind(span) -> str:
    return span.kind.name


def test_a_trace_goes_from_a_send_to_the_consumers_listener(instrumented, make_client, backend):
    client = make_client()
    topic = _topic("listener")
    handled = threading.Event()
    seen = {}

    def listener(consumer, message):
        from opentelemetry import trace
        seen["trace_id"] = trace.get_current_span().get_span_context().trace_id
        consumer.acknowledge(message)
        handled.set()

    client.subscribe(topic, "sub", message_listener=listener, initial_position=InitialPosition.Earliest)
    producer = client.create_producer(topic)
    message_id = producer.send(b"hello", properties={"k": "v"})
    assert wait_for(handled.is_set, backend, timeout=15)
    (send,) = instrumented.spans("send ")
    assert wait_for(lambda: instrumented.spans("process "), backend, timeout=15)
    (process,) = instrumented.spans("process ")
    assert (send.name, _kind(send)) == ("send " + producer.topic(), "PRODUCER")
    assert (process.name, _kind(process)) == ("process " + producer.topic(), "CONSUMER")
    assert process.context.trace_id == send.context.trace_id == seen["trace_id"]
    assert process.parent.span_id == send.context.span_id
    assert dict(send.attributes) == {
        "messaging.system": "pulsar", "messaging.destination.name": producer.topic(),
        "messaging.operation.name": "send", "messaging.operation.type": "send",
        "messaging.message.body.size": 5, "messaging.message.id": str(message_id)}
    assert process.attributes["messaging.consumer.group.name"] == "sub"
    assert process.attributes["messaging.message.id"] == str(message_id)


def test_receive_continues_the_producers_trace_and_the_traceparent_reaches_the_official_client(
        instrumented, make_client):
    client = make_client()
    topic = _topic("receive")
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    done = []
    client.create_producer(topic, batching_enabled=True).send_async(b"async", lambda r, i: done.append(r))
    message = consumer.receive(RECEIVE_MS)
    wait_for(lambda: done, "threads", timeout=15)
    assert done == [pulsarfast.Result.Ok]
    (send,) = instrumented.spans("send ")
    (receive,) = instrumented.spans("receive ")
    assert _kind(receive) == "CONSUMER" and receive.parent.span_id == send.context.span_id
    assert message.properties()["traceparent"].split("-")[1] == "%032x" % send.context.trace_id
    with otel.process(message, "sub"):
        pass
    (process,) = instrumented.spans("process ")
    assert process.parent.span_id == send.context.span_id


def test_a_failed_send_and_a_failing_handler_are_recorded_on_their_spans(instrumented, make_client, backend):
    client = make_client()
    topic = _topic("errors")
    producer = client.create_producer(topic)
    producer.close()
    with pytest.raises(pulsarfast.AlreadyClosed):
        producer.send(b"x")
    (failed_send,) = instrumented.spans("send ")
    assert failed_send.status.status_code.name == "ERROR"
    assert failed_send.attributes["error.type"] == "AlreadyClosed"
    assert [event.name for event in failed_send.events] == ["exception"]
    raised = threading.Event()

    def listener(consumer, message):
        raised.set()
        raise RuntimeError("the handler failed")

    client.subscribe(topic, "sub", message_listener=listener, initial_position=InitialPosition.Earliest)
    client.create_producer(topic).send(b"y")
    assert wait_for(raised.is_set, backend, timeout=15)
    assert wait_for(lambda: instrumented.spans("process "), backend, timeout=15)
    (process,) = instrumented.spans("process ")
    assert process.status.status_code.name == "ERROR"
    assert process.attributes["error.type"] == "RuntimeError"


def test_metrics_count_sent_and_consumed_messages_and_time_operations(instrumented, make_client):
    client = make_client()
    topic = _topic("metrics")
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(b"%d" % i)
    for _ in range(3):
        consumer.receive(RECEIVE_MS)
    sent = instrumented.metric_points("messaging.client.sent.messages")
    consumed = instrumented.metric_points("messaging.client.consumed.messages")
    assert sum(point.value for point in sent) == 3 and sum(point.value for point in consumed) == 3
    assert {point.attributes["messaging.operation.name"] for point in
            instrumented.metric_points("messaging.client.operation.duration")} == {"send", "receive"}


def test_asyncio_send_and_receive_are_one_trace(instrumented, pulsar_broker):
    async def main():
        client = pulsar_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        try:
            topic = _topic("aio")
            consumer = await client.subscribe(topic, "sub", initial_position=pulsar_asyncio.InitialPosition.Earliest)
            producer = await client.create_producer(topic)
            await producer.send(b"aio", properties={"a": "b"})
            message = await consumer.receive()
            return message
        finally:
            await client.close()

    message = asyncio.run(asyncio.wait_for(main(), 60))
    (send,) = instrumented.spans("send ")
    (receive,) = instrumented.spans("receive ")
    assert receive.parent.span_id == send.context.span_id
    assert message.properties()["a"] == "b"


def test_uninstrument_puts_the_original_methods_back(telemetry):
    before = (pulsarfast.Producer.send, pulsarfast.Consumer.receive, pulsar_asyncio.Producer.send,
              pulsarfast.Client.subscribe)
    otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    assert otel.is_instrumented() and pulsarfast.Producer.send is not before[0]
    otel.instrument()  # (a second call changes nothing)
    otel.uninstrument()
    assert not otel.is_instrumented()
    assert (pulsarfast.Producer.send, pulsarfast.Consumer.receive, pulsar_asyncio.Producer.send,
            pulsarfast.Client.subscribe) == before
