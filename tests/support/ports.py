"""Free loopback ports for the test servers, never handed out twice in one test run.

A run of the suite has several processes that start servers at once (pytest-xdist workers,
the controller's shared Pulsar broker, programs the tests run): each claims a port by creating
``<run dir>/ports/<port>`` with O_EXCL, so two processes never pick the same one. The run dir
is ``$NSQFAST_TEST_RUN_DIR`` (made by tests/conftest.py for the run); without it (a harness
used on its own, by a benchmark), ports are unique within the process only.
"""
from __future__ import annotations

import errno
import os
import random
import socket
import threading

__all__ = ["LOOPBACK", "RUN_DIR_ENV", "free_port", "run_dir"]

LOOPBACK = "127.0.0.1"
#: the environment variable naming the directory a test run's processes share
RUN_DIR_ENV = "NSQFAST_TEST_RUN_DIR"

_port_lock = threading.Lock()
_handed_out: set = set()


def run_dir() -> str | None:
    """The test run's shared directory, when there is one."""
    path = os.environ.get(RUN_DIR_ENV)
    return path if path and os.path.isdir(path) else None


def _ephemeral_range() -> tuple:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((LOOPBACK, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _claim(port: int) -> bool:
    """Claim ``port`` for this process: in this process and, in a test run, across its processes."""
    if port in _handed_out:
        return False
    shared = run_dir()
    if shared is not None:
        folder = os.path.join(shared, "ports")
        os.makedirs(folder, exist_ok=True)
        try:
            os.close(os.open(os.path.join(folder, str(port)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                return False
            raise
    _handed_out.add(port)
    return True


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1, never the same twice in a test run.

    Ports are drawn below the kernel's ephemeral range when possible, so outgoing
    client connections cannot grab a server's port between its stop() and start().
    """
    lo, _hi = _ephemeral_range()
    with _port_lock:
        if lo > 12000:
            for _ in range(500):
                port = random.randint(10000, lo - 1)
                if _bindable(port) and _claim(port):
                    return port
        for _ in range(50):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((LOOPBACK, 0))
                port = s.getsockname()[1]
            finally:
                s.close()
            if _claim(port):
                return port
    raise RuntimeError("could not find a free loopback port")
