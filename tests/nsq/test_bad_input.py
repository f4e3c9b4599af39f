# Bad input from both sides, on both backends.
#
# A hostile or broken "server": a FaultProxy in front of a real nsqd injects
# garbage into a Reader's idle connection (an oversized frame, a frame type that
# does not exist, a 2 GB length prefix, a message frame shorter than its header,
# a truncated frame followed by EOF). Each must end that connection with a clear
# error, without a hang and without allocating the declared size (tracemalloc),
# and the Reader must reconnect and go on consuming.
#
# User mistakes: bad names, bodies that are not bytes, negative or huge RDY and
# delay values, conflicting options. Each must raise an nsq.Error that is also a
# ValueError or TypeError, before a byte reaches the wire: the proxy counts the
# bytes, and nsqd still has the connection open and its counts unchanged.
from __future__ import annotations

import functools
import collections
import struct
import tracemalloc

import pytest

import nsq
from nsq import codec
from nsq.conn import Connection
from nsq.errors import (
    ConfigError,
    ConnectionClosedError,
    InvalidArgumentError,
    InvalidBodyError,
    MessageTooLargeError,
    ProtocolError,
)
from msgengine.runtime import get_backend

from tests.support import waiting

WAIT = 15.0
CHANNEL = "ch"
MAX_FRAME = codec.DEFAULT_MAX_FRAME_SIZE
#: Python memory the client may use while it meets the garbage (all threads
#: traced); the frames below declare sizes of 10 MB to 4 GB.
PEAK_LIMIT = 1024 * 1024

pytestmark = pytest.mark.timeout(90)


wait_for = functools.partial(waiting.wait_for, timeout=WAIT)


def http(backend, fn, *args):
    return get_backend(backend).run_blocking(fn, *args)


def header(size, frame_type):
    return struct.pack(">II", size, frame_type)


# -- a server that sends garbage ---------------------------------------------------------

# name: (bytes to inject, then EOF?, Reader's max_frame_size, expected error, text in it)
GARBAGE = {
    "oversized frame": (header(MAX_FRAME + 1, 0) + b"x" * 64, False, MAX_FRAME, ProtocolError, "exceeds the maximum"),
    "unknown frame type": (header(12, 9) + b"whatever", False, MAX_FRAME, ProtocolError, "unknown frame type 9"),
    "2 GB length prefix": (header(2**31, 2) + b"\0" * 26, False, MAX_FRAME, ProtocolError, "exceeds the maximum"),
    "4 GB length prefix": (b"\xff\xff\xff\xff", False, MAX_FRAME, ProtocolError, "exceeds the maximum"),
    "length too small for a frame type": (header(2, 0) + b"\0\0", False, MAX_FRAME, ProtocolError, "too small"),
    "message shorter than its header": (header(14, 2) + b"\0" * 10, False, MAX_FRAME, ProtocolError, "shorter than"),
    "truncated 10 MB frame then EOF": (header(10_000_000, 2) + b"\0" * 1000, True, MAX_FRAME, ConnectionClosedError,
                                       "closed the connection"),
    "truncated 2 GB frame, allowed by max_frame_size, then EOF": (
        header(2**31, 2) + b"\0" * 1000, True, 2**32 - 1, ConnectionClosedError, "closed the connection"),
}


@pytest.mark.pure
@pytest.mark.parametrize("case", list(GARBAGE))
def test_garbage_from_the_server_closes_with_a_clear_error_and_reconnects(
    nsqd, topic, backend, fault_proxy_factory, case, record_property
):
    garbage, then_eof, max_frame_size, expected, text = GARBAGE[case]
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    seen = collections.Counter()

    def handler(message):
        seen[message.body] += 1
        return True

    reader = nsq.Reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[proxy.address], max_in_flight=10,
        max_reconnect_delay=0.5, max_frame_size=max_frame_size, backend=backend,
    )
    try:
        nsqd.http_mpub(topic, [b"before%03d" % i for i in range(50)])
        reader.start()

        def idle():  # all consumed and finished: nothing is on its way, the next byte starts a frame
            c = http(backend, nsqd.channel_stats, topic, CHANNEL) or {}
            return len(seen) == 50 and c.get("in_flight_count") == 0 and c.get("depth") == 0

        wait_for(idle, backend, message="the first messages to be consumed")
        conn = next(iter(reader.conns.values()))
        assert conn.is_connected()

        tracemalloc.start()
        try:
            assert proxy.inject_downstream(garbage) >= 1
            if then_eof:
                get_backend(backend).sleep(0.2)  # let the client read the bytes before the FIN
                proxy.cut()
            wait_for(conn.closed, backend, message="the client to drop the connection")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

        assert isinstance(conn.close_error, expected), repr(conn.close_error)
        assert text in str(conn.close_error)
        assert peak < PEAK_LIMIT, "%d bytes allocated while handling %s" % (peak, case)
        if then_eof:
            assert 0 < conn.protocol.buffered_bytes() <= len(garbage)  # only what arrived was kept

        wait_for(lambda: any(c is not conn and c.is_connected() for c in list(reader.conns.values())),
                 backend, message="the Reader to reconnect")
        http(backend, nsqd.http_mpub, topic, [b"after%03d" % i for i in range(50)])
        wait_for(lambda: len(seen) == 100, backend, message=lambda: "consumption to go on (%d seen)" % len(seen))
    finally:
        reader.close(timeout=5)
    assert all(body.startswith((b"before", b"after")) for body in seen)  # garbage never became a message
    for key, value in dict(fault="server sent: %s (%s, %s codec)" % (case, backend, codec.IMPLEMENTATION),
                           error=type(conn.close_error).__name__, peak_bytes=peak, lost=100 - len(seen)).items():
        record_property(key, value)


# -- user mistakes: Writer -------------------------------------------------------------------


def producers(nsqd):
    return nsqd.stats(include_clients=True).get("producers") or []


@pytest.fixture
def proxied_writer(nsqd, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    writer = nsq.Writer([proxy.address], backend=backend)
    assert writer.wait_connected(WAIT)
    yield writer, proxy
    writer.close()


def no_callback(conn, data):
    raise AssertionError("a refused publish must not call its callback")


WRITER_MISTAKES = {
    "topic with a space": (lambda w, t: w.pub("bad topic", b"x"), InvalidArgumentError, ValueError),
    "empty topic": (lambda w, t: w.pub("", b"x"), InvalidArgumentError, ValueError),
    "65-character topic": (lambda w, t: w.pub("a" * 65, b"x"), InvalidArgumentError, ValueError),
    "non-ASCII topic": (lambda w, t: w.pub("t\u00f6pic", b"x"), InvalidArgumentError, ValueError),
    "topic that is not a string": (lambda w, t: w.pub(42, b"x"), InvalidArgumentError, ValueError),
    "str body": (lambda w, t: w.pub(t, "text"), InvalidBodyError, TypeError),
    "int body": (lambda w, t: w.pub(t, 123), InvalidBodyError, TypeError),
    "None body": (lambda w, t: w.pub(t, None), InvalidBodyError, TypeError),
    "str body with a callback": (lambda w, t: w.pub(t, "text", no_callback), InvalidBodyError, TypeError),
    "mpub with one str body": (lambda w, t: w.mpub(t, [b"ok", "bad"]), InvalidBodyError, TypeError),
    "mpub of a str": (lambda w, t: w.mpub(t, "text"), InvalidBodyError, TypeError),
    "empty mpub": (lambda w, t: w.mpub(t, []), InvalidArgumentError, ValueError),
    "body over max_msg_size": (lambda w, t: w.pub(t, b"x" * (w.max_msg_size + 1)), MessageTooLargeError, ValueError),
    "negative dpub delay": (lambda w, t: w.dpub(t, -5, b"x"), InvalidArgumentError, ValueError),
    "float dpub delay": (lambda w, t: w.dpub(t, 1.5, b"x"), InvalidArgumentError, ValueError),
    "bool dpub delay": (lambda w, t: w.dpub(t, True, b"x"), InvalidArgumentError, ValueError),
    "str dpub delay": (lambda w, t: w.dpub(t, "10", b"x"), InvalidArgumentError, ValueError),
}


def test_writer_mistakes_raise_before_the_wire(proxied_writer, nsqd, topic, backend, record_property):
    writer, proxy = proxied_writer
    assert writer.pub(topic, b"good") == b"OK"
    conn = next(iter(writer.conns.values()))
    bytes_before = proxy.bytes_up
    for name, (call, error, builtin) in WRITER_MISTAKES.items():
        with pytest.raises(error) as info:
            call(writer, topic)
        assert isinstance(info.value, nsq.Error) and isinstance(info.value, builtin), name
    get_backend(backend).sleep(0.2)  # anything queued by mistake would have left by now
    assert proxy.bytes_up == bytes_before  # not one byte
    assert conn.is_connected()
    assert http(backend, nsqd.message_count, topic) == 1
    assert len(http(backend, producers, nsqd)) == 1  # nsqd still has the connection
    assert writer.pub(topic, b"still good") == b"OK"
    record_property("fault", "user mistakes refused before the wire: Writer (%s)" % backend)
    record_property("mistakes", len(WRITER_MISTAKES))


def test_dpub_delay_nsqd_would_wrap_is_refused_before_the_wire(proxied_writer, nsqd, topic, backend):
    writer, proxy = proxied_writer
    bytes_before = proxy.bytes_up
    try:
        with pytest.raises(InvalidArgumentError):
            writer.dpub(topic, 2**64, b"x")
        assert proxy.bytes_up == bytes_before
    finally:
        writer.close()
        assert http(backend, nsqd.message_count, topic) == 0


# -- user mistakes: Connection RDY ---------------------------------------------------------------


def test_bad_rdy_counts_raise_before_the_wire(nsqd, topic, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    conn = Connection(proxy.host, proxy.port, backend=backend)
    conn.connect()
    try:
        conn.subscribe(topic, CHANNEL)
        bytes_before = proxy.bytes_up
        for count in (-1, 10**9, conn.max_rdy_count + 1, 1.5, True, "5", None):
            with pytest.raises(ConfigError) as info:
                conn.send_rdy(count)
            assert isinstance(info.value, ValueError), count
        get_backend(backend).sleep(0.2)
        assert proxy.bytes_up == bytes_before
        assert conn.is_connected() and conn.rdy == 0
        [client] = http(backend, nsqd.clients, topic, CHANNEL)  # still connected, RDY untouched
        assert client["ready_count"] == 0
        conn.send_rdy(conn.max_rdy_count)  # the largest legal value goes through
        wait_for(lambda: http(backend, nsqd.clients, topic, CHANNEL)[0]["ready_count"] == conn.max_rdy_count,
                 backend, message="nsqd to take the legal RDY")
    finally:
        conn.close()


# -- user mistakes: requeue -------------------------------------------------------------------------


def test_bad_requeue_arguments_raise_and_leave_the_message_unanswered(nsqd, topic, backend):
    outcomes = []
    done = get_backend(backend).event()

    def handler(message):
        for kwargs in ({"delay": -3}, {"delay": "5"}, {"delay": float("nan")},
                       {"delay": float("inf")}, {"delay": True}, {"delai": 5}):
            try:
                message.requeue(**kwargs)
                outcomes.append((kwargs, None))
            except Exception as exc:  # noqa: BLE001 - checked below
                outcomes.append((kwargs, exc))
        outcomes.append(("responded", message.has_responded()))
        done.set()
        return True  # still unanswered: this finishes it

    nsqd.http_pub(topic, b"only")
    reader = nsq.Reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend,
                        max_reconnect_delay=0.5)
    try:
        reader.start()
        wait_for(done.is_set, backend, message="the handler")

        def finished():
            c = http(backend, nsqd.channel_stats, topic, CHANNEL) or {}
            return c.get("in_flight_count") == 0 and c.get("depth") == 0 and c.get("message_count") == 1

        wait_for(finished, backend, message="the message to be finished")
        channel = http(backend, nsqd.channel_stats, topic, CHANNEL)
    finally:
        reader.close(timeout=5)
    assert outcomes[-1] == ("responded", False)
    for kwargs, exc in outcomes[:-1]:
        assert isinstance(exc, nsq.Error) or isinstance(exc, TypeError), (kwargs, exc)
        assert isinstance(exc, (ValueError, TypeError)), (kwargs, exc)
    assert channel["requeue_count"] == 0  # no REQ reached nsqd
    assert channel["clients"][0]["finish_count"] == 1


def test_huge_requeue_delay_never_brings_the_message_back_at_once(nsqd, topic, backend):
    deliveries = []
    state = {}

    def handler(message):
        deliveries.append(message.attempts)
        if len(deliveries) == 1:
            try:
                message.requeue(delay=1e300, backoff=False)
            except InvalidArgumentError as exc:  # refusing it is fine too, if nothing was claimed
                state["refused"] = exc
                return True
            return None
        return True

    nsqd.http_pub(topic, b"later")
    reader = nsq.Reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend,
                        max_reconnect_delay=0.5)
    try:
        reader.start()
        wait_for(lambda: deliveries, backend, message="the first delivery")

        def settled():
            c = http(backend, nsqd.channel_stats, topic, CHANNEL) or {}
            return c.get("deferred_count") == 1 or len(deliveries) > 1 or (
                "refused" in state and c.get("in_flight_count") == 0)

        wait_for(settled, backend, message="nsqd to defer, refuse or redeliver the message")
        get_backend(backend).sleep(0.5)
    finally:
        reader.close(timeout=5)
    assert deliveries == [1]  # never redelivered right away


# -- user mistakes: conflicting or impossible options ---------------------------------------------------

CONN_OPTION_MISTAKES = {
    "snappy and deflate": dict(snappy=True, deflate=True),
    "deflate_level 10": dict(deflate=True, deflate_level=10),
    "heartbeat_interval 0.5": dict(heartbeat_interval=0.5),
    "sample_rate 100": dict(sample_rate=100),
    "negative msg_timeout": dict(msg_timeout=-1),
    "negative requeue_delay": dict(requeue_delay=-1),
}


def _assert_config_error(make, name):
    with pytest.raises(ConfigError) as info:
        make()
    assert isinstance(info.value, ValueError) and isinstance(info.value, nsq.Error), name


def test_conflicting_options_fail_before_connecting_connection_and_writer(nsqd, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    for name, kwargs in CONN_OPTION_MISTAKES.items():
        _assert_config_error(lambda: Connection(proxy.host, proxy.port, backend=backend, **kwargs), name)
        _assert_config_error(lambda: nsq.Writer([proxy.address], backend=backend, **kwargs), name)
    _assert_config_error(lambda: nsq.Writer(["no-port-here"], backend=backend), "address without a port")
    _assert_config_error(lambda: nsq.Writer([proxy.address], backend=backend, bogus=1), "unknown keyword")
    get_backend(backend).sleep(0.2)
    assert proxy.connections_accepted == 0


def test_bad_reader_arguments_fail_at_construction(nsqd, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    ok = dict(nsqd_tcp_addresses=[proxy.address], backend=backend)
    handler = lambda message: True  # noqa: E731
    mistakes = {
        "topic with a space": (lambda: nsq.Reader("bad topic", CHANNEL, handler, **ok), InvalidArgumentError),
        "channel with a bang": (lambda: nsq.Reader("t", "ch!", handler, **ok), InvalidArgumentError),
        "max_in_flight 0": (lambda: nsq.Reader("t", CHANNEL, handler, max_in_flight=0, **ok), ConfigError),
        "handler not callable": (lambda: nsq.Reader("t", CHANNEL, "handler", **ok), ConfigError),
        "no address": (lambda: nsq.Reader("t", CHANNEL, handler, backend=backend), ConfigError),
        "unknown keyword": (lambda: nsq.Reader("t", CHANNEL, handler, bogus=1, **ok), ConfigError),
    }
    for name, (make, error) in mistakes.items():
        with pytest.raises(error) as info:
            make()
        assert isinstance(info.value, ValueError) and isinstance(info.value, nsq.Error), name
    get_backend(backend).sleep(0.2)
    assert proxy.connections_accepted == 0


def test_conflicting_options_fail_before_connecting_reader(nsqd, backend, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    for name, kwargs in CONN_OPTION_MISTAKES.items():
        def make():
            reader = nsq.Reader("t", CHANNEL, lambda message: True, nsqd_tcp_addresses=[proxy.address],
                                backend=backend, **kwargs)
            reader.close(timeout=1)

        _assert_config_error(make, name)
    assert proxy.connections_accepted == 0
