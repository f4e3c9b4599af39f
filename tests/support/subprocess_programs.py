"""The Python programs the tests run as subprocesses (tests/support/programs/): their environment
(``program_env``: the repo importable, output unbuffered) and ``Program``, one of them running with
its stdout lines coming through a queue, its output kept, its stdin a pipe, and SIGINT handled as
under a terminal.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from .servers import REPO_ROOT

__all__ = ["Program", "program_env"]


def program_env() -> dict:
    """The environment of a test's program: ours, with the repo first on PYTHONPATH and unbuffered output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def default_sigint() -> None:
    """A subprocess's preexec_fn: SIGINT at its default in the child."""
    # A shell that starts a job in the background (CI runners, `make test &`) leaves SIGINT
    # ignored in it, and Python then keeps it ignored: give the program a terminal's default,
    # so that Python installs its own KeyboardInterrupt handler as it does for a user.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Program:
    """``python <args>`` as a subprocess: its stdout lines come through a queue (``line``,
    ``wait_line``, ``round_where``) and are kept in ``stdout``; its stderr is kept (``stderr``)."""

    def __init__(self, args):
        self.proc = subprocess.Popen(
            [sys.executable, *args], env=program_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
        )
        self.lines: queue.Queue = queue.Queue()
        self.stdout: list = []  # the lines it printed so far
        self._err: list = []
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._err, None), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    @staticmethod
    def _pump(stream, kept, lines):
        for line in stream:
            kept.append(line)
            if lines is not None:
                lines.put(line)
        if lines is not None:
            lines.put(None)  # end of output

    @property
    def stderr(self) -> str:
        """What it wrote to stderr so far (all of it once it has ended: wait_exit(), finish())."""
        return "".join(self._err)

    def stderr_tail(self) -> str:
        return self.stderr[-3000:]

    def report(self) -> str:
        return "stdout:\n%s\nstderr:\n%s" % ("".join(self.stdout), self.stderr[-4000:])

    # -- its output, line by line
    def line(self, timeout):
        """The next line it prints, with its newline (None once it has ended)."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the program printed nothing for %ss; stderr:\n%s" % (timeout, self.stderr_tail()))

    def wait_line(self, wanted, timeout):
        """``wanted`` once it prints that line (without its newline); None if it ends first, or if
        no line comes for timeout seconds."""
        try:
            while True:
                line = self.lines.get(timeout=timeout)
                if line is None:
                    return None
                if line.rstrip("\n") == wanted:
                    return wanted
        except queue.Empty:
            return None

    def round_where(self, predicate, timeout):
        """The first ``ROUND {...}`` line whose report satisfies predicate (the program must print
        one within timeout seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.line(max(deadline - time.monotonic(), 0.01))
            assert line is not None, "the program ended early; stderr:\n%s" % self.stderr_tail()
            if line.startswith("ROUND "):
                report = json.loads(line[len("ROUND "):])
                if predicate(report):
                    return report
            assert time.monotonic() < deadline, "no round as awaited within %ss (last: %s)" % (timeout, line)

    def say(self, text):
        """Write a line to its stdin."""
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    # -- its end
    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def wait_exit(self, timeout):
        """The exit code, or None if the program is still running after timeout (then killed). Its
        output is then all in ``stdout`` and ``stderr``."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        try:
            self.proc.stdin.close()
        except OSError:  # (a line said but not read: the pipe is gone with the program)
            pass
        for pump in self._pumps:
            pump.join(10)
        return code

    def finish(self, timeout):
        """Wait for it to end (subprocess.TimeoutExpired after timeout, the program killed);
        returns (stdout, stderr)."""
        if self.wait_exit(timeout) is None:
            raise subprocess.TimeoutExpired(self.proc.args, timeout)
        return "".join(self.stdout), self.stderr

    def signal_and_wait_exit(self, signum, timeout):
        """Send signum, then wait_exit(timeout): the exit code, or None (the program is killed in any case)."""
        try:
            self.proc.send_signal(signum)
            return self.wait_exit(timeout)
        finally:
            self.kill()
