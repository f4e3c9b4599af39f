# pulsarfast.asyncio (the official pulsar.asyncio module's API) on the real broker: round trips, the
# official docs' examples with only the import changed, errors and the consumer's operations side by
# side with the official pulsar.asyncio, equal signatures, cancellation of receive losing nothing,
# concurrent sends, and the sync API from other threads meanwhile.
#
# Every test body runs in asyncio.run(...); every wait is bounded by asyncio.wait_for.
from __future__ import annotations

import asyncio
import inspect
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


def run(coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(*args), 120))


def within(awaitable: Awaitable[Any]) -> Awaitable[Any]:
    return asyncio.wait_for(awaitable, WAIT)


def modules():
    """(label, the asyncio module, its package) of both clients."""
    return [("fast", fast_asyncio, pulsarfast), ("official", official_asyncio, official)]


# ----------------------------------------------------------------------------- round trip


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
def test_produce_consume_round_trip(pulsar_broker, pulsar_topic):
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "sub"))
        producer = await within(client.create_producer(pulsar_topic))
        assert producer.topic() == "persistent://public/default/" + pulsar_topic
        assert producer.is_connected()
        ids = [await within(producer.send(b"m-%d" % i, properties={"i": str(i)})) for i in range(10)]
        assert producer.last_sequence_id() == 9
        got = [await within(consumer.receive()) for _ in range(10)]
        assert [m.data() for m in got] == [b"m-%d" % i for i in range(10)]
        assert [m.properties()["i"] for m in got] == [str(i) for i in range(10)]
        assert [m.message_id() for m in got] == ids
        for message in got:
            await within(consumer.acknowledge(message))
        assert consumer.subscription_name() == "sub"
        assert consumer.topic() == "persistent://public/default/" + pulsar_topic
        await within(producer.flush())
        await within(producer.close())
        await within(consumer.close())
        await within(client.close())
    run(main)


# ----------------------------------------------------------------------------- the docs' examples


async def docs_producer(pulsar_asyncio, url, topic):
    """The official docs' asyncio producer example."""
    client = pulsar_asyncio.Client(url)
    producer = await client.create_producer(topic)
    sent = []
    for i in range(10):
        msg_id = await producer.send(('hello-%d' % i).encode('utf-8'))
        sent.append(msg_id)
    await client.close()
    return len(sent)


async def docs_consumer(pulsar_asyncio, url, topic, count):
    """The official docs' asyncio consumer example (its `while True` loop, left after count messages)."""
    client = pulsar_asyncio.Client(url)
    consumer = await client.subscribe(topic, 'my-subscription', initial_position=pulsar_asyncio.InitialPosition.Earliest)
    received = []
    while True:
        msg = await consumer.receive()
        received.append(msg.data())
        await consumer.acknowledge(msg)
        if len(received) == count:
            break
    await client.close()
    return received


async def docs_reader(pulsar_asyncio, package, url, topic, count):
    """The official docs' asyncio reader example."""
    client = pulsar_asyncio.Client(url)
    reader = await client.create_reader(topic, package.MessageId.earliest)
    received = []
    while len(received) < count:
        msg = await reader.read_next()
        received.append(msg.data())
    await client.close()
    return received


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
@pytest.mark.parametrize("label,pulsar_asyncio,package", modules(), ids=["fast", "official"])
def test_docs_examples_run_with_only_the_import_changed(pulsar_broker, pulsar_topic, label, pulsar_asyncio, package):
    topic = "%s_%s" % (pulsar_topic, label)
    url = pulsar_broker.service_url

    # (each example is a program of its own, with its own asyncio.run, as in the docs)
    sent = run(lambda: within(docs_producer(pulsar_asyncio, url, topic)))
    consumed = run(lambda: within(docs_consumer(pulsar_asyncio, url, topic, sent)))
    read = run(lambda: within(docs_reader(pulsar_asyncio, package, url, topic, sent)))
    expected = [b"hello-%d" % i for i in range(10)]
    assert (sent, consumed, read) == (10, expected, expected)


# ----------------------------------------------------------------------------- side by side with official


async def _error_of(awaitable: Awaitable[Any]) -> Any:
    """The Result of the PulsarException the awaitable raises (or the exception type's name)."""
    try:
        await within(awaitable)
    except Exception as exc:  # noqa: BLE001 - compared below
        error = getattr(exc, "error", None)
        return (type(exc).__module__.split(".")[-1], error().name) if callable(error) else type(exc).__name__
    return None


async def _errors(pulsar_asyncio, package, url, topic) -> dict[str, Any]:
    out: dict[str, Any] = {}
    client = pulsar_asyncio.Client(url, operation_timeout_seconds=5)  # (the official get_last_message_id
    # on a closed consumer retries for the operation timeout, then raises NotConnected)
    missing = "persistent://no_such_tenant_x/no_ns/t"
    out["producer on a missing namespace"] = await _error_of(client.create_producer(missing))
    out["subscribe on a missing namespace"] = await _error_of(client.subscribe(missing, "s"))
    out["reader on a missing namespace"] = await _error_of(client.create_reader(missing, package.MessageId.earliest))
    out["partitions of a missing namespace"] = await _error_of(client.get_topic_partitions(missing))
    consumer = await within(client.subscribe(topic, "busy"))
    out["second exclusive consumer"] = await _error_of(client.subscribe(topic, "busy"))
    out["batching and chunking"] = await _error_of(client.create_producer(topic, chunking_enabled=True))
    out["pattern list"] = await _error_of(client.subscribe([topic], "s", is_pattern_topic=True))
    out["int topic"] = await _error_of(client.subscribe(5, "s"))
    out["reader int start"] = await _error_of(client.create_reader(topic, 5))
    out["partitions int"] = await _error_of(client.get_topic_partitions(5))
    out["seek str"] = await _error_of(consumer.seek("x"))
    producer = await within(client.create_producer(topic))
    await within(producer.send(b"x"))
    message = await within(consumer.receive())
    await within(consumer.close())
    # (in this order: the official consumer answers acknowledge and seek differently after its
    # get_last_message_id has failed)
    out["closed consumer: receive"] = await _error_of(consumer.receive())
    out["closed consumer: acknowledge"] = await _error_of(consumer.acknowledge(message))
    out["closed consumer: close"] = await _error_of(consumer.close())
    out["closed consumer: seek"] = await _error_of(consumer.seek(0))
    out["closed consumer: unsubscribe"] = await _error_of(consumer.unsubscribe())
    out["closed consumer: negative_acknowledge"] = await _error_of(consumer.negative_acknowledge(message))
    out["closed consumer: get_last_message_id"] = await _error_of(consumer.get_last_message_id())
    await within(producer.close())
    for name in ("send", "flush", "close"):
        out["closed producer: " + name] = await _error_of(producer.send(b"y") if name == "send" else getattr(producer, name)())
    await within(client.close())
    out["closed client: create_producer"] = await _error_of(client.create_producer(topic))
    out["closed client: close"] = await _error_of(client.close())
    return out


def test_errors_are_the_official_ones(pulsar_broker, pulsar_topic):
    url = pulsar_broker.service_url
    fast = run(_errors, fast_asyncio, pulsarfast, url, pulsar_topic + "_f")
    theirs = run(_errors, official_asyncio, official, url, pulsar_topic + "_o")
    assert fast == theirs
    assert fast["closed consumer: receive"] == ("asyncio", "AlreadyClosed")
    assert fast["producer on a missing namespace"] == ("asyncio", "TopicNotFound")


def test_pulsar_exception_str_and_error():
    for module in (fast_asyncio, official_asyncio):
        result = pulsarfast.Result.Timeout if module is fast_asyncio else official.Result.Timeout
        assert str(module.PulsarException(result)) == "3 Timeout"
        assert str(module.PulsarException(result, "no answer")) == "3 Timeout: no answer"
        assert module.PulsarException(result).error() == result
    assert not issubclass(fast_asyncio.PulsarException, pulsarfast.PulsarException)


async def _consumer_operations(pulsar_asyncio, package, url, topic) -> dict[str, Any]:
    out: dict[str, Any] = {}
    client = pulsar_asyncio.Client(url, operation_timeout_seconds=15)
    producer = await within(client.create_producer(topic, batching_enabled=False))
    consumer = await within(client.subscribe(topic, "ops", consumer_type=package.ConsumerType.Shared,
                                             negative_ack_redelivery_delay_ms=100))
    ids = []
    for i in range(6):
        ids.append(await within(producer.send(b"%d" % i)))
        await asyncio.sleep(0.005)  # (distinct publish times for the seek by timestamp below)
    last = await within(consumer.get_last_message_id())
    out["last id is the last sent"] = (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
    got = [await within(consumer.receive()) for _ in range(6)]
    out["received"] = [m.data() for m in got]
    # acknowledge by message and by id; negative_acknowledge one: it comes again
    await within(consumer.acknowledge(got[0]))
    await within(consumer.acknowledge(got[1].message_id()))
    await within(consumer.negative_acknowledge(got[2]))
    again = await within(consumer.receive())
    out["negatively acknowledged comes again"] = again.data()
    for message in [again] + got[3:]:
        await within(consumer.acknowledge(message))
    # seek by id: the messages after it (Shared: the one after it)
    await within(consumer.seek(ids[3]))
    out["after seek by id"] = (await within(consumer.receive())).data()
    # seek by timestamp: the first published at or after it
    await within(consumer.seek(got[4].publish_timestamp()))
    out["after seek by timestamp"] = (await within(consumer.receive())).data()
    await within(consumer.unsubscribe())
    out["unsubscribed: receive"] = await _error_of(consumer.receive())
    # the subscription is gone: a new one at Latest sees nothing old
    consumer = await within(client.subscribe(topic, "ops"))
    await within(producer.send(b"new"))
    out["new subscription"] = (await within(consumer.receive())).data()
    await within(client.close())
    return out


def test_consumer_operations_as_the_official_ones(pulsar_broker, pulsar_topic):
    url = pulsar_broker.service_url
    fast = run(_consumer_operations, fast_asyncio, pulsarfast, url, pulsar_topic + "_f")
    theirs = run(_consumer_operations, official_asyncio, official, url, pulsar_topic + "_o")
    assert fast == theirs
    assert fast["received"] == [b"%d" % i for i in range(6)]
    assert fast["negatively acknowledged comes again"] == b"2"


def test_reader_seek_and_has_message_available(pulsar_broker, pulsar_topic):
    async def main(pulsar_asyncio, package, topic):
        client = pulsar_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        producer = await within(client.create_producer(topic))
        ids = [await within(producer.send(b"%d" % i)) for i in range(4)]
        reader = await within(client.create_reader(topic, package.MessageId.earliest))
        out = [reader.topic() == "persistent://public/default/" + topic, reader.is_connected(),
               await within(reader.has_message_available())]
        out.append([(await within(reader.read_next())).data() for _ in range(4)])
        out.append(await within(reader.has_message_available()))
        await within(reader.seek(ids[1]))
        out.append((await within(reader.read_next())).data())
        await within(reader.close())
        await within(client.close())
        return out
    fast = run(main, fast_asyncio, pulsarfast, pulsar_topic + "_f")
    assert fast == run(main, official_asyncio, official, pulsar_topic + "_o")
    assert fast == [True, True, True, [b"0", b"1", b"2", b"3"], False, b"2"]


async def _redeliver_and_shutdown(pulsar_asyncio, url, topic) -> list[Any]:
    out: list[Any] = []
    client = pulsar_asyncio.Client(url, operation_timeout_seconds=5)
    producer = await within(client.create_producer(topic))
    consumer = await within(client.subscribe(topic, "redeliver"))
    await within(producer.send(b"once"))
    out.append((await within(consumer.receive())).data())
    consumer.redeliver_unacknowledged_messages()  # (not acknowledged: it comes again)
    out.append((await within(consumer.receive())).data())
    waiting = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0)
    client.shutdown()
    out.append(await _error_of(waiting))
    return out


def test_redeliver_unacknowledged_messages_and_shutdown(pulsar_broker, pulsar_topic):
    url = pulsar_broker.service_url
    fast = run(_redeliver_and_shutdown, fast_asyncio, url, pulsar_topic + "_f")
    assert fast == [b"once", b"once", ("asyncio", "AlreadyClosed")]
    theirs = run(_redeliver_and_shutdown, official_asyncio, url, pulsar_topic + "_o")
    assert theirs[:2] == fast[:2]
    # (the official client's receive pending at shutdown() fails with AlreadyClosed, as ours, or, on a
    # loaded machine, is never answered at all: seen in 3 of 6 runs beside a CPU hog)
    assert theirs[2] in (fast[2], "TimeoutError")


def _parameters(fn: Any) -> list[tuple[str, Any, Any]]:
    """Name, kind and default (an enum default by name) of each parameter."""
    out = []
    for p in inspect.signature(fn).parameters.values():
        default = p.default
        if hasattr(default, "name") and hasattr(default, "value"):
            default = ("enum", type(default).__name__, default.name)
        out.append((p.name, p.kind, default))
    return out


_TRANSACTION = [("transaction", inspect.Parameter.KEYWORD_ONLY, None)]
OUR_KEYWORDS = {("Client", "create_producer"): [("batching_eager", inspect.Parameter.KEYWORD_ONLY, False)],
                ("Producer", "send"): _TRANSACTION, ("Consumer", "acknowledge"): _TRANSACTION,
                ("Consumer", "acknowledge_cumulative"): _TRANSACTION}


def test_signatures_are_the_official_ones():
    for cls in ("Client", "Producer", "Consumer", "Reader", "PulsarException"):
        ours, theirs = getattr(fast_asyncio, cls), getattr(official_asyncio, cls)
        names = {n for n in vars(theirs) if not n.startswith("_") or n in ("__init__", "__str__")}
        assert names <= set(vars(ours)), cls
        for name in names:
            ours_fn, theirs_fn = getattr(ours, name), getattr(theirs, name)
            # (the official parameters, then pulsarfast's own keyword-only ones)
            assert _parameters(ours_fn) == _parameters(theirs_fn) + OUR_KEYWORDS.get((cls, name), []), (cls, name)
            assert inspect.iscoroutinefunction(ours_fn) == inspect.iscoroutinefunction(theirs_fn), (cls, name)
    for enum_name in ("InitialPosition", "CompressionType", "PartitionsRoutingMode", "BatchingType",
                      "ProducerAccessMode", "RegexSubscriptionMode", "ConsumerCryptoFailureAction"):
        ours_enum, theirs_enum = getattr(fast_asyncio, enum_name), getattr(official_asyncio, enum_name)
        assert ours_enum is getattr(pulsarfast, enum_name)
        assert {m.name: int(m) for m in ours_enum} == {n: int(m) for n, m in theirs_enum.__members__.items()}


def test_client_outside_a_running_loop_is_a_clear_error(pulsar_broker):
    with pytest.raises(RuntimeError, match="running event loop"):
        fast_asyncio.Client(pulsar_broker.service_url)


# ----------------------------------------------------------------------------- cancellation


def test_cancelled_receive_loses_no_message(pulsar_broker, pulsar_topic):
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "sub"))
        producer = await within(client.create_producer(pulsar_topic))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consumer.receive(), 0.2)
        await within(producer.send(b"after"))
        assert (await within(consumer.receive())).data() == b"after"
        # receives cancelled at every point of their course (before they start, while the take
        # waits, after it took its message): each message is received once, in order
        expected = [b"m%d" % k for k in range(8)]
        for payload in expected:
            await within(producer.send(payload))
        got, cancelled = [], 0
        for k in range(8):
            pending = asyncio.ensure_future(consumer.receive())
            for _ in range(k):
                await asyncio.sleep(0)
            pending.cancel()
            try:
                got.append((await within(pending)).data())
            except asyncio.CancelledError:
                cancelled += 1
        while len(got) < len(expected):
            got.append((await within(consumer.receive())).data())
        assert got == expected
        assert cancelled > 0
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consumer.receive(), 0.3)
        await within(client.close())
    run(main)


def test_cancelled_read_next_loses_no_message(pulsar_broker, pulsar_topic):
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        producer = await within(client.create_producer(pulsar_topic))
        reader = await within(client.create_reader(pulsar_topic, pulsarfast.MessageId.latest))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.read_next(), 0.2)
        await within(producer.send(b"after"))
        assert (await within(reader.read_next())).data() == b"after"
        await within(client.close())
    run(main)


def test_many_receivers_and_cancellations_deliver_each_message_once(pulsar_broker, pulsar_topic):
    count = 400

    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "sub", receiver_queue_size=10))
        producer = await within(client.create_producer(pulsar_topic))
        got: list[bytes] = []
        cancelled = 0

        async def receiver(index: int) -> None:
            nonlocal cancelled
            while len(got) < count:
                try:  # (short waits, many of them cancelled, some while a message is being taken)
                    message = await asyncio.wait_for(consumer.receive(), 0.001 * (1 + index % 7))
                except asyncio.TimeoutError:
                    cancelled += 1
                    continue
                got.append(message.data())
                await consumer.acknowledge(message)

        receivers = [asyncio.ensure_future(receiver(i)) for i in range(20)]
        sends = [producer.send(b"%d" % i) for i in range(count)]
        await within(asyncio.gather(*sends))
        await asyncio.wait_for(asyncio.gather(*receivers), 60)
        assert sorted(got) == sorted(b"%d" % i for i in range(count))
        assert len(got) == count
        assert cancelled > 0
        with pytest.raises(asyncio.TimeoutError):  # nothing more: no copy of any
            await asyncio.wait_for(consumer.receive(), 0.5)
        await within(client.close())
    run(main)


# ----------------------------------------------------------------------------- concurrency


def test_100_concurrent_sends(pulsar_broker, pulsar_topic):
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "sub"))
        producer = await within(client.create_producer(pulsar_topic))
        ids = await within(asyncio.gather(*[producer.send(b"%d" % i) for i in range(100)]))
        assert len(set(ids)) == 100
        got = [await within(consumer.receive()) for _ in range(100)]
        assert sorted(m.data() for m in got) == sorted(b"%d" % i for i in range(100))
        assert {m.message_id() for m in got} == set(ids)
        await within(client.close())
    run(main)


def test_an_eager_batch_goes_without_waiting_out_the_delay_when_none_is_on_its_way(pulsar_broker, pulsar_topic):
    # batching on (the asyncio API's default) with a delay no test waits out and batching_eager=True
    # (pulsarfast's own; off by default, as the official semantics: test_asyncio_official_semantics.py):
    # a send awaited alone goes at the end of the loop's turn; concurrent sends made in one turn share one batch
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "sub"))
        producer = await within(client.create_producer(pulsar_topic, batching_max_publish_delay_ms=600_000,
                                                       batching_eager=True))
        alone = [await within(producer.send(b"alone-%d" % i)) for i in range(3)]
        together = await within(asyncio.gather(*[producer.send(b"together-%d" % i) for i in range(50)]))
        entries = {(i.ledger_id(), i.entry_id()) for i in together}
        assert len(entries) < len(together)  # batched: fewer entries than messages
        assert sorted(i.batch_index() for i in together)[-1] > 0
        assert len({(i.ledger_id(), i.entry_id()) for i in alone}) == 3  # one batch each, none waited
        got = [await within(consumer.receive()) for _ in range(53)]
        assert [m.data() for m in got] == [b"alone-%d" % i for i in range(3)] + [b"together-%d" % i for i in range(50)]
        for message in got:
            await consumer.acknowledge(message)
        await within(client.close())
    run(main)


def test_sync_api_on_other_threads_is_not_blocked(pulsar_broker, pulsar_topic):
    """While the loop awaits a receive of pulsarfast.asyncio, a sync client on another thread
    produces and consumes; the loop's receive then gets what that thread sent."""
    done = threading.Event()
    errors: list[BaseException] = []

    def sync_side() -> None:
        try:
            client = pulsarfast.Client(pulsar_broker.service_url, backend="threads", operation_timeout_seconds=15)
            try:
                consumer = client.subscribe(pulsar_topic, "sync-sub")
                producer = client.create_producer(pulsar_topic)
                producer.send(b"from-thread")
                assert consumer.receive(timeout_millis=15_000).data() == b"from-thread"
            finally:
                client.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            done.set()

    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "async-sub"))
        receiving = asyncio.ensure_future(consumer.receive())
        thread = threading.Thread(target=sync_side)
        thread.start()
        message = await within(receiving)
        assert message.data() == b"from-thread"
        await within(asyncio.get_running_loop().run_in_executor(None, done.wait, WAIT))
        thread.join(WAIT)
        await within(client.close())
    run(main)
    assert done.is_set() and not errors, errors


def test_loop_keeps_running_while_a_receive_waits(pulsar_broker, pulsar_topic):
    async def main():
        client = fast_asyncio.Client(pulsar_broker.service_url, operation_timeout_seconds=15)
        consumer = await within(client.subscribe(pulsar_topic, "sub"))
        receiving = asyncio.ensure_future(consumer.receive())
        ticks = 0
        for _ in range(20):  # (the loop turns while the receive waits)
            await asyncio.sleep(0)
            ticks += 1
        assert not receiving.done() and ticks == 20
        producer = await within(client.create_producer(pulsar_topic))
        await within(producer.send(b"x"))
        assert (await within(receiving)).data() == b"x"
        await within(client.close())
    run(main)
