"""nsq.run(): start every Reader and Writer made so far and block, as pynsq's
run() does with its IOLoop.

In a program with a tornado or asyncio loop (see nsq.loops) it runs that
loop, so the program's PeriodicCallbacks and callbacks fire, until the
program stops it (``IOLoop.current().stop()``, ``reader.io_loop.stop()``),
SIGINT or SIGTERM. Without one it waits until ``reader.io_loop.stop()`` (the
library's loop: see ``loops.OwnedIOLoop``), a signal, or until every client
has closed by itself; with no client at all it returns at once (pynsq's
blocks for ever, deaf even to SIGTERM).

As in pynsq, a stop leaves the Readers and Writers open: a later
``nsq.run()`` goes on with them (meanwhile, in a program with a loop,
handlers wait for it to run again). A signal, or a KeyboardInterrupt or
SystemExit raised by a handler (which closes its Reader), closes the
clients still open gracefully, and that interrupt is raised again here.

``nsq`` imports this module with the package (``nsq.run`` is this function, not the module), so it
loads the machinery it drives when it runs, not at ``import nsq`` (import time, issue 49).
"""
from __future__ import annotations

import logging
import signal
import threading
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from nsq import loops

logger = logging.getLogger(__name__)


def run(poll_interval: float = 0.1) -> None:
    """Run every Reader and Writer until a signal (which closes them), a
    stopped loop (which leaves them open), or until all close."""
    from msgengine.runtime import get_backend

    from nsq import client, loops

    clients = client.live_clients()
    backend = get_backend(clients[0].backend if clients else "auto")
    bridge = loops.program_loop(None, backend)
    run_loop = bridge if bridge is not None and not bridge.is_running() else None  # (the loop nsq.run runs)
    # pynsq starts every Reader when the IOLoop starts: do the same here
    for live in clients:
        start = getattr(live, "start", None)
        if start is None:
            continue
        if run_loop is not None:
            run_loop.call_soon(_start_logged, live)  # on the loop's first turn, where handlers will run
        else:
            start()
    client.run_started()
    try:
        if run_loop is not None:
            _run_loop(run_loop)
        else:
            _wait(backend, poll_interval)
    finally:
        client.run_ended()
    client.raise_interrupt()


def _start_logged(live: Any) -> None:
    try:
        live.start()
    except Exception:
        logger.exception("cannot start %r", live)


def _on_signals(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    restore: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            restore[signum] = signal.signal(signum, handler)
    return restore


def _restore(restore: dict[int, Any]) -> None:
    for signum, previous in restore.items():
        signal.signal(signum, previous)


def _close_all() -> None:
    from nsq import client

    for live in client.live_clients():
        try:
            live.close()
        except Exception:
            logger.exception("error while closing %r", live)


def _run_loop(bridge: loops.LoopBridge) -> None:
    from nsq import client

    interrupted: list[str] = []  # what stopped the loop, when it is to close the clients

    def on_signal(signum: int, frame: Any = None) -> None:
        logger.info("signal %d received; stopping the loop, then closing readers and writers", signum)
        interrupted.append("signal")
        bridge.stop()

    def on_interrupt() -> None:
        interrupted.append("a handler's interrupt")
        bridge.stop()

    restore = _on_signals(on_signal)
    client.on_interrupt(on_interrupt)
    stopped = False
    try:
        bridge.run()
        stopped = True
    finally:
        client.on_interrupt(None)
        _restore(restore)
        if interrupted or not stopped:  # (an exception out of the loop: the program is ending)
            _close_all()


def _wait(backend: Any, poll_interval: float) -> None:
    from nsq import client, loops

    # The signal handler only records the signal: it runs between two bytecodes
    # of this thread, which may hold an Event's lock at that moment.
    stop: list[str] = []

    def on_signal(signum: int, frame: Any = None) -> None:
        stop.append("signal %d" % signum)

    restore = _on_signals(on_signal)
    client.on_interrupt(lambda: stop.append("a handler's interrupt"))
    try:
        while not stop:
            # (a stop asked before this run counts, as for an IOLoop stopped before start())
            if not client.live_clients() or loops.take_stop_request():
                return
            backend.pause(poll_interval)
    finally:
        client.on_interrupt(None)
        _restore(restore)
        if stop:
            logger.info("%s: closing readers and writers", stop[0])
            _close_all()
