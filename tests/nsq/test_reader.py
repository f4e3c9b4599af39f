# nsq.Reader against a real nsqd, on both backends: every message handled once
# and finished (checked against nsqd's /stats and reader.stats()), pynsq's
# constructor forms, max_tries and giving_up, requeue on exceptions, async
# responses from other threads and greenlets, backoff as seen on the wire (RDY
# commands), RDY rotation over idle nsqd, graceful close, run()/nsq.run(), and
# pausing with set_max_in_flight(0).
from __future__ import annotations

import collections
import functools
import gc
import logging
import threading
import time

import pytest

import nsq
from nsq import client as nsq_client
from nsq.conn import Connection
from msgengine.runtime import get_backend

from tests.support import waiting
from tests.support.scanned_channels import nsqd_with_channels

CHANNEL = "ch"

# Knobs that keep the tests fast; individual tests override them.
FAST = dict(
    low_rdy_idle_timeout=0.5,
    max_backoff_duration=1,
    max_reconnect_delay=0.5,
    lookupd_poll_interval=0.5,
    # nsqd holds a few messages up to this long (ms) before it flushes them: 25, its least,
    # rather than pynsq's 250, which every small batch would wait out
    output_buffer_timeout=25,
)


wait_for = functools.partial(waiting.wait_for, timeout=20.0)


def channel(nsqd, topic, name=CHANNEL):
    return nsqd.channel_stats(topic, name) or {}


def drained(nsqd, topic, name=CHANNEL):
    def check():
        c = channel(nsqd, topic, name)
        return c and c["depth"] == 0 and c["in_flight_count"] == 0 and c["deferred_count"] == 0

    check.__name__ = "%s/%s drained" % (topic, name)
    return check


def bodies(n, prefix="m"):
    return [("%s%05d" % (prefix, i)).encode() for i in range(n)]


@pytest.fixture
def timing_out_nsqd(nsqd_factory, topic):
    """For the tests that wait for nsqd to time a message out: an nsqd that does it on
    topic/CHANNEL at the message's timeout, not at its next 5-second refresh of the channels
    it scans (tests/support/scanned_channels.py)."""
    return nsqd_with_channels(nsqd_factory, {topic: [CHANNEL]})


@pytest.fixture
def make_reader(backend):
    """Readers on the test's backend with fast knobs; all closed at teardown."""
    made = []

    def make(*args, reader_class=nsq.Reader, **kwargs):
        for key, value in FAST.items():
            kwargs.setdefault(key, value)
        kwargs.setdefault("backend", backend)
        reader = reader_class(*args, **kwargs)
        made.append(reader)
        return reader

    yield make
    for reader in made:
        reader.close(timeout=2)


def spawn_flagged(backend, fn, *args):
    """Run fn in a backend task; returns a dict whose 'done' turns True when fn returned."""
    state = {"done": False, "error": None}

    def run():
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            state["error"] = exc
        finally:
            state["done"] = True

    get_backend(backend).spawn(run)
    return state


# -- consuming ------------------------------------------------------------------------


def test_every_message_handled_once_and_finished(nsqd, topic, backend, make_reader):
    n = 1000
    nsqd.http_mpub(topic, bodies(n))
    seen = collections.Counter()

    def handler(msg):
        seen[msg.body] += 1
        return True

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=50)
    reader.start()
    wait_for(lambda: sum(seen.values()) >= n, backend, message="all messages handled")
    wait_for(drained(nsqd, topic), backend)

    assert set(seen) == set(bodies(n))
    assert set(seen.values()) == {1}
    c = channel(nsqd, topic)
    assert c["message_count"] == n
    assert c["depth"] == 0 and c["in_flight_count"] == 0
    assert c["requeue_count"] == 0 and c["timeout_count"] == 0
    assert c["client_count"] == 1
    stats = reader.stats()
    assert stats["received"] == n
    assert stats["finished"] == n
    assert stats["requeued"] == stats["given_up"] == stats["handler_errors"] == 0


def test_positional_handler_form(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(20))
    seen = []
    reader = make_reader(lambda m: seen.append(m.body) or True, topic, CHANNEL, nsqd_tcp_addresses=nsqd.tcp_address)
    assert reader.topic == topic and reader.channel == CHANNEL
    reader.start()
    wait_for(lambda: len(seen) == 20, backend)
    wait_for(drained(nsqd, topic), backend)
    assert sorted(seen) == bodies(20)


def test_keyword_form_like_pynsq(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(20))
    seen = []
    reader = make_reader(
        topic=topic,
        channel=CHANNEL,
        message_handler=lambda m: seen.append(m.body) or True,
        nsqd_tcp_addresses=[nsqd.tcp_address],
        max_in_flight=5,
        max_tries=3,
        name="kw",
    )
    assert reader.name == "kw" and reader.max_in_flight == 5 and reader.max_tries == 3
    reader.start()
    wait_for(lambda: len(seen) == 20, backend)


@pytest.mark.parametrize("form", ["map", "string", "tuple", "generator"])
def test_address_forms(nsqd, topic, backend, make_reader, form):
    nsqd.http_mpub(topic, bodies(10))
    addresses = {
        "map": lambda: map(str, [nsqd.tcp_address]),
        "string": lambda: nsqd.tcp_address,
        "tuple": lambda: (nsqd.tcp_address,),
        "generator": lambda: (a for a in [nsqd.tcp_address]),
    }[form]()
    seen = []
    reader = make_reader(topic, CHANNEL, lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=addresses)
    assert reader.nsqd_tcp_addresses == [nsqd.tcp_address]
    reader.start()
    wait_for(lambda: len(seen) == 10, backend)


def test_unknown_keyword_argument_is_an_assertion_error_naming_it(nsqd, topic, backend):
    with pytest.raises(AssertionError, match="bogus_option"):
        nsq.Reader(topic, CHANNEL, lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address], bogus_option=1, backend=backend)
    with pytest.raises(AssertionError, match=r"Invalid keyword argument\(s\)"):
        nsq.Reader(topic, CHANNEL, lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address], io_lop=None)


def test_connection_keyword_arguments_reach_nsqd(nsqd, topic, backend, make_reader):
    reader = make_reader(
        topic, CHANNEL, lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address],
        user_agent="reader-test/1.0", client_id="rdr", heartbeat_interval=5,
    )
    reader.start()
    clients = wait_for(lambda: channel(nsqd, topic).get("clients"), backend)
    assert clients[0]["user_agent"] == "reader-test/1.0"
    assert clients[0]["client_id"] == "rdr"


# -- failures ------------------------------------------------------------------------------


class GivingUpReader(nsq.Reader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.given_up = []

    def giving_up(self, message):
        self.given_up.append((message.body, message.attempts))


def test_max_tries_gives_up_after_the_last_attempt(nsqd, topic, backend, make_reader):
    n = 5
    nsqd.http_mpub(topic, bodies(n))
    attempts = collections.defaultdict(list)

    def handler(msg):
        attempts[msg.body].append(msg.attempts)
        return False

    # (each False backs off, as in pynsq: the least backoff keeps the 15 failures from adding up to seconds)
    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], reader_class=GivingUpReader,
        max_tries=3, max_in_flight=5, requeue_delay=0, max_backoff_duration=0.05,
    )
    reader.start()
    wait_for(lambda: len(reader.given_up) >= n, backend, message="giving_up for every message")
    wait_for(drained(nsqd, topic), backend)

    # giving_up once per message, with attempts == 4 > max_tries
    assert sorted(reader.given_up) == [(body, 4) for body in bodies(n)]
    # the handler saw attempts 1, 2, 3 and never the 4th
    assert {body: sorted(a) for body, a in attempts.items()} == {body: [1, 2, 3] for body in bodies(n)}
    c = channel(nsqd, topic)
    assert c["depth"] == 0 and c["in_flight_count"] == 0
    assert c["requeue_count"] == 3 * n
    assert c["timeout_count"] == 0
    stats = reader.stats()
    assert stats["given_up"] == n
    assert stats["requeued"] == 3 * n
    assert stats["finished"] == n  # giving up finishes the message


def test_handler_exception_requeues(nsqd, topic, backend, make_reader):
    n = 10
    nsqd.http_mpub(topic, bodies(n))
    attempts = collections.defaultdict(list)

    def handler(msg):
        attempts[msg.body].append(msg.attempts)
        if msg.attempts == 1:
            raise RuntimeError("boom")
        return True

    # (each exception backs off, as in pynsq: the least backoff keeps the 10 from adding up to a second)
    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=5, requeue_delay=0,
        max_backoff_duration=0.05,
    )
    reader.start()
    wait_for(lambda: sum(len(a) for a in attempts.values()) >= 2 * n, backend)
    wait_for(drained(nsqd, topic), backend)
    assert {body: sorted(a) for body, a in attempts.items()} == {body: [1, 2] for body in bodies(n)}
    c = channel(nsqd, topic)
    assert c["requeue_count"] == n and c["timeout_count"] == 0
    stats = reader.stats()
    assert stats["handler_errors"] == n and stats["requeued"] == n and stats["finished"] == n


def test_handler_returning_none_does_not_lose_the_message(nsqd, topic, backend, make_reader):
    nsqd.http_pub(topic, b"x")
    attempts = []

    def handler(msg):
        attempts.append(msg.attempts)
        return None if msg.attempts == 1 else True

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], requeue_delay=0)
    reader.start()
    wait_for(lambda: len(attempts) == 2, backend)
    wait_for(drained(nsqd, topic), backend)
    assert attempts == [1, 2]


def test_validate_message_false_finishes_without_processing(nsqd, topic, backend, make_reader):
    class Skipping(nsq.Reader):
        def preprocess_message(self, message):
            return message.body.upper()

        def validate_message(self, message):
            return not message.startswith(b"SKIP")

    nsqd.http_mpub(topic, [b"skip1", b"keep1", b"skip2", b"keep2"])
    seen = []
    reader = make_reader(
        topic, CHANNEL, lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address],
        reader_class=Skipping,
    )
    reader.start()
    wait_for(lambda: channel(nsqd, topic).get("message_count") == 4 and drained(nsqd, topic)(), backend)
    assert sorted(seen) == [b"keep1", b"keep2"]
    assert channel(nsqd, topic)["requeue_count"] == 0


def test_finishing_a_timed_out_message_is_not_fatal(timing_out_nsqd, topic, backend, make_reader, caplog):
    """FIN after nsqd timed the message out gets E_FIN_FAILED: logged, the connection stays,
    and the redelivered message is handled again."""
    nsqd = timing_out_nsqd
    caplog.set_level(logging.WARNING, logger="nsq")
    nsqd.http_pub(topic, b"late")
    sleep = get_backend(backend).sleep
    attempts = []

    def handler(msg):
        attempts.append(msg.attempts)
        if msg.attempts == 1:
            deadline = time.monotonic() + 20
            while channel(nsqd, topic).get("timeout_count", 0) < 1 and time.monotonic() < deadline:
                sleep(0.05)
        return True

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], msg_timeout=1.0)
    reader.start()
    wait_for(lambda: reader.conns, backend)
    conn = reader.conns[nsqd.tcp_address]
    wait_for(lambda: attempts == [1, 2], backend, timeout=30)
    wait_for(drained(nsqd, topic), backend)
    assert channel(nsqd, topic)["timeout_count"] == 1
    assert reader.conns[nsqd.tcp_address] is conn and conn.is_connected()
    wait_for(lambda: any("E_FIN_FAILED" in r.getMessage() for r in caplog.records), backend)


def test_a_reader_needs_a_handler(nsqd, topic, backend):
    reader = nsq.Reader(topic, CHANNEL, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend)
    try:
        with pytest.raises(nsq.Error, match="message_handler"):
            reader.start()
        with pytest.raises(nsq.Error, match="callable"):
            reader.set_message_handler("not callable")
    finally:
        reader.close()


def test_start_after_setting_the_missing_handler(nsqd, topic, backend, make_reader):
    nsqd.http_pub(topic, b"x")
    seen = []
    reader = make_reader(topic, CHANNEL, nsqd_tcp_addresses=[nsqd.tcp_address])
    with pytest.raises(nsq.Error):
        reader.start()
    reader.set_message_handler(lambda m: seen.append(m.body) or True)
    reader.start()
    wait_for(lambda: seen == [b"x"], backend, timeout=2)


# -- async responses -----------------------------------------------------------------------


@pytest.mark.parametrize("responder", ["thread", "greenlet"])
def test_enable_async_responses_finish_messages(nsqd, topic, backend, make_reader, responder, request):
    if responder == "greenlet" and backend != "gevent":
        pytest.skip("greenlets only exist on the gevent backend")
    limit = 10
    n = 200
    nsqd.http_mpub(topic, bodies(n))
    handled = []
    pending = []
    lock = threading.Lock()

    def handler(msg):
        msg.enable_async()
        handled.append(msg.body)
        with lock:
            pending.append(msg)
        return False  # ignored: the message is async

    if responder == "thread":
        stop = threading.Event()

        def answer_loop():
            while not stop.is_set():
                with lock:
                    batch = pending[:]
                    del pending[:]
                for msg in batch:
                    msg.finish()
                stop.wait(0.005)

        worker = threading.Thread(target=answer_loop, daemon=True)
        worker.start()
        request.addfinalizer(stop.set)
    else:
        import gevent

        def handler(msg):  # noqa: F811 - the greenlet variant answers from its own greenlet
            msg.enable_async()
            handled.append(msg.body)
            gevent.spawn_later(0.001, msg.finish)

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=20)
    reader.start()
    wait_for(lambda: len(handled) >= n, backend, timeout=limit)
    wait_for(drained(nsqd, topic), backend, timeout=limit)
    c = channel(nsqd, topic)
    assert c["requeue_count"] == 0 and c["timeout_count"] == 0
    assert sorted(handled) == bodies(n)
    wait_for(lambda: reader.stats()["finished"] == n, backend, timeout=5)


def test_responding_twice_raises_an_assertion_error(nsqd, topic, backend, make_reader):
    nsqd.http_pub(topic, b"x")
    errors = []

    def handler(msg):
        msg.finish()
        for again in (msg.finish, msg.requeue):
            try:
                again()
            except AssertionError as exc:
                errors.append(exc)
        return True  # ignored: already answered

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address])
    reader.start()
    wait_for(lambda: len(errors) == 2, backend)
    wait_for(drained(nsqd, topic), backend)
    assert all(isinstance(e, nsq.Error) for e in errors)
    c = channel(nsqd, topic)
    assert c["requeue_count"] == 0
    assert reader.stats()["finished"] == 1 and reader.stats()["requeued"] == 0


# -- backoff and RDY on the wire -----------------------------------------------------------


@pytest.fixture
def rdy_log(monkeypatch):
    """Every RDY a Connection sends, as (conn.id, count), in order."""
    log = []
    original = Connection.send_rdy

    def send_rdy(self, count, flush=True):
        log.append((self.id, count))
        return original(self, count, flush)

    monkeypatch.setattr(Connection, "send_rdy", send_rdy)
    return log


def test_backoff_on_the_wire(nsqd, topic, backend, make_reader, rdy_log):
    n = 30
    nsqd.http_mpub(topic, [b"fail"] + bodies(n - 1))
    done = set()

    def handler(msg):
        if msg.body == b"fail" and msg.attempts == 1:
            return False
        done.add(msg.body)
        return True

    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=5,
        requeue_delay=0, max_backoff_duration=2,
    )
    reader.start()
    wait_for(lambda: len(done) == n, backend)
    wait_for(drained(nsqd, topic), backend)
    counts = [count for _, count in rdy_log]
    assert counts[:2] == [1, 5], counts  # bootstrap RDY 1, grow to max_in_flight
    first_zero = counts.index(0)
    # backoff: RDY 0, then RDY 1 to test the waters, then (after a success) full flow again
    assert counts[first_zero + 1] == 1, counts
    assert 5 in counts[first_zero + 2:], counts
    assert counts[-1] == 5, counts
    assert not reader.stats()["in_backoff"]
    assert channel(nsqd, topic)["requeue_count"] == 1


def test_backoff_pauses_the_flow(nsqd, topic, backend, make_reader, rdy_log):
    """While failures keep coming the reader never has more than RDY 1 (after the first
    block); after they stop, successes bring it back to max_in_flight."""
    n = 40
    nsqd.http_mpub(topic, bodies(n))
    failures = {"left": 4}
    done = set()

    def handler(msg):
        if failures["left"] > 0:
            failures["left"] -= 1
            return False
        done.add(msg.body)
        return True

    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=10,
        requeue_delay=0, max_backoff_duration=1,
    )
    reader.start()
    wait_for(lambda: len(done) == n, backend)
    wait_for(lambda: reader.stats()["total_rdy"] == 10 and not reader.stats()["in_backoff"], backend)
    counts = [count for _, count in rdy_log]
    first_zero = counts.index(0)
    last_zero = len(counts) - 1 - counts[::-1].index(0)
    # between the first and the last RDY 0 only RDY 0 and RDY 1 were ever sent
    assert set(counts[first_zero:last_zero + 1]) <= {0, 1}, counts
    assert counts[-1] == 10


def test_backoff_does_not_stall_when_the_testing_connection_has_no_messages(
    nsqd_factory, topic, backend, make_reader
):
    """After a backoff block RDY 1 goes to one random connection. If that nsqd has
    nothing to deliver while another one does, the reader must move RDY 1 on (pynsq
    redistributes in backoff after low_rdy_idle_timeout); otherwise it stalls forever."""
    a, b = nsqd_factory(), nsqd_factory()
    a.http_pub(topic, b"fail")
    done = []

    def handler(msg):
        if msg.body == b"fail":
            msg.requeue(delay=3600)  # a failure (backoff) that leaves nothing to deliver
            return
        done.append(msg.body)
        return True

    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[a.tcp_address, b.tcp_address], max_in_flight=10,
        max_backoff_duration=1, low_rdy_idle_timeout=0.5,
    )
    reader.start()
    wait_for(lambda: len(reader.conns) == 2, backend)
    wait_for(lambda: channel(a, topic).get("deferred_count") == 1, backend)

    def testing_conn():
        stats = reader.stats()
        rdy = {key: c["rdy"] for key, c in stats["per_connection"].items()}
        if stats["in_backoff"] and sorted(rdy.values()) == [0, 1]:
            return [key for key, v in rdy.items() if v == 1][0]

    tester = wait_for(testing_conn, backend, message="RDY 1 on one connection after the backoff block")
    other = b if tester == a.tcp_address else a
    other.http_mpub(topic, bodies(10))
    wait_for(lambda: len(done) == 10, backend, timeout=3,
             message=lambda: "messages on the other nsqd (%d handled, stats %r)" % (len(done), reader.stats()))


def test_max_in_flight_1_finds_the_one_busy_nsqd_of_four(nsqd_factory, topic, backend, make_reader):
    servers = [nsqd_factory() for _ in range(4)]
    n = 30
    busy = servers[2]
    busy.http_mpub(topic, bodies(n))
    seen = []
    # (the one RDY moves on from an nsqd that sent nothing for low_rdy_idle_timeout, at the
    # redistribution rounds, every half of it: it finds the busy one after a few of them)
    reader = make_reader(
        topic, CHANNEL, lambda m: seen.append(m.body) or True,
        nsqd_tcp_addresses=[s.tcp_address for s in servers], max_in_flight=1, low_rdy_idle_timeout=0.1,
    )
    reader.start()
    wait_for(lambda: len(reader.conns) == 4, backend)
    wait_for(lambda: len(seen) == n, backend, timeout=30, message=lambda: "%d of %d handled" % (len(seen), n))
    wait_for(drained(busy, topic), backend)
    assert sorted(seen) == bodies(n)
    assert reader.stats()["total_rdy"] <= 1


def test_rdy_is_spread_over_several_nsqd(nsqd_factory, topic, backend, make_reader):
    servers = [nsqd_factory() for _ in range(3)]
    for i, server in enumerate(servers):
        server.http_mpub(topic, bodies(100, prefix="s%d-" % i))
    seen = collections.Counter()
    reader = make_reader(
        topic, CHANNEL, lambda m: seen.update([m.body]) or True,
        nsqd_tcp_addresses=[s.tcp_address for s in servers], max_in_flight=30,
    )
    reader.start()
    wait_for(lambda: sum(seen.values()) >= 300, backend)
    for server in servers:
        wait_for(drained(server, topic), backend)
        assert channel(server, topic)["message_count"] == 100
    assert set(seen.values()) == {1}
    stats = reader.stats()
    assert stats["connections"] == 3
    assert all(0 < c["rdy"] <= 10 for c in stats["per_connection"].values())
    assert stats["total_rdy"] <= 30


def test_rdy_never_exceeds_nsqd_max_rdy_count(nsqd_factory, topic, backend, make_reader, rdy_log):
    nsqd = nsqd_factory("--max-rdy-count=5")
    nsqd.http_mpub(topic, bodies(100))
    seen = []
    reader = make_reader(
        topic, CHANNEL, lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address],
        max_in_flight=50,
    )
    reader.start()
    wait_for(lambda: len(seen) == 100, backend)
    wait_for(drained(nsqd, topic), backend)
    assert max(count for _, count in rdy_log) == 5
    assert len(reader.conns) == 1  # nsqd never closed the connection for a bad RDY


def test_heartbeat_hook_is_called(nsqd, topic, backend, make_reader):
    beats = []

    class Beating(nsq.Reader):
        def heartbeat(self, conn):
            beats.append(conn.id)

    reader = make_reader(
        topic, CHANNEL, lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address], reader_class=Beating,
        heartbeat_interval=1,
    )
    reader.start()
    wait_for(lambda: len(beats) >= 1, backend, timeout=10)
    assert set(beats) == {nsqd.tcp_address}
    assert len(reader.conns) == 1  # the NOP answers keep the connection open


# -- closing ---------------------------------------------------------------------------------


def test_close_with_messages_in_flight_loses_nothing_and_does_not_reconnect(
    timing_out_nsqd, topic, backend, make_reader
):
    nsqd = timing_out_nsqd
    n = 60
    nsqd.http_mpub(topic, bodies(n))
    sleep = get_backend(backend).sleep
    first = {"handled": set(), "after_close": [], "closed": False, "calls": 0}

    def slow(msg):
        first["calls"] += 1
        if first["closed"]:
            first["after_close"].append(msg.body)
        sleep(0.05)
        first["handled"].add(msg.body)
        return True

    # (the messages it received but never handled come back to the second reader after
    # msg_timeout: 1 s, the least nsqd takes, which still leaves the few it handles (each
    # within 10 x 50 ms of its arrival) ample time to be finished before that)
    reader = make_reader(
        topic, CHANNEL, slow, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=10,
        msg_timeout=1.0, user_agent="first-reader",
    )
    reader.start()
    wait_for(lambda: first["calls"] >= 3 and channel(nsqd, topic).get("in_flight_count", 0) >= 5, backend)
    reader.close()
    first["closed"] = True
    assert reader.is_closed()
    assert reader.conns == {}
    # nsqd sees the client go away
    wait_for(lambda: channel(nsqd, topic).get("client_count") == 0, backend)
    handled_by_first = set(first["handled"])
    assert 3 <= len(handled_by_first) < n

    # a new reader gets everything else (the unhandled in-flight ones after nsqd's timeout)
    second = set()
    reader2 = make_reader(
        topic, CHANNEL, lambda m: second.add(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address],
        max_in_flight=10, user_agent="second-reader",
    )
    reader2.start()
    wait_for(lambda: handled_by_first | second == set(bodies(n)), backend,
             message=lambda: "%d of %d" % (len(handled_by_first | second), n))
    wait_for(drained(nsqd, topic), backend)

    # no handler of the first reader started after close() returned, and it never came back
    assert first["after_close"] == []
    assert first["handled"] == handled_by_first
    # what the first reader handled was finished (even the handler running during close());
    # only what it received but never handled timed out
    c = channel(nsqd, topic)
    assert c["requeue_count"] == 0
    assert c["timeout_count"] == reader.stats()["received"] - len(handled_by_first)
    agents = [c["user_agent"] for c in channel(nsqd, topic)["clients"]]
    assert agents == ["second-reader"]


def test_close_from_inside_a_handler(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(20))
    seen = []
    holder = {}

    def handler(msg):
        seen.append(msg.body)
        if len(seen) == 3:
            holder["reader"].close()
            holder["closing_returned"] = True
        return True

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=1)
    holder["reader"] = reader
    state = spawn_flagged(backend, reader.run)
    wait_for(lambda: state["done"], backend, message="run() returning after close() from a handler")
    assert state["error"] is None
    assert holder["closing_returned"]
    assert reader.is_closed()
    assert len(seen) == 3
    # the message whose handler closed the reader was still finished: 17 of 20 left
    wait_for(lambda: channel(nsqd, topic).get("client_count") == 0, backend)
    c = channel(nsqd, topic)
    assert c["depth"] + c["in_flight_count"] + c["deferred_count"] == 17
    assert c["requeue_count"] == 0


def test_run_returns_after_close_from_another_task(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(5))
    seen = []
    reader = make_reader(topic, CHANNEL, lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address])
    state = spawn_flagged(backend, reader.run)
    wait_for(lambda: len(seen) == 5, backend)
    assert not state["done"]
    reader.close()
    wait_for(lambda: state["done"], backend, timeout=10)
    assert state["error"] is None
    assert reader.is_closed()


def test_close_is_idempotent_and_works_before_start(nsqd, topic, backend):
    reader = nsq.Reader(topic, CHANNEL, lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend)
    reader.close()
    reader.close()
    assert reader.is_closed()
    reader.start()  # a closed reader does not come back
    assert reader.conns == {}
    assert not channel(nsqd, topic).get("clients")


def test_nsq_run_returns_after_all_readers_and_writers_close(nsqd, topic, backend, make_reader):
    # clients leaked by earlier tests (never closed) would keep nsq.run() waiting
    gc.collect()
    for leftover in nsq_client.live_clients():
        leftover.close()
    n = 50
    seen = []
    reader = make_reader(topic, CHANNEL, lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address],
                         max_in_flight=10)
    reader.start()
    writer = nsq.Writer([nsqd.tcp_address], backend=backend)
    state = {}

    def producer_then_close():
        writer.wait_connected(10)
        for body in bodies(n):
            writer.pub(topic, body)
        wait_for(lambda: len(seen) == n, backend)
        writer.close()
        state["writer_closed"] = True
        reader.close()

    task = spawn_flagged(backend, producer_then_close)
    nsq.run()
    assert reader.is_closed() and writer.is_closed()
    wait_for(lambda: task["done"], backend)
    assert task["error"] is None
    assert sorted(seen) == bodies(n)


# -- stats and flow control ---------------------------------------------------------------------


def test_stats_fields(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(10))
    reader = make_reader(
        topic, CHANNEL, lambda m: m.body != b"m00003", nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=4,
        requeue_delay=60,
    )
    stats = reader.stats()
    assert stats["connections"] == 0 and stats["received"] == 0 and stats["total_rdy"] == 0
    reader.start()
    wait_for(lambda: reader.stats()["finished"] == 9 and reader.stats()["requeued"] == 1, backend)
    stats = reader.stats()
    assert set(stats) >= {
        "received", "finished", "requeued", "given_up", "handler_errors",
        "connections", "total_rdy", "in_backoff", "per_connection",
    }
    assert stats["received"] == 10
    assert stats["connections"] == 1
    assert list(stats["per_connection"]) == [nsqd.tcp_address]
    assert set(stats["per_connection"][nsqd.tcp_address]) == {"rdy", "in_flight"}
    assert stats["per_connection"][nsqd.tcp_address]["in_flight"] == 0
    assert isinstance(stats["in_backoff"], bool)
    assert 0 <= stats["total_rdy"] <= 4
    assert reader.total_rdy == stats["total_rdy"]
    assert reader.max_in_flight == 4
    assert channel(nsqd, topic)["deferred_count"] == 1  # requeued for 60 s


class RoundCountingReader(nsq.Reader):
    """Counts the RDY redistribution rounds: pynsq's disabled() hook is asked at each one."""

    rounds = 0

    def disabled(self):
        self.rounds += 1
        return False


def test_set_max_in_flight_zero_pauses_and_n_resumes(nsqd, topic, backend, make_reader):
    n = 200
    nsqd.http_mpub(topic, bodies(n))
    seen = []
    sleep = get_backend(backend).sleep

    def handler(msg):
        seen.append(msg.body)
        sleep(0.002)
        return True

    # (rounds every 50 ms: low_rdy_idle_timeout / 2)
    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=5,
        reader_class=RoundCountingReader, low_rdy_idle_timeout=0.1,
    )
    reader.start()
    wait_for(lambda: len(seen) >= 10, backend)
    reader.set_max_in_flight(0)
    assert reader.max_in_flight == 0

    def paused():
        c = channel(nsqd, topic)
        clients = c.get("clients") or []
        return clients and clients[0]["ready_count"] == 0 and c["in_flight_count"] == 0

    wait_for(paused, backend)
    count_when_paused = len(seen)
    depth = channel(nsqd, topic)["depth"]
    assert depth > 0
    assert count_when_paused + depth == n  # nothing lost in between

    # several redistribution rounds pass: nothing arrives and RDY stays 0
    def still_paused():
        return len(seen) == count_when_paused and paused()

    last_round = reader.rounds + 6

    def six_rounds_later():
        assert still_paused(), "condition stopped holding: still_paused"
        return reader.rounds >= last_round

    wait_for(six_rounds_later, backend)
    assert still_paused(), "condition stopped holding: still_paused"

    reader.set_max_in_flight(5)
    wait_for(lambda: len(seen) >= n, backend)
    wait_for(drained(nsqd, topic), backend)
    assert sorted(seen) == bodies(n)
    assert reader.stats()["total_rdy"] == 5


def test_is_starved(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(10))
    held = []

    def handler(msg):
        msg.enable_async()
        held.append(msg)

    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=10)
    assert not reader.is_starved()  # (after start() the 10 messages may all be in flight at once)
    reader.start()
    wait_for(lambda: len(held) == 10, backend)
    assert reader.is_starved()  # 10 in flight >= 0.85 * RDY 10
    for msg in held:
        msg.finish()
    wait_for(lambda: not reader.is_starved(), backend)
    wait_for(drained(nsqd, topic), backend)


def overlap_counting_handler(backend, pause):
    """(handler, state): a handler that takes `pause` seconds, and state counting the calls
    running at this moment ("now"), the most that ever ran at once ("peak") and those done."""
    sleep = get_backend(backend).sleep
    state = {"now": 0, "peak": 0, "done": 0}

    def handler(msg):
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        sleep(pause)
        state["now"] -= 1
        state["done"] += 1
        return True

    return handler, state


def test_concurrency_runs_handlers_in_parallel(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(8))
    handler, state = overlap_counting_handler(backend, 0.1)
    reader = make_reader(
        topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=8, concurrency=4
    )
    reader.start()
    wait_for(lambda: state["done"] == 8, backend)
    assert 2 <= state["peak"] <= 4


def test_handlers_never_run_concurrently_by_default(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(50))
    handler, state = overlap_counting_handler(backend, 0.001)
    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=20)
    reader.start()
    wait_for(lambda: state["done"] == 50, backend)
    assert state["peak"] == 1


def test_connects_to_an_nsqd_that_starts_later(nsqd_factory, topic, backend, make_reader):
    nsqd = nsqd_factory(start=False)
    seen = []
    reader = make_reader(topic, CHANNEL, lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address])
    reader.start()
    get_backend(backend).sleep(0.3)  # a few refused attempts
    assert reader.conns == {}
    nsqd.start()
    nsqd.http_mpub(topic, bodies(5))
    wait_for(lambda: len(seen) == 5, backend, timeout=10)
    assert list(reader.conns) == [nsqd.tcp_address]


def test_reconnects_to_a_restarted_nsqd(nsqd, topic, backend, make_reader):
    nsqd.http_mpub(topic, bodies(5, "a"))
    seen = set()
    reader = make_reader(topic, CHANNEL, lambda m: seen.add(m.body) or True, nsqd_tcp_addresses=[nsqd.tcp_address])
    reader.start()
    wait_for(lambda: len(seen) == 5, backend)
    wait_for(drained(nsqd, topic), backend)
    nsqd.restart()
    nsqd.http_mpub(topic, bodies(5, "b"))
    wait_for(lambda: len(seen) == 10, backend, timeout=20)
    assert seen == set(bodies(5, "a")) | set(bodies(5, "b"))
    assert len(reader.conns) == 1


@pytest.mark.timeout(60)
def test_touch_inside_a_handler_is_written_while_the_handler_runs(nsqd, topic, backend, make_reader):
    """FINs of a batch wait for the batch to end; a TOUCH must not: the handler
    asked for more time now (a long handler with a short msg_timeout)."""
    nsqd.http_pub(topic, b"slow")
    outcome = []

    def handler(msg):
        (conn,) = reader.conns.values()
        msg.touch()
        try:
            waiting.wait_for(lambda: not conn.protocol.has_data(), backend, 3.0, "the TOUCH to leave the buffer")
            outcome.append("written")
        except AssertionError:
            outcome.append("held")
        return True

    # no periodic tick during the test (it flushes what waits)
    reader = make_reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address], low_rdy_idle_timeout=60)
    reader.start()
    wait_for(lambda: outcome, backend)
    assert outcome == ["written"]
    wait_for(lambda: drained(nsqd, topic), backend)


@pytest.mark.timeout(60)
def test_an_overridden_connect_to_nsqd_is_how_the_reader_connects(nsqd, topic, backend, make_reader):
    calls = []

    class Counting(nsq.Reader):
        def connect_to_nsqd(self, host, port):
            calls.append((host, port))
            return super().connect_to_nsqd(host, port)

    seen = []
    reader = make_reader(topic, CHANNEL, lambda m: seen.append(m.body) or True,
                         nsqd_tcp_addresses=[nsqd.tcp_address], reader_class=Counting)
    reader.start()
    nsqd.http_pub(topic, b"x")
    wait_for(lambda: seen == [b"x"], backend)
    assert calls == [(nsqd.host, nsqd.tcp_port)]
