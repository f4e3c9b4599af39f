"""pulsarfast when the Pulsar broker crashes: SIGKILLed mid-stream and started again on the same
data dir (bookie journal and ledgers, RocksDB metadata store), the same ports and the same config,
on both backends, with batching on and off, and once with a 1 s send timeout and the restart held
back until every send made while the broker is down has failed (Result.Timeout, reported).

The client is given nothing: it must notice the dead connections, reconnect to the same service URL
by itself and resend what was waiting. What is checked is the contract of a send: every send gets
exactly one outcome; every send acknowledged to the caller (callback Result.Ok, or send() returned)
is consumed at least once from a durable subscription made before the stream; a send that could
not be made is reported as a failure, never dropped in silence. Duplicates are allowed (at least
once: acks in flight at the crash are lost with it, resent messages may have been persisted).

A dedicated broker (module scope) takes the kills: the session's broker is never touched. The
figures (sent, acknowledged, failed, consumed, duplicates, lost) go to the JUnit report as
properties: ``soak/report.py faults --pulsar`` collects them for docs/reliability.md.
"""
from __future__ import annotations

import functools
import signal

import pytest

import pulsarfast as pulsar
from msgengine.runtime import get_backend
from tests.support.pulsar_broker import PulsarBroker, require_pulsar_lib
from tests.support.pulsar_streams import Collector, Sender
from tests.support.waiting import run_blocking, wait_for

# (one worker runs the module: its broker is one more JVM for the run, not one per worker)
pytestmark = [pytest.mark.timeout(420), pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("pulsar_crash")]

WAIT = 30.0
#: the broker's restart on this shared 2-core machine, and the client's reconnect backoff after it
RECOVERY = 240.0
RECEIVE_MS = 200
STREAM = 3000
KILL_AFTER = 400  # outcomes before the kill: part of the stream is acknowledged before the crash

wait_for = functools.partial(wait_for, timeout=WAIT)


@pytest.fixture(scope="module")
def crash_broker():
    """A broker of this module's own, killed and restarted by its tests."""
    require_pulsar_lib()
    broker = PulsarBroker()
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()  # (its data goes with it)


def body(index):
    return b"c-%05d" % index


#: (batching, sends time out while the broker is down): the sends wait through the restart, or
#: (with a 1 s send timeout, the broker restarted only once every send has its outcome) the ones
#: made while it was down all fail with Result.Timeout, reported, none acknowledged and lost
CASES = [(True, False), (False, False), (True, True)]


@pytest.mark.parametrize("batching,time_out", CASES, ids=["batching", "no-batching", "batching-sends-time-out"])
def test_broker_killed_and_restarted_on_its_data_loses_no_acknowledged_send(
        crash_broker, pulsar_topic, backend, batching, time_out, record_property, monkeypatch):
    # (the client's attempts to reconnect back off to at most 2 s instead of 30: a broker back after
    # a restart is found at once, instead of up to 30 s later; the backoff is not what is tested)
    monkeypatch.setattr(pulsar.client, "MAX_RECONNECT_SECONDS", 2.0)
    broker = crash_broker
    b = get_backend(backend)
    service_url = broker.service_url
    client = pulsar.Client(service_url, backend=backend, operation_timeout_seconds=30, connection_timeout_ms=3000)
    collector = None
    try:
        # the durable subscription exists before the first message
        consumer = client.subscribe(pulsar_topic, "crash", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(
            pulsar_topic, block_if_queue_full=True, max_pending_messages=500,
            send_timeout_millis=1000 if time_out else int(RECOVERY * 1000),
            batching_enabled=batching, batching_max_messages=50, batching_max_publish_delay_ms=5)
        collector = Collector(backend, consumer, RECEIVE_MS, ack_failures_are_duplicates=True)

        resume = b.event()
        sender = Sender(backend, producer, STREAM, STREAM // 3, resume, WAIT, body=body)
        wait_for(lambda: sender.callbacks >= KILL_AFTER, backend, message="the stream to start")
        resume.set()  # the sender goes on: sends are in flight when the broker dies
        wait_for(lambda: sender.callbacks >= KILL_AFTER + 50 or sender.done(), backend,
                 message="sends in flight after the resume")
        sender.crashed = True
        acked_before = len(sender.acknowledged())
        pid = broker.pid
        code = run_blocking(backend, functools.partial(broker.kill, keep_data=True))
        assert code == -signal.SIGKILL, code  # a crash, not a clean stop
        at_kill = sender.callbacks
        assert at_kill < STREAM  # the crash hit the stream in the middle
        if time_out:  # every send gets its outcome while the broker is down: what is left fails
            wait_for(sender.done, backend, timeout=RECOVERY,
                     message=lambda: "all %d send callbacks with the broker down, got %d" % (STREAM, sender.callbacks))
            assert sender.failed(), "sends made with the broker down must fail"
            assert {res for r in sender.failed().values() for res, _mid in r} == {pulsar.Result.Timeout}

        run_blocking(backend, broker.start)  # same data dir, ports and config
        assert broker.pid != pid and broker.service_url == service_url
        restarts = broker.restarts

        # every send gets its one outcome; the client reconnected by itself
        wait_for(sender.done, backend, timeout=RECOVERY,
                 message=lambda: "all %d send callbacks, got %d (%d at the kill; sender errors %r); broker log:\n%s"
                 % (STREAM, sender.callbacks, at_kill, sender.errors, broker.log_tail(2000)))
        assert sender.errors == []
        assert sorted(sender.results) == list(range(STREAM))
        assert all(len(r) == 1 for r in sender.results.values())  # one outcome per send, never two
        wait_for(lambda: producer.is_connected() and consumer.is_connected(), backend, timeout=RECOVERY,
                 message="producer and consumer connected again")
        acked = sender.acknowledged()
        failed = sender.failed()
        assert all(res != pulsar.Result.Ok and mid is None for r in failed.values() for res, mid in r)
        assert all(mid is not None for i in acked for _res, mid in sender.results[i])
        if not time_out:
            assert sender.ok_after_crash > 0  # sends in flight at the crash or made after it went through

        # every acknowledged send is consumed at least once
        want = {body(i) for i in acked}
        wait_for(lambda: want <= collector.bodies, backend, timeout=RECOVERY,
                 message=lambda: "the consumer to receive all %d acknowledged sends; missing %d, e.g. %r (errors %r)"
                 % (len(want), len(want - collector.bodies), sorted(want - collector.bodies)[:5], collector.errors))
        # and after the crash the client works as before
        assert producer.send(b"after-crash") is not None
        wait_for(lambda: b"after-crash" in collector.bodies, backend, message="a send after the crash to arrive")
        assert collector.errors == []
        assert collector.bodies <= {body(i) for i in range(STREAM)} | {b"after-crash"}

        record_property("fault", "broker SIGKILLed mid-stream, restarted on its data (%s%s, %s)"
                        % ("batching" if batching else "no batching", ", 1 s send timeout" if time_out else "", backend))
        record_property("sent", STREAM)
        record_property("acknowledged", len(acked))
        record_property("acknowledged_before_crash", acked_before)
        record_property("failed", len(failed))
        record_property("consumed", len(collector.bodies & {body(i) for i in range(STREAM)}))
        record_property("deliveries", collector.deliveries)
        record_property("duplicates", collector.deliveries - len(collector.bodies))
        record_property("lost", len(want - collector.bodies))
        record_property("restart_seconds", round(broker.start_seconds, 1))
        record_property("restarts", restarts)
    finally:
        if collector is not None:
            collector.stop()
        client.close()
