# nsq.Reader discovering nsqd through real nsqlookupd, on both backends: the
# union of several lookupds (addresses with and without http://), nsqd that
# appear after the reader started, nsqd that go away (dropped, and redialled
# only when a lookupd lists them again), and a dead lookupd that is logged and
# skipped. Plus the pure URL/answer helpers of nsq.lookupd.
from __future__ import annotations

import functools
import logging
import socket
import threading

import pytest

import nsq
from nsq import lookupd as nsq_lookupd
from tests.support.servers import free_port
from tests.support import waiting

CHANNEL = "ch"
# Seconds between discovery rounds: the tests wait for rounds (an nsqd found by the next one,
# none redialled through three), so they come often; a round is one HTTP request per lookupd.
POLL = 0.1


wait_for = functools.partial(waiting.wait_for, timeout=20.0)


def bodies(n, prefix):
    return [("%s-%04d" % (prefix, i)).encode() for i in range(n)]


def channel(nsqd, topic):
    return nsqd.channel_stats(topic, CHANNEL) or {}


def drained(nsqd, topic):
    c = channel(nsqd, topic)
    return bool(c) and c["depth"] == 0 and c["in_flight_count"] == 0


def listed(lookupd, topic):
    """The nsqd tcp addresses a lookupd lists for topic."""
    return {"%s:%d" % (p["broadcast_address"], p["tcp_port"]) for p in lookupd.lookup(topic)}


class PollRecordingReader(nsq.Reader):
    """Records the producers every discovery round found."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.polls = []

    def query_lookupd(self):
        producers = super().query_lookupd()
        self.polls.append({"%s:%d" % p for p in producers})
        return producers


@pytest.fixture
def make_reader(backend):
    made = []

    def make(topic, handler, **kwargs):
        kwargs.setdefault("backend", backend)
        kwargs.setdefault("lookupd_poll_interval", POLL)
        kwargs.setdefault("low_rdy_idle_timeout", 0.5)
        kwargs.setdefault("max_reconnect_delay", 0.5)
        kwargs.setdefault("max_in_flight", 10)
        # nsqd holds a few messages up to this long (ms) before it flushes them: 25, its least,
        # rather than pynsq's 250, which every small batch would wait out
        kwargs.setdefault("output_buffer_timeout", 25)
        reader = PollRecordingReader(topic, CHANNEL, handler, **kwargs)
        made.append(reader)
        return reader

    yield make
    for reader in made:
        reader.close(timeout=2)


def test_consumes_from_every_nsqd_listed_by_two_lookupds(nsqlookupd_factory, nsqd_factory, topic, backend, make_reader):
    l1, l2 = nsqlookupd_factory(), nsqlookupd_factory()
    servers = [nsqd_factory(lookupd=[l1, l2]) for _ in range(3)]
    for i, server in enumerate(servers):
        server.http_mpub(topic, bodies(50, "n%d" % i))
    addresses = {s.tcp_address for s in servers}
    wait_for(lambda: listed(l1, topic) == addresses and listed(l2, topic) == addresses, backend)

    seen = []
    reader = make_reader(
        topic, lambda m: seen.append(m.body) or True,
        lookupd_http_addresses=[l1.http_address, "http://" + l2.http_address],
    )
    reader.start()
    wait_for(lambda: len(seen) >= 150, backend)
    for server in servers:
        wait_for(lambda: drained(server, topic), backend)
        c = channel(server, topic)
        assert c["message_count"] == 50
        assert c["client_count"] == 1  # both lookupds list it, the reader connects once
    assert sorted(seen) == sorted(bodies(50, "n0") + bodies(50, "n1") + bodies(50, "n2"))
    assert set(reader.conns) == addresses
    assert all(poll == addresses for poll in reader.polls[1:])


def test_single_lookupd_address_string(nsqlookupd, nsqd_factory, topic, backend, make_reader):
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    nsqd.http_mpub(topic, bodies(10, "x"))
    wait_for(lambda: listed(nsqlookupd, topic), backend)
    seen = []
    reader = make_reader(topic, lambda m: seen.append(m.body) or True, lookupd_http_addresses=nsqlookupd.http_url + "/")
    assert reader.lookupd_http_addresses == [nsqlookupd.http_url + "/"]
    reader.start()
    wait_for(lambda: len(seen) == 10, backend)


def test_nsqd_added_later_is_found_by_a_later_poll(nsqlookupd, nsqd_factory, topic, backend, make_reader):
    seen = []
    reader = make_reader(topic, lambda m: seen.append(m.body) or True, lookupd_http_addresses=[nsqlookupd.http_address])
    reader.start()
    # the topic is unknown to lookupd at first: polls find nothing, and that is not an error
    wait_for(lambda: len(reader.polls) >= 2, backend)
    assert reader.polls[0] == set() and reader.conns == {}

    first = nsqd_factory(lookupd=nsqlookupd)
    first.http_mpub(topic, bodies(20, "a"))
    wait_for(lambda: len(seen) == 20, backend)
    assert set(reader.conns) == {first.tcp_address}

    second = nsqd_factory(lookupd=nsqlookupd)
    second.http_mpub(topic, bodies(20, "b"))
    wait_for(lambda: len(seen) == 40, backend)
    assert set(reader.conns) == {first.tcp_address, second.tcp_address}
    assert sorted(seen) == sorted(bodies(20, "a") + bodies(20, "b"))
    wait_for(lambda: drained(first, topic) and drained(second, topic), backend)


class Trap:
    """A listener on a stopped nsqd's port that counts connection attempts."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_stopped_nsqd_is_dropped_and_redialled_only_when_listed_again(
    nsqlookupd, nsqd_factory, topic, backend, make_reader
):
    a = nsqd_factory(lookupd=nsqlookupd)
    b = nsqd_factory(lookupd=nsqlookupd)
    a.http_mpub(topic, bodies(10, "a"))
    b.http_mpub(topic, bodies(10, "b"))
    wait_for(lambda: listed(nsqlookupd, topic) == {a.tcp_address, b.tcp_address}, backend)
    seen = []
    reader = make_reader(topic, lambda m: seen.append(m.body) or True, lookupd_http_addresses=[nsqlookupd.http_address])
    reader.start()
    wait_for(lambda: len(seen) == 20, backend)
    assert set(reader.conns) == {a.tcp_address, b.tcp_address}

    b.stop()
    wait_for(lambda: b.tcp_address not in reader.conns, backend, message="the lost connection dropped")
    assert set(reader.conns) == {a.tcp_address}
    wait_for(lambda: listed(nsqlookupd, topic) == {a.tcp_address}, backend, message="lookupd forgetting b")
    # one full poll that saw lookupd without b, so no dial from an older poll is pending
    polls_before = len(reader.polls)
    wait_for(lambda: any(b.tcp_address not in p for p in reader.polls[polls_before:]), backend)

    trap = Trap(b.tcp_port)
    try:
        polls_before = len(reader.polls)
        wait_for(lambda: len(reader.polls) >= polls_before + 3, backend, message="three more discovery rounds")
        assert trap.accepted == 0, "the reader redialled an nsqd that no lookupd lists"
        # the reader still works meanwhile
        a.http_mpub(topic, bodies(5, "a2"))
        wait_for(lambda: len(seen) == 25, backend)
    finally:
        trap.close()

    b.start()  # same ports and data: it registers the topic with lookupd again
    wait_for(lambda: b.tcp_address in reader.conns, backend, message="reconnect once lookupd lists b again")
    b.http_mpub(topic, bodies(5, "b2"))
    wait_for(lambda: len(seen) == 30, backend)
    assert sorted(seen) == sorted(bodies(10, "a") + bodies(10, "b") + bodies(5, "a2") + bodies(5, "b2"))


def test_dead_lookupd_is_logged_and_skipped(nsqlookupd, nsqd_factory, topic, backend, make_reader, caplog):
    caplog.set_level(logging.WARNING, logger="nsq")
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    nsqd.http_mpub(topic, bodies(10, "x"))
    wait_for(lambda: listed(nsqlookupd, topic), backend)
    dead = "127.0.0.1:%d" % free_port()  # nothing listens there
    seen = []
    reader = make_reader(
        topic, lambda m: seen.append(m.body) or True,
        lookupd_http_addresses=[dead, nsqlookupd.http_address], lookupd_connect_timeout=1, lookupd_request_timeout=1,
    )
    reader.start()
    wait_for(lambda: len(seen) == 10, backend)

    def dead_logged():
        return [r for r in caplog.records if r.levelno >= logging.WARNING and dead in r.getMessage()]

    records = wait_for(dead_logged, backend)
    assert "lookupd" in records[0].getMessage()
    assert set(reader.conns) == {nsqd.tcp_address}
    # the dead one keeps being skipped while the good one keeps working
    nsqd.http_mpub(topic, bodies(5, "y"))
    wait_for(lambda: len(seen) == 15, backend)


def test_lookupd_answer_that_is_not_json_is_skipped(nsqlookupd, nsqd_factory, topic, backend, make_reader, caplog):
    """An address that answers HTTP but is not a lookupd (here: nsqd's own /ping as the path) is logged and skipped."""
    caplog.set_level(logging.WARNING, logger="nsq")
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    nsqd.http_mpub(topic, bodies(5, "x"))
    wait_for(lambda: listed(nsqlookupd, topic), backend)
    bogus = nsqd.http_url + "/ping"
    seen = []
    reader = make_reader(topic, lambda m: seen.append(m.body) or True, lookupd_http_addresses=[bogus, nsqlookupd.http_address])
    reader.start()
    wait_for(lambda: len(seen) == 5, backend)
    wait_for(lambda: [r for r in caplog.records if bogus.split("//")[1] in r.getMessage()], backend)


# -- nsq.lookupd helpers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "address, url",
    [
        ("127.0.0.1:4161", "http://127.0.0.1:4161/lookup?topic=t"),
        ("http://127.0.0.1:4161", "http://127.0.0.1:4161/lookup?topic=t"),
        ("http://127.0.0.1:4161/", "http://127.0.0.1:4161/lookup?topic=t"),
        ("https://lookupd.example:4161", "https://lookupd.example:4161/lookup?topic=t"),
        ("http://h:1/lookup?a=1", "http://h:1/lookup?a=1&topic=t"),
        ("http://h:1/custom?topic=old", "http://h:1/custom?topic=t"),
    ],
)
def test_lookup_url(address, url):
    assert nsq_lookupd.lookup_url(address, "t") == url


def test_parse_producers_current_and_legacy_formats():
    current = {"channels": [], "producers": [
        {"broadcast_address": "h1", "tcp_port": 4150, "http_port": 4151},
        {"broadcast_address": "", "address": "h2", "tcp_port": 4250},
    ]}
    legacy = {"status_code": 200, "status_txt": "OK", "data": current}
    assert nsq_lookupd.parse_producers(current) == [("h1", 4150), ("h2", 4250)]
    assert nsq_lookupd.parse_producers(legacy) == [("h1", 4150), ("h2", 4250)]
    assert nsq_lookupd.parse_producers({"producers": None}) == []
    assert nsq_lookupd.parse_producers({"producers": [{"broadcast_address": "h", "tcp_port": "x"}]}) == []
