# The concurrency layer (msgengine.runtime): how "auto" picks a backend (checked in fresh
# interpreters, since gevent patching is process-wide), that the threads path never
# imports gevent, and the semantics of spawn/sleep/Event/Lock/Queue/call_later/
# call_threadsafe/run_blocking on both backends.
from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import nsq
import nsq.config
from msgengine.errors import EngineConfigError
import msgengine.runtime
from msgengine.runtime import get_backend

from tests.support import waiting

from tests.support.servers import REPO_ROOT
WAIT = 5.0  # generous deadline for anything that should happen "soon"


def run_python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, "subprocess failed:\nstdout:\n%s\nstderr:\n%s" % (proc.stdout, proc.stderr)
    return proc


wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.005)


# ----------------------------------------------------------------------------- choosing a backend


def test_auto_is_threads_and_neither_gevent_nor_a_loop_is_imported_on_the_threads_path(nsqd, topic):
    proc = run_python(
        """
        import sys
        import msgengine.runtime
        import nsq
        assert "gevent" not in sys.modules, "import nsq imported gevent"
        backend = msgengine.runtime.get_backend("auto")
        assert backend.name == "threads", backend.name
        w = nsq.Writer([sys.argv[1]])
        assert w.backend.name == "threads"
        assert w.pub(sys.argv[2], b"from threads") == b"OK"
        assert w.mpub(sys.argv[2], [b"a", b"b"]) == b"OK"
        r = nsq.Reader(sys.argv[2], "c", lambda m: True, nsqd_tcp_addresses=[sys.argv[1]])
        r.start()
        r.close()
        w.close()
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("gevent", "tornado", "asyncio"))
        assert not leaked, leaked  # a plain script loads neither gevent nor an event loop
        print("threads-ok")
        """,
        nsqd.tcp_address,
        topic,
    )
    assert "threads-ok" in proc.stdout
    assert nsqd.message_count(topic) == 3


def test_auto_is_gevent_after_patch_all(nsqd, topic):
    proc = run_python(
        """
        from gevent import monkey
        monkey.patch_all()
        import sys
        import msgengine.runtime
        import nsq
        backend = msgengine.runtime.get_backend("auto")
        assert backend.name == "gevent", backend.name
        assert msgengine.runtime.gevent_socket_patched()
        w = nsq.Writer([sys.argv[1]])
        assert w.backend is backend
        assert w.pub(sys.argv[2], b"from gevent") == b"OK"
        w.close()
        print("gevent-ok")
        """,
        nsqd.tcp_address,
        topic,
    )
    assert "gevent-ok" in proc.stdout
    assert nsqd.message_count(topic) == 1


def test_auto_stays_threads_when_gevent_imported_but_not_patched():
    proc = run_python(
        """
        import gevent, gevent.monkey
        import msgengine.runtime
        import nsq
        assert not msgengine.runtime.gevent_socket_patched()
        assert msgengine.runtime.get_backend("auto").name == "threads"
        print("ok")
        """
    )
    assert "ok" in proc.stdout


def test_auto_in_this_process_is_threads():
    # the test session never patches gevent (conftest enforces it)
    assert get_backend("auto").name == "threads"
    assert get_backend().name == "threads"


@pytest.fixture(params=["gevent", "threads", "asyncio"])
def backend(request):
    """The backend under test; an "asyncio" test runs in a task of that backend on a loop of its
    own (tests/engine/conftest.py)."""
    return request.param


def test_asyncio_outside_a_running_loop_is_a_config_error_naming_the_loop():
    with pytest.raises(EngineConfigError, match="running event loop"):
        get_backend("asyncio")
    with pytest.raises(nsq.Error, match="running event loop"):
        nsq.config.Config(backend="asyncio")


@pytest.mark.parametrize("name", ["", "GEVENT", "tornado", None, 3])
def test_invalid_backend_name_raises_a_config_error(name):
    # the engine refuses it with its own error; nsq's Config says it with nsq's
    with pytest.raises(EngineConfigError) as info:
        get_backend(name)
    assert isinstance(info.value, ValueError)
    with pytest.raises(nsq.Error) as info:
        nsq.config.Config(backend=name)
    assert isinstance(info.value, nsq.errors.ConfigError)
    assert isinstance(info.value, ValueError)


def test_invalid_backend_name_rejected_by_writer():
    with pytest.raises(nsq.Error):
        nsq.Writer(["127.0.0.1:4150"], backend="tornado")


def test_get_backend_returns_one_instance_per_name_and_passes_instances_through(backend):
    b = get_backend(backend)
    assert b.name == backend
    assert get_backend(backend) is b
    assert get_backend(b) is b
    assert isinstance(b, msgengine.runtime.Backend)


# ----------------------------------------------------------------------------- primitives


def test_spawn_runs_with_args_and_join_waits(backend):
    b = get_backend(backend)
    results = []

    def work(a, c):
        b.sleep(0.01)
        results.append(a + c)

    task = b.spawn(work, 2, 3)
    task.join(WAIT)
    assert results == [5]


def test_spawned_tasks_have_distinct_ids(backend):
    b = get_backend(backend)
    ids = []
    release = b.event()

    def record():
        ids.append(b.current_task_id())
        release.wait(WAIT)  # stay alive so that no id can be reused

    tasks = [b.spawn(record) for _ in range(5)]
    wait_for(lambda: len(ids) == 5, backend)
    main_id = b.current_task_id()
    release.set()
    for t in tasks:
        t.join(WAIT)
    assert len(set(ids)) == 5
    assert main_id not in ids


def test_sleep_yields_to_other_tasks(backend):
    b = get_backend(backend)
    order = []

    def other():
        order.append("other")

    task = b.spawn(other)
    wait_for(lambda: order, backend)
    order.append("main")
    task.join(WAIT)
    assert order == ["other", "main"]


def test_event_semantics(backend):
    b = get_backend(backend)
    ev = b.event()
    assert not ev.is_set()
    assert not ev.wait(0.01)  # times out, returns falsy
    ev.set()
    assert ev.is_set()
    assert ev.wait(0)
    assert ev.wait(WAIT)
    ev.clear()
    assert not ev.is_set()


def test_event_set_by_another_task_wakes_waiter(backend):
    b = get_backend(backend)
    ev = b.event()
    woke = []

    def waiter():
        woke.append(bool(ev.wait(WAIT)))

    task = b.spawn(waiter)
    b.sleep(0.01)
    assert woke == []
    setter = b.spawn(ev.set)
    task.join(WAIT)
    setter.join(WAIT)
    assert woke == [True]


def test_lock_is_usable_and_reentrant(backend):
    b = get_backend(backend)
    lock = b.lock()
    with lock:
        with lock:  # re-entrant for the owner
            pass
    assert lock.acquire()
    assert lock.acquire()
    lock.release()
    lock.release()


def test_lock_regions_exclude_other_tasks(backend):
    # The contract the library relies on: no other task runs inside a locked region.
    # Threads get a real lock, so the region may even give up the GIL; gevent greenlets
    # only switch where they block, and locked regions never block (the gevent backend's
    # lock is free for that reason), so there the region does not yield.
    b = get_backend(backend)
    lock = b.lock()
    inside = []
    overlaps = []
    done = []

    def worker(n):
        for _ in range(50):
            with lock:
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(list(inside))
                if backend == "threads":
                    b.sleep(0)  # releases the GIL while holding the lock
                inside.remove(n)
            b.sleep(0)  # let the others in between regions
        done.append(n)

    tasks = [b.spawn(worker, i) for i in range(5)]
    for t in tasks:
        t.join(WAIT)
    assert sorted(done) == list(range(5))
    assert overlaps == []


def test_threads_lock_blocks_other_thread_until_released():
    b = get_backend("threads")
    lock = b.lock()
    acquired = []
    lock.acquire()

    def other():
        with lock:
            acquired.append(True)

    task = b.spawn(other)
    b.sleep(0.02)
    assert acquired == []
    lock.release()
    task.join(WAIT)
    assert acquired == [True]


def test_waiter_is_a_one_shot_signal(backend):
    b = get_backend(backend)
    # set by another task while this one waits
    waiter = b.waiter()
    woke = []

    def setter():
        b.sleep(0.01)
        waiter.set()

    task = b.spawn(setter)
    waiter.wait()
    woke.append(True)
    task.join(WAIT)
    assert woke == [True]
    # set before the wait: the wait returns at once; a second set is harmless
    early = b.waiter()
    early.set()
    early.set()
    early.wait()


def test_many_waiters_each_woken_once(backend):
    b = get_backend(backend)
    waiters = [b.waiter() for _ in range(20)]
    woken = []

    def wait_on(i):
        waiters[i].wait()
        woken.append(i)

    tasks = [b.spawn(wait_on, i) for i in range(20)]
    b.sleep(0.01)
    for w in reversed(waiters):
        w.set()
    for t in tasks:
        t.join(WAIT)
    assert sorted(woken) == list(range(20))


def test_queue_fifo_and_blocking_get(backend):
    b = get_backend(backend)
    q = b.queue()
    for i in range(5):
        q.put(i)
    assert [q.get() for _ in range(5)] == [0, 1, 2, 3, 4]

    got = []

    def consumer():
        got.append(q.get(timeout=WAIT))

    task = b.spawn(consumer)
    b.sleep(0.01)
    assert got == []
    q.put("late")
    task.join(WAIT)
    assert got == ["late"]


def test_queue_get_timeout_raises_empty(backend):
    import queue as std_queue

    b = get_backend(backend)
    q = b.queue()
    expected = [std_queue.Empty]
    if backend == "gevent":
        import gevent.queue

        expected.append(gevent.queue.Empty)
    with pytest.raises(tuple(expected)):
        q.get(timeout=0.01)


def test_call_later_fires_once_with_args_after_delay(backend):
    b = get_backend(backend)
    calls = []
    start = b.monotonic()
    timer = b.call_later(0.05, lambda *a: calls.append((b.monotonic(), a)), "x", 1)
    assert isinstance(timer, msgengine.runtime.Timer)
    wait_for(lambda: calls, backend)
    timer.task.join(WAIT)
    assert len(calls) == 1
    fired_at, args = calls[0]
    assert args == ("x", 1)
    assert fired_at - start >= 0.05 - 0.005  # never early (small clock slack)


def test_call_later_cancel_prevents_the_call(backend):
    b = get_backend(backend)
    calls = []
    timer = b.call_later(0.2, calls.append, "fired")
    timer.cancel()
    timer.task.join(WAIT)
    b.sleep(0.01)
    assert calls == []
    timer.cancel()  # idempotent


def test_call_later_cancel_after_firing_is_harmless(backend):
    b = get_backend(backend)
    calls = []
    timer = b.call_later(0, calls.append, 1)
    wait_for(lambda: calls, backend)
    timer.task.join(WAIT)
    timer.cancel()
    assert calls == [1]


def test_call_threadsafe_runs_fn_in_backend_context(backend):
    b = get_backend(backend)
    ran = []
    done = b.event()
    main_thread = threading.get_ident()

    def fn(value):
        ran.append((value, threading.get_ident(), b.in_backend_context()))
        done.set()

    # from a foreign OS thread
    t = threading.Thread(target=b.call_threadsafe, args=(fn, "v"))
    t.start()
    assert done.wait(3)
    t.join(WAIT)
    value, thread_id, in_context = ran[0]
    assert value == "v"
    assert in_context
    if backend in ("gevent", "asyncio"):
        # the gevent hub (or the event loop) lives in this (the main) thread: the callback was moved here
        assert thread_id == main_thread
    else:
        assert thread_id == t.ident


def test_in_backend_context(backend):
    b = get_backend(backend)
    assert b.in_backend_context()
    seen = []
    t = threading.Thread(target=lambda: seen.append(b.in_backend_context()))
    t.start()
    t.join(WAIT)
    assert seen == [backend == "threads"]


def test_run_blocking_returns_value_and_does_not_stall_other_tasks(backend):
    b = get_backend(backend)
    ticks = []
    release = threading.Event()  # a real OS-level event: blocks without yielding to gevent

    def ticker():
        while not release.is_set():
            ticks.append(1)
            b.sleep(0.002)

    def blocking(x):
        # wait (in real OS terms) until the other task has shown it still runs
        deadline = b.monotonic() + WAIT
        while len(ticks) < 5 and b.monotonic() < deadline:
            threading.Event().wait(0.002)
        release.set()
        return x * 2, len(ticks)

    task = b.spawn(ticker)
    result, ticks_seen = b.run_blocking(blocking, 21)
    task.join(WAIT)
    assert result == 42
    assert ticks_seen >= 5


def test_create_connection_returns_connected_socket(backend):
    import socket

    b = get_backend(backend)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        sock = b.create_connection(listener.getsockname(), timeout=WAIT)
        try:
            assert sock.getpeername() == listener.getsockname()
        finally:
            sock.close()
    finally:
        listener.close()
