"""nsq.otel on a real nsqd: publish spans (pub, mpub, dpub; the callback form too) and a process
span per handler run, named and attributed as the messaging semantic conventions say; a failing
handler and a refused publish recorded on their spans; message bodies unchanged (NSQ has no headers:
no context travels); metrics; uninstrument() puts the original methods back."""
from __future__ import annotations

import threading

import pytest

import nsq
import nsq.otel as otel
from msgengine.runtime import get_backend
from tests.support.waiting import wait_for


@pytest.fixture
def instrumented(telemetry):
    otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    yield telemetry
    otel.uninstrument()


def test_publishes_and_handler_runs_have_their_spans(instrumented, nsqd, topic, backend):
    with nsq.Writer([nsqd.tcp_address], backend=backend) as writer:
        assert writer.pub(topic, b"one") == b"OK"
        assert writer.mpub(topic, [b"two", b"three"]) == b"OK"
        assert writer.dpub(topic, 0, b"four") == b"OK"
        answered = threading.Event()
        writer.pub(topic, b"five", callback=lambda conn, data: answered.set())
        assert wait_for(answered.is_set, backend, timeout=15)
    bodies = []

    def handler(message):
        bodies.append(message.body)
        if len(bodies) == 5:
            reader.close()
        if message.body == b"three":
            raise RuntimeError("the handler failed on three")
        return True

    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=10,
                        backend=backend)
    get_backend(backend).spawn(reader.run).join(30)
    assert sorted(bodies) == sorted([b"one", b"two", b"three", b"four", b"five"])  # (bodies unchanged)
    publishes = instrumented.spans("publish ")
    assert [span.attributes["messaging.operation.name"] for span in publishes] == ["pub", "mpub", "dpub", "pub"]
    assert {span.kind.name for span in publishes} == {"PRODUCER"}
    assert publishes[1].attributes["messaging.batch.message_count"] == 2
    assert publishes[0].attributes["messaging.message.body.size"] == 3
    assert all(span.attributes["messaging.system"] == "nsq" and span.attributes["messaging.destination.name"] == topic
               for span in publishes)
    processes = instrumented.spans("process ")
    assert len(processes) >= 5 and {span.kind.name for span in processes} == {"CONSUMER"}
    failed = [span for span in processes if span.status.status_code.name == "ERROR"]
    assert failed and failed[0].attributes["error.type"] == "RuntimeError"
    assert all(span.attributes["messaging.consumer.group.name"] == "ch" for span in processes)
    assert sum(point.value for point in instrumented.metric_points("messaging.client.sent.messages")) == 5


def test_a_refused_publish_is_recorded_on_its_span(instrumented, nsqd, backend):
    with nsq.Writer([nsqd.tcp_address], backend=backend) as writer:
        with pytest.raises(nsq.Error):
            writer.pub("bad topic!", b"x")
    (span,) = instrumented.spans("publish ")
    assert span.status.status_code.name == "ERROR"


def test_uninstrument_puts_the_original_methods_back(telemetry):
    before = (nsq.Writer.pub, nsq.Writer.mpub, nsq.Writer.dpub, nsq.Reader.process_message)
    otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    assert otel.is_instrumented() and nsq.Writer.pub is not before[0]
    otel.uninstrument()
    assert (nsq.Writer.pub, nsq.Writer.mpub, nsq.Writer.dpub, nsq.Reader.process_message) == before


def test_on_an_asyncio_loop_a_publish_and_a_coroutine_handler_have_their_spans(instrumented, nsqd, topic):
    import asyncio

    async def main():
        done = asyncio.Event()

        async def handler(message):
            await asyncio.sleep(0)
            done.set()
            return True

        reader = nsq.Reader(topic=topic, channel="ch", message_handler=handler,
                            nsqd_tcp_addresses=[nsqd.tcp_address])
        writer = nsq.Writer([nsqd.tcp_address])
        assert await writer.pub(topic, b"on the loop") == b"OK"
        await asyncio.wait_for(done.wait(), 30)
        reader.close()
        writer.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    (publish,) = instrumented.spans("publish ")
    assert publish.attributes["messaging.operation.name"] == "pub" and publish.status.status_code.name == "UNSET"
    (process,) = instrumented.spans("process ")
    assert process.end_time >= process.start_time and process.attributes["messaging.consumer.group.name"] == "ch"
