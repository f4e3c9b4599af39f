"""Programs with an event loop (tornado, plain asyncio) and what pynsq users
expect of them: user code on the loop's thread, a publish that does not
block the loop, awaitable handlers, and Readers that start when they should.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

import pytest

import nsq
from msgengine.runtime import get_backend
from nsq import client as nsq_client
from tests.support.servers import PROGRAMS_DIR, REPO_ROOT
from tests.support.waiting import wait_for

PROGRAM = os.path.join(PROGRAMS_DIR, "loop_program.py")


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
@pytest.mark.parametrize("flavour", ["tornado", "asyncio"])
def test_user_code_runs_on_the_programs_loop_and_publishing_does_not_block_it(nsqd, topic, flavour):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = [sys.executable, PROGRAM, nsqd.tcp_address, topic, "50"] + (["--asyncio"] if flavour == "asyncio" else [])
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["handled"] == 50
    assert result["awaited_ok"] == 49  # `await writer.pub(...)` gave b"OK" each time
    assert result["handler_threads"] == [result["loop_thread"]]
    assert result["callback_threads"] == [result["loop_thread"]]
    assert result["ticks_during_publish"] > 0  # the loop ran other callbacks while publishes were in flight
    assert result["io_loop_is_programs"] is True
    assert nsqd.message_count(topic) == 50
    # pynsq's threading model: the Reader and Writer ran on the loop's asyncio backend, no engine thread
    assert result["backends"] == ["asyncio"]
    assert result["threads"] == ["MainThread"]


BLOCKING_WITH_TORNADO_IMPORTED = """
import sys, time
import tornado.ioloop  # imported (as dask or a web framework would), but its loop never runs
import nsq

nsqd, topic = sys.argv[1], sys.argv[2]
seen, answers = [], []
reader = nsq.Reader(topic, "c", lambda m: seen.append(m.body) or True, nsqd_tcp_addresses=[nsqd])
reader.start()
writer = nsq.Writer([nsqd])
writer.pub(topic, b"blocking")
writer.pub(topic, b"with-callback", callback=lambda conn, data: answers.append(data))
deadline = time.time() + 20
while (len(seen) < 2 or not answers) and time.time() < deadline:
    time.sleep(0.01)
reader.close()
writer.close()
print(sorted(seen), answers)
"""


def test_a_blocking_program_that_imports_tornado_but_never_runs_its_loop(nsqd, topic):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", BLOCKING_WITH_TORNADO_IMPORTED, nsqd.tcp_address, topic],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[b'blocking', b'with-callback'] [b'OK']"


# -- handlers that return something else than a bool ---------------------------------------------


def quiet(nsqd, topic) -> bool:
    stats = nsqd.channel_stats(topic, "c") or {}
    return stats.get("depth") == 0 and stats.get("in_flight_count") == 0 and stats.get("deferred_count") == 0


def make(backend, topic, nsqd, handler, **kwargs):
    kwargs.setdefault("max_in_flight", 10)
    return nsq.Reader(topic, "c", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend,
                      requeue_delay=0, max_backoff_duration=0.05, **kwargs)


def test_async_def_handlers_run_their_body_and_decide_like_a_return_value(nsqd, topic, backend):
    nsqd.http_mpub(topic, [b"ok-%d" % i for i in range(20)] + [b"boom", b"no"])
    ran = []

    async def handler(message):
        ran.append((message.body, message.attempts))
        if message.attempts == 1 and message.body == b"boom":
            raise ValueError("first attempt fails")
        if message.attempts == 1 and message.body == b"no":
            return False
        return True

    reader = make(backend, topic, nsqd, handler)
    try:
        reader.start()
        wait_for(lambda: len(ran) == 24 and quiet(nsqd, topic), backend)
    finally:
        reader.close()
    assert sorted(ran) == sorted([(b"ok-%d" % i, 1) for i in range(20)] + [(b"boom", 1), (b"boom", 2), (b"no", 1), (b"no", 2)])
    stats = nsqd.channel_stats(topic, "c")
    assert stats["requeue_count"] == 2 and stats["timeout_count"] == 0
    assert reader.stats()["finished"] == 22


@pytest.mark.parametrize("returned", ["generator", "string", "object"])
def test_a_result_that_is_neither_bool_nor_awaitable_requeues_and_is_logged(nsqd, topic, backend, returned, caplog):
    nsqd.http_pub(topic, b"x")
    seen = []

    def generator():
        yield True

    def handler(message):
        seen.append(message.attempts)
        if message.attempts > 1:
            return True
        return {"generator": generator(), "string": "yes", "object": object()}[returned]

    reader = make(backend, topic, nsqd, handler)
    with caplog.at_level(logging.ERROR, logger="nsq.reader"):
        try:
            reader.start()
            wait_for(lambda: seen == [1, 2] and quiet(nsqd, topic), backend)
        finally:
            reader.close()
    assert nsqd.channel_stats(topic, "c")["requeue_count"] == 1  # never FINished because it was truthy
    assert "neither a bool nor an awaitable" in caplog.text
    assert reader.stats()["handler_errors"] == 1


# -- when a Reader starts -------------------------------------------------------------------------


def test_a_reader_made_while_nsq_run_runs_starts_and_consumes(nsqd, topic, backend):
    for leftover in nsq_client.live_clients():  # clients other tests left open would keep run() going
        leftover.close()
    nsqd.http_mpub(topic, [b"%d" % i for i in range(30)])
    seen = []
    made = []

    class Late(nsq.Reader):
        def __init__(self, **kwargs):
            super().__init__(message_handler=self.handle, **kwargs)
            self.bodies = seen  # set after the base class: must exist before the first message

        def handle(self, message):
            self.bodies.append(message.body)
            if len(self.bodies) == 30:
                self.close()
            return True

    def make_late():
        get_backend(backend).sleep(0.2)  # nsq.run() is running by now
        made.append(Late(topic=topic, channel="c", nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend))

    keeper = nsq.Writer([nsqd.tcp_address], backend=backend)  # keeps nsq.run() going until the end
    helper = get_backend(backend).spawn(make_late)
    closer = get_backend(backend).spawn(
        lambda: (wait_for(lambda: made and made[0].is_closed(), backend, timeout=20), keeper.close())
    )
    nsq.run()
    helper.join(5)
    closer.join(5)
    assert sorted(seen) == sorted(b"%d" % i for i in range(30))


def test_keyboard_interrupt_from_a_handler_requeues_closes_and_surfaces_in_run(nsqd, topic, backend):
    nsqd.http_mpub(topic, [b"a", b"stop", b"b"])

    def handler(message):
        if message.body == b"stop":
            raise KeyboardInterrupt
        return True

    reader = make(backend, topic, nsqd, handler, max_in_flight=1)
    outcome = []

    def run_it():
        try:
            reader.run()
            outcome.append("returned")
        except KeyboardInterrupt:
            outcome.append("KeyboardInterrupt")

    if backend == "threads":
        thread = threading.Thread(target=run_it)
        thread.start()
        thread.join(20)
    else:
        run_it()
    assert outcome == ["KeyboardInterrupt"]
    assert reader.is_closed()
    wait_for(lambda: nsqd.channel_stats(topic, "c")["client_count"] == 0, backend)
    stats = nsqd.channel_stats(topic, "c")
    assert stats["requeue_count"] == 1  # "stop" went back; "b" was never handed to the handler
    assert stats["depth"] + stats["in_flight_count"] + stats["deferred_count"] == 2
