"""What only the asyncio backend (msgengine.aio) has: the door from coroutines (``run_sync``), a
blocking call made on the loop outside a task refused instead of freezing the loop, no OS thread of
its own, cancellation that loses no queued item, its sockets' timeouts, and a loop whose thread is
whichever runs it (a task left waiting on a thread that no longer runs the loop is handed to its
owner, Backend.when_lost). (The primitives' common
semantics run on it in tests/engine/test_runtime.py, beside gevent and threads.)"""
from __future__ import annotations

import asyncio
import queue
import socket
import threading

import pytest

from msgengine.aio import BlockingCallError, backend_for_running_loop, run_sync
from msgengine.errors import CallTimeoutError

WAIT = 5.0


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def test_run_sync_returns_the_value_and_raises_the_exception_of_a_blocking_call():
    async def main():
        backend = backend_for_running_loop()

        def slow_add(a, b):
            backend.sleep(0.01)
            return a + b

        def fails():
            backend.sleep(0)
            raise KeyError("k")

        assert await run_sync(slow_add, 2, b=3) == 5
        with pytest.raises(KeyError):
            await run_sync(fails)

    run(main())


def test_a_blocking_call_on_the_loop_outside_a_task_is_refused_not_a_freeze():
    async def main():
        backend = backend_for_running_loop()
        with pytest.raises(BlockingCallError):
            backend.sleep(0.01)
        with pytest.raises(BlockingCallError):
            backend.event().wait(1.0)
        with pytest.raises(BlockingCallError):
            backend.call_and_wait(lambda: 1)

    run(main())


def test_the_loop_goes_on_while_a_task_blocks_and_no_os_thread_is_started():
    async def main():
        backend = backend_for_running_loop()
        threads = threading.active_count()
        ticks = []

        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        event = backend.event()
        backend.call_later(0.2, event.set)
        assert await run_sync(event.wait, WAIT)  # (blocks its task for 0.2 s, not the loop)
        ticking.cancel()
        assert len(ticks) > 5
        assert threading.active_count() == threads

    run(main())


def test_a_cancelled_get_leaves_the_item_for_the_next_getter():
    async def main():
        backend = backend_for_running_loop()
        items = backend.queue()
        first = asyncio.ensure_future(run_sync(items.get))
        second = asyncio.ensure_future(run_sync(items.get))
        await asyncio.sleep(0.01)  # (both wait)
        items.put("only")  # (wakes the first getter, which is cancelled before it runs)
        first.cancel()
        assert await asyncio.wait_for(second, WAIT) == "only"
        with pytest.raises(asyncio.CancelledError):
            await first
        assert items.empty()

    run(main())


def test_a_get_that_times_out_raises_empty():
    async def main():
        backend = backend_for_running_loop()
        with pytest.raises(queue.Empty):
            await run_sync(backend.queue().get, True, 0.01)

    run(main())


def test_another_thread_enters_through_the_door_and_waits_with_a_bound():
    async def main():
        backend = backend_for_running_loop()
        loop_thread = threading.get_ident()

        def on_the_loop():
            backend.sleep(0.01)
            return threading.get_ident()

        def stuck():
            backend.sleep(WAIT)

        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, backend.call_and_wait, on_the_loop) == loop_thread
        with pytest.raises(CallTimeoutError):
            await loop.run_in_executor(None, backend.call_and_wait, stuck, 0.05)

    run(main())


def test_call_every_repeats_until_cancelled():
    async def main():
        backend = backend_for_running_loop()
        calls = []
        enough = backend.event()

        def tick():
            calls.append(1)
            if len(calls) == 3:
                enough.set()

        timer = backend.call_every(0.01, tick)
        assert await run_sync(enough.wait, WAIT)
        timer.cancel()
        assert timer.cancelled and timer.deadline is None

    run(main())


def test_socket_reads_wait_on_the_loop_and_time_out_as_sockets_do():
    async def main():
        backend = backend_for_running_loop()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        try:
            def exchange():
                sock = backend.create_connection(listener.getsockname(), WAIT)
                peer, _ = backend.run_blocking(listener.accept)
                try:
                    buffer = bytearray(16)
                    sock.settimeout(0.0)
                    with pytest.raises(BlockingIOError):
                        sock.recv_into(buffer)
                    sock.settimeout(0.05)
                    with pytest.raises(socket.timeout):
                        sock.recv_into(buffer)
                    sock.settimeout(None)
                    peer.sendall(b"hello")
                    n = sock.recv_into(buffer)
                    sock.sendall(b"back")
                    return bytes(buffer[:n]), peer.recv(4)
                finally:
                    peer.close()
                    sock.close()

            assert await run_sync(exchange) == (b"hello", b"back")
        finally:
            listener.close()

    run(main())


# -- a loop that is not running (yet, or any more): NSQ's loop programs ---------------------------


def test_a_backend_made_before_its_loop_runs_schedules_tasks_that_run_when_it_does():
    from msgengine.aio import backend_for_loop

    loop = asyncio.new_event_loop()
    try:
        backend = backend_for_loop(loop)  # (not running: the calling thread's loop)
        ran = []
        backend.spawn(lambda: ran.append(threading.current_thread() is threading.main_thread()))
        backend.call_later(0, lambda: ran.append("timer"))
        assert ran == []  # nothing runs before the loop does

        async def turn():
            await asyncio.sleep(0.05)
            return backend_for_running_loop()

        assert loop.run_until_complete(turn()) is backend  # one backend per loop, before and after it runs
        assert ran == [True, "timer"]
    finally:
        loop.close()


def test_a_blocking_call_on_a_stopped_loops_thread_runs_the_loop_until_it_is_done():
    from msgengine.aio import backend_for_loop

    loop = asyncio.new_event_loop()
    try:
        backend = backend_for_loop(loop)
        side = []
        backend.spawn(lambda: (backend.sleep(0.01), side.append("task")))

        def blocks():
            backend.sleep(0.05)
            return "done"

        assert backend.call_and_wait(blocks) == "done"
        assert side == ["task"]  # the loop ran meanwhile: other tasks went on
        assert not loop.is_running()
    finally:
        loop.close()


def test_on_a_closed_loop_a_call_runs_in_place_and_a_wait_is_refused():
    from msgengine.aio import backend_for_loop

    loop = asyncio.new_event_loop()
    backend = backend_for_loop(loop)
    loop.close()
    assert backend.call_and_wait(lambda: 42) == 42
    with pytest.raises(BlockingCallError):
        backend.call_and_wait(lambda: backend.sleep(0.01))


def test_an_inline_method_runs_in_place_in_a_callback_of_the_running_loop():
    from msgengine.runtime import from_any_thread

    class Client:
        def __init__(self, backend):
            self.backend = backend

        @from_any_thread(inline=True)
        def never_waits(self):
            return threading.current_thread() is threading.main_thread()

        @from_any_thread()
        def may_wait(self):
            return True

    async def main():
        client = Client(backend_for_running_loop())
        assert client.never_waits() is True  # (a coroutine on the loop: not a task of the backend)
        with pytest.raises(BlockingCallError):
            client.may_wait()  # refused: it could freeze the loop
        assert await run_sync(client.may_wait) is True

    run(main())


# -- the loop's thread is the one running it ------------------------------------------------------


def run_on_thread(loop, name):
    """Run loop on a new thread named name until something stops it; that thread, ended."""
    thread = threading.Thread(target=loop.run_forever, name=name)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the loop did not stop"
    return thread


def test_a_backend_made_on_one_thread_serves_its_loop_run_on_another():
    # (tornado's Thread(target=IOLoop.current().start): the backend is made here, before the loop
    # runs; its thread is the one that runs it, not this one)
    from msgengine.aio import backend_for_loop
    from msgengine.runtime import from_any_thread

    class Client:
        def __init__(self, backend):
            self.backend = backend

        @from_any_thread(inline=True)
        def never_waits(self):
            return threading.current_thread().name

    loop = asyncio.new_event_loop()
    try:
        backend = backend_for_loop(loop)
        client = Client(backend)
        seen = []

        def on_the_loop():  # a plain callback of the loop (pynsq's clients start on its first turn)
            seen.append(backend.on_loop_thread())
            seen.append(client.never_waits())  # in place: before, it waited for the loop, on the loop
            backend.spawn(lambda: (backend.sleep(0.01), seen.append(threading.current_thread().name), loop.stop()))

        loop.call_soon(on_the_loop)
        run_on_thread(loop, "A")
        assert seen == [True, "A", "A"]
        # the thread that ran it has ended: a blocking call here runs the loop until it is done
        assert backend.on_loop_thread() is True
        assert backend.call_and_wait(lambda: (backend.sleep(0.01), threading.current_thread().name)[1]) == "MainThread"
    finally:
        loop.close()


def test_while_the_loop_runs_on_another_thread_this_one_goes_through_the_door():
    from msgengine.aio import backend_for_loop

    loop = asyncio.new_event_loop()
    try:
        backend = backend_for_loop(loop)
        answers = []
        started = threading.Event()
        loop.call_soon(started.set)
        thread = threading.Thread(target=loop.run_forever, name="A")
        thread.start()
        assert started.wait(WAIT)
        assert backend.on_loop_thread() is False
        answers.append(backend.call_and_wait(lambda: (backend.sleep(0.01), threading.current_thread().name)[1], WAIT))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        assert answers == ["A"]
    finally:
        loop.close()


def test_a_loop_run_on_thread_a_then_on_thread_b_hands_a_waiting_task_over_to_when_lost():
    # A task greenlet stays on the thread it started on: one that waited while the loop stopped
    # cannot go on when thread B runs the loop; its owner's when_lost callback runs instead, on B
    from msgengine.aio import backend_for_loop

    loop = asyncio.new_event_loop()
    try:
        backend = backend_for_loop(loop)
        wake = backend.event()
        events = []

        def waits():
            try:
                wake.wait()
                events.append("woke")
            finally:
                events.append("finally on " + threading.current_thread().name)

        def start():
            task = backend.spawn(waits)
            backend.when_lost(task, lambda: events.append("lost, on " + threading.current_thread().name))
            loop.call_soon(loop.stop)

        loop.call_soon(start)
        a_keeps_going = threading.Event()
        a_may_end = threading.Event()

        def run_a():  # thread A runs the loop, then lives on (and calls greenlet code) while B runs it
            loop.run_forever()
            a_keeps_going.set()
            a_may_end.wait(WAIT)
            greenlet_current()

        thread_a = threading.Thread(target=run_a, name="A")
        thread_a.start()
        assert a_keeps_going.wait(WAIT)

        loop.call_soon(lambda: (wake.set(), loop.call_later(0.05, loop.stop)))
        run_on_thread(loop, "B")
        a_may_end.set()
        thread_a.join(WAIT)
        # the task was not resumed (nor killed on A when A went on: its handlers never ran there)
        assert events == ["lost, on B"]
    finally:
        loop.close()


def test_a_lost_task_without_when_lost_is_dropped_and_said_so(caplog):
    from msgengine.aio import backend_for_loop

    loop = asyncio.new_event_loop()
    try:
        backend = backend_for_loop(loop)
        wake = backend.event()
        loop.call_soon(lambda: (backend.spawn(wake.wait), loop.call_soon(loop.stop)))
        run_on_thread(loop, "A")
        loop.call_soon(lambda: (wake.set(), loop.call_later(0.05, loop.stop)))
        with caplog.at_level("ERROR", logger="msgengine.aio"):
            run_on_thread(loop, "B")
        lost = [r for r in caplog.records if "cannot go on" in r.getMessage()]
        assert len(lost) == 1 and "msgengine-wait" in lost[0].getMessage()
        assert not [r for r in caplog.records if "raised" in r.getMessage()]
    finally:
        loop.close()


def greenlet_current():
    import greenlet

    return greenlet.getcurrent()
