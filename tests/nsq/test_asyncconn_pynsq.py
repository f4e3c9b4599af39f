# nsq.AsyncConn as pynsq programs use it, against real nsqd: connect() returns at
# once and the handshake runs on the engine; its events come in pynsq's order with
# pynsq's keywords (connect, identify, identify_response, [auth, auth_response],
# ready: once), on the program's loop when it has one; a send() from the ready
# listener publishes; a failed connect or a refused AUTH is reported by events,
# never raised; settings read back in milliseconds, pynsq's state names.
from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import threading
import time

import pytest

import nsq
import nsq.conn
from nsq.errors import AuthFailedError

from tests.support import waiting
from tests.support.authserver import AuthServer, grant
from tests.support.ports import free_port
from tests.support.servers import REPO_ROOT
from tests.support.waiting import run_blocking

pytestmark = pytest.mark.timeout(90)

WAIT = 15.0
HANDSHAKE = ["connect", "identify", "identify_response", "ready"]
EVENTS = ("connect", "identify", "identify_response", "auth", "auth_response", "ready", "response", "message",
          "error", "close")
SECRET = "s3cret-asyncconn-Qe7L"
REFUSED = "s3cret-asyncconn-refused-Vb3K"

wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)


# -- whole programs, as pynsq users write them ---------------------------------------------------

PROGRAM = r"""
import json, sys, threading
flavour, address, topic, hold = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "hold"
if flavour == "tornado":
    import tornado.ioloop
    io_loop = tornado.ioloop.IOLoop.current()
    call_later, start, stop = io_loop.call_later, io_loop.start, io_loop.stop
elif flavour == "asyncio":
    import asyncio
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    call_later, start, stop = loop.call_later, loop.run_forever, loop.stop
else:  # no loop at all
    finished = threading.Event()
    stop = finished.set
import nsq

host, port = address.rsplit(":", 1)
conn = nsq.AsyncConn(host, int(port), timeout=10.0)
events, ticks = [], [0]
result = {"main_thread": threading.current_thread().name}


def listen(name):
    def listener(**kwargs):
        events.append([name, sorted(kwargs), kwargs.get("conn") is conn, threading.current_thread().name, ticks[0]])
    conn.on(name, listener)


for name in ("connect", "identify", "identify_response", "auth", "auth_response", "ready", "response", "error", "close"):
    listen(name)
conn.on("ready", lambda conn, **kwargs: conn.send(nsq.pub(topic, b"from-ready")))  # pynsq's pattern


def on_response(conn, data, **kwargs):
    result["response"] = bytes(data).decode()
    stop()


conn.on("response", on_response)


def tick():  # the loop turning while the handshake runs elsewhere
    ticks[0] += 1
    if ticks[0] == 3:
        result["events_at_tick_3"] = [e[0] for e in events]
        result["state_at_tick_3"] = conn.state
        if hold:
            print("TICKING", flush=True)  # the test releases the relay now
    call_later(0.01, tick)


result["connect_returned"] = repr(conn.connect())
result["state_after_connect"] = conn.state
result["events_when_connect_returned"] = [e[0] for e in events]
if flavour == "none":
    finished.wait(15)
else:
    call_later(0, tick)
    call_later(15, stop)  # only if the publish never comes back
    start()
result["events"] = events
result["backend"] = conn.backend.name
result["threads"] = sorted(t.name for t in threading.enumerate())
conn.close()
print(json.dumps(result))
"""


def start_program(flavour: str, address: str, topic: str, hold: bool = False) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", PROGRAM, flavour, address, topic, "hold" if hold else "-"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_program(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("flavour", ["tornado", "asyncio", "none"])
def test_the_pynsq_publish_pattern_publishes_exactly_once(nsqd, topic, flavour):
    result = finish_program(start_program(flavour, nsqd.tcp_address, topic))
    assert result["connect_returned"] == "None"
    assert result.get("response") == "OK"
    assert nsqd.message_count(topic) == 1
    names = [e[0] for e in result["events"]]
    assert names[:5] == HANDSHAKE + ["response"]
    assert names.count("ready") == 1
    kwargs = {e[0]: e[1] for e in result["events"]}
    assert kwargs["connect"] == kwargs["ready"] == ["conn"]
    assert kwargs["identify"] == kwargs["identify_response"] == kwargs["response"] == ["conn", "data"]
    assert all(e[2] for e in result["events"])  # conn=the AsyncConn itself
    threads = {e[3] for e in result["events"] if e[0] != "close"}  # (the program closes it from its main thread)
    if flavour == "none":  # the engine's task: never the thread that called connect()
        assert result["main_thread"] not in threads
    else:  # every callback on the program's loop, none before it runs; the connection is the loop's
        assert threads == {result["main_thread"]}
        assert result["events_when_connect_returned"] == []
        assert result["backend"] == "asyncio"
        assert result["threads"] == [result["main_thread"]]
        assert result["state_after_connect"] in ("CONNECTING", "CONNECTED")  # (the engine may be done already)


def test_the_loop_keeps_turning_while_the_handshake_waits(nsqd, topic, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    proxy.hold()  # nsqd hears nothing of the handshake until released
    proc = start_program("tornado", proxy.address, topic, hold=True)
    try:
        line = proc.stdout.readline()  # the loop turned 3 times with the handshake unanswered
    finally:
        proxy.release()
    assert line.strip() == "TICKING", proc.stderr.read()[-3000:] if proc.poll() is not None else line
    result = finish_program(proc)
    assert result["connect_returned"] == "None" and result["state_after_connect"] == "CONNECTING"
    assert result["state_at_tick_3"] == "CONNECTING"
    assert "identify_response" not in result["events_at_tick_3"] and "ready" not in result["events_at_tick_3"]
    ready = [e for e in result["events"] if e[0] == "ready"]
    assert len(ready) == 1 and ready[0][4] >= 3  # after the loop's third turn
    assert [e[0] for e in result["events"]][:5] == HANDSHAKE + ["response"]
    assert {e[3] for e in result["events"]} == {result["main_thread"]}
    assert nsqd.message_count(topic) == 1


# -- in this process: the threads backend with a loop (io_loop=), gevent without ------------------


@pytest.fixture
def program_loop():
    """An asyncio loop running on a thread of its own, named "program-loop"."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="program-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def where() -> tuple[str, object]:
    """Where code runs now: the thread's name and its greenlet (under gevent, tasks are greenlets)."""
    greenlet = sys.modules.get("greenlet")
    return threading.current_thread().name, greenlet.getcurrent() if greenlet is not None else None


class Recorder:
    """Every event of one connection: (name, kwargs, where it ran)."""

    def __init__(self, conn: nsq.AsyncConn) -> None:
        self.seen: list[tuple[str, dict, object]] = []
        for name in EVENTS:
            conn.on(name, functools.partial(self._record, name))

    def _record(self, name: str, **kwargs: object) -> None:
        self.seen.append((name, kwargs, where()))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.seen]

    def kwargs(self, name: str) -> dict:
        return next(kw for n, kw, _ in self.seen if n == name)

    def places(self, names: list[str]) -> set:
        return {place for n, _, place in self.seen if n in names}


def make(backend: str, loop: asyncio.AbstractEventLoop, host: str, port: int, **kwargs: object) -> nsq.AsyncConn:
    if backend == "threads":
        kwargs["io_loop"] = loop  # callbacks on that loop's thread (gevent: on the engine's greenlets)
    return nsq.AsyncConn(host, port, backend=backend, **kwargs)


def check_places(backend: str, recorder: Recorder, names: list[str]) -> None:
    places = recorder.places(names)
    if backend == "threads":
        assert {thread for thread, _ in places} == {"program-loop"}
    else:
        assert where() not in places  # not the task that called connect()


def test_connect_returns_before_the_handshake(nsqd, topic, backend, program_loop, fault_proxy_factory):
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    proxy.hold()
    conn = make(backend, program_loop, proxy.host, proxy.port, timeout=10.0, heartbeat_interval=5)
    recorder = Recorder(conn)
    try:
        assert conn.connect() is None
        assert conn.state == "CONNECTING" and conn.connecting() and not conn.closed() and not conn.connected()
        assert conn.connect() is None  # pynsq: a second connect() while connecting does nothing
        wait_for(lambda: recorder.names() == ["connect", "identify"], backend)  # IDENTIFY sent, unanswered
        assert conn.state == "CONNECTING"
        proxy.release()
        wait_for(lambda: "ready" in recorder.names(), backend)
        assert recorder.names() == HANDSHAKE
        assert conn.state == "CONNECTED" and conn.connected() and not conn.closed()
        assert recorder.kwargs("connect") == {"conn": conn}
        identify = recorder.kwargs("identify")
        assert identify["conn"] is conn and identify["data"]["heartbeat_interval"] == 5000
        assert identify["data"]["feature_negotiation"] is True
        response = recorder.kwargs("identify_response")
        assert response["conn"] is conn and response["data"]["max_rdy_count"] > 0
        assert recorder.kwargs("ready") == {"conn": conn}
        check_places(backend, recorder, HANDSHAKE)
    finally:
        conn.close()


def test_send_from_ready_publishes_and_ready_fires_once(nsqd, topic, backend, program_loop):
    conn = make(backend, program_loop, nsqd.host, nsqd.tcp_port)
    recorder = Recorder(conn)
    conn.on("ready", lambda conn, **kwargs: conn.send(nsq.pub(topic, b"from-ready")))
    try:
        conn.connect()
        wait_for(lambda: "response" in recorder.names(), backend)
        assert bytes(recorder.kwargs("response")["data"]) == b"OK"
        assert run_blocking(backend, nsqd.message_count, topic) == 1
        conn.send(nsq.subscribe(topic[:50] + "_empty", "ch"))  # (nsqd takes RDY only after SUB)
        assert conn.send_rdy(1) is True and conn.send_rdy(0) is True  # pynsq: True when written
        conn.send(nsq.pub(topic, b"second"))  # its answer comes after any event the RDYs fired
        wait_for(lambda: recorder.names().count("response") == 3, backend)
        assert recorder.names() == HANDSHAKE + ["response"] * 3  # ready once: not again on RDY
        assert run_blocking(backend, nsqd.message_count, topic) == 2
        check_places(backend, recorder, HANDSHAKE)
    finally:
        conn.close()
    wait_for(lambda: "close" in recorder.names(), backend)
    assert conn.state == nsq.conn.DISCONNECTED and conn.closed()


def test_a_consumer_gets_messages_with_pynsq_timestamps(nsqd, topic, backend, program_loop):
    before = time.time()
    conn = make(backend, program_loop, nsqd.host, nsqd.tcp_port)
    recorder = Recorder(conn)
    bodies = []

    def on_ready(conn, **kwargs):
        conn.send(nsq.subscribe(topic, "ch"))
        conn.send_rdy(1)

    def on_message(conn, message, **kwargs):
        bodies.append(message.body)
        message.finish()

    conn.on("ready", on_ready)
    conn.on("message", on_message)
    try:
        conn.connect()
        wait_for(lambda: "response" in recorder.names(), backend)  # SUB's OK
        run_blocking(backend, nsqd.http_pub, topic, b"hello")
        wait_for(lambda: bodies, backend)
        assert bodies == [b"hello"]
        assert before <= conn.last_msg_timestamp <= time.time()  # pynsq: time.time(), not a monotonic clock
        wait_for(lambda: run_blocking(backend, nsqd.channel_stats, topic, "ch")["in_flight_count"] == 0, backend)
        check_places(backend, recorder, HANDSHAKE + ["message"])
    finally:
        conn.close()


def test_a_refused_connection_fires_close_and_raises_nothing(backend, program_loop):
    conn = make(backend, program_loop, "127.0.0.1", free_port(), timeout=5.0)
    recorder = Recorder(conn)
    assert conn.connect() is None
    wait_for(lambda: "close" in recorder.names(), backend)
    assert recorder.names() == ["close"]  # pynsq: close, no error event (the failure is logged)
    assert recorder.kwargs("close") == {"conn": conn}
    assert conn.closed() and conn.state == "DISCONNECTED"
    check_places(backend, recorder, ["close"])


@pytest.fixture
def auth_nsqd(nsqd_factory):
    server = AuthServer()
    server.allow(SECRET, grant(), identity="alice")
    server.fail(REFUSED, 403)
    try:
        yield nsqd_factory("--auth-http-address=%s" % server.address)
    finally:
        server.close()


def test_auth_events(auth_nsqd, topic, backend, program_loop):
    conn = make(backend, program_loop, "127.0.0.1", auth_nsqd.tcp_port, auth_secret=SECRET)
    recorder = Recorder(conn)
    conn.on("ready", lambda conn, **kwargs: conn.send(nsq.pub(topic, b"authorized")))
    try:
        conn.connect()
        wait_for(lambda: "response" in recorder.names(), backend)
        assert recorder.names() == ["connect", "identify", "identify_response", "auth", "auth_response", "ready",
                                    "response"]
        assert recorder.kwargs("identify_response")["data"]["auth_required"] is True
        assert recorder.kwargs("auth") == {"conn": conn, "data": SECRET.encode()}  # pynsq: the secret, as bytes
        identity = recorder.kwargs("auth_response")
        assert identity["conn"] is conn and identity["data"]["identity"] == "alice"
        assert bytes(recorder.kwargs("response")["data"]) == b"OK"
        check_places(backend, recorder, ["connect", "identify", "identify_response", "auth", "auth_response", "ready"])
    finally:
        conn.close()


def test_a_refused_secret_fires_error_then_close(auth_nsqd, backend, program_loop):
    conn = make(backend, program_loop, "127.0.0.1", auth_nsqd.tcp_port, auth_secret=REFUSED)
    recorder = Recorder(conn)
    assert conn.connect() is None
    wait_for(lambda: "close" in recorder.names(), backend)
    assert recorder.names() == ["connect", "identify", "identify_response", "auth", "error", "close"]
    assert isinstance(recorder.kwargs("error")["error"], AuthFailedError)
    assert conn.closed() and conn.state == "DISCONNECTED"
    check_places(backend, recorder, ["connect", "error", "close"])


def test_pynsq_states_and_units_before_connect():
    assert (nsq.conn.INIT, nsq.conn.DISCONNECTED, nsq.conn.CONNECTING, nsq.conn.CONNECTED) == (
        "INIT", "DISCONNECTED", "CONNECTING", "CONNECTED")
    conn = nsq.AsyncConn("127.0.0.1", 4150, heartbeat_interval=30, msg_timeout=60)
    assert (conn.heartbeat_interval, conn.msg_timeout) == (30000, 60000)  # pynsq keeps milliseconds
    assert nsq.AsyncConn("127.0.0.1", 4150).msg_timeout is None
    assert conn.state == "INIT" and conn.closed() and not conn.connected() and not conn.connecting()
