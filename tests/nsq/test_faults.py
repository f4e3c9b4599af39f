# Server faults against real nsqd, on both backends: nsqd stopped (SIGTERM) or
# killed (SIGKILL, disk-only queue) in the middle of consuming, and one of three
# nsqd killed while a Writer publishes to all three. What must hold: every
# message is handled at least once (duplicates are counted and printed, never
# losses), every publish is answered, and every publish nsqd acknowledged is
# still in nsqd after the restart.
#
# The figures (published, handled, duplicates, lost) are attached with
# record_property, so `soak/report.py faults` can collect them from JUnit XML.
# NSQ_FAULT_MESSAGES makes the same tests run at soak size.
from __future__ import annotations

import functools
import collections
import os
import time

import pytest

import nsq
from nsq.errors import ConnectionClosedError
from msgengine.runtime import get_backend

from tests.support import waiting

#: Messages per test in `make test`; `make soak` runs these tests with more.
N_MESSAGES = int(os.environ.get("NSQ_FAULT_MESSAGES", "50000"))
#: Messages published through the Writer while one of three nsqd is killed.
N_PUBLISH = int(os.environ.get("NSQ_FAULT_PUBLISHES", "30000"))
CHANNEL = "ch"
# Long enough for the soak sizes too (the tests finish in seconds at the default sizes).
DEADLINE = 30.0 + max(N_MESSAGES, N_PUBLISH) / 2000.0

pytestmark = pytest.mark.timeout(int(60 + 4 * DEADLINE))

# Keeps nsqd's own guarantee at-least-once across SIGKILL: nsqd persists a disk
# queue's read position every --sync-every messages / --sync-timeout, and a
# message whose read position was persisted while it was still in flight is
# gone after a SIGKILL (nsqd keeps in-flight messages in memory only). With
# these values the read position is persisted only by the graceful restart the
# test does before consuming, so everything read after it is delivered again.
NO_READ_SYNC = ("--sync-every=1000000000", "--sync-timeout=1h")

# nsqd holds a few messages up to this long (ms) before it flushes them: 25, its least,
# rather than pynsq's 250, which the last messages of a stream would wait out.
OUTPUT_BUFFER_TIMEOUT = 25


wait_for = functools.partial(waiting.wait_for, timeout=DEADLINE)


def http(backend, fn, *args):
    """The harness's blocking HTTP helpers, off the gevent hub."""
    return get_backend(backend).run_blocking(fn, *args)


def bodies(n, prefix="m"):
    return [b"%s%08d" % (prefix.encode(), i) for i in range(n)]


def duplicates(counter):
    return {body: count for body, count in counter.items() if count > 1}


def report(record_property, **figures):
    for key, value in figures.items():
        record_property(key, value)
    print(" ".join("%s=%s" % item for item in figures.items()))


def published_to_channel(nsqd, topic, n):
    """Create the channel first and publish n messages; returns their bodies once all are in the channel."""
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, CHANNEL)
    expected = bodies(n)
    nsqd.http_mpub(topic, expected)
    deadline = time.monotonic() + DEADLINE
    while (nsqd.channel_stats(topic, CHANNEL) or {}).get("depth") != n:
        assert time.monotonic() < deadline, "nsqd did not move %d messages to the channel" % n
        time.sleep(0.02)
    return expected


# -- nsqd stopped or killed while a Reader consumes -----------------------------------


class AttemptCountingReader(nsq.Reader):
    """Counts the connection attempts that came to nothing (each goes through pynsq's
    connect_to_nsqd hook; None: failed, or already connected)."""

    fruitless_attempts = 0

    def connect_to_nsqd(self, host, port):
        conn = super().connect_to_nsqd(host, port)
        if conn is None:
            self.fruitless_attempts += 1
        return conn


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_nsqd_restart_mid_consumption_loses_nothing(nsqd_factory, topic, backend, how, record_property):
    if how == "sigterm":
        nsqd = nsqd_factory("--msg-timeout=2s")  # default memory queue: SIGTERM must flush it
    else:
        nsqd = nsqd_factory("--msg-timeout=2s", "--mem-queue-size=0", *NO_READ_SYNC)
    expected = published_to_channel(nsqd, topic, N_MESSAGES)
    if how == "sigkill":
        nsqd.restart()  # persists the queue's positions once, before consuming
    b = get_backend(backend)
    seen = collections.Counter()
    pause_at = N_MESSAGES // 3
    reached = b.event()
    resume = b.event()

    def handler(message):
        seen[message.body] += 1
        if len(seen) == pause_at and not reached.is_set():
            # Hold this handler (with messages in flight and more queued in the
            # client) until nsqd is down: the fault lands mid-consumption.
            reached.set()
            resume.wait(DEADLINE)
        return True

    reader = AttemptCountingReader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=100,
        max_reconnect_delay=0.5, heartbeat_interval=1, output_buffer_timeout=OUTPUT_BUFFER_TIMEOUT, backend=backend,
    )
    try:
        reader.start()
        wait_for(reached.is_set, backend, message="the first third of the messages")
        first_conn = next(iter(reader.conns.values()))
        code = nsqd.stop() if how == "sigterm" else nsqd.kill()
        assert code == (0 if how == "sigterm" else -9)
        wait_for(first_conn.closed, backend, message="the client to see nsqd go away")
        assert isinstance(first_conn.close_error, (ConnectionClosedError, OSError)), repr(first_conn.close_error)
        resume.set()  # the held handler and the queued messages go on while nsqd is down
        attempts = reader.fruitless_attempts  # (nothing is connected now: the next one fails)
        wait_for(lambda: reader.fruitless_attempts > attempts, backend,
                 message="a reconnection attempt of the Reader to fail while nsqd is down")
        nsqd.start()
        wait_for(
            lambda: any(c is not first_conn and c.is_connected() for c in list(reader.conns.values())),
            backend, message="the Reader to reconnect to the restarted nsqd",
        )
        wait_for(lambda: len(seen) == N_MESSAGES, backend, message=lambda: "all messages (%d seen)" % len(seen))

        def drained():
            c = http(backend, nsqd.channel_stats, topic, CHANNEL) or {}
            return c.get("depth") == 0 and c.get("in_flight_count") == 0 and c.get("deferred_count") == 0

        wait_for(drained, backend, message="nsqd to have every message finished")
    finally:
        resume.set()
        reader.close(timeout=5)
    assert set(seen) == set(expected)  # handled at least once: none lost ...
    dups = duplicates(seen)
    lost = len(set(expected) - set(seen))
    report(
        record_property, fault="nsqd %s and restart mid-consumption (%s)" % (how.upper(), backend),
        published=len(expected), handled=sum(seen.values()), distinct=len(seen), duplicates=sum(dups.values()) - len(dups),
        lost=lost,
    )
    assert lost == 0
    assert not set(seen) - set(expected)  # ... and nothing invented


# -- one of three nsqd killed while a Writer publishes ----------------------------------


def test_one_of_three_nsqd_killed_while_publishing(nsqd_factory, topic, backend, record_property):
    servers = [nsqd_factory("--mem-queue-size=0") for _ in range(3)]
    for server in servers:
        # nsqd writes a PUB to its disk queue before answering OK, and after a SIGKILL
        # it salvages what its files hold beyond the last synced position, provided
        # the queue's metadata file exists: a queue that never synced (less than
        # --sync-every messages or --sync-timeout old) is rewritten from position 0,
        # losing what was there. A graceful restart writes that file once.
        server.create_topic(topic)
        server.restart()
    victim = servers[1]
    by_port = {s.tcp_port: s for s in servers}
    b = get_backend(backend)
    writer = nsq.Writer([s.tcp_address for s in servers], reconnect_interval=0.5, backend=backend)
    ok: dict[int, set] = {s.tcp_port: set() for s in servers}
    errors: collections.Counter = collections.Counter()
    answered = collections.Counter()
    state = {"outstanding": 0}
    expected = bodies(N_PUBLISH, prefix="w")

    def answer(body):
        def callback(conn, data):
            answered[body] += 1
            state["outstanding"] -= 1
            if data == b"OK":
                ok[conn.port].add(body)
            else:
                assert isinstance(data, nsq.Error), data
                errors[type(data).__name__] += 1

        return callback

    try:
        assert wait_for(lambda: len(writer.conns) == 3, b.name, message="the Writer to connect to all three")
        for i, body in enumerate(expected):
            if i == N_PUBLISH // 3:
                victim.kill()
            elif i == 2 * N_PUBLISH // 3:
                victim.start()  # and the last third goes to all three again
                wait_for(lambda: len(writer.conns) == 3, backend, message="the Writer to reconnect")
            while state["outstanding"] >= 1000:  # keep the pipeline bounded
                b.sleep(0.001)
            state["outstanding"] += 1
            writer.pub(topic, body, answer(body))
            if i % 200 == 0:
                b.sleep(0)
        wait_for(lambda: sum(answered.values()) == N_PUBLISH, backend,
                 message=lambda: "every publish answered (%d of %d)" % (sum(answered.values()), N_PUBLISH))
    finally:
        writer.close()
    assert all(count == 1 for count in answered.values())  # exactly one answer each: none hangs
    assert sum(len(s) for s in ok.values()) + sum(errors.values()) == N_PUBLISH
    assert ok[victim.tcp_port], "nothing was acknowledged by the nsqd that was killed"

    # Every acknowledged message is in the nsqd that acknowledged it (the killed one
    # restarted from its disk queue): consume everything and compare.
    found = {s.tcp_port: collections.Counter() for s in servers}
    readers = []
    try:
        for server in servers:
            counter = found[server.tcp_port]

            def handler(message, counter=counter):
                counter[message.body] += 1
                return True

            reader = nsq.Reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[server.tcp_address],
                                max_in_flight=200, max_reconnect_delay=0.5,
                                output_buffer_timeout=OUTPUT_BUFFER_TIMEOUT, backend=backend)
            readers.append(reader)
            reader.start()
        for port, acked in ok.items():
            wait_for(lambda: acked <= set(found[port]), backend,
                     message=lambda: "acknowledged messages in nsqd :%d (%d missing)" % (port, len(acked - set(found[port]))))
    finally:
        for reader in readers:
            reader.close(timeout=5)
    lost = sum(len(acked - set(found[port])) for port, acked in ok.items())
    report(
        record_property, fault="one of three nsqd SIGKILLed while publishing (%s)" % backend,
        published=N_PUBLISH, acknowledged=sum(len(s) for s in ok.values()),
        acknowledged_by_killed=len(ok[victim.tcp_port]), errors=sum(errors.values()),
        error_types=dict(errors), stored=sum(len(c) for c in found.values()), lost=lost,
    )
    assert lost == 0
    assert by_port[victim.tcp_port].running
