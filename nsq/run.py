"""nsq.run(): block until SIGINT or SIGTERM (then close every Reader and Writer
gracefully) or until all of them have closed by themselves."""
from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from . import client
from .runtime import get_backend, thread_signal

logger = logging.getLogger(__name__)


def run(poll_interval: float = 0.1) -> None:
    """Run every Reader and Writer made so far until a signal or until all close."""
    clients = client.live_clients()
    backend = get_backend(clients[0].backend if clients else "auto")
    # pynsq starts every Reader when the IOLoop starts: do the same here
    for live in clients:
        start = getattr(live, "start", None)
        if start is not None:
            start()
    # Off the hub's thread (gevent) a gevent Event cannot be waited on: wait on one of this thread's own.
    stop = backend.event() if backend.in_backend_context() else thread_signal()
    received: list[int] = []

    def on_signal(signum: int, frame: Any = None) -> None:
        logger.info("signal %d received; closing readers and writers", signum)
        received.append(signum)
        stop.set()

    restore = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            restore[signum] = signal.signal(signum, on_signal)
    try:
        while not stop.wait(poll_interval):
            if not client.live_clients():
                return
    finally:
        for signum, previous in restore.items():
            signal.signal(signum, previous)
        if received:
            for live in client.live_clients():
                try:
                    live.close()
                except Exception:
                    logger.exception("error while closing %r", live)
