"""Threads and greenlets in one process, and os.fork().

Under gevent only the hub's OS thread may touch the hub; calls from other
OS threads enter through the runtime's door (msgengine/runtime.py). These tests
check the door itself, the debug switch that refuses any other way in, the
public calls users make from OS threads, a bounded stress program that
mixes all of it under monkey patching with CPU hogs beside it and nsqd
restarting, and what a client made before os.fork() does in the child.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

import nsq
from msgengine.errors import CallTimeoutError
from nsq.errors import HubThreadError
from msgengine.primitives import NULL_LOCK, NullLock, lock_or_none
from msgengine.runtime import get_backend, os_thread_ident
from tests.support.servers import PROGRAMS_DIR
from tests.support.subprocess_programs import Program, program_env
from tests.support.waiting import wait_for

PROGRAMS = PROGRAMS_DIR
WAIT = 10


def last_json_line(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert lines, "the program printed no result:\n%s" % text[-3000:]
    return json.loads(lines[-1])


def in_os_thread(fn, *args):
    """Run fn(*args) on a new OS thread; returns a thread whose .outcome is ("ok", value) or ("raised", exc)."""
    thread = threading.Thread(target=lambda: setattr(thread, "outcome", _call(fn, args)), daemon=True)
    thread.start()
    return thread


def _call(fn, args):
    try:
        return ("ok", fn(*args))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        return ("raised", exc)


# -- where a call may run ----------------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["gevent", "threads"])
def test_may_call_inline_answers_as_in_backend_context_on_each_thread(backend_name):
    # (both backends answer may_call_inline() directly, without asking in_backend_context())
    b = get_backend(backend_name)
    assert b.may_call_inline() is True and b.in_backend_context() is True
    thread = in_os_thread(lambda: (b.may_call_inline(), b.in_backend_context()))
    thread.join(WAIT)
    expected = backend_name == "threads"  # (under gevent another OS thread is outside the hub's context)
    assert thread.outcome == ("ok", (expected, expected))


def test_lock_or_none_drops_only_a_lock_that_does_nothing():
    assert lock_or_none(NULL_LOCK) is None
    hub = get_backend("gevent")
    lock = hub.lock()  # (a NullLock; one that checks the caller's thread when the checks are on, as in tests)
    assert lock_or_none(lock) is (lock if hub.checked else None)
    real = get_backend("threads").lock()
    assert lock_or_none(real) is real

    class Checking(NullLock):  # (as gevent's with its checks on: it does something, so it stays)
        __slots__ = ()

    checking = Checking()
    assert lock_or_none(checking) is checking


# -- the door -----------------------------------------------------------------------------


def test_calls_from_os_threads_run_on_the_hub_and_leave_the_loop_count_intact():
    b = get_backend("gevent")
    hub_thread = os_thread_ident()
    ran_on = []
    calls = 3000

    def flood():
        for i in range(calls):
            b.call_threadsafe(lambda: ran_on.append(os_thread_ident()))

    lowest = 0
    loop = __import__("gevent").get_hub().loop
    threads = [in_os_thread(flood) for _ in range(2)]
    deadline = b.monotonic() + WAIT
    while (len(ran_on) < 2 * calls or any(t.is_alive() for t in threads)) and b.monotonic() < deadline:
        b.sleep(0.0005)  # the hub starts and stops a timer each turn: the count moves on this thread
        lowest = min(lowest, loop.activecnt)
    assert set(ran_on) == {hub_thread}
    assert len(ran_on) == 2 * calls
    assert lowest >= 0 and b.hub_problem() is None


def test_call_and_wait_returns_the_result_or_raises_on_the_calling_thread():
    b = get_backend("gevent")

    def on_hub(x):
        b.sleep(0.01)  # a greenlet primitive: only possible on the hub
        if x < 0:
            raise ValueError("negative")
        return x * 2, os_thread_ident()

    ok = in_os_thread(b.call_and_wait, lambda: on_hub(21), 5)
    bad = in_os_thread(b.call_and_wait, lambda: on_hub(-1), 5)
    wait_for(lambda: not ok.is_alive() and not bad.is_alive(), "gevent", timeout=WAIT)
    assert ok.outcome == ("ok", (42, os_thread_ident()))
    assert bad.outcome[0] == "raised" and isinstance(bad.outcome[1], ValueError)


def test_call_and_wait_gives_up_when_the_hub_does_not_run():
    b = get_backend("gevent")
    thread = in_os_thread(b.call_and_wait, lambda: "never", 0.2)
    thread.join(WAIT)  # an OS-level join: the hub does not run meanwhile
    assert not thread.is_alive()
    kind, error = thread.outcome
    assert kind == "raised" and isinstance(error, CallTimeoutError) and isinstance(error, TimeoutError)
    assert "did not complete" in str(error)
    b.sleep(0.01)  # the queued call runs now, harmlessly


@pytest.mark.parametrize(
    "use",
    [
        ("event()", lambda b: b.event()),
        ("queue()", lambda b: b.queue()),
        ("spawn", lambda b: b.spawn(lambda: None)),
        ("sleep", lambda b: b.sleep(0)),
        ("lock", lambda b: b.lock().__enter__()),
    ],
    ids=lambda use: use[0],
)
def test_the_debug_switch_refuses_hub_primitives_on_other_threads(use):
    b = get_backend("gevent")
    assert b.checked, "the suite runs with NSQ_CHECK_HUB_THREAD=1 (tests/conftest.py)"
    name, fn = use
    thread = in_os_thread(fn, b)
    thread.join(WAIT)
    kind, error = thread.outcome
    assert kind == "raised" and isinstance(error, HubThreadError), thread.outcome
    assert str(error).startswith(name)


def test_the_debug_switch_refuses_a_socket_write_from_another_thread(nsqd):
    conn = nsq.Connection("127.0.0.1", int(nsqd.tcp_address.rpartition(":")[2]), backend="gevent")
    conn.connect()
    try:
        thread = in_os_thread(conn.send, nsq.protocol.nop())
        thread.join(WAIT)
        kind, error = thread.outcome
        assert kind == "raised" and isinstance(error, HubThreadError)
        assert "Connection.send" in str(error)
    finally:
        conn.close()


# -- public calls from OS threads under gevent ----------------------------------------------


def test_writer_publishes_from_os_threads_under_gevent(nsqd, topic):
    hub_thread = os_thread_ident()
    writer = nsq.Writer([nsqd.tcp_address], backend="gevent")
    try:
        answered = []

        def publish_from_thread(i):
            result = writer.pub(topic, b"blocking-%d" % i)
            writer.pub(topic, b"callback-%d" % i, callback=lambda conn, data: answered.append((data, os_thread_ident())))
            writer.mpub(topic, [b"mpub-%d" % i])
            return result

        threads = [in_os_thread(publish_from_thread, i) for i in range(4)]
        wait_for(lambda: not any(t.is_alive() for t in threads) and len(answered) == 4, "gevent", timeout=WAIT)
        assert [t.outcome for t in threads] == [("ok", b"OK")] * 4
        assert answered == [(b"OK", hub_thread)] * 4  # callbacks run on the hub, as pub callbacks always do
        wait_for(lambda: nsqd.message_count(topic) == 12, "gevent", timeout=WAIT)
    finally:
        writer.close()


def test_clients_made_and_used_on_an_os_thread_under_gevent(nsqd, topic):
    handled = []

    def on_os_thread():
        writer = nsq.Writer([nsqd.tcp_address], backend="gevent")
        reader = nsq.Reader(topic, "ch", lambda m: handled.append(m.body) or True,
                            nsqd_tcp_addresses=[nsqd.tcp_address], backend="gevent")
        reader.start()
        results = [writer.pub(topic, b"%d" % i) for i in range(10)]
        deadline = b.monotonic() + WAIT
        while len(handled) < 10 and b.monotonic() < deadline:
            threading.Event().wait(0.01)  # this thread's own wait: the hub runs meanwhile
        reader.close()
        writer.close()
        return results, sorted(handled)

    b = get_backend("gevent")
    thread = in_os_thread(on_os_thread)
    wait_for(lambda: not thread.is_alive(), "gevent", timeout=WAIT * 2)
    assert thread.outcome == ("ok", ([b"OK"] * 10, sorted(b"%d" % i for i in range(10))))


def test_reader_closed_from_an_os_thread_under_gevent(nsqd, topic):
    nsqd.http_mpub(topic, [b"%d" % i for i in range(30)])
    handled = []

    def handler(message):
        handled.append(message.body)
        return True

    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend="gevent", max_in_flight=5)
    reader.start()
    wait_for(lambda: len(handled) == 30, "gevent", timeout=WAIT)
    closer = in_os_thread(reader.close)
    wait_for(lambda: not closer.is_alive(), "gevent", timeout=WAIT)
    assert closer.outcome == ("ok", None)
    assert reader.is_closed()
    assert nsqd.channel_stats(topic, "ch")["client_count"] == 0


def test_a_message_answered_from_an_os_thread_under_gevent(nsqd, topic):
    nsqd.http_mpub(topic, [b"a", b"b", b"c"])
    got = []

    def handler(message):
        if message.attempts > 1:
            return True  # the requeued one, back again
        message.enable_async()
        got.append(message)

    # (the requeue backs off, as in pynsq, for max_backoff_duration x 2.8 % at the first failure:
    # 3.6 s by default, here 1.4 ms; and nsqd flushes the three messages after 25 ms, its least,
    # rather than pynsq's 250)
    reader = nsq.Reader(
        topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend="gevent", max_in_flight=5,
        max_backoff_duration=0.05, output_buffer_timeout=25,
    )
    reader.start()
    try:
        wait_for(lambda: len(got) == 3, "gevent", timeout=WAIT)
        answer = in_os_thread(lambda: (got[0].touch(), got[0].finish(), got[1].finish(), got[2].requeue(delay=0)))
        wait_for(lambda: not answer.is_alive(), "gevent", timeout=WAIT)
        assert answer.outcome[0] == "ok"
        wait_for(lambda: reader.stats()["finished"] == 3, "gevent", timeout=WAIT)  # the requeued one came back
        stats = nsqd.channel_stats(topic, "ch")
        assert stats["requeue_count"] == 1 and stats["timeout_count"] == 0
    finally:
        reader.close()


# -- the stress program ---------------------------------------------------------------------


@pytest.mark.slow  # (a stress program, 4-7 s)
@pytest.mark.timeout(240)  # (its own waits, up to 190 s on a loaded machine, report first)
def test_mixed_threads_and_greenlets_under_load_lose_nothing_and_keep_the_hub_intact(
    nsqd_factory, nsqlookupd, topic
):
    nsqd = nsqd_factory(lookupd=nsqlookupd)
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
        for _ in range(2)
    ]
    kinds = ("g", "t", "cb")  # publishers: greenlets, OS threads, an OS thread with callbacks
    program = Program([
        os.path.join(PROGRAMS, "mixed_threads_greenlets.py"), "--nsqd", nsqd.tcp_address,
        "--lookupd", nsqlookupd.http_address, "--topic", topic, "--churn-every", "0.5",
    ])
    try:
        assert program.line(timeout=30) == "STARTED\n", program.stderr_tail()
        # let it run: a reader closed on the hub and one from an OS thread, every kind of publisher
        # acknowledged; then take nsqd away under it
        program.round_where(lambda r: r["closes"] >= 2 and all(r["acked"][k] for k in kinds), timeout=60)
        nsqd.restart()
        # it goes on for two more rounds and until every kind of publisher is acknowledged again
        program.say("RESTARTED")
        out, err = program.finish(timeout=100)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if program.proc.poll() is None:
            program.proc.kill()
            program.finish(timeout=10)
    result = last_json_line(out + "\n" + err)
    print("stress result:", json.dumps(result))
    assert program.proc.returncode == 0, err[-3000:]
    assert result["min_activecnt"] >= 0, result
    assert result["hub_problem"] is None, result
    assert result["hung"] == 0, result
    assert result["missing_count"] == 0, result
    assert set(result["acked_by"]) >= {"g0", "t0", "cb"}, result  # greenlets, OS threads and callbacks all published
    assert all(result["acked_since_restarted"][k] for k in kinds), result  # ... and again after the restart
    assert "HubStateError" not in result["errors"] and "HubThreadError" not in result["errors"], result
    assert "LoopExit" not in err, err[-3000:]


# -- fork -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["threads", "gevent"])
def test_clients_made_before_fork(nsqd, topic, tmp_path, backend_name):
    log = tmp_path / "handled.log"
    proc = subprocess.run(
        [sys.executable, os.path.join(PROGRAMS, "fork_clients.py"), "--backend=%s" % backend_name,
         "--nsqd", nsqd.tcp_address, "--topic", topic, "--log", str(log)],
        env=program_env(), capture_output=True, text=True, timeout=90,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = next(r for r in results if r["process"] == "child")
    parent = next(r for r in results if r["process"] == "parent")
    # the child publishes on the inherited Writer: it reconnects on its own sockets
    assert child["published"] == 50 and child["errors"] == [], child
    # the inherited, started Reader does not consume in the child: it says so at once
    assert child["reader_run"] == "ForkedError", child
    # the parent goes on publishing and consuming, and gets everything
    assert "child_hung" not in parent and parent["child_status"] == 0, parent
    assert parent["published"] == 50 and parent["errors"] == [], parent
    assert parent["parent_missing"] == [], parent
    # no handler ran in the child, and nothing is left on nsqd
    handled_by = {line.split()[0] for line in log.read_text().splitlines()}
    assert handled_by == {str(parent["pid"])}
    stats = nsqd.channel_stats(topic, "forked")
    assert nsqd.message_count(topic) == 101
    assert stats["depth"] == 0 and stats["in_flight_count"] == 0 and stats["timeout_count"] == 0
