# nsq.Writer against real nsqd, on both backends: blocking and callback publishes,
# many concurrent publishers on one Writer, nsqd dying mid-run (with and without a
# second nsqd and retry_publish), nsqd's own refusals, validation before the wire,
# close()/with, and the joining of concurrent PUBs into MPUBs.
from __future__ import annotations

import functools
import socket

import pytest

import nsq
from nsq.conn import Connection
from nsq.errors import (
    ConnectionClosedError,
    InvalidArgumentError,
    InvalidBodyError,
    MessageTooLargeError,
    ServerError,
)
from msgengine.runtime import get_backend

from tests.support import waiting
from tests.support.waiting import join_all, run_blocking, tasks_done

WAIT = 10.0


wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)


def make_writer(backend, *nsqds, **kwargs):
    w = nsq.Writer([d.tcp_address for d in nsqds], backend=backend, **kwargs)
    assert w.wait_connected(WAIT)
    wait_for(lambda: len(w.conns) == len(nsqds), backend)
    return w




def drain(nsqd, topic, channel, required, backend, timeout=WAIT, done=None):
    """Consume from an existing channel until every body in `required` arrived (or until
    done(bodies) is true, when given); return all bodies received."""
    required = set(required)
    conn = Connection(nsqd.host, nsqd.tcp_port, backend=backend)
    conn.connect()
    bodies: set = set()

    def on_message(conn, message):
        bodies.add(bytes(message.body))
        message.finish()

    conn.on("message", on_message)
    try:
        conn.subscribe(topic, channel)
        conn.send_rdy(min(conn.max_rdy_count, 1000))
        try:
            arrived = (lambda: done(bodies)) if done else (lambda: required <= bodies)
            wait_for(arrived, backend, timeout=timeout, interval=0.02)
        except AssertionError:
            missing = required - bodies
            raise AssertionError(
                "%d of %d expected messages never arrived, e.g. %r" % (len(missing), len(required), sorted(missing)[:5])
            ) from None
    finally:
        conn.close()
    return bodies


class CommandCounter:
    """Counts the commands a Writer hands to one connection (instance-level shim on send_request)."""

    def __init__(self, conn):
        self.commands: list[bytes] = []
        inner = conn.send_request

        def send_request(data, pending=None):
            self.commands.append(bytes(data[:5]))
            return inner(data, pending)

        conn.send_request = send_request

    def count(self, prefix: bytes) -> int:
        return sum(1 for c in self.commands if c.startswith(prefix))


# ----------------------------------------------------------------------------- basics


def test_pub_mpub_dpub_blocking_return_ok(nsqd, topic, backend):
    run_blocking(backend, nsqd.create_topic, topic)
    run_blocking(backend, nsqd.create_channel, topic, "c")
    with make_writer(backend, nsqd) as w:
        assert w.pub(topic, b"one") == b"OK"
        assert w.mpub(topic, [b"two", b"three"]) == b"OK"
        assert w.mpub(topic, b"four") == b"OK"  # a lone bytes value is one message
        assert w.mpub(topic, (b"five",)) == b"OK"
        assert w.dpub(topic, 0, b"six") == b"OK"
        assert w.dpub(topic, 60_000, b"deferred") == b"OK"
        assert w.pub(topic, bytearray(b"seven")) == b"OK"
    assert run_blocking(backend, nsqd.message_count, topic) == 8
    stats = run_blocking(backend, nsqd.channel_stats, topic, "c")
    assert stats["depth"] == 7
    assert stats["deferred_count"] == 1
    expected = {b"one", b"two", b"three", b"four", b"five", b"six", b"seven"}
    assert drain(nsqd, topic, "c", expected, backend) == expected


def test_callbacks_get_conn_and_ok(nsqd, topic, backend):
    results = []

    def callback(conn, data):
        results.append((conn, data))

    with make_writer(backend, nsqd) as w:
        assert w.pub(topic, b"a", callback=callback) is None
        assert w.mpub(topic, [b"b", b"c"], callback=callback) is None
        assert w.dpub(topic, 0, b"d", callback=callback) is None
        assert w.pub(topic, b"e", callback) is None  # positional, as pynsq
        wait_for(lambda: len(results) == 4, backend)
        for conn, data in results:
            assert data == b"OK"
            assert isinstance(conn, Connection)
            assert conn.id == nsqd.tcp_address
    assert run_blocking(backend, nsqd.message_count, topic) == 5


def test_callback_receives_server_error(nsqd_factory, topic, backend):
    nsqd = nsqd_factory("--max-msg-size=100")
    results = []
    with make_writer(backend, nsqd) as w:
        w.pub(topic, b"x" * 200, callback=lambda conn, data: results.append(data))
        wait_for(lambda: results, backend)
    assert isinstance(results[0], ServerError)


# ----------------------------------------------------------------------------- concurrency


@pytest.mark.timeout(90)
def test_many_concurrent_publishers_on_one_writer(nsqd, topic, backend):
    b = get_backend(backend)
    workers, per_worker = (50, 1000) if backend == "gevent" else (8, 1000)
    answers = {"ok": 0}
    failures = []
    lock = b.lock()

    def publisher(i):
        ok = 0
        try:
            for n in range(per_worker):
                assert w.pub(topic, b"%d-%d" % (i, n)) == b"OK"
                ok += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        with lock:
            answers["ok"] += ok

    with make_writer(backend, nsqd) as w:
        tasks = [b.spawn(publisher, i) for i in range(workers)]
        join_all(backend, tasks, timeout=80)
        assert tasks_done(tasks)
        assert failures == []
        assert answers["ok"] == workers * per_worker
    assert run_blocking(backend, nsqd.message_count, topic) == workers * per_worker


def test_concurrent_mixed_publishes_each_get_their_own_answer(nsqd, topic, backend):
    b = get_backend(backend)
    results = []
    with make_writer(backend, nsqd) as w:

        def run(i):
            if i % 3 == 0:
                results.append(w.pub(topic, b"p%d" % i))
            elif i % 3 == 1:
                results.append(w.mpub(topic, [b"m%d" % i, b"n%d" % i]))
            else:
                results.append(w.dpub(topic, 0, b"d%d" % i))

        join_all(backend, [b.spawn(run, i) for i in range(90)])
    assert results == [b"OK"] * 90
    assert run_blocking(backend, nsqd.message_count, topic) == 30 + 60 + 30


# ----------------------------------------------------------------------------- nsqd dies


@pytest.mark.timeout(90)
def test_nsqd_killed_mid_run_every_call_answered_and_resumes(nsqd_factory, topic, backend):
    # --mem-queue-size=0: every accepted message goes to disk; --sync-every=1: nsqd syncs
    # its disk queue (data and read/write positions) after each one. Without the latter,
    # nsqd 1.3 itself overwrites messages written after its last metadata sync when it
    # restarts after a SIGKILL, so "acknowledged implies durable" would not hold.
    nsqd = nsqd_factory("--mem-queue-size=0", "--sync-every=1")
    run_blocking(backend, nsqd.create_topic, topic)
    run_blocking(backend, nsqd.create_channel, topic, "audit")
    b = get_backend(backend)
    stop = b.event()
    calls = [0]
    oks: list = []
    errors: list = []
    unexpected: list = []
    workers = 10 if backend == "gevent" else 4

    def publisher(i):
        n = 0
        while not stop.is_set():
            body = b"%d-%d" % (i, n)
            n += 1
            calls[0] += 1
            try:
                result = w.pub(topic, body)
            except nsq.Error as exc:
                errors.append(exc)
                b.sleep(0.01)
            except BaseException as exc:  # noqa: BLE001
                unexpected.append(exc)
                return
            else:
                if result == b"OK":
                    oks.append(body)
                else:
                    unexpected.append(result)

    w = make_writer(backend, nsqd, reconnect_interval=0.5, publish_timeout=5)
    tasks = []
    try:
        tasks = [b.spawn(publisher, i) for i in range(workers)]
        wait_for(lambda: len(oks) >= 100, backend)
        run_blocking(backend, nsqd.kill)
        killed_at = len(oks)
        wait_for(lambda: not w.conns, backend)  # the Writer noticed
        run_blocking(backend, nsqd.start)
        resumed_from = len(oks)
        # publishing resumes by itself on the same Writer
        wait_for(lambda: len(oks) >= resumed_from + 100, backend, timeout=30)
        assert w.pub(topic, b"after restart") == b"OK"
    finally:
        stop.set()
        join_all(backend, tasks, timeout=20)
        w.close()
    assert tasks_done(tasks)
    assert unexpected == []
    # every call came back: with OK or with an nsq.Error (none hung: the tasks ended)
    assert len(oks) + len(errors) == calls[0]
    assert all(isinstance(e, nsq.Error) for e in errors), errors[:5]
    # Every OK was persisted (unanswered ones may or may not have been), within nsqd's own
    # limits: its disk queue answers a write before syncing it, so a SIGKILL can lose the
    # one message last written to the topic queue and the one last written to the channel
    # queue, both acknowledged just before the kill.
    oks.append(b"after restart")
    before_kill, after_restart = set(oks[:killed_at]), set(oks[resumed_from:])
    maybe_in_flight = set(oks[killed_at:resumed_from])  # answered around the kill

    def consumed_all(bodies):
        if not after_restart <= bodies or len(before_kill - bodies) > 2:
            return False
        stats = run_blocking(backend, nsqd.channel_stats, topic, "audit")
        return stats["depth"] == 0 and stats["in_flight_count"] == 0

    received = drain(nsqd, topic, "audit", oks, backend, timeout=30, done=consumed_all)
    lost = set(oks) - received
    assert len(lost) <= 2 and lost <= before_kill | maybe_in_flight, sorted(lost)[:10]


def test_message_over_nsqd_limit_raises_server_error_and_writer_recovers(nsqd_factory, topic, backend):
    nsqd = nsqd_factory("--max-msg-size=1000")
    with make_writer(backend, nsqd) as w:
        old = w.conns[nsqd.tcp_address]
        with pytest.raises(ServerError) as info:
            w.pub(topic, b"x" * 2000)  # the Writer's own limit (1 MiB default) lets it through
        assert info.value.code == "E_BAD_MESSAGE"
        assert isinstance(info.value, nsq.errors.BadMessageError)
        # E_BAD_MESSAGE is fatal: nsqd hung up (the call returned once the connection closed)
        assert old.closed()
        # the very next publish waits for the background reconnection and succeeds
        assert w.pub(topic, b"small") == b"OK"
        new = w.conns[nsqd.tcp_address]
        assert new is not old and new.is_connected()
        with pytest.raises(ServerError):
            w.mpub(topic, [b"ok", b"y" * 2000])
        assert w.mpub(topic, [b"a", b"b"]) == b"OK"
    assert run_blocking(backend, nsqd.message_count, topic) == 3


@pytest.mark.timeout(30)
def test_publish_without_any_nsqd_fails_within_publish_timeout(backend):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    address = "%s:%d" % probe.getsockname()
    probe.close()  # nothing listens there
    w = nsq.Writer([address], backend=backend, publish_timeout=0.5, reconnect_interval=0.2)
    try:
        assert not w.wait_connected(0.1)
        with pytest.raises(nsq.SendError):
            w.pub("t", b"nowhere")
        with pytest.raises(nsq.Error):
            w.mpub("t", [b"nowhere"])
    finally:
        w.close()


@pytest.mark.timeout(30)
def test_unanswered_publish_times_out_then_writer_continues(nsqd, topic, fault_proxy_factory, backend):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    w = nsq.Writer([proxy.address], backend=backend, publish_timeout=0.5)
    try:
        assert w.wait_connected(WAIT)
        assert w.pub(topic, b"before") == b"OK"
        proxy.hold()  # nsqd never sees the command; the connection stays open
        with pytest.raises(nsq.errors.TimeoutError) as info:
            w.pub(topic, b"stuck")
        assert isinstance(info.value, nsq.Error)
        proxy.release()
        # the late answer pairs with the abandoned command; the next one gets its own
        assert w.pub(topic, b"after") == b"OK"
    finally:
        proxy.release()
        w.close()
    assert run_blocking(backend, nsqd.message_count, topic) == 3


def test_client_side_max_msg_size_refuses_before_the_wire(nsqd, topic, backend):
    with make_writer(backend, nsqd, max_msg_size=1000) as w:
        conn = w.conns[nsqd.tcp_address]
        counter = CommandCounter(conn)
        with pytest.raises(MessageTooLargeError):
            w.pub(topic, b"x" * 1001)
        with pytest.raises(MessageTooLargeError):
            w.mpub(topic, [b"ok", b"x" * 1001])
        with pytest.raises(MessageTooLargeError):
            w.dpub(topic, 10, b"x" * 1001)
        with pytest.raises(MessageTooLargeError):
            w.pub(topic, b"x" * 1001, callback=lambda conn, data: None)
        assert counter.commands == []
        assert w.pub(topic, b"x" * 1000) == b"OK"  # the limit itself is allowed
        assert w.conns[nsqd.tcp_address] is conn  # same connection: nothing fatal happened
    assert run_blocking(backend, nsqd.message_count, topic) == 1


def test_mpub_over_max_body_size_refused_before_the_wire(nsqd, topic, backend):
    with make_writer(backend, nsqd, max_body_size=100) as w:
        with pytest.raises(MessageTooLargeError):
            w.mpub(topic, [b"x" * 40, b"y" * 40, b"z" * 40])
        assert w.mpub(topic, [b"x" * 40, b"y" * 40]) == b"OK"
    assert run_blocking(backend, nsqd.message_count, topic) == 2


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("bad_topic", ["", "a" * 65, "bad topic", "bad!topic", "a\n", None, 42])
def test_invalid_topic_refused_before_the_wire(nsqd, backend, bad_topic):
    with make_writer(backend, nsqd) as w:
        counter = CommandCounter(w.conns[nsqd.tcp_address])
        for call in (
            lambda: w.pub(bad_topic, b"x"),
            lambda: w.mpub(bad_topic, [b"x"]),
            lambda: w.dpub(bad_topic, 0, b"x"),
            lambda: w.pub(bad_topic, b"x", callback=lambda conn, data: None),
        ):
            with pytest.raises(InvalidArgumentError) as info:
                call()
            assert isinstance(info.value, ValueError)
        assert counter.commands == []
    assert run_blocking(backend, nsqd.stats)["topics"] in (None, [])


@pytest.mark.parametrize("bad_body", ["text", 5, None, {"a": 1}])
def test_non_bytes_body_refused_before_the_wire(nsqd, topic, backend, bad_body):
    with make_writer(backend, nsqd) as w:
        counter = CommandCounter(w.conns[nsqd.tcp_address])
        for call in (
            lambda: w.pub(topic, bad_body),
            lambda: w.mpub(topic, [b"fine", bad_body]),
            lambda: w.dpub(topic, 0, bad_body),
        ):
            with pytest.raises(InvalidBodyError) as info:
                call()
            assert isinstance(info.value, TypeError)
        with pytest.raises(InvalidBodyError):
            w.mpub(topic, "a string is not a list of messages")
        assert counter.commands == []
    assert run_blocking(backend, nsqd.topic_stats, topic) is None


@pytest.mark.parametrize("delay", [-1, "5", 1.5, True])
def test_invalid_dpub_delay_refused(nsqd, topic, backend, delay):
    with make_writer(backend, nsqd) as w:
        with pytest.raises(InvalidArgumentError):
            w.dpub(topic, delay, b"x")
    assert run_blocking(backend, nsqd.topic_stats, topic) is None


def test_empty_mpub_refused(nsqd, topic, backend):
    with make_writer(backend, nsqd) as w:
        with pytest.raises(InvalidArgumentError):
            w.mpub(topic, [])


def test_unknown_keyword_argument_is_assertion_error(backend):
    with pytest.raises(AssertionError) as info:
        nsq.Writer(["127.0.0.1:4150"], backend=backend, bogus=1)
    assert "Invalid keyword argument(s): ['bogus']" in str(info.value)
    assert isinstance(info.value, nsq.Error)


def test_bad_writer_settings_raise_at_construction(backend):
    with pytest.raises(nsq.errors.ConfigError):
        nsq.Writer(["not-an-address"], backend=backend)
    with pytest.raises(nsq.errors.ConfigError):
        nsq.Writer(["127.0.0.1:4150"], backend=backend, snappy=True, deflate=True)
    with pytest.raises(InvalidArgumentError):
        nsq.Writer([], backend=backend)
    with pytest.raises(InvalidArgumentError):
        nsq.Writer(["127.0.0.1:4150"], backend=backend, reconnect_interval=0)


# ----------------------------------------------------------------------------- several nsqd


def test_publishes_spread_over_several_nsqd(nsqd_factory, topic, backend):
    a, c = nsqd_factory(), nsqd_factory()
    with make_writer(backend, a, c) as w:
        for i in range(100):
            assert w.pub(topic, b"%d" % i) == b"OK"
        for i in range(20):
            assert w.mpub(topic, [b"m%d" % i, b"n%d" % i]) == b"OK"
    count_a = run_blocking(backend, a.message_count, topic)
    count_c = run_blocking(backend, c.message_count, topic)
    assert count_a > 0 and count_c > 0
    assert count_a + count_c == 140


@pytest.mark.timeout(60)
@pytest.mark.parametrize("retry_publish", [False, True], ids=["no-retry", "retry"])
def test_one_of_two_nsqd_killed(nsqd_factory, topic, backend, retry_publish):
    victim, survivor = nsqd_factory(), nsqd_factory()
    b = get_backend(backend)
    stop = b.event()
    oks: list = []
    errors: list = []
    unexpected: list = []

    def publisher(i):
        n = 0
        while not stop.is_set():
            try:
                result = w.pub(topic, b"%d-%d" % (i, n))
            except nsq.Error as exc:
                errors.append(exc)
            except BaseException as exc:  # noqa: BLE001
                unexpected.append(exc)
                return
            else:
                oks.append(result)
            n += 1

    w = make_writer(backend, victim, survivor, reconnect_interval=0.5, retry_publish=retry_publish)
    tasks = []
    try:
        tasks = [b.spawn(publisher, i) for i in range(8)]
        wait_for(lambda: len(oks) >= 300, backend)
        assert run_blocking(backend, victim.message_count, topic) > 0
        run_blocking(backend, victim.kill)
        wait_for(lambda: victim.tcp_address not in w.conns, backend)
        after_kill = len(oks)
        wait_for(lambda: len(oks) >= after_kill + 300, backend)  # the survivor takes over
        stop.set()
        join_all(backend, tasks)
        assert tasks_done(tasks)  # every call came back
        tasks = []

        # new publishes all go to the survivor
        before = run_blocking(backend, survivor.message_count, topic)
        for i in range(50):
            assert w.pub(topic, b"later-%d" % i) == b"OK"
        assert run_blocking(backend, survivor.message_count, topic) == before + 50

        # the dead one is reconnected in the background once it is back
        run_blocking(backend, victim.start)
        wait_for(lambda: victim.tcp_address in w.conns, backend)
    finally:
        stop.set()
        join_all(backend, tasks)
        w.close()
    assert unexpected == []
    assert set(oks) == {b"OK"}
    if retry_publish:
        assert errors == []
    else:
        assert all(isinstance(e, ConnectionClosedError) for e in errors), errors[:5]


# ----------------------------------------------------------------------------- lifecycle


def test_close_and_context_manager(nsqd, topic, backend):
    with make_writer(backend, nsqd) as w:
        assert w.pub(topic, b"inside") == b"OK"
        assert not w.is_closed()
    assert w.is_closed()
    with pytest.raises(nsq.Error):
        w.pub(topic, b"after close")
    results = []
    w.pub(topic, b"after close", callback=lambda conn, data: results.append(data))
    assert len(results) == 1 and isinstance(results[0], nsq.Error)
    w.close()  # idempotent

    w2 = make_writer(backend, nsqd)
    conn = w2.conns[nsqd.tcp_address]
    w2.close()
    assert w2.is_closed()
    assert conn.closed()
    assert run_blocking(backend, nsqd.message_count, topic) == 1


def test_close_lets_publishes_in_flight_finish(nsqd, topic, backend):
    results = []
    w = make_writer(backend, nsqd)
    for i in range(500):
        w.pub(topic, b"%d" % i, callback=lambda conn, data: results.append(data))
    w.mpub(topic, [b"a", b"b"], callback=lambda conn, data: results.append(data))
    w.close()
    wait_for(lambda: len(results) == 501, backend)
    assert results == [b"OK"] * 501
    assert run_blocking(backend, nsqd.message_count, topic) == 502


# ----------------------------------------------------------------------------- joined publishes


def test_concurrent_pubs_are_joined_into_fewer_commands(nsqd, topic, backend):
    b = get_backend(backend)
    workers, per_worker = (200, 5) if backend == "gevent" else (8, 200)
    results = []
    with make_writer(backend, nsqd) as w:
        counter = CommandCounter(w.conns[nsqd.tcp_address])

        def publisher(i):
            for n in range(per_worker):
                results.append(w.pub(topic, b"%d-%d" % (i, n)))

        join_all(backend, [b.spawn(publisher, i) for i in range(workers)])
        total = workers * per_worker
        assert results == [b"OK"] * total
        commands = counter.count(b"PUB ") + counter.count(b"MPUB ")
        assert counter.count(b"MPUB ") > 0
        assert commands < total

        # a lone pub is still a plain PUB answered OK
        before = len(counter.commands)
        assert w.pub(topic, b"lone") == b"OK"
        lone = counter.commands[before:]
        assert len(lone) == 1 and lone[0].startswith(b"PUB ")
    assert run_blocking(backend, nsqd.message_count, topic) == total + 1


def test_join_publishes_off_sends_one_pub_per_message(nsqd, topic, backend):
    b = get_backend(backend)
    results = []
    with make_writer(backend, nsqd, join_publishes=False) as w:
        counter = CommandCounter(w.conns[nsqd.tcp_address])

        def publisher(i):
            for n in range(20):
                results.append(w.pub(topic, b"%d-%d" % (i, n)))

        join_all(backend, [b.spawn(publisher, i) for i in range(10)])
        assert results == [b"OK"] * 200
        assert counter.count(b"PUB ") == 200
        assert counter.count(b"MPUB ") == 0
    assert run_blocking(backend, nsqd.message_count, topic) == 200


@pytest.mark.timeout(60)
def test_a_raising_close_listener_does_not_stop_reconnection(nsqd, topic, fault_proxy_factory, backend):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    w = nsq.Writer([proxy.address], backend=backend, reconnect_interval=0.2)
    try:
        assert w.wait_connected(WAIT)
        (first,) = list(w.conns.values())

        def raising(**_):
            raise RuntimeError("a user's close listener failed")

        first.on("close", raising)
        proxy.cut()
        wait_for(lambda: w.conns and list(w.conns.values())[0] is not first, backend)
        assert w.pub(topic, b"after") == b"OK"
    finally:
        w.close()
    assert run_blocking(backend, nsqd.message_count, topic) == 1
