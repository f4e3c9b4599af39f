"""pynsq's way to stop ``nsq.run()`` from the program, twice, then a signal:
run as a subprocess by tests/nsq/test_pynsq_run.py.

``python run_stop_restart.py BACKEND FLAVOUR NSQD TOPIC``. BACKEND: threads,
or gevent after ``monkey.patch_all()``; FLAVOUR: ``none`` (no tornado, no
asyncio: ``reader.io_loop`` is the library's own loop), ``tornado`` or
``asyncio`` (a loop set for the main thread).

Two rounds of: publish one message from an ``io_loop`` callback, run
``nsq.run()``; once the message and the publish answer have come, the
handler or the publish callback stops it with
``reader.io_loop.add_callback(reader.io_loop.stop)``. After each round it
prints ``ROUND {...}`` (what the handler and the publish callbacks got, and
whether the Reader and Writer are closed). Then a third ``nsq.run()`` is
ended by SIGTERM (sent once nsq.run() has installed its handler), and it
prints ``END {...}`` the same way.
"""
import sys

backend, flavour, nsqd, topic = sys.argv[1:5]
if backend == "gevent":
    from gevent import monkey

    monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

if flavour == "tornado":
    import tornado.ioloop  # noqa: F401
elif flavour == "asyncio":
    import asyncio

    asyncio.set_event_loop(asyncio.new_event_loop())
else:
    assert flavour == "none"

import nsq  # noqa: E402

got, answers = [], []
stopped = set()  # the rounds already stopped
lock = threading.Lock()


def stop_when_round_done():
    """Once this round's message and publish answer have both come: stop, once."""
    with lock:
        done = min(len(got), len(answers))
        if not done or done in stopped:
            return
        stopped.add(done)
    reader.io_loop.add_callback(reader.io_loop.stop)


def handler(message):
    got.append(message.body.decode())
    stop_when_round_done()
    return True


def answered(conn, data):
    answers.append(data.decode() if isinstance(data, bytes) else type(data).__name__)
    stop_when_round_done()


def publish(body):
    writer.pub(topic, body, callback=answered)


def report(what):
    state = {"got": got, "answers": answers, "reader_closed": reader.is_closed(), "writer_closed": writer.is_closed()}
    print(what + " " + json.dumps(state), flush=True)


reader = nsq.Reader(topic, "c", handler, nsqd_tcp_addresses=[nsqd], backend=backend)
writer = nsq.Writer([nsqd], backend=backend)
for number, body in ((1, b"first"), (2, b"second")):
    reader.io_loop.add_callback(publish, body)
    nsq.run()
    report("ROUND")

ours = signal.getsignal(signal.SIGTERM)


def terminate_once_running():
    """SIGTERM once nsq.run() has put its own handler in place (within 15 s)."""
    deadline = time.monotonic() + 15
    while signal.getsignal(signal.SIGTERM) is ours and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=terminate_once_running, daemon=True).start()
nsq.run()
report("END")
