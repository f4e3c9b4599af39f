"""Which thread runs each Reader hook: run as a subprocess by
tests/nsq/test_pynsq_reader_hooks.py.

usage: reader_hooks.py MODE NSQD TOPIC FINS REQS [--async] [--threads]

MODE: ``tornado`` (tornado imported before nsq, ``nsq.run()``), ``tornado-late``
(the Reader is made before the program imports tornado), ``asyncio`` (a plain
asyncio loop set for the main thread, ``nsq.run()``), ``threads`` (no loop:
``reader.start()``), ``gevent`` (``monkey.patch_all()`` first, ``reader.start()``).

The topic holds FINS messages ``fin-N``, REQS messages ``req-N`` and one
``give-up``. The handler (an ``async def`` one with --async) finishes ``fin-*``,
requeues ``req-*`` on their first attempt (returns False) and finishes them on
the second, and always requeues ``give-up`` (max_tries=2: ``giving_up`` on its
third attempt). A Reader subclass records where ``heartbeat``, ``disabled``,
``preprocess_message``, ``validate_message``, ``giving_up``, ``connect_to_nsqd``,
the handler and ``Message.on("finish")`` listeners run, as one of "loop" (the
thread of the program's loop), "hub" (a greenlet on the gevent hub's OS thread),
"main" (the main thread, no loop running), or the name of another thread.

It stops when every message has its final answer, ``giving_up`` ran, and
``heartbeat`` and (after start) ``disabled`` were each called at least twice, or
after 40 s. ``--threads`` makes the Reader with ``backend="threads"``. Prints one JSON
line: {"done": bool, "hooks": {hook: [where, ...]}, "finals": int, "backend": the
Reader's backend's name, "threads": the names of the threads running at the end}.
"""
import sys

MODE = sys.argv[1]
if MODE == "gevent":
    from gevent import monkey

    monkey.patch_all()
if MODE == "tornado":
    import tornado.ioloop
elif MODE == "asyncio":
    import asyncio

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import nsq  # noqa: E402
from msgengine.runtime import os_thread_ident  # noqa: E402

NSQD, TOPIC, FINS, REQS = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ASYNC = "--async" in sys.argv
DEADLINE = time.monotonic() + 30
MAIN_OS_THREAD = os_thread_ident()
loop_thread = [None]  # the ident of the loop's thread, once known
hooks = {}
finals = set()  # bodies whose last answer is given
started = [False]


def where():
    if MODE == "gevent":
        import gevent

        if os_thread_ident() == MAIN_OS_THREAD and gevent.getcurrent() is not gevent.get_hub():
            return "hub"
        return threading.current_thread().name
    if loop_thread[0] is not None and threading.get_ident() == loop_thread[0]:
        return "loop"
    if threading.current_thread() is threading.main_thread():
        return "main"
    return threading.current_thread().name


def record(hook):
    place = where()
    seen = hooks.setdefault(hook, [])
    seen.append(place)


class Recording(nsq.Reader):
    def heartbeat(self, conn):
        record("heartbeat")

    @classmethod
    def disabled(cls):
        if started[0]:
            record("disabled")
        return False

    def preprocess_message(self, message):
        record("preprocess_message")
        return message

    def validate_message(self, message):
        record("validate_message")
        return True

    def giving_up(self, message):
        record("giving_up")
        finals.add(message.body)

    def connect_to_nsqd(self, host, port):
        record("connect_to_nsqd")
        return super().connect_to_nsqd(host, port)


def decide(message):
    record("handler")
    message.on("finish", lambda **kwargs: record("Message.on(finish)"))
    body = message.body
    if body.startswith(b"fin-") or (body.startswith(b"req-") and message.attempts > 1):
        finals.add(body)
        return True
    return False


if ASYNC:
    async def handler(message):
        return decide(message)
else:
    handler = decide


def done():
    return (
        len(finals) == FINS + REQS + 1
        and len(hooks.get("heartbeat", ())) >= 2
        and len(hooks.get("disabled", ())) >= 2
        and len(hooks.get("Message.on(finish)", ())) >= FINS + REQS
    )


def make_reader():
    return Recording(
        topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD], max_tries=2,
        heartbeat_interval=1, low_rdy_idle_timeout=1, requeue_delay=0, max_backoff_duration=0.1,
        max_in_flight=5, **({"backend": "threads"} if "--threads" in sys.argv else {}),
    )


if MODE == "tornado-late":
    reader = make_reader()
    import tornado.ioloop  # imported after the Reader was made
if MODE in ("tornado", "tornado-late"):
    io_loop = tornado.ioloop.IOLoop.current()
elif MODE == "asyncio":
    aio = asyncio.new_event_loop()
    asyncio.set_event_loop(aio)
if MODE != "tornado-late":
    reader = make_reader()

if MODE in ("tornado", "tornado-late", "asyncio"):
    def on_loop(fn, delay):
        if MODE == "asyncio":
            aio.call_later(delay, fn)
        else:
            io_loop.call_later(delay, fn)

    def check():
        loop_thread[0] = threading.get_ident()
        started[0] = True
        if done() or time.monotonic() > DEADLINE:
            (aio.stop if MODE == "asyncio" else io_loop.stop)()
        else:
            on_loop(check, 0.05)

    on_loop(check, 0)
    nsq.run()
else:
    reader.start()
    started[0] = True
    while not done() and time.monotonic() < DEADLINE:
        time.sleep(0.05)
ok = done()
threads = sorted(t.name for t in threading.enumerate())
reader.close()
print(json.dumps({"done": ok, "hooks": {hook: sorted(set(places)) for hook, places in hooks.items()},
                  "finals": len(finals), "backend": reader.backend.name, "threads": threads}), flush=True)
