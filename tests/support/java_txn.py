"""The Java client's transactions as a test tool: tests/support/java_txn/TxnTool.java, compiled against
the Java client in .pulsar-lib and run one JVM per command (its usage is at the top of that file).

``java_txn_tool()`` compiles it once into ``build/java_txn/<hash of the source>/`` (gitignored; kept
across runs, rebuilt when the source changes), under a file lock so that the run's xdist workers
compile it once between them. ``run_java_txn(args)`` runs one command and returns its JSON lines;
``HeldTransaction`` runs ``produce ... hold`` (or ``consume-txn-ack ... hold``) and keeps the
transaction open until the test says ``commit()`` or ``abort()``.

A command's JVM is up and connected in about 0.8 s; ``produce`` (3 messages, commit) takes about
1.5 s in all on this 2-core machine, ``consume`` about 1 s plus its idle timeout.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any, Optional, Sequence

from .pulsar_broker import require_pulsar_lib
from .servers import REPO_ROOT

__all__ = ["HeldTransaction", "JavaTxnError", "JavaTxnTool", "java_txn_tool", "messages", "run_java_txn"]

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java_txn", "TxnTool.java")
CACHE_ROOT = os.path.join(REPO_ROOT, "build", "java_txn")
MAIN_CLASS = "TxnTool"
#: a short-lived client: the C1 JIT only, the serial GC, no perf-data file (a quicker start)
JVM_ARGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xmx256m")
DEFAULT_TIMEOUT = 60.0

# the client's log at WARN on stderr: stdout carries the tool's JSON lines only
_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="STDERR" target="SYSTEM_ERR">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p [%t] %c{1} - %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="STDERR"/></Root>
  </Loggers>
</Configuration>
"""


class JavaTxnError(RuntimeError):
    """The tool failed: ``lines`` (its JSON lines, the last one {"error": ..., "message": ...} when the
    client raised), ``stderr`` and ``returncode`` attached."""

    def __init__(self, message: str, lines: list[dict[str, Any]], stderr: str, returncode: Optional[int]):
        super().__init__(message)
        self.lines = lines
        self.stderr = stderr
        self.returncode = returncode

    @property
    def error(self) -> Optional[str]:
        """The Java exception's class name (``...PulsarClientException$TransactionConflictException``...)."""
        for line in reversed(self.lines):
            if "error" in line:
                return str(line["error"])
        return None


class JavaTxnTool:
    """The compiled tool: ``command(*args)`` is the argv that runs it."""

    def __init__(self, classes_dir: str, lib_dir: str):
        self.classes_dir = classes_dir
        self.lib_dir = lib_dir
        self.log_config = os.path.join(classes_dir, "log4j2.xml")

    @property
    def classpath(self) -> str:
        return os.pathsep.join((self.classes_dir, os.path.join(self.lib_dir, "*")))

    def command(self, *args: str) -> list[str]:
        return ["java", *JVM_ARGS, f"-Dlog4j.configurationFile={self.log_config}", "-cp", self.classpath,
                MAIN_CLASS, *[str(a) for a in args]]


def _source_digest(lib_dir: str) -> str:
    digest = hashlib.sha256()
    with open(SOURCE, "rb") as f:
        digest.update(f.read())
    digest.update(os.path.realpath(lib_dir).encode())
    for name in sorted(os.listdir(lib_dir)):  # (a client upgrade in .pulsar-lib rebuilds it)
        if name.startswith("pulsar-client"):
            digest.update(name.encode())
    return digest.hexdigest()[:16]


_tool: Optional[JavaTxnTool] = None
_tool_lock = threading.Lock()


def java_txn_tool() -> JavaTxnTool:
    """The tool, compiled now unless a run (this one or an earlier) already did for this source."""
    global _tool
    with _tool_lock:
        if _tool is not None:
            return _tool
        lib_dir = require_pulsar_lib()
        if shutil.which("javac") is None:
            raise RuntimeError("javac (a JDK 17) is needed to build tests/support/java_txn/TxnTool.java")
        os.makedirs(CACHE_ROOT, exist_ok=True)
        target = os.path.join(CACHE_ROOT, _source_digest(lib_dir))
        with open(os.path.join(CACHE_ROOT, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # (the other processes of the run wait for one compile)
            try:
                if not os.path.isfile(os.path.join(target, MAIN_CLASS + ".class")):
                    _compile(lib_dir, target)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        _tool = JavaTxnTool(target, lib_dir)
        return _tool


def _compile(lib_dir: str, target: str) -> None:
    staging = tempfile.mkdtemp(prefix="compiling-", dir=CACHE_ROOT)
    try:
        done = subprocess.run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", os.path.join(lib_dir, "*"), "-d", staging, SOURCE],
            capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError("javac failed on %s:\n%s%s" % (SOURCE, done.stdout, done.stderr))
        with open(os.path.join(staging, "log4j2.xml"), "w") as f:
            f.write(_LOG4J2_XML)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _parse(stdout: str) -> list[dict[str, Any]]:
    lines = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def run_java_txn(args: Sequence[Any], timeout: float = DEFAULT_TIMEOUT, check: bool = True,
                 stdin: Optional[str] = None) -> list[dict[str, Any]]:
    """Run one TxnTool command (``["produce", url, topic, 3, "m", "commit"]``) and return its JSON lines.

    JavaTxnError when it exits non-zero (``check``), or fails to end within ``timeout`` s (then killed).
    """
    tool = java_txn_tool()
    try:
        done = subprocess.run(tool.command(*[str(a) for a in args]), capture_output=True, text=True,
                              timeout=timeout, input=stdin if stdin is not None else "")
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise JavaTxnError("TxnTool %s did not end within %g s; stderr:\n%s" % (list(args), timeout, err[-3000:]),
                           _parse(out), err, None) from None
    lines = _parse(done.stdout)
    if check and done.returncode != 0:
        raise JavaTxnError("TxnTool %s exited with %d: %s; stderr:\n%s"
                           % (list(args), done.returncode, lines[-1:] or done.stdout[-1000:], done.stderr[-3000:]),
                           lines, done.stderr, done.returncode)
    return lines


def messages(lines: Sequence[dict[str, Any]]) -> list[str]:
    """The values of a consume command's message lines, in order."""
    return [line["value"] for line in lines if "value" in line]


class HeldTransaction:
    """A TxnTool command run with ``hold``: its transaction stays open until ``commit()`` / ``abort()``.

        with HeldTransaction(["produce", url, topic, 5, "m", "hold"]) as held:
            held.txn_id          # (most, least), once the messages are sent
            ...                  # nothing of it visible yet
            held.commit()        # -> {"outcome": "committed", ...}

    Leaving the block without ending it closes the tool's stdin (the tool exits, the transaction is
    left open on the broker until its timeout) and kills the JVM if it lingers.
    """

    def __init__(self, args: Sequence[Any], timeout: float = DEFAULT_TIMEOUT):
        self.args = [str(a) for a in args]
        if "hold" not in self.args:
            raise ValueError("HeldTransaction runs a command with `hold`: %s" % self.args)
        self.timeout = timeout
        self.lines: list[dict[str, Any]] = []
        self._queue: "queue.Queue[Optional[str]]" = queue.Queue()
        self._stderr: list[str] = []
        tool = java_txn_tool()
        self.proc = subprocess.Popen(tool.command(*self.args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._readers = [threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, False), daemon=True)]
        for reader in self._readers:
            reader.start()
        try:
            self.opened = self._next_with("txn")
        except BaseException:
            self.close()
            raise

    def _pump(self, stream: Any, is_stdout: bool) -> None:
        for line in stream:
            if is_stdout:
                self._queue.put(line)
            else:
                self._stderr.append(line)
        if is_stdout:
            self._queue.put(None)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    @property
    def txn_id(self) -> tuple[int, int]:
        most, least = self.opened["txn"]
        return int(most), int(least)

    def _next_with(self, key: str) -> dict[str, Any]:
        """Read lines until one has ``key`` (or an error); return it."""
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                raw = self._queue.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                self.kill()
                raise JavaTxnError("TxnTool %s: no %r line within %g s" % (self.args, key, self.timeout),
                                   self.lines, self.stderr, None) from None
            if raw is None:
                code = self.proc.wait(timeout=10)
                raise JavaTxnError("TxnTool %s ended (exit %s) before a %r line: %s; stderr:\n%s"
                                   % (self.args, code, key, self.lines[-1:], self.stderr[-3000:]),
                                   self.lines, self.stderr, code)
            raw = raw.strip()
            if not raw.startswith("{"):
                continue
            line = json.loads(raw)
            self.lines.append(line)
            if "error" in line:
                code = self.proc.wait(timeout=10)
                raise JavaTxnError("TxnTool %s failed: %s" % (self.args, line), self.lines, self.stderr, code)
            if key in line:
                return line

    def _end(self, how: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(how + "\n")
        self.proc.stdin.flush()
        outcome = self._next_with("outcome")
        self.proc.wait(timeout=self.timeout)
        return outcome

    def commit(self) -> dict[str, Any]:
        """Commit the held transaction; its outcome line (``{"outcome": "committed", "state": "COMMITTED"}``)."""
        return self._end("commit")

    def abort(self) -> dict[str, Any]:
        """Abort the held transaction; its outcome line."""
        return self._end("abort")

    def kill(self) -> None:
        """End the JVM at once (a client crash: the transaction stays open on the broker)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def __enter__(self) -> "HeldTransaction":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
