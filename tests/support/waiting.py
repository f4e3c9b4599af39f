# Waiting in tests, on either backend: wait_for (poll until a condition holds), stays (a
# condition that must keep holding, for things that must NOT happen) and run_blocking (call a
# blocking harness helper, e.g. the HTTP stats of tests/support/servers.py, without stalling gevent).
# They sleep with the backend's own sleep, so the gevent hub keeps running while a gevent test
# waits. Test files import these instead of defining their own polling loops; a file whose
# waits need another default timeout binds it once, e.g.
# `wait_for = functools.partial(waiting.wait_for, timeout=WAIT)`.
from __future__ import annotations

import time

from msgengine.runtime import get_backend


def _describe(predicate, message) -> str:
    text = message() if callable(message) else message
    return text or getattr(predicate, "__name__", None) or repr(predicate)


def wait_for(predicate, backend, timeout=15.0, message=None, interval=0.02):
    """Poll predicate() until it is truthy and return that value.

    After `timeout` seconds raise AssertionError naming what was awaited: `message` (a str, or
    a callable returning one, evaluated only on failure) or else the predicate's name.
    """
    sleep = get_backend(backend).sleep
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %gs waiting for %s" % (timeout, _describe(predicate, message)))
        sleep(interval)


def stays(predicate, backend, duration, interval=0.02) -> bool:
    """True if predicate() holds every time it is checked during `duration` seconds (and once
    more at the end); False as soon as it does not."""
    sleep = get_backend(backend).sleep
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        if not predicate():
            return False
        sleep(interval)
    return bool(predicate())


def run_blocking(backend, fn, *args):
    """fn(*args) for a blocking (unpatched) harness call, run so that it does not stall gevent."""
    return get_backend(backend).run_blocking(fn, *args)


def join_all(backend, tasks, timeout=10.0):
    """Join every task (thread or greenlet of the backend) within timeout seconds in all."""
    b = get_backend(backend)
    deadline = b.monotonic() + timeout
    for task in tasks:
        task.join(max(deadline - b.monotonic(), 0.01))


def tasks_done(tasks) -> bool:
    """Every task (a backend's thread or greenlet handle) has ended."""
    return all((not t.thread.is_alive()) if hasattr(t, "thread") else t.dead for t in tasks)
