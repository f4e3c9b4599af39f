# pulsarfast.asyncio beside the official pulsar.asyncio on the real broker, the same steps on both:
# a batch waits until it is full, its delay passes or flush() runs (pulsarfast's batching_eager=True
# sends it early, on request only); after Client.shutdown() every call fails with AlreadyClosed (or
# does nothing) where the official one does, and close() returns once; the official module's helper
# _set_future(future, result, value), which test modules written for the official client import.
#
# Every test body runs in asyncio.run(...); every wait is bounded by asyncio.wait_for.
from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any, Awaitable, Callable

import pytest

import pulsarfast
import pulsarfast.asyncio as fast_asyncio

official = pytest.importorskip(
    "pulsar", reason="the official `pulsar-client` wheel is not installed (pip install -r requirements-dev.txt)"
)
import pulsar.asyncio as official_asyncio  # noqa: E402

pytestmark = pytest.mark.timeout(150)

WAIT = 15.0  # seconds: the bound of every wait for the broker

BOTH = pytest.mark.parametrize("pulsar_asyncio, package", [(fast_asyncio, pulsarfast), (official_asyncio, official)],
                               ids=["fast", "official"])


def run(coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(*args), 120))


def within(awaitable: Awaitable[Any]) -> Awaitable[Any]:
    return asyncio.wait_for(awaitable, WAIT)


async def outcome(awaitable: Awaitable[Any]) -> Any:
    """"ok" (with no value compared), or the Result name of the PulsarException the awaitable raises
    (or the exception type's name)."""
    try:
        await within(awaitable)
    except Exception as exc:  # noqa: BLE001 - compared by the tests
        error = getattr(exc, "error", None)
        return error().name if callable(error) else type(exc).__name__
    return "ok"


# ----------------------------------------------------------------------------- item 4: batching


async def _two_sends_wait_for_flush(pulsar_asyncio, url, topic, **extra) -> dict[str, Any]:
    """Two awaited sends into a batch of 3 with a delay no test waits out, then a message of an
    unbatched producer on the same topic (awaited: the fence), then flush()."""
    out: dict[str, Any] = {}
    client = pulsar_asyncio.Client(url, operation_timeout_seconds=15)
    batched = await within(client.create_producer(topic, batching_max_messages=3,
                                                  batching_max_publish_delay_ms=60_000, **extra))
    single = await within(client.create_producer(topic, batching_enabled=False))
    sends = [asyncio.ensure_future(batched.send(b"b-%d" % i)) for i in range(2)]
    await asyncio.sleep(0)  # (both queued into the open batch)
    fence = await within(single.send(b"fence"))
    # (a batch sent before the fence's message is stored before it, on the same topic)
    out["fence entry"] = fence.entry_id()
    out["pending after the fence's receipt"] = [not send.done() for send in sends]
    await within(batched.flush())
    ids = [await within(send) for send in sends]
    out["one entry"] = len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1
    out["batch indexes"] = [i.batch_index() for i in ids]
    out["entry after the fence"] = ids[0].entry_id() - fence.entry_id()
    await within(client.close())
    return out


def test_two_batched_sends_wait_for_the_batch_until_flush_as_the_official_ones(pulsar_broker, pulsar_topic):
    url = pulsar_broker.service_url
    fast = run(_two_sends_wait_for_flush, fast_asyncio, url, pulsar_topic + "_f")
    theirs = run(_two_sends_wait_for_flush, official_asyncio, url, pulsar_topic + "_o")
    assert fast == theirs
    assert fast == {"fence entry": 0, "pending after the fence's receipt": [True, True], "one entry": True,
                    "batch indexes": [0, 1], "entry after the fence": 1}


def test_batching_eager_sends_the_batch_when_none_is_on_its_way(pulsar_broker, pulsar_topic):
    # pulsarfast's own keyword: the same two sends, with no flush, come back (the batch went at the
    # end of the loop's turn, not after its delay), in one entry
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        producer = await within(client.create_producer(pulsar_topic, batching_max_messages=3,
                                                       batching_max_publish_delay_ms=600_000, batching_eager=True))
        ids = await within(asyncio.gather(*[producer.send(b"b-%d" % i) for i in range(2)]))
        assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1
        assert [i.batch_index() for i in ids] == [0, 1]
        alone = await within(producer.send(b"alone"))
        assert alone.entry_id() == ids[0].entry_id() + 1
        await within(client.close())
    run(main)


@BOTH
def test_a_batch_goes_when_full_or_when_its_delay_passes(pulsar_broker, pulsar_topic, pulsar_asyncio, package):
    async def main():
        client = pulsar_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        full = await within(client.create_producer(pulsar_topic, batching_max_messages=3,
                                                   batching_max_publish_delay_ms=600_000))
        ids = await within(asyncio.gather(*[full.send(b"f-%d" % i) for i in range(3)]))  # (no flush)
        assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1
        assert [i.batch_index() for i in ids] == [0, 1, 2]
        timed = await within(client.create_producer(pulsar_topic, batching_max_messages=3,
                                                    batching_max_publish_delay_ms=50))
        ids = await within(asyncio.gather(*[timed.send(b"t-%d" % i) for i in range(2)]))  # (nor here)
        assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1
        assert [i.batch_index() for i in ids] == [0, 1]
        await within(client.close())
    run(main)


# ----------------------------------------------------------------------------- item 5: shutdown


async def _after_shutdown(pulsar_asyncio, package, url, topic) -> dict[str, Any]:
    out: dict[str, Any] = {}
    client = pulsar_asyncio.Client(url, operation_timeout_seconds=5)
    batched = await within(client.create_producer(topic))
    single = await within(client.create_producer(topic, batching_enabled=False))
    consumer = await within(client.subscribe(topic, "sub"))
    reader = await within(client.create_reader(topic, package.MessageId.earliest))
    for i in range(3):
        await within(single.send(b"m-%d" % i))
    first = await within(consumer.receive())  # (the others are on their way to its queue, or in it)
    assert (await within(reader.read_next())).data() == b"m-0"
    out["shutdown"] = client.shutdown()  # (nothing awaited from here to the calls below)
    out["send (batched)"] = await outcome(batched.send(b"after"))
    out["send (unbatched)"] = await outcome(single.send(b"after"))
    out["flush"] = await outcome(batched.flush())
    out["producer connected"] = batched.is_connected()
    out["receive"] = await outcome(consumer.receive())
    out["acknowledge"] = await outcome(consumer.acknowledge(first))
    out["acknowledge_cumulative"] = await outcome(consumer.acknowledge_cumulative(first))
    out["negative_acknowledge"] = await outcome(consumer.negative_acknowledge(first))
    out["redeliver_unacknowledged_messages"] = consumer.redeliver_unacknowledged_messages()
    out["get_last_message_id"] = await outcome(consumer.get_last_message_id())
    out["seek by timestamp"] = await outcome(consumer.seek(first.publish_timestamp()))
    out["read_next"] = await outcome(reader.read_next())
    out["has_message_available"] = await outcome(reader.has_message_available())
    out["reader connected"] = reader.is_connected()
    out["create_producer"] = await outcome(client.create_producer(topic))
    out["subscribe"] = await outcome(client.subscribe(topic, "other"))
    out["get_topic_partitions"] = await outcome(client.get_topic_partitions(topic))
    out["unsubscribe"] = await outcome(consumer.unsubscribe())
    out["producer close"] = await outcome(batched.close())
    out["consumer close"] = await outcome(consumer.close())
    out["reader close"] = await outcome(reader.close())
    out["client close"] = await outcome(client.close())
    out["client close again"] = await outcome(client.close())
    out["shutdown again"] = client.shutdown()
    return out


def test_after_shutdown_calls_fail_with_already_closed_as_the_official_ones(pulsar_broker, pulsar_topic):
    url = pulsar_broker.service_url
    fast = run(_after_shutdown, fast_asyncio, pulsarfast, url, pulsar_topic + "_f")
    theirs = run(_after_shutdown, official_asyncio, official, url, pulsar_topic + "_o")
    assert fast == theirs
    closed = "AlreadyClosed"
    assert fast == {
        "shutdown": None, "send (batched)": closed, "send (unbatched)": closed, "flush": closed,
        "producer connected": False, "receive": closed, "acknowledge": closed, "acknowledge_cumulative": closed,
        "negative_acknowledge": "ok", "redeliver_unacknowledged_messages": None, "get_last_message_id": closed,
        "seek by timestamp": closed, "read_next": closed, "has_message_available": closed,
        "reader connected": False, "create_producer": closed, "subscribe": closed, "get_topic_partitions": closed,
        "unsubscribe": closed, "producer close": closed, "consumer close": "ok", "reader close": "ok",
        "client close": "ok", "client close again": closed, "shutdown again": None}


@BOTH
def test_close_after_a_close_fails_and_shutdown_after_it_does_nothing(pulsar_broker, pulsar_topic, pulsar_asyncio,
                                                                      package):
    async def main():
        client = pulsar_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=5)
        producer = await within(client.create_producer(pulsar_topic))
        consumer = await within(client.subscribe(pulsar_topic, "sub"))
        await within(client.close())
        assert await outcome(client.close()) == "AlreadyClosed"
        assert client.shutdown() is None
        assert await outcome(producer.send(b"after")) == "AlreadyClosed"
        assert await outcome(producer.close()) == "AlreadyClosed"
        assert await outcome(consumer.get_last_message_id()) == "AlreadyClosed"
        assert await outcome(consumer.receive()) == "AlreadyClosed"
    run(main)


def test_a_batched_send_waiting_at_shutdown_fails_with_already_closed(pulsar_broker, pulsar_topic):
    # (pulsarfast only: the official client leaves such a send unanswered for ever, and its process
    # then ends with "terminate called without an active exception")
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=5)
        producer = await within(client.create_producer(pulsar_topic, batching_max_publish_delay_ms=600_000))
        waiting = asyncio.ensure_future(producer.send(b"in the open batch"))
        await asyncio.sleep(0)
        client.shutdown()
        assert await outcome(waiting) == "AlreadyClosed"
        assert await outcome(client.close()) == "ok"
    run(main)


# ----------------------------------------------------------------------------- item 6: _set_future


@BOTH
def test_set_future_resolves_a_future_from_a_send_callback(pulsar_broker, pulsar_topic, pulsar_asyncio, package):
    """The helper as a callback of the sync API's send_async (official: its C++ threads; pulsarfast:
    the connection's thread): the future gets the message id on the loop."""
    client = package.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
    try:
        producer = client.create_producer(pulsar_topic)
        consumer = client.subscribe(pulsar_topic, "sub")

        async def main():
            sent = asyncio.get_running_loop().create_future()
            producer.send_async(b"via _set_future", functools.partial(pulsar_asyncio._set_future, sent))
            return await within(sent)

        message_id = run(main)
        message = consumer.receive(timeout_millis=int(WAIT * 1000))
        assert message.data() == b"via _set_future"
        assert (message_id.ledger_id(), message_id.entry_id()) == (message.message_id().ledger_id(),
                                                                   message.message_id().entry_id())
    finally:
        client.close()


@BOTH
def test_set_future_contract(pulsar_asyncio, package):
    async def main():
        loop = asyncio.get_running_loop()
        errors: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        set_future = pulsar_asyncio._set_future
        ok, failed, cancelled, resolved, threaded = (loop.create_future() for _ in range(5))
        set_future(ok, package.Result.Ok, "value")
        assert not ok.done()  # (resolved at the loop's next turn, as call_soon_threadsafe does)
        assert await within(ok) == "value"
        set_future(failed, package.Result.Timeout, "ignored")
        with pytest.raises(pulsar_asyncio.PulsarException) as raised:
            await within(failed)
        assert raised.value.error() == package.Result.Timeout
        cancelled.cancel()
        set_future(cancelled, package.Result.Ok, "late")  # (no-op: cancelled)
        resolved.set_result("first")
        set_future(resolved, package.Result.Timeout, None)  # (no-op: resolved already)
        thread = threading.Thread(target=set_future, args=(threaded, package.Result.Ok, "from a thread"))
        thread.start()
        assert await within(threaded) == "from a thread"
        thread.join(WAIT)
        marker = loop.create_future()
        loop.call_soon(marker.set_result, None)  # (after the no-op callbacks above)
        await within(marker)
        assert cancelled.cancelled()
        assert resolved.result() == "first"
        assert errors == []
    run(main)
