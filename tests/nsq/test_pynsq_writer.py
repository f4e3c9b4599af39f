# The Writer as pynsq programs see it, against real nsqd: pub/mpub/dpub with a
# callback on the program's loop return an awaitable (pynsq: the write's
# Future), off the loop they keep returning None; a Writer subclass's
# heartbeat(conn) is called (on the loop when there is one); connect() and
# connect_to_nsqd(host, port) exist and keep nsqd connected.
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

import nsq
from nsq.errors import InvalidArgumentError

from tests.support import waiting
from tests.support.servers import REPO_ROOT

WAIT = 10.0

wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)


def run_program(source: str, *args: str) -> dict:
    """Run source as a program (argv[1:] = args); its last stdout line is JSON."""
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", source, *args], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- 1. pub/mpub/dpub with a callback on the program's loop ---------------------------------------

PUB_WITH_CALLBACK_ON_THE_LOOP = r"""
import asyncio, inspect, json, socket, sys, threading
nsqd, topic, flavour = sys.argv[1], sys.argv[2], sys.argv[3]
if flavour == "tornado":
    import tornado.gen, tornado.ioloop
import nsq

sock = socket.socket(); sock.bind(("127.0.0.1", 0)); dead_port = sock.getsockname()[1]; sock.close()
calls, results, state = {}, {}, {}

def cb(name):
    def callback(conn, data):
        what = data.decode() if isinstance(data, bytes) else type(data).__name__
        calls.setdefault(name, []).append([what, threading.current_thread().name == state["loop_thread"]])
    return callback

async def settle(name, returned):
    entry = results[name] = {"awaitable": inspect.isawaitable(returned)}
    if entry["awaitable"]:
        try:
            entry["value"] = repr(await asyncio.wait_for(returned, 10))
        except Exception as exc:
            entry["error"] = type(exc).__name__

async def main():
    state["loop_thread"] = threading.current_thread().name
    w = nsq.Writer([nsqd])
    dead = nsq.Writer(["127.0.0.1:%d" % dead_port], publish_timeout=0.3)
    state["writers"] = [w, dead]
    for _ in range(1000):
        if w.conns:
            break
        await asyncio.sleep(0.01)
    await settle("pub", w.pub(topic, b"p", cb("pub")))
    await settle("pub_kw", w.pub(topic, b"k", callback=cb("pub_kw")))
    await settle("mpub", w.mpub(topic, [b"m1", b"m2"], cb("mpub")))
    await settle("dpub", w.dpub(topic, 0, b"d", cb("dpub")))
    await settle("dead", dead.pub(topic, b"x", cb("dead")))  # no connection: SendError (after publish_timeout)
    if flavour == "tornado":
        @tornado.gen.coroutine
        def gen_style():
            value = yield w.pub(topic, b"g", cb("gen"))
            raise tornado.gen.Return(value)
        results["gen"] = {"value": repr(await gen_style())}
    thread_out = {}
    def off_the_loop():  # a worker thread of the same program: today's return values
        thread_out["callback"] = repr(w.pub(topic, b"t", cb("thread")))
        thread_out["blocking"] = repr(w.pub(topic, b"b"))
    worker = threading.Thread(target=off_the_loop); worker.start()
    while worker.is_alive():
        await asyncio.sleep(0.01)
    results["thread"] = thread_out
    for _ in range(1000):  # every callback came
        if all(name in calls for name in results if name != "thread") and "thread" in calls:
            break
        await asyncio.sleep(0.01)
    results["sync"] = repr(await w.pub(topic, b"s"))  # one more round trip: no late second call

if flavour == "tornado":
    tornado.ioloop.IOLoop.current().run_sync(main, timeout=60)
else:
    asyncio.run(main())
for writer in state["writers"]:
    writer.close()
print(json.dumps({"results": results, "calls": calls}))
"""


@pytest.mark.parametrize("flavour", ["tornado", "asyncio"])
def test_pub_with_a_callback_on_the_loop_returns_the_writes_awaitable(nsqd, topic, flavour):
    out = run_program(PUB_WITH_CALLBACK_ON_THE_LOOP, nsqd.tcp_address, topic, flavour)
    results, calls = out["results"], out["calls"]
    # pynsq's Future: None once the command is written; SendError when no connection is open
    for name in ("pub", "pub_kw", "mpub", "dpub"):
        assert results[name] == {"awaitable": True, "value": "None"}, name
        assert calls[name] == [["OK", True]], name  # exactly once, on the loop's thread
    assert results["dead"] == {"awaitable": True, "error": "SendError"}
    assert calls["dead"] == [["SendError", True]]
    if flavour == "tornado":
        assert results["gen"] == {"value": "None"}  # `yield writer.pub(..., callback)` in a gen.coroutine
        assert calls["gen"] == [["OK", True]]
    # off the loop (a worker thread of the same program): None with a callback, b"OK" blocking
    assert results["thread"] == {"callback": "None", "blocking": "b'OK'"}
    assert calls["thread"] == [["OK", True]]
    assert results["sync"] == "b'OK'"
    extra = 1 if flavour == "tornado" else 0
    wait_for(lambda: nsqd.message_count(topic) == 1 + 1 + 2 + 1 + extra + 2 + 1, "threads")


def test_pub_with_a_callback_off_the_loop_still_returns_none(nsqd, topic, backend):
    calls: list = []
    with nsq.Writer([nsqd.tcp_address], backend=backend) as w:
        assert w.wait_connected(WAIT)
        returned = [
            w.pub(topic, b"p", lambda conn, data: calls.append(("pub", data))),
            w.mpub(topic, [b"m1", b"m2"], lambda conn, data: calls.append(("mpub", data))),
            w.dpub(topic, 0, b"d", lambda conn, data: calls.append(("dpub", data))),
        ]
        assert returned == [None, None, None]
        wait_for(lambda: len(calls) == 3, backend)
        assert w.pub(topic, b"sync") == b"OK"  # (one more round trip: no late second call)
        assert sorted(calls) == [("dpub", b"OK"), ("mpub", b"OK"), ("pub", b"OK")]


def test_a_blocking_pub_inside_a_pub_callback_off_the_loop_fails_at_once(nsqd, topic, backend):
    """The callback runs on the task that reads nsqd's answers: a blocking pub() there
    would wait for an answer only that task can read (until publish_timeout). It raises
    at once instead; a pub with a callback from the callback works."""
    seen: list = []
    with nsq.Writer([nsqd.tcp_address], backend=backend, publish_timeout=300) as w:
        assert w.wait_connected(WAIT)

        def on_first(conn, data):
            try:
                w.pub(topic, b"blocking")
            except nsq.errors.PublishInCallbackError as exc:
                seen.append(("refused", type(exc).__name__))
            w.pub(topic, b"second", lambda conn, data: seen.append(("second", data)))

        w.pub(topic, b"first", on_first)
        wait_for(lambda: len(seen) == 2, backend)  # (far less than publish_timeout)
        assert seen == [("refused", "PublishInCallbackError"), ("second", b"OK")]
        assert w.pub(topic, b"after") == b"OK"  # a blocking pub off a callback still blocks and answers
    assert nsqd.message_count(topic) == 3


# -- 2. the heartbeat hook, connect() and connect_to_nsqd() ----------------------------------------

HEARTBEAT_ON_THE_LOOP = r"""
import asyncio, json, sys, threading
nsqd, flavour = sys.argv[1], sys.argv[2]
if flavour == "tornado":
    import tornado.ioloop
import nsq

beats, state = [], {}

class W(nsq.Writer):
    def heartbeat(self, conn):
        beats.append([threading.current_thread().name == state["loop_thread"], conn in self.conns.values()])

async def main():
    state["loop_thread"] = threading.current_thread().name
    state["writer"] = W([nsqd], heartbeat_interval=1)
    for _ in range(1000):  # two heartbeats come within about 2 s; give up after 10
        if len(beats) >= 2:
            break
        await asyncio.sleep(0.01)

if flavour == "tornado":
    tornado.ioloop.IOLoop.current().run_sync(main, timeout=60)
else:
    asyncio.run(main())
state["writer"].close()
print(json.dumps({"beats": beats[:2]}))
"""


@pytest.mark.parametrize("flavour", ["tornado", "asyncio"])
def test_a_writer_subclass_heartbeat_is_called_on_the_programs_loop(nsqd, flavour):
    out = run_program(HEARTBEAT_ON_THE_LOOP, nsqd.tcp_address, flavour)
    assert out["beats"] == [[True, True], [True, True]]


class HeartbeatWriter(nsq.Writer):
    """Records each heartbeat; the first publishes (blocking) from the hook, the second raises."""

    def __init__(self, *args, topic, **kwargs):
        self.beats: list = []
        self.topic = topic
        super().__init__(*args, **kwargs)

    def heartbeat(self, conn):
        self.beats.append(conn)
        if len(self.beats) == 1:
            self.published_from_hook = self.pub(self.topic, b"from heartbeat")
        elif len(self.beats) == 2:
            raise RuntimeError("a heartbeat hook that fails")


def test_a_writer_subclass_heartbeat_is_called_without_a_loop(nsqd, topic, backend):
    with HeartbeatWriter([nsqd.tcp_address], topic=topic, backend=backend, heartbeat_interval=1) as w:
        assert w.wait_connected(WAIT)
        conn = next(iter(w.conns.values()))
        # the hook may block (it does not run on the task that reads the connection) and may raise (logged)
        wait_for(lambda: len(w.beats) >= 3, backend)
        assert w.published_from_hook == b"OK"
        assert all(beat is conn for beat in w.beats)  # the same connection all along: the raise closed nothing
        assert w.pub(topic, b"after") == b"OK"


def test_connect_to_nsqd_adds_an_nsqd_and_connect_keeps_the_addresses(nsqd_factory, topic, backend):
    first, second = nsqd_factory(), nsqd_factory()
    asked: list = []

    class W(nsq.Writer):
        def connect_to_nsqd(self, host, port):
            asked.append((host, port))
            return super().connect_to_nsqd(host, port)

    with W([first.tcp_address], backend=backend) as w:
        assert w.wait_connected(WAIT)
        assert w.connect() is None  # already connected: nothing new, but an override hears each address
        assert asked == [(first.host, first.tcp_port)]
        # returns at once, as pynsq's; from any OS thread (here one that is not gevent's hub)
        assert waiting.run_blocking(backend, w.connect_to_nsqd, second.host, second.tcp_port) is None
        wait_for(lambda: sorted(w.conns) == sorted([first.tcp_address, second.tcp_address]), backend)
        w.connect_to_nsqd(second.host, second.tcp_port)  # kept already: no second connection
        assert len(w.conns) == 2
        for bad in ((first.host, str(first.tcp_port)), (None, first.tcp_port), (first.host, True)):
            with pytest.raises(InvalidArgumentError):
                w.connect_to_nsqd(*bad)
        for _ in range(20):
            assert w.pub(topic, b"x") == b"OK"
        wait_for(lambda: first.message_count(topic) + second.message_count(topic) == 20, backend)
        assert first.message_count(topic) > 0 and second.message_count(topic) > 0
    w.connect_to_nsqd(second.host, second.tcp_port)  # closed: ignored
    assert w.conns == {}


def test_connect_to_nsqd_from_the_loop_does_not_block_it(nsqd_factory, topic):
    # (on the program's loop, as pynsq's _run / reconnect callbacks call it)
    first, second = nsqd_factory(), nsqd_factory()
    source = r"""
import asyncio, json, sys, time
import nsq
first, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}
async def main():
    w = nsq.Writer([first])
    for _ in range(1000):
        if w.conns:
            break
        await asyncio.sleep(0.01)
    out["returned"] = repr(w.connect_to_nsqd(host, port))
    for _ in range(1000):
        if len(w.conns) == 2:
            break
        await asyncio.sleep(0.01)
    out["conns"] = sorted(w.conns)
    w.close()
asyncio.run(main())
print(json.dumps(out))
"""
    out = run_program(source, first.tcp_address, second.host, str(second.tcp_port))
    assert out == {"returned": "None", "conns": sorted([first.tcp_address, second.tcp_address])}
