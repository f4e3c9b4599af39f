"""Loop programs run their Readers and Writers on the loop itself (pynsq's threading model):
the clients of a tornado or asyncio program are on the loop's asyncio backend, with no
engine thread; they close cleanly from a loop callback, after the loop stopped, and after
``asyncio.run()`` closed it; a Writer used from another thread before the loop ever runs
stays on threads, and its callbacks still come on the loop. The loop's thread is the one running it:
a loop run by one thread, stopped, then run by another keeps its clients on it.

Each case is a real program (tests/support/programs/loop_backend.py) against a real nsqd;
nsqd's own stats say what was published, finished, and that no client is left connected.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.servers import PROGRAMS_DIR
from tests.support.subprocess_programs import program_env

PROGRAM = os.path.join(PROGRAMS_DIR, "loop_backend.py")
COUNT = 20

pytestmark = pytest.mark.timeout(120)


def run_program(nsqd, topic, mode):
    proc = subprocess.run([sys.executable, PROGRAM, mode, nsqd.tcp_address, topic, str(COUNT)],
                          env=program_env(), capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def assert_all_finished(nsqd, topic):
    """Every message finished once (the program has exited: a message left in flight would
    have been requeued when its connection dropped)."""
    stats = nsqd.channel_stats(topic, "c")
    assert stats["depth"] == stats["in_flight_count"] == stats["requeue_count"] == stats["timeout_count"] == 0
    assert nsqd.message_count(topic) == COUNT


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
def test_clients_made_in_a_coroutine_run_on_the_loop_and_close_from_it(nsqd, topic):
    result, _ = run_program(nsqd, topic, "coroutine")
    assert result["backends"] == ["asyncio"]
    assert result["threads_while_running"] == ["MainThread"]
    assert result["answers"] == ["OK"] * COUNT
    assert result["handled"] == COUNT
    assert result["closed_when_close_returned"] is False  # (on the loop: the close went on in a task)
    assert result["closed"] == [True, True]
    assert_all_finished(nsqd, topic)


def test_pynsq_shaped_clients_close_after_the_loop_stopped(nsqd, topic):
    result, _ = run_program(nsqd, topic, "stopped")
    assert result["backends"] == ["asyncio"]
    assert result["threads_while_running"] == ["MainThread"]
    assert result["handled"] == COUNT
    assert result["closed"] == [True, True]
    assert_all_finished(nsqd, topic)


def test_clients_left_open_when_asyncio_run_ends_close_afterwards_without_error(nsqd, topic):
    result, stderr = run_program(nsqd, topic, "ended")
    assert result["backends"] == ["asyncio"]
    assert result["handled"] == COUNT
    assert result["closed"] == [True, True]
    assert result["threads_at_end"] == ["MainThread"]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "closing after error" not in stderr, stderr[-3000:]  # (a cancelled task is not an error)
    assert_all_finished(nsqd, topic)


def test_a_writer_used_from_a_thread_before_the_loop_runs_stays_on_threads(nsqd, topic):
    result, _ = run_program(nsqd, topic, "used-early")
    assert result["answers"] == ["OK"]  # the blocking pub from a thread did not wait for the loop
    assert result["backends"] == ["threads"]
    assert result["callbacks"] == [["OK", True]]  # and its callbacks still come on the loop
    assert result["closed"] == [True]
    assert nsqd.message_count(topic) == 2


@pytest.mark.parametrize("flavour", ["tornado", "asyncio"])
def test_a_loop_run_by_a_thread_then_another_keeps_the_clients_on_it(nsqd, topic, flavour):
    # (made on the main thread; loop-A runs the loop, a callback stops it, loop-B runs it: each
    # time the loop's thread is the one running it, and the main thread closes them at the end)
    result, stderr = run_program(nsqd, topic, "two-threads-" + flavour)
    assert result["backends"] == ["asyncio"]
    # no engine thread: only the main thread and the one running the loop
    assert result["threads_while_running"] == [["MainThread", "loop-A"], ["MainThread", "loop-B"]]
    assert result["callbacks"] == result["handlers"] == ["loop-A", "loop-B"]
    assert result["answers"] == ["OK"] * COUNT
    assert result["handled"] == COUNT
    # the connections' readers, left waiting on loop-A, read on from loop-B: nothing reconnected
    assert result["same_writer_connection"] is True
    assert "Traceback" not in stderr and "cannot go on" not in stderr, stderr[-3000:]
    assert result["closed"] == [True, True]
    assert result["threads_at_end"] == ["MainThread"]
    assert_all_finished(nsqd, topic)


# A known bug, seen once beside a CPU hog (passing in the other runs): when the loop moves to thread B
# while a connection's reader is midway through a frame, that connection is closed ("reading stopped
# midway") and the Reader reconnects, but the message in flight on it was not handled again within
# the program's 90 s (19 of 20 handled), so run() on B never ended. Not strict until it is fixed.
@pytest.mark.xfail(strict=False, reason="a connection lost midway by a loop moved to another thread can leave "
                                        "a message unhandled (seen once under load)")
def test_reader_run_on_a_thread_then_on_another_ends_when_the_reader_closes(nsqd, topic):
    nsqd.http_mpub(topic, [b"m-%d" % i for i in range(COUNT)])
    result, stderr = run_program(nsqd, topic, "run-twice")
    assert result["ran"] == [True, True]  # each run() returned: the loop stopped, then the Reader closed
    assert result["backends"] == ["asyncio"]
    assert result["handlers"] == ["loop-A", "loop-B"]
    assert result["handled"] == COUNT
    assert result["closed"] == [True]
    assert "Traceback" not in stderr and "cannot go on" not in stderr, stderr[-3000:]


# -- the choice itself (no server) ------------------------------------------------------------------


def test_the_config_remembers_what_backend_was_asked_for():
    from msgengine.runtime import get_backend
    from nsq.config import Config

    assert Config().backend_requested == "auto"
    assert Config(backend="threads").backend_requested == "threads"
    assert Config().replace(backend=get_backend("threads")).backend_requested == "threads"


def test_the_loop_backend_is_chosen_for_auto_on_the_loops_thread_only():
    import asyncio
    import threading

    from nsq import loops
    from nsq.config import Config

    async def main():
        auto, threads = Config(), Config(backend="threads")
        bridge = loops.program_loop(None, auto.backend)
        backend = loops.loop_backend(auto, bridge)
        assert backend is not None and backend.name == "asyncio" and backend.loop is asyncio.get_running_loop()
        assert loops.loop_backend(threads, bridge) is None  # backend="threads" keeps the engine's threads
        elsewhere = []
        thread = threading.Thread(target=lambda: elsewhere.append(loops.loop_backend(auto, bridge)))
        thread.start()
        thread.join(5)
        assert elsewhere == [None]  # another thread of a running loop: not here

    asyncio.run(main())

    loop = asyncio.new_event_loop()  # set for this thread, not running yet (pynsq's programs)
    try:
        bridge = loops.program_loop(loop, Config().backend)
        assert loops.loop_backend(Config(), bridge) is None  # not now...
        later = loops.loop_backend(Config(), bridge, not_running_too=True)
        assert later is not None and later.loop is loop  # ...but on its first turn
    finally:
        loop.close()
