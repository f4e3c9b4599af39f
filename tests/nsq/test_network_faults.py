# Network faults between the client and a real nsqd, through tests/support/faultproxy.py,
# on both backends: a stalled link (hold), a cut link (FIN), a reset in the
# middle of a frame (RST after n bytes, both directions) and a slow link
# (delay). A Reader and a Writer each go through their own proxy while
# messages flow. For every fault: each message nsqd has is eventually
# consumed, and no publish that nsqd acknowledged (OK) is lost.
from __future__ import annotations

import functools
import collections
import os

import pytest

import nsq
from nsq.errors import ConnectionClosedError
from msgengine.runtime import get_backend

from tests.support import waiting
from tests.support.scanned_channels import nsqd_with_channels

#: Messages published per test (half before the fault, half during and after it).
N_MESSAGES = int(os.environ.get("NSQ_NET_FAULT_MESSAGES", "10000"))
CHANNEL = "ch"
HEARTBEAT = 1  # seconds: the client must notice a dead link within two of these
DEADLINE = 30.0 + N_MESSAGES / 1000.0

pytestmark = pytest.mark.timeout(int(60 + 3 * DEADLINE))

# nsqd redelivers the messages in flight on a connection that went away only when
# they time out (after its --msg-timeout), and nsqd starts with the test's channel
# so that it times them out from the start (tests/support/scanned_channels.py).
# Where the link dies at once (cut, reset) they time out once: 1 s, the least a
# client may ask nsqd for, is ample for a handler that only counts. Where it stalls,
# nsqd keeps sending into the held link for the two heartbeats the client takes to
# give up, and every timeout there is one more attempt: 2 s keeps those attempts
# well under the Reader's max_tries.
MSG_TIMEOUT = "2s"
MSG_TIMEOUT_WHEN_THE_LINK_DIES = "1s"
# nsqd holds the messages it has for the Reader up to this long (ms) before it flushes them
# when no more come: 25, its least, rather than pynsq's 250, which every lull would wait out.
OUTPUT_BUFFER_TIMEOUT = 25


wait_for = functools.partial(waiting.wait_for, timeout=DEADLINE)


def http(backend, fn, *args):
    return get_backend(backend).run_blocking(fn, *args)


def report(record_property, **figures):
    for key, value in figures.items():
        record_property(key, value)
    print(" ".join("%s=%s" % item for item in figures.items()))


class Publisher:
    """Pipelined publishes with callbacks through a Writer; remembers every answer."""

    def __init__(self, writer, topic, backend, limit=500):
        self.writer = writer
        self.topic = topic
        self.backend = get_backend(backend)
        self.limit = limit
        self.sent = 0
        self.ok: set = set()
        self.errors: collections.Counter = collections.Counter()
        self.answers: collections.Counter = collections.Counter()

    @property
    def answered(self):
        return sum(self.answers.values())

    def _callback(self, body):
        def callback(conn, data):
            self.answers[body] += 1
            if data == b"OK":
                self.ok.add(body)
            else:
                self.errors[type(data).__name__] += 1

        return callback

    def publish(self, bodies):
        for i, body in enumerate(bodies):
            while self.sent - self.answered >= self.limit:
                self.backend.sleep(0.001)
            self.sent += 1
            self.writer.pub(self.topic, body, self._callback(body))
            if i % 100 == 0:
                self.backend.sleep(0)

    def wait_answered(self):
        wait_for(lambda: self.answered == self.sent, self.backend.name,
                 message=lambda: "every publish answered (%d of %d)" % (self.answered, self.sent))
        assert all(count == 1 for count in self.answers.values()), "a publish was answered twice"


class Rig:
    """nsqd, a Reader through one proxy and a Writer through another."""

    def __init__(self, nsqd, topic, backend, fault_proxy_factory, max_in_flight=50):
        self.nsqd = nsqd
        self.topic = topic
        self.backend = backend
        self.seen: collections.Counter = collections.Counter()
        self.reader_proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
        self.writer_proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
        nsqd.create_topic(topic)
        nsqd.create_channel(topic, CHANNEL)
        self.reader = nsq.Reader(
            topic, CHANNEL, self._handle, nsqd_tcp_addresses=[self.reader_proxy.address],
            max_in_flight=max_in_flight, max_reconnect_delay=0.5, heartbeat_interval=HEARTBEAT,
            output_buffer_timeout=OUTPUT_BUFFER_TIMEOUT, backend=backend,
        )
        self.writer = nsq.Writer([self.writer_proxy.address], reconnect_interval=0.5,
                                 heartbeat_interval=HEARTBEAT, backend=backend)
        self.publisher = Publisher(self.writer, topic, backend)

    def _handle(self, message):
        self.seen[message.body] += 1
        return True

    def start(self):
        self.reader.start()
        wait_for(lambda: self.reader_conn() is not None, self.backend, message="the Reader to connect")
        wait_for(lambda: self.writer_conn() is not None, self.backend, message="the Writer to connect")

    def reader_conn(self):
        conns = [c for c in list(self.reader.conns.values()) if c.is_connected()]
        return conns[0] if conns else None

    def writer_conn(self):
        conns = [c for c in list(self.writer.conns.values()) if c.is_connected()]
        return conns[0] if conns else None

    def close(self):
        self.reader.close(timeout=5)
        self.writer.close()

    def check_nothing_lost(self, record_property, fault, **extra):
        """Every acknowledged publish consumed; every message nsqd took consumed; nsqd drained."""
        publisher = self.publisher
        publisher.wait_answered()
        wait_for(lambda: publisher.ok <= set(self.seen), self.backend,
                 message=lambda: "acknowledged messages (%d not consumed)" % len(publisher.ok - set(self.seen)))

        def drained():
            c = http(self.backend, self.nsqd.channel_stats, self.topic, CHANNEL) or {}
            return (c.get("depth") == 0 and c.get("in_flight_count") == 0 and c.get("deferred_count") == 0
                    and c.get("message_count") == len(self.seen))

        wait_for(drained, self.backend, message=lambda: "nsqd's channel drained: %r / %d seen" % (
            {k: v for k, v in (http(self.backend, self.nsqd.channel_stats, self.topic, CHANNEL) or {}).items()
             if k != "clients"}, len(self.seen)))
        in_nsqd = http(self.backend, self.nsqd.message_count, self.topic)
        lost = len(publisher.ok - set(self.seen))
        dups = sum(c - 1 for c in self.seen.values() if c > 1)
        report(
            record_property, fault="%s (%s)" % (fault, self.backend), published=publisher.sent,
            acknowledged=len(publisher.ok), errors=sum(publisher.errors.values()), in_nsqd=in_nsqd,
            consumed=len(self.seen), duplicates=dups, lost=lost, **extra,
        )
        assert lost == 0
        assert in_nsqd == len(self.seen)  # whatever nsqd took (acknowledged or not) was consumed


@pytest.fixture
def rig(nsqd_factory, topic, backend, fault_proxy_factory):
    made = []

    def make(msg_timeout=MSG_TIMEOUT, **kwargs):
        nsqd = nsqd_with_channels(nsqd_factory, {topic: [CHANNEL]}, "--msg-timeout=%s" % msg_timeout)
        r = Rig(nsqd, topic, backend, fault_proxy_factory, **kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        for proxy in (r.reader_proxy, r.writer_proxy):
            proxy.release()
            proxy.set_delay(0)
        r.close()


def bodies(n, prefix):
    return [b"%s%07d" % (prefix.encode(), i) for i in range(n)]


# -- stall ---------------------------------------------------------------------------------


def test_stalled_link_is_noticed_by_heartbeats_and_nothing_is_lost(rig, backend, record_property):
    r = rig()
    r.start()
    half = N_MESSAGES // 2
    r.publisher.publish(bodies(half, "a"))
    r.publisher.wait_answered()
    wait_for(lambda: len(r.seen) >= half // 4, backend, message="consumption to start")
    reader_conn, writer_conn = r.reader_conn(), r.writer_conn()

    r.reader_proxy.hold()
    r.writer_proxy.hold()
    stalled = bodies(20, "s")
    r.publisher.publish(stalled)  # these wait on a link that forwards nothing
    # Nothing arrives any more, not even nsqd's heartbeats: both clients give the
    # connection up on their own (the proxies keep the TCP connections open).
    wait_for(lambda: reader_conn.closed() and writer_conn.closed(), backend, timeout=10 * HEARTBEAT,
             message="the stalled connections to be given up")
    assert r.reader_proxy.active_connections >= 1  # still held open: only heartbeats could tell
    for conn in (reader_conn, writer_conn):
        assert isinstance(conn.close_error, ConnectionClosedError)
        assert "two heartbeat intervals" in str(conn.close_error)
    wait_for(lambda: r.publisher.answered == r.publisher.sent, backend, message="stalled publishes answered")
    assert not r.publisher.ok & set(stalled)  # none could have been acknowledged
    assert r.publisher.errors["ConnectionClosedError"] >= 1

    r.reader_proxy.release()
    r.writer_proxy.release()
    wait_for(lambda: r.reader_conn() not in (None, reader_conn), backend, message="the Reader to reconnect")
    wait_for(lambda: r.writer_conn() not in (None, writer_conn), backend, message="the Writer to reconnect")
    r.publisher.publish(bodies(N_MESSAGES - half, "b"))
    r.check_nothing_lost(record_property, "link stalled (hold) mid-stream")


# -- cut -----------------------------------------------------------------------------------


def test_cut_link_reconnects_and_nothing_is_lost(rig, backend, record_property):
    r = rig(msg_timeout=MSG_TIMEOUT_WHEN_THE_LINK_DIES)
    r.start()
    half = N_MESSAGES // 2
    r.publisher.publish(bodies(half, "a"))
    wait_for(lambda: len(r.seen) >= half // 4, backend, message="consumption to start")
    reader_conn, writer_conn = r.reader_conn(), r.writer_conn()
    # Cut both links while publishes are in flight and messages are being consumed.
    r.publisher.publish(bodies(200, "c"))
    assert r.reader_proxy.cut() == 1
    r.writer_proxy.cut()
    wait_for(lambda: reader_conn.closed() and writer_conn.closed(), backend, message="the cut to be seen")
    assert isinstance(reader_conn.close_error, (ConnectionClosedError, OSError))
    wait_for(lambda: r.reader_conn() not in (None, reader_conn), backend, message="the Reader to reconnect")
    r.publisher.publish(bodies(N_MESSAGES - half, "b"))
    r.check_nothing_lost(record_property, "link cut (FIN) mid-stream")


# -- reset in the middle of a frame ----------------------------------------------------------

BIG = 16 * 1024
BIG_FRAME = 4 + 4 + 26 + BIG  # size, frame type, message header, body


def test_reset_in_the_middle_of_a_frame(rig, backend, record_property):
    r = rig(max_in_flight=10, msg_timeout=MSG_TIMEOUT_WHEN_THE_LINK_DIES)
    r.start()
    reader_conn, writer_conn = r.reader_conn(), r.writer_conn()
    n_big = max(40, N_MESSAGES // 100)

    def big(prefix):
        return [b"%s%06d" % (prefix, i) + b"x" * (BIG - 7) for i in range(n_big)]

    # Downstream, to the Reader: RST halfway through the fourth message frame
    # (counted from now, while the link is idle: at most a few 19-byte heartbeats
    # come first).
    r.reader_proxy.reset_after(3 * BIG_FRAME + BIG // 2, "downstream", once=True)
    r.publisher.publish(big(b"r"))
    wait_for(reader_conn.closed, backend, message="the reset of the Reader's connection")
    assert r.reader_proxy.resets_fired == 1
    assert isinstance(reader_conn.close_error, (ConnectionClosedError, OSError))
    # The reader's decoder held part of a frame when the connection died: the reset
    # really was mid-frame, and the partial frame was dropped, not handed on.
    assert 0 < reader_conn.protocol.buffered_bytes() < BIG_FRAME
    assert all(len(body) == BIG for body in r.seen)

    # Upstream, from the Writer: RST inside the third message body it sends.
    r.publisher.wait_answered()
    r.writer_proxy.reset_after(2 * BIG + BIG // 2, "upstream", once=True)
    r.publisher.publish(big(b"w"))
    wait_for(writer_conn.closed, backend, message="the reset of the Writer's connection")
    assert r.writer_proxy.resets_fired == 1
    assert isinstance(writer_conn.close_error, (ConnectionClosedError, OSError))

    wait_for(lambda: r.reader_conn() not in (None, reader_conn), backend, message="the Reader to reconnect")
    r.publisher.publish(bodies(N_MESSAGES // 2, "b"))
    r.check_nothing_lost(record_property, "connection reset (RST) mid-frame", big_messages=2 * n_big)


# -- delay ---------------------------------------------------------------------------------


def test_slow_link_delivers_everything_without_reconnecting(rig, backend, record_property):
    r = rig(max_in_flight=200)
    delay = HEARTBEAT / 10
    r.reader_proxy.set_delay(delay)
    r.writer_proxy.set_delay(delay)
    r.start()
    reader_conn, writer_conn = r.reader_conn(), r.writer_conn()
    # Each round trip takes two delays: fewer messages keep the test short.
    r.publisher.publish(bodies(max(500, N_MESSAGES // 10), "d"))
    r.check_nothing_lost(record_property, "every chunk delayed %.1fs both ways" % delay)
    # A slow link is not a dead one: the first connections served everything.
    assert reader_conn.is_connected() and writer_conn.is_connected()
    assert r.reader_proxy.connections_accepted == 1 and r.writer_proxy.connections_accepted == 1
