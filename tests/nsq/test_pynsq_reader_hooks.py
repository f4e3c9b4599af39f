"""Where a Reader calls user code, as pynsq does: in a program with a loop
(tornado, or plain asyncio), every hook (handler, preprocess_message,
validate_message, giving_up, heartbeat, disabled, Message listeners) runs on
the loop's thread, also for a Reader made before the program imported
tornado; under gevent every hook runs in a greenlet of the hub, and an
``async def`` handler completes and decides FIN/REQ as on threads.

Each case is a real program (tests/support/programs/reader_hooks.py) against
a real nsqd; see that program for what it records. Last, backoff's RDY 0 goes
out before the FIN of the success that starts the next block, as in pynsq.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import nsq
from tests.support.servers import PROGRAMS_DIR
from tests.support.subprocess_programs import program_env
from tests.support.waiting import wait_for

PROGRAM = os.path.join(PROGRAMS_DIR, "reader_hooks.py")
FINS, REQS = 3, 2
USER_CODE = ("handler", "preprocess_message", "validate_message", "giving_up", "Message.on(finish)")


def run_program(nsqd, topic, mode, *flags):
    """Publish the program's messages, run it; its report, and the channel's stats at its end."""
    nsqd.http_mpub(topic, [b"fin-%d" % i for i in range(FINS)] + [b"req-%d" % i for i in range(REQS)] + [b"give-up"])
    proc = subprocess.run(
        [sys.executable, PROGRAM, mode, nsqd.tcp_address, topic, str(FINS), str(REQS), *flags],
        env=program_env(), capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["done"], (report, proc.stderr[-3000:])
    return report, nsqd.channel_stats(topic, "c")


@pytest.mark.parametrize("mode", ["tornado", "asyncio", "tornado-late"])
def test_every_hook_runs_on_the_programs_loop(nsqd, topic, mode):
    report, _ = run_program(nsqd, topic, mode)
    hooks = report["hooks"]
    # the Reader runs on the loop's asyncio backend: connect_to_nsqd too (it waits in a task of the
    # loop, where a wait is an await), as pynsq calls it on its IOLoop; and no engine thread runs
    on_loop = USER_CODE + ("heartbeat", "disabled", "connect_to_nsqd")
    assert {hook: hooks.get(hook) for hook in on_loop} == {hook: ["loop"] for hook in on_loop}
    assert report["backend"] == "asyncio"
    assert report["threads"] == ["MainThread"], report["threads"]


def test_with_backend_threads_a_loop_program_keeps_its_connections_off_the_loop(nsqd, topic):
    report, _ = run_program(nsqd, topic, "tornado", "--threads")
    hooks = report["hooks"]
    assert report["backend"] == "threads"
    on_loop = USER_CODE + ("heartbeat", "disabled")
    assert {hook: hooks.get(hook) for hook in on_loop} == {hook: ["loop"] for hook in on_loop}
    # connect_to_nsqd blocks until connected and subscribed: on threads it stays off the loop
    assert "loop" not in hooks["connect_to_nsqd"], hooks


def test_without_a_loop_hooks_run_on_the_librarys_threads(nsqd, topic):
    report, _ = run_program(nsqd, topic, "threads")
    hooks = report["hooks"]
    for hook in USER_CODE + ("heartbeat", "disabled", "connect_to_nsqd"):
        assert hooks.get(hook) and "main" not in hooks[hook], (hook, hooks)


def test_under_gevent_every_hook_runs_in_a_greenlet_of_the_hub(nsqd, topic):
    report, _ = run_program(nsqd, topic, "gevent")
    hooks = report["hooks"]
    in_hub = USER_CODE + ("heartbeat", "disabled", "connect_to_nsqd")
    assert {hook: hooks.get(hook) for hook in in_hub} == {hook: ["hub"] for hook in in_hub}


@pytest.mark.parametrize("mode", ["threads", "gevent", "tornado"])
def test_async_def_handlers_complete_and_decide_fin_or_req(nsqd, topic, mode):
    report, stats = run_program(nsqd, topic, mode, "--async")
    assert report["finals"] == FINS + REQS + 1
    # req-* once each (False on their first attempt), give-up twice, then giving_up finishes it
    assert stats["requeue_count"] == REQS + 2
    assert stats["timeout_count"] == 0
    assert stats["depth"] == stats["in_flight_count"] == stats["deferred_count"] == 0
    if mode == "gevent":  # what the hub's greenlets run, around the body that ran on an OS thread's asyncio loop
        hooks = report["hooks"]
        for hook in ("preprocess_message", "validate_message", "giving_up", "Message.on(finish)"):
            assert hooks.get(hook) == ["hub"], (hook, hooks)


# -- backoff, as pynsq orders it -------------------------------------------------------------------


def test_after_a_success_in_backoff_nothing_arrives_until_the_next_block_ends(nsqd, topic, backend):
    """pynsq sends the RDY 0 that starts the next backoff block before the FIN:
    nsqd pushes nothing more until the block ends. (backoff_block is read at
    each call: with max_in_flight=1, a message that arrives during a block was
    pushed because the FIN went out first.)"""
    nsqd.http_mpub(topic, [b"m%d" % i for i in range(6)])
    calls = []  # (a backoff block was on when the message was handed over, what the handler answered)

    def handler(message):
        ok = len(calls) >= 3  # three failures, then successes: each success shortens the backoff
        calls.append((reader._subscription.rdy.backoff_block, ok))
        return ok

    reader = nsq.Reader(topic, "c", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend,
                        max_in_flight=1, max_backoff_duration=2, requeue_delay=0)
    try:
        reader.start()
        wait_for(lambda: len(calls) == 9 and not reader.stats()["in_backoff"], backend)
    finally:
        reader.close()
    after_success = [blocked for (blocked, _), (_, previous_ok) in zip(calls[1:], calls) if previous_ok]
    assert after_success and not any(after_success), calls
