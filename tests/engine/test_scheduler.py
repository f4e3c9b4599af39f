# Timers: Backend.call_later / call_every on both backends, the threads backend's one scheduler
# thread per process (msgengine/scheduler.py) and what a forked child's scheduler does.
#
# No test measures how late a timer is. Where a test must show that something did NOT happen
# by some point, it waits for a sentinel timer with a later deadline: timers run in deadline
# order, so had the other call been due it would have run first.
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from msgengine.errors import EngineConfigError
from msgengine.runtime import Timer, get_backend, os_thread_ident
from msgengine.scheduler import _COMPACT_AT, TimerHandle, thread_scheduler

from tests.support import waiting

from tests.support.servers import REPO_ROOT
WAIT = 10.0  # how long anything that must happen "soon" may take before a test fails
wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.002)


def after_sentinel(b, delay: float) -> None:
    """Wait until a timer set now with this delay has run, and so every timer due earlier."""
    assert b.call_later(delay, lambda: None).join(WAIT)


@contextlib.contextmanager
def timers_held(b):
    """Nothing runs in the block, however long it takes: on threads a callback keeps the
    scheduler thread busy till the block ends; under gevent the hub runs nothing while this
    test's greenlet does not yield."""
    if b.name != "threads":
        yield
        return
    entered, release = threading.Event(), threading.Event()

    def hold():
        entered.set()
        release.wait(WAIT)

    b.call_later(0, hold)
    assert entered.wait(WAIT)
    try:
        yield
    finally:
        release.set()


def live_threads() -> int:
    """How many OS threads of this process run. threading.enumerate() misses raw _thread
    threads; a thread group leader that has ended stays listed, as a zombie, until the
    process ends."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/stat" % tid) as f:
                count += f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
        except FileNotFoundError:  # ended meanwhile
            pass
    return count


def run_program(code: str, *helpers) -> dict:
    """Run code in a fresh interpreter, after the source of each helper function; return the
    JSON object it printed last."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    source = "import os\n" + "".join(inspect.getsource(h) for h in helpers) + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60, env=env, cwd=REPO_ROOT
    )
    assert proc.returncode == 0, "program failed:\nstdout:\n%s\nstderr:\n%s" % (proc.stdout, proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, "the program printed no result:\n%s\n%s" % (proc.stdout, proc.stderr)
    return json.loads(lines[-1])


# ----------------------------------------------------------------------------- both backends


@pytest.mark.timeout(30)
def test_call_later_fires_once_with_args(backend):
    b = get_backend(backend)
    calls = []
    handle = b.call_later(0.01, lambda *args: calls.append(args), "a", 2)
    assert isinstance(handle, Timer)
    assert handle.join(WAIT)
    after_sentinel(b, 0.02)
    assert calls == [("a", 2)]
    assert not handle.cancelled and handle.deadline is None


@pytest.mark.timeout(30)
def test_cancel_before_firing_prevents_the_call(backend):
    b = get_backend(backend)
    calls = []
    with timers_held(b):
        handle = b.call_later(0.001, calls.append, "fired")
        assert handle.deadline is not None
        handle.cancel()
        handle.cancel()  # idempotent
    assert handle.cancelled
    assert handle.join(WAIT)  # nothing left to run
    after_sentinel(b, 0.04)
    assert calls == []


@pytest.mark.timeout(30)
def test_call_every_repeats_until_cancelled_each_run_an_interval_after_the_last(backend):
    b = get_backend(backend)
    interval = 0.005
    runs = []  # (start, end) of each call

    def tick(tag):
        assert tag == "t"
        start = b.monotonic()
        if backend == "gevent":
            b.sleep(0.001)  # a call that yields must not overlap the next one either
        runs.append((start, b.monotonic()))

    handle = b.call_every(interval, tick, "t")
    wait_for(lambda: len(runs) >= 4, backend)
    handle.cancel()
    assert handle.join(WAIT)
    seen = len(runs)
    after_sentinel(b, 10 * interval)  # the periodic timer, were it still set, is due before this
    assert len(runs) == seen
    for (_, end), (start, _) in zip(runs, runs[1:]):
        assert start - end >= interval - 0.001  # never early (the clocks' granularity aside)


@pytest.mark.timeout(30)
def test_cancel_from_inside_the_periodic_callback_stops_it(backend):
    b = get_backend(backend)
    runs = []
    handles = []

    def tick():
        runs.append(1)
        if len(runs) == 3:
            handles[0].cancel()

    handles.append(b.call_every(0.002, tick))
    assert handles[0].join(WAIT)
    after_sentinel(b, 0.02)
    assert len(runs) == 3


@pytest.mark.timeout(30)
def test_a_raising_callback_stops_neither_its_periodic_timer_nor_later_timers(backend, caplog):
    b = get_backend(backend)
    caplog.set_level(logging.ERROR)
    raised = []

    def boom(kind):
        raised.append(kind)
        raise RuntimeError("boom %s" % kind)

    b.call_later(0, boom, "once")
    periodic = b.call_every(0.002, boom, "every")
    wait_for(lambda: raised.count("every") >= 3, backend)
    periodic.cancel()
    assert periodic.join(WAIT)
    fired = []
    assert b.call_later(0.001, fired.append, "after").join(WAIT)
    assert fired == ["after"]
    assert "once" in raised
    failures = [r for r in caplog.records if r.exc_info and "timer callback" in r.getMessage()]
    assert len(failures) >= 4
    assert {str(r.exc_info[1]) for r in failures} >= {"boom once", "boom every"}


@pytest.mark.timeout(30)
def test_timers_fire_in_deadline_order(backend):
    b = get_backend(backend)
    order = []
    handles = {}
    with timers_held(b):  # none runs before its deadline was read
        for i, delay in enumerate([0.03, 0.0, 0.05, 0.01, 0.04, 0.02, 0.01, 0.0]):
            handles[i] = b.call_later(delay, order.append, i)
        deadlines = {i: h.deadline for i, h in handles.items()}
    for h in handles.values():
        assert h.join(WAIT)
    assert order == sorted(deadlines, key=lambda i: (deadlines[i], i))


@pytest.mark.timeout(30)
def test_bad_delays_are_refused_and_a_negative_delay_means_now(backend):
    b = get_backend(backend)
    for bad in (0, -1, float("nan")):
        with pytest.raises(EngineConfigError):
            b.call_every(bad, lambda: None)
    with pytest.raises(ValueError):
        b.call_later(float("nan"), lambda: None)
    fired = []
    assert b.call_later(-5, fired.append, 1).join(WAIT)
    assert fired == [1]


# ----------------------------------------------------------------------------- threads


@pytest.mark.timeout(30)
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc/self/task")
def test_many_timers_add_at_most_one_os_thread_and_all_run_on_it():
    b = get_backend("threads")
    before = live_threads()
    ran_on = []
    handles = [b.call_later(0.05 + i * 0.0005, lambda: ran_on.append(os_thread_ident())) for i in range(200)]
    handles += [b.call_every(0.01, lambda: None) for _ in range(20)]
    while_pending = live_threads()
    for h in handles[:200]:
        assert h.join(WAIT)
    for h in handles[200:]:
        h.cancel()
    after = live_threads()
    assert while_pending - before <= 1, (before, while_pending)
    assert after - before <= 1, (before, after)
    assert len(ran_on) == 200
    assert len(set(ran_on)) == 1  # one scheduler thread ran every call...
    assert ran_on[0] != threading.get_ident()  # ...and it is not the caller's


@pytest.mark.timeout(30)
def test_callbacks_run_on_the_scheduler_thread_and_cannot_join_a_pending_timer():
    b = get_backend("threads")
    later = b.call_later(3600, lambda: None)
    seen = []

    def inside():
        seen.append(thread_scheduler().in_scheduler_thread())
        try:
            later.join(1)
        except RuntimeError as exc:  # waiting here would stop the very thread that runs timers
            seen.append(str(exc))

    assert b.call_later(0, inside).join(WAIT)
    later.cancel()
    assert seen[0] is True and "scheduler thread" in seen[1]
    assert not thread_scheduler().in_scheduler_thread()


@pytest.mark.timeout(30)
def test_cancel_is_thread_safe_and_cancelled_entries_do_not_pile_up():
    b = get_backend("threads")
    scheduler = thread_scheduler()
    heap_before = len(scheduler._heap)
    fired = []
    start = threading.Event()
    with timers_held(b):
        handles = [b.call_later(0.001 + i * 1e-5, fired.append, i) for i in range(1000)]
        assert all(isinstance(h, TimerHandle) for h in handles)

        def cancel_all():
            start.wait(WAIT)
            for h in handles:
                h.cancel()

        threads = [threading.Thread(target=cancel_all) for _ in range(4)]
        for t in threads:
            t.start()
        start.set()
        for t in threads:
            t.join(WAIT)
        assert all(h.cancelled and h.join(0) for h in handles)
        assert len(scheduler._heap) - heap_before <= 2 * _COMPACT_AT  # dropped, not kept till their deadline
    after_sentinel(b, 0.05)
    assert fired == []


@pytest.mark.timeout(90)
def test_a_forked_child_gets_a_fresh_scheduler_thread_and_none_of_the_parents_timers():
    result = run_program(
        """
        import json, os, threading
        from msgengine.runtime import get_backend
        b = get_backend("threads")
        ran_on = []  # native ids: a child's new thread may get a dead thread's pthread id
        assert b.call_later(0, lambda: ran_on.append(threading.get_native_id())).join(10)
        fired = []
        pending = b.call_later(0.3, fired.append, "parent timer")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ticks = []
                every = b.call_every(0.005, lambda: ticks.append(threading.get_native_id()))
                # due after the parent's timer: had the child kept that timer, it would run first
                last = b.call_later(0.31, lambda: fired.append("child timer"))
                ok = last.join(10)
                every.cancel()
                report = {"joined": ok, "fired": fired, "ticks": len(ticks),
                          "child_thread_is_new": set(ticks) != {ran_on[0]} and len(set(ticks)) == 1,
                          "parent_timer_cancelled": pending.cancelled}
                os.write(w, json.dumps(report).encode())
            finally:
                os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        _, status = os.waitpid(pid, 0)
        assert pending.join(10)
        print(json.dumps({"child": json.loads(data), "status": status, "parent_fired": fired}))
        """
    )
    assert result["status"] == 0
    child = result["child"]
    assert child["joined"]
    assert child["fired"] == ["child timer"]  # the parent's pending timer did not fire in the child
    assert child["parent_timer_cancelled"]
    assert child["ticks"] >= 1 and child["child_thread_is_new"]
    assert result["parent_fired"] == ["parent timer"]  # ...and still fired in the parent


@pytest.mark.timeout(90)
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc/self/task")
def test_a_fork_inside_a_timer_callback_leaves_the_child_one_working_scheduler_thread():
    result = run_program(
        """
        import json, os, threading, time
        from msgengine.runtime import get_backend
        b = get_backend("threads")
        r, w = os.pipe()
        pids = []

        def fork_here():  # on the scheduler thread, which is the child's only thread
            pid = os.fork()
            if pid:
                pids.append(pid)
                return
            got = []
            handle = b.call_later(0, lambda: got.append(threading.get_native_id()))
            ok = handle.join(10)  # a new scheduler thread must run it: this one is busy here
            new = bool(got) and got[0] != threading.get_native_id()

            def report():  # runs once this callback has returned, and its thread has ended
                try:
                    deadline = time.monotonic() + 10
                    while live_threads() > 1 and time.monotonic() < deadline:
                        time.sleep(0.001)
                    threads = live_threads()
                    os.write(w, json.dumps({"ok": ok, "new_thread": new, "threads": threads}).encode())
                finally:
                    os._exit(0)

            b.call_later(0, report)

        assert b.call_later(0, fork_here).join(10)
        os.close(w)
        data = os.read(r, 65536)
        _, status = os.waitpid(pids[0], 0)
        again = []
        assert b.call_later(0, again.append, 1).join(10)  # the parent's scheduler goes on
        print(json.dumps({"child": json.loads(data), "status": status, "again": again}))
        """,
        live_threads,
    )
    assert result["status"] == 0
    assert result["child"] == {"ok": True, "new_thread": True, "threads": 1}
    assert result["again"] == [1]


# ----------------------------------------------------------------------------- gevent


def in_os_thread(fn, *args):
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(30)
def test_gevent_timers_set_and_cancelled_from_other_os_threads_go_through_the_door():
    b = get_backend("gevent")
    assert b.checked  # NSQ_CHECK_HUB_THREAD=1 (conftest): a foreign touch of the hub would raise
    hub_thread = os_thread_ident()
    ran_on = []
    handles = []
    setter = in_os_thread(lambda: handles.append(b.call_later(0, lambda: ran_on.append(os_thread_ident()))))
    wait_for(lambda: ran_on, "gevent")
    setter.join(WAIT)
    assert ran_on == [hub_thread]

    calls = []
    handle = b.call_later(0.001, calls.append, "fired")
    canceller = in_os_thread(handle.cancel)
    canceller.join(WAIT)  # an OS-level join: the hub, and so the timer, does not run meanwhile
    assert handle.join(WAIT) and handle.cancelled
    after_sentinel(b, 0.04)
    assert calls == []
    assert b.hub_problem() is None


@pytest.mark.timeout(30)
def test_gevent_timer_callbacks_may_block_in_their_greenlet():
    b = get_backend("gevent")
    order = []

    def slow():
        b.sleep(0.02)  # blocking in a hub callback would raise; a timer's call has a greenlet of its own
        order.append("slow")

    slow_timer = b.call_later(0, slow)
    quick = b.call_later(0.001, order.append, "quick")
    assert slow_timer.join(WAIT) and quick.join(WAIT)
    assert order == ["quick", "slow"]  # the blocked call held up no other timer
