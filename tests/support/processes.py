"""The real server processes of the test harness: what they all share.

``ServerProcess`` is the base of nsqd and nsqlookupd (tests/support/servers.py) and of the Pulsar
broker (tests/support/pulsar_broker.py). It owns a private temp dir holding the process's log (its
stdout and stderr, every run appended), the spawn (the process dies with the test run), the wait
until it is ready (ServerStartError with the run's log otherwise), ``stop()`` (SIGTERM, then
SIGKILL), ``kill()``, ``close()`` (kill, then remove the temp dir unless $NSQ_TEST_KEEP_DIRS is set)
and an atexit net that closes the ones a test forgot. A subclass gives its ports, its command line
(``_command``), its readiness check (``_ready``) and its ``start()``.

And the rule that a server-less run (``make test-unit``) starts none: ``refuse_in_unit_run``.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional

from .ports import LOOPBACK

__all__ = [
    "UNIT_RUN_ENV", "ServerInUnitRun", "ServerProcess", "ServerStartError", "die_with_parent_preexec",
    "refuse_in_unit_run",
]

#: set by ``make test-unit`` (``-m "not integration"``): starting a server is then a test marking bug
UNIT_RUN_ENV = "NSQFAST_TESTS_UNIT_ONLY"


class ServerInUnitRun(RuntimeError):
    """A test of a server-less run started a server: it lacks the ``integration`` marker."""


class ServerStartError(RuntimeError):
    """A server process failed to come up (the message carries its log)."""


def refuse_in_unit_run(what: str) -> None:
    """Raise when the run is server-less (``$NSQFAST_TESTS_UNIT_ONLY=1``) and a test starts ``what``."""
    if os.environ.get(UNIT_RUN_ENV, "").strip() not in ("", "0"):
        raise ServerInUnitRun(
            f"this run is server-less ({UNIT_RUN_ENV}=1, `make test-unit`) but a test started {what}: "
            f"mark it `integration` (tests/conftest.py marks the tests of the server fixtures itself)"
        )


def die_with_parent_preexec(any_thread: bool = False) -> Optional[Callable[[], None]]:
    """Make the child die with us (Linux). The signal fires when the *thread* that started it exits:
    only from the main thread, or from a thread that lives as long as the child (``any_thread``)."""
    if not sys.platform.startswith("linux"):
        return None
    if not any_thread and threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except Exception:
        return None
    PR_SET_PDEATHSIG = 1

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


_live: set = set()  # the servers whose temp dir exists (strong refs: the atexit net must see forgotten ones)


@atexit.register
def _close_leftovers() -> None:  # safety net if a test forgot close() / stop()
    for server in list(_live):
        try:
            server.close()
        except Exception:
            pass


class ServerProcess:
    """One server process on loopback ports (a subclass sets ``tcp_port``), run in a private temp
    dir (``tmp_dir``, made by ``_make_dir()``) with its stdout and stderr appended to ``log_path``."""

    binary_name = ""  # names the process in messages, its temp dir and its log file
    ready_check = ""  # what _ready() waits for (for the error when it never comes)
    poll_interval = 0.02  # between two readiness checks
    startup_log_tail = 3000  # how much of a failed start's log the error shows (after its head)
    #: started (and restarted) only from a thread that outlives the process: it dies with that thread
    started_by_lasting_thread = False

    def __init__(self, start_timeout: float):
        self.start_timeout = start_timeout
        self.tmp_dir: Optional[str] = None
        self.log_path: Optional[str] = None
        self.proc: Optional[subprocess.Popen] = None
        self._log_file = None
        self._closed = False
        self._lock = threading.RLock()

    # -- what a subclass gives
    def _command(self) -> list:  # pragma: no cover - overridden
        raise NotImplementedError

    def _ready(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def _addresses(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def start(self) -> "ServerProcess":  # pragma: no cover - overridden
        raise NotImplementedError

    # -- addresses and state
    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def tcp_address(self) -> str:
        return f"{LOOPBACK}:{self.tcp_port}"

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._addresses()} {'running' if self.running else 'stopped'}>"

    # -- log
    def log_tail(self, max_bytes: int = 4000) -> str:
        """Last bytes of the process's combined stdout/stderr log (all runs of this instance)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - max_bytes))
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):  # (TypeError: no log_path yet)
            return ""

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def _run_log(self, offset: int, head: int = 1500, tail: int = 3000) -> str:
        """Log written since ``offset`` (one run): all of it if short, else its head and tail."""
        text = self._log_since(offset)
        if len(text) <= head + tail + 100:
            return text
        return text[:head] + "\n[...]\n" + text[-tail:]

    # -- lifecycle
    def _make_dir(self) -> None:
        self.tmp_dir = tempfile.mkdtemp(prefix=f"{self.binary_name}-")
        self.log_path = os.path.join(self.tmp_dir, f"{self.binary_name}.log")
        _live.add(self)

    def _remove_dir(self) -> None:
        if self not in _live:
            return
        _live.discard(self)
        if os.environ.get("NSQ_TEST_KEEP_DIRS"):
            sys.stderr.write(f"kept {self.binary_name} dir {self.tmp_dir}\n")
        else:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def _spawn(self) -> int:
        """Start the process in ``tmp_dir``; returns where its run begins in the log."""
        if self._closed:
            raise RuntimeError(f"{self.binary_name} instance is closed")
        cmd = self._command()
        self._log_file = open(self.log_path, "ab")
        offset = self._log_file.tell()
        self._log_file.write(f"==== {time.strftime('%H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
        self._log_file.flush()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=self.tmp_dir,
            close_fds=True,
            preexec_fn=die_with_parent_preexec(any_thread=self.started_by_lasting_thread),
        )
        return offset

    def _wait_ready(self, deadline: float, log_offset: int, ready: Optional[Callable[[], bool]] = None) -> None:
        """Wait until ``ready()`` (default ``_ready``); if the process exits first or ``deadline``
        passes, end it and raise ServerStartError with the log of the run from ``log_offset``."""
        ready = ready or self._ready
        while True:
            if self.proc.poll() is not None:
                problem = f"exited with code {self.proc.returncode} during startup"
                break
            if ready():
                return
            if time.monotonic() >= deadline:
                problem = f"was not ready ({self.ready_check}) by its deadline"
                break
            time.sleep(self.poll_interval)
        self._end(None)
        kept = tempfile.NamedTemporaryFile("w", prefix=f"{self.binary_name}-failed-start-", suffix=".log",
                                           delete=False)
        with kept:  # (the whole log of the run, for a post-mortem: the temp dir goes with the process)
            kept.write(self._log_since(log_offset))
        raise ServerStartError(f"{self.binary_name} ({self._addresses()}) {problem}; whole log in {kept.name}; "
                               f"log:\n{self._run_log(log_offset, tail=self.startup_log_tail)}")

    def _end(self, timeout: Optional[float]) -> Optional[int]:
        """End the process: SIGTERM and up to ``timeout`` s to exit (``None``: no SIGTERM), then
        SIGKILL. Returns its exit code."""
        proc = self.proc
        if proc is not None:
            if timeout is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
                pass
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return None if proc is None else proc.returncode

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Graceful stop: SIGTERM and wait (SIGKILL after ``timeout``). Returns the exit code."""
        with self._lock:
            return self._end(timeout)

    def kill(self) -> Optional[int]:
        """Hard stop: SIGKILL and wait. Returns the exit code."""
        with self._lock:
            return self._end(None)

    def close(self) -> None:
        """Kill the process and remove the temp dir (data + logs); it never starts again. Idempotent."""
        with self._lock:
            self._closed = True
            try:
                self._end(None)
            finally:
                self._remove_dir()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
