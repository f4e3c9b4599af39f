"""pulsarfast's engine on the asyncio backend (msgengine.aio, ``backend="asyncio"``) against the real
broker: the sync API's calls awaited through ``run_sync`` from coroutines, with no OS thread of the
client's, every callback (send callbacks, the message listener, batching timers) on the loop's
thread, the loop free to run other tasks while a call waits, and a call from another OS thread
entering through the door."""
from __future__ import annotations

import asyncio
import threading

import pytest

import pulsarfast as pulsar
from msgengine.aio import BlockingCallError, run_sync

pytestmark = pytest.mark.timeout(120)

WAIT = 15.0


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def test_a_round_trip_on_the_loop_with_no_thread_of_the_client(pulsar_broker, pulsar_topic):
    async def main():
        threads = threading.active_count()
        ticks = []

        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        client = await run_sync(pulsar.Client, pulsar_broker.service_url, backend="asyncio",
                                operation_timeout_seconds=15)
        try:
            consumer = await run_sync(client.subscribe, pulsar_topic, "loop")
            producer = await run_sync(client.create_producer, pulsar_topic)
            ids = [await run_sync(producer.send, b"m-%d" % i) for i in range(20)]
            assert [i.entry_id() for i in ids] == list(range(ids[0].entry_id(), ids[0].entry_id() + 20))
            got = []
            for _ in range(20):
                message = await run_sync(consumer.receive, int(WAIT * 1000))
                got.append(message.data())
                await run_sync(consumer.acknowledge, message)
            assert got == [b"m-%d" % i for i in range(20)]
            assert threading.active_count() == threads  # (the connection is a task of the loop)
            ticks.clear()
            with pytest.raises(pulsar.Timeout):
                await run_sync(consumer.receive, 300)  # (its task waits; the loop goes on)
            assert len(ticks) > 5
        finally:
            await run_sync(client.close)
            ticking.cancel()

    run(main())


def test_callbacks_and_the_listener_run_on_the_loops_thread(pulsar_broker, pulsar_topic):
    async def main():
        loop_thread = threading.get_ident()
        client = await run_sync(pulsar.Client, pulsar_broker.service_url, backend="asyncio",
                                operation_timeout_seconds=15)
        heard = asyncio.Queue()
        try:
            def listener(consumer, message):
                heard.put_nowait((threading.get_ident(), message.data()))
                consumer.acknowledge(message)

            await run_sync(client.subscribe, pulsar_topic, "listening", message_listener=listener)
            producer = await run_sync(client.create_producer, pulsar_topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=5)
            outcomes = asyncio.Queue()

            def sent(result, message_id):
                outcomes.put_nowait((threading.get_ident(), result))

            for i in range(5):
                await run_sync(producer.send_async, b"b-%d" % i, sent)  # (the batch closes on its timer)
            for _ in range(5):
                assert await asyncio.wait_for(outcomes.get(), WAIT) == (loop_thread, pulsar.Result.Ok)
            bodies = []
            for _ in range(5):
                thread, body = await asyncio.wait_for(heard.get(), WAIT)
                assert thread == loop_thread
                bodies.append(body)
            assert bodies == [b"b-%d" % i for i in range(5)]
        finally:
            await run_sync(client.close)

    run(main())


def test_a_call_from_another_thread_enters_through_the_door(pulsar_broker, pulsar_topic):
    async def main():
        client = await run_sync(pulsar.Client, pulsar_broker.service_url, backend="asyncio",
                                operation_timeout_seconds=15)
        try:
            producer = await run_sync(client.create_producer, pulsar_topic)
            consumer = await run_sync(client.subscribe, pulsar_topic, "door")
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, producer.send, b"from a thread")  # (blocking, on its own thread)
            message = await run_sync(consumer.receive, int(WAIT * 1000))
            assert message.data() == b"from a thread"
            with pytest.raises(BlockingCallError):
                producer.send(b"on the loop, outside a task")  # (would freeze the loop: refused)
        finally:
            await run_sync(client.close)

    run(main())


def test_clients_one_after_another_on_one_loop(pulsar_broker, pulsar_topic):
    """A closed client's sockets leave the loop's selector (a socket opened next gets the same
    descriptor number) and wake the task reading them."""
    async def main():
        for round_ in range(3):
            client = await run_sync(pulsar.Client, pulsar_broker.service_url, backend="asyncio",
                                    operation_timeout_seconds=15)
            try:
                consumer = await run_sync(client.subscribe, pulsar_topic, "again-%d" % round_)
                producer = await run_sync(client.create_producer, pulsar_topic)
                await run_sync(producer.send, b"round %d" % round_)
                message = await run_sync(consumer.receive, int(WAIT * 1000))
                assert message.data() == b"round %d" % round_
            finally:
                await run_sync(client.close)
        engine_tasks = [task for task in asyncio.all_tasks() if task.get_name().startswith("msgengine-")]
        await asyncio.wait_for(asyncio.gather(*engine_tasks, return_exceptions=True), WAIT)  # (each one ends)

    run(main())
