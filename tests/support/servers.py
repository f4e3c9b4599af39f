# Test harness that runs REAL nsqd / nsqlookupd processes (pinned v1.3.0 from ci/install-nsq.sh) on
# loopback ports in private temp dirs, plus small HTTP helpers (pub, mpub, stats, lookup). No fakes.
from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import requests

__all__ = [
    "REPO_ROOT",
    "NsqBinaryNotFound",
    "ServerStartError",
    "nsq_bin_dir",
    "nsq_binary",
    "require_nsq_bin",
    "free_port",
    "wait_until",
    "Nsqd",
    "Nsqlookupd",
]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOPBACK = "127.0.0.1"
REQUIRED_BINARIES = ("nsqd", "nsqlookupd")
DEFAULT_START_TIMEOUT = 15.0
HTTP_TIMEOUT = 10.0
# nsqd's default --max-body-size is 5 MiB; keep each binary /mpub request well below it
_MPUB_BATCH_BYTES = 4 * 1024 * 1024


class NsqBinaryNotFound(RuntimeError):
    """The pinned nsq binaries are not installed."""


class ServerStartError(RuntimeError):
    """A server process failed to come up (message carries its log tail)."""


# --------------------------------------------------------------------------- binaries


def nsq_bin_dir() -> str:
    """Folder holding the nsq binaries: $NSQ_BIN_DIR or <repo>/.nsq-bin (not checked)."""
    return os.path.abspath(os.environ.get("NSQ_BIN_DIR") or os.path.join(REPO_ROOT, ".nsq-bin"))


def require_nsq_bin(names: Sequence[str] = REQUIRED_BINARIES) -> str:
    """Return the binaries folder, or raise NsqBinaryNotFound telling how to install them."""
    folder = nsq_bin_dir()
    missing = [n for n in names if not os.access(os.path.join(folder, n), os.X_OK)]
    if missing:
        raise NsqBinaryNotFound(
            f"nsq binaries {missing} not found in {folder}. "
            f"Run `bash ci/install-nsq.sh` from the repo root (builds nsq v1.3.0 with Go into .nsq-bin/), "
            f"or point NSQ_BIN_DIR at a folder holding them."
        )
    return folder


def nsq_binary(name: str) -> str:
    """Absolute path of one nsq binary (nsqd, nsqlookupd, nsq_tail, to_nsq, bench_reader, bench_writer)."""
    return os.path.join(require_nsq_bin((name,)), name)


# --------------------------------------------------------------------------- ports / polling

_port_lock = threading.Lock()
_handed_out: set = set()


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


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1, never the same twice in this process.

    Ports are drawn below the kernel's ephemeral range when possible, so outgoing
    client connections cannot grab a server's port between its stop() and start().
    """
    lo, _hi = _ephemeral_range()
    with _port_lock:
        if lo > 12000:
            for _ in range(200):
                port = random.randint(10000, lo - 1)
                if port not in _handed_out and _bindable(port):
                    _handed_out.add(port)
                    return port
        for _ in range(50):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((LOOPBACK, 0))
                port = s.getsockname()[1]
            finally:
                s.close()
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("could not find a free loopback port")


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: Union[str, Callable[[], str], None] = None,
) -> Any:
    """Poll ``predicate`` until it returns a truthy value (returned) or raise AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(
                f"condition not met within {timeout:.1f}s" + (f": {text}" if text else f" (last value {last!r})")
            )
        time.sleep(interval)


# --------------------------------------------------------------------------- process base

_live_servers: set = set()  # strong refs until close(): the atexit net must still see forgotten servers


@atexit.register
def _kill_leftovers() -> None:  # safety net if a test forgot close()
    for server in list(_live_servers):
        try:
            server.close()
        except Exception:
            pass


def _pdeathsig_preexec() -> Optional[Callable[[], None]]:
    """Make the child die with us (Linux). Only from the main thread: the signal fires when the *thread* exits."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
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


def _as_lookupd_addresses(lookupd: Any) -> list:
    if lookupd is None:
        return []
    if isinstance(lookupd, (str, Nsqlookupd)):
        lookupd = [lookupd]
    out = []
    for item in lookupd:
        out.append(item.tcp_address if isinstance(item, Nsqlookupd) else str(item))
    return out


def _unwrap(payload: Any) -> Any:
    """nsq < 1.0 wraps HTTP JSON answers in {"status_code":..,"data":..}; 1.x returns them bare."""
    if isinstance(payload, dict) and "data" in payload and "status_code" in payload:
        return payload["data"]
    return payload


class _Server:
    """Common process handling for nsqd / nsqlookupd."""

    binary_name = ""
    ping_path = "/ping"

    def __init__(self, extra_flags: Iterable[str] = (), start: bool = True, start_timeout: float = DEFAULT_START_TIMEOUT):
        self._bin = nsq_binary(self.binary_name)
        self.extra_flags = [str(f) for f in extra_flags]
        self.start_timeout = start_timeout
        self.tmp_dir = tempfile.mkdtemp(prefix=f"{self.binary_name}-")
        self.log_path = os.path.join(self.tmp_dir, f"{self.binary_name}.log")
        self.proc: Optional[subprocess.Popen] = None
        self._log_file = None
        self._closed = False
        self._lock = threading.RLock()
        self._local = threading.local()
        self._session_gen = 0
        self.tcp_port = free_port()
        self.http_port = free_port()
        _live_servers.add(self)
        if start:
            try:
                self._start(first=True)
            except BaseException:
                self.close()
                raise

    # -- addresses
    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def tcp_address(self) -> str:
        return f"{LOOPBACK}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{LOOPBACK}:{self.http_port}"

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    # -- process
    def _command(self) -> list:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, max_bytes: int = 4000) -> str:
        """Last bytes of the server's combined stdout/stderr log (all runs of this instance)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - max_bytes))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _run_log(self, offset: int, head: int = 1500, tail: int = 3000) -> str:
        """Log written since ``offset`` (one run): all of it if short, else its head and tail."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        if len(text) <= head + tail + 100:
            return text
        return text[:head] + "\n[...]\n" + text[-tail:]

    def _spawn(self) -> None:
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"==== {time.strftime('%H:%M:%S')} starting: {' '.join(self._command())}\n".encode())
        self._log_file.flush()
        self.proc = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=self.tmp_dir,
            close_fds=True,
            preexec_fn=_pdeathsig_preexec(),
        )

    def _reap(self) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self._reset_sessions()

    def _ping_ok(self) -> bool:
        try:
            r = requests.get(self.http_url + self.ping_path, timeout=1.0)
        except requests.RequestException:
            return False
        return r.status_code == 200 and r.text.strip() == "OK"

    def _wait_ready(self, timeout: float, log_offset: int = 0) -> None:
        """Wait for /ping == OK; raise ServerStartError (with log tail) if the process exits or the deadline passes."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self._reap()
                raise ServerStartError(
                    f"{self.binary_name} exited with code {rc} during startup "
                    f"(tcp {self.tcp_port}, http {self.http_port}); log:\n{self._run_log(log_offset)}"
                )
            if self._ping_ok():
                return
            if time.monotonic() >= deadline:
                self.proc.kill()
                self._reap()
                raise ServerStartError(
                    f"{self.binary_name} did not answer {self.ping_path} within {timeout:.1f}s; log:\n{self._run_log(log_offset)}"
                )
            time.sleep(0.02)

    def _start(self, first: bool) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.binary_name} instance is closed")
            if self.running:
                return
            deadline = time.monotonic() + self.start_timeout
            attempt = 0
            while True:
                attempt += 1
                log_size = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
                self._spawn()
                try:
                    self._wait_ready(max(1.0, deadline - time.monotonic()), log_size)
                    return
                except ServerStartError:
                    with open(self.log_path, "rb") as f:
                        f.seek(log_size)
                        new_log = f.read().decode("utf-8", "replace")
                    if "address already in use" not in new_log or time.monotonic() >= deadline or attempt >= 50:
                        raise
                    if first:
                        # a port got taken between free_port() and bind: pick new ones
                        self.tcp_port = free_port()
                        self.http_port = free_port()
                    else:
                        time.sleep(0.1)  # restart must keep its ports: retry briefly

    def start(self) -> "_Server":
        """(Re)start on the SAME ports (and data dir) and wait for /ping. No-op if already running."""
        self._start(first=False)
        return self

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Graceful stop: SIGTERM and wait (SIGKILL after ``timeout``). Returns the exit code."""
        with self._lock:
            if self.proc is None:
                return None
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            self._reap()
            return self.proc.returncode

    def kill(self) -> Optional[int]:
        """Hard stop: SIGKILL and wait. Returns the exit code."""
        with self._lock:
            if self.proc is None:
                return None
            if self.proc.poll() is None:
                self.proc.kill()
            self._reap()
            return self.proc.returncode

    def restart(self) -> "_Server":
        self.stop()
        return self.start()

    def close(self) -> None:
        """Kill the process and remove the temp dir (data + logs). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self.kill()
            finally:
                if self._log_file is not None:
                    self._log_file.close()
                    self._log_file = None
                if os.environ.get("NSQ_TEST_KEEP_DIRS"):
                    sys.stderr.write(f"kept {self.binary_name} dir {self.tmp_dir}\n")
                else:
                    shutil.rmtree(self.tmp_dir, ignore_errors=True)
                _live_servers.discard(self)

    def __enter__(self):
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} tcp={self.tcp_address} http={self.http_address} {state}>"

    # -- HTTP
    def _reset_sessions(self) -> None:
        self._session_gen += 1

    def _session(self) -> requests.Session:
        local = self._local
        if getattr(local, "gen", None) != self._session_gen:
            old = getattr(local, "session", None)
            if old is not None:
                old.close()
            local.session = requests.Session()
            local.gen = self._session_gen
        return local.session

    def _request(self, method: str, path: str, params=None, data=None, timeout: float = HTTP_TIMEOUT) -> requests.Response:
        url = self.http_url + path
        try:
            r = self._session().request(method, url, params=params, data=data, timeout=timeout)
        except requests.ConnectionError:
            # a pooled keep-alive connection may belong to a previous run: retry on a fresh one
            self._reset_sessions()
            r = self._session().request(method, url, params=params, data=data, timeout=timeout)
        return r

    def http_get(self, path: str, params=None) -> Any:
        """GET and parse JSON (unwrapping the old {"data":..} envelope); raises on HTTP errors."""
        r = self._request("GET", path, params=params)
        if r.status_code != 200:
            raise RuntimeError(f"GET {path} {params or ''} -> {r.status_code}: {r.text.strip()}")
        return _unwrap(r.json()) if r.content else None

    def http_post(self, path: str, params=None, data=None) -> str:
        """POST; returns the body text; raises on HTTP errors."""
        r = self._request("POST", path, params=params, data=data)
        if r.status_code != 200:
            raise RuntimeError(f"POST {path} {params or ''} -> {r.status_code}: {r.text.strip()}")
        return r.text

    def ping(self) -> bool:
        return self._ping_ok()


# --------------------------------------------------------------------------- nsqd


class Nsqd(_Server):
    """A real nsqd on free loopback ports with its own data dir.

    ``Nsqd(*extra_flags, lookupd=None, start=True)`` — ``extra_flags`` are raw command
    line flags (e.g. ``"--mem-queue-size=0"``) appended after the defaults, so they win;
    ``lookupd`` is an Nsqlookupd, a "host:port" string, or a list of those.
    """

    binary_name = "nsqd"

    def __init__(self, *extra_flags: str, lookupd: Any = None, start: bool = True,
                 start_timeout: float = DEFAULT_START_TIMEOUT):
        self.lookupd_tcp_addresses = _as_lookupd_addresses(lookupd)
        self._data_dir: Optional[str] = None
        super().__init__(extra_flags, start=start, start_timeout=start_timeout)

    @property
    def data_dir(self) -> str:
        if self._data_dir is None:
            self._data_dir = os.path.join(self.tmp_dir, "data")
            os.makedirs(self._data_dir, exist_ok=True)
        return self._data_dir

    def _command(self) -> list:
        cmd = [
            self._bin,
            f"--tcp-address={self.tcp_address}",
            f"--http-address={self.http_address}",
            f"--data-path={self.data_dir}",
            f"--broadcast-address={LOOPBACK}",
        ]
        cmd += [f"--lookupd-tcp-address={a}" for a in self.lookupd_tcp_addresses]
        cmd += self.extra_flags
        return cmd

    # -- stats
    def stats(self, topic: Optional[str] = None, channel: Optional[str] = None,
              include_clients: bool = True) -> dict:
        """Parsed ``/stats?format=json`` (optionally filtered to a topic / channel)."""
        params = {"format": "json"}
        if topic is not None:
            params["topic"] = topic
        if channel is not None:
            params["channel"] = channel
        if not include_clients:
            params["include_clients"] = "false"
        return self.http_get("/stats", params)

    def topic_stats(self, topic: str) -> Optional[dict]:
        """The topic's stats dict (depth, backend_depth, message_count, channels, ...) or None if absent."""
        for t in self.stats(topic=topic).get("topics") or []:
            if t.get("topic_name") == topic:
                return t
        return None

    def topic_depth(self, topic: str) -> int:
        """Messages queued on the topic itself (memory + disk); 0 if the topic does not exist."""
        t = self.topic_stats(topic)
        return int(t["depth"]) if t else 0

    def message_count(self, topic: str) -> int:
        """Total messages ever published to the topic by this run of nsqd; 0 if absent."""
        t = self.topic_stats(topic)
        return int(t["message_count"]) if t else 0

    def channel_stats(self, topic: str, channel: str) -> Optional[dict]:
        """Channel stats dict (depth, backend_depth, in_flight_count, deferred_count, message_count,
        requeue_count, timeout_count, client_count, clients, paused, ...) or None if absent."""
        for t in self.stats(topic=topic, channel=channel).get("topics") or []:
            if t.get("topic_name") != topic:
                continue
            for c in t.get("channels") or []:
                if c.get("channel_name") == channel:
                    return c
        return None

    def channel_depth(self, topic: str, channel: str) -> int:
        c = self.channel_stats(topic, channel)
        return int(c["depth"]) if c else 0

    def clients(self, topic: str, channel: str) -> list:
        c = self.channel_stats(topic, channel)
        return list(c.get("clients") or []) if c else []

    # -- admin
    def create_topic(self, topic: str) -> None:
        self.http_post("/topic/create", {"topic": topic})

    def delete_topic(self, topic: str) -> None:
        self.http_post("/topic/delete", {"topic": topic})

    def empty_topic(self, topic: str) -> None:
        self.http_post("/topic/empty", {"topic": topic})

    def pause_topic(self, topic: str) -> None:
        self.http_post("/topic/pause", {"topic": topic})

    def unpause_topic(self, topic: str) -> None:
        self.http_post("/topic/unpause", {"topic": topic})

    def create_channel(self, topic: str, channel: str) -> None:
        self.http_post("/channel/create", {"topic": topic, "channel": channel})

    def delete_channel(self, topic: str, channel: str) -> None:
        self.http_post("/channel/delete", {"topic": topic, "channel": channel})

    def empty_channel(self, topic: str, channel: str) -> None:
        self.http_post("/channel/empty", {"topic": topic, "channel": channel})

    def pause_channel(self, topic: str, channel: str) -> None:
        self.http_post("/channel/pause", {"topic": topic, "channel": channel})

    def unpause_channel(self, topic: str, channel: str) -> None:
        self.http_post("/channel/unpause", {"topic": topic, "channel": channel})

    # -- publishing over HTTP
    def http_pub(self, topic: str, body: Union[bytes, str], defer_ms: Optional[int] = None) -> str:
        """Publish one message via ``/pub``; returns nsqd's answer ("OK")."""
        if isinstance(body, str):
            body = body.encode()
        params = {"topic": topic}
        if defer_ms is not None:
            params["defer"] = str(int(defer_ms))
        return self.http_post("/pub", params, data=body)

    def http_mpub(self, topic: str, bodies: Iterable[Union[bytes, str]]) -> int:
        """Publish many messages via binary ``/mpub`` (split to stay under --max-body-size). Returns the count."""
        total = 0
        batch: list = []
        batch_bytes = 4

        def flush() -> None:
            nonlocal batch, batch_bytes
            if batch:
                payload = struct.pack(">i", len(batch)) + b"".join(batch)
                self.http_post("/mpub", {"topic": topic, "binary": "true"}, data=payload)
                batch = []
                batch_bytes = 4

        for body in bodies:
            if isinstance(body, str):
                body = body.encode()
            if not body:
                raise ValueError("nsqd rejects empty message bodies in /mpub")
            frame = struct.pack(">i", len(body)) + body
            if batch and batch_bytes + len(frame) > _MPUB_BATCH_BYTES:
                flush()
            batch.append(frame)
            batch_bytes += len(frame)
            total += 1
        flush()
        return total

    def info(self) -> dict:
        return self.http_get("/info")


# --------------------------------------------------------------------------- nsqlookupd


class Nsqlookupd(_Server):
    """A real nsqlookupd on free loopback ports. ``Nsqlookupd(*extra_flags, start=True)``."""

    binary_name = "nsqlookupd"

    def __init__(self, *extra_flags: str, start: bool = True, start_timeout: float = DEFAULT_START_TIMEOUT):
        super().__init__(extra_flags, start=start, start_timeout=start_timeout)

    def _command(self) -> list:
        return [
            self._bin,
            f"--tcp-address={self.tcp_address}",
            f"--http-address={self.http_address}",
            f"--broadcast-address={LOOPBACK}",
            *self.extra_flags,
        ]

    def lookup(self, topic: str) -> list:
        """Producers of ``topic`` (list of dicts with broadcast_address, tcp_port, http_port, ...); [] if unknown."""
        r = self._request("GET", "/lookup", params={"topic": topic})
        if r.status_code == 404:
            return []
        if r.status_code != 200:
            raise RuntimeError(f"GET /lookup?topic={topic} -> {r.status_code}: {r.text.strip()}")
        return list(_unwrap(r.json()).get("producers") or [])

    def lookup_channels(self, topic: str) -> list:
        r = self._request("GET", "/lookup", params={"topic": topic})
        if r.status_code == 404:
            return []
        if r.status_code != 200:
            raise RuntimeError(f"GET /lookup?topic={topic} -> {r.status_code}: {r.text.strip()}")
        return list(_unwrap(r.json()).get("channels") or [])

    def topics(self) -> list:
        return list(self.http_get("/topics").get("topics") or [])

    def nodes(self) -> list:
        return list(self.http_get("/nodes").get("producers") or [])

    def create_topic(self, topic: str) -> None:
        self.http_post("/topic/create", {"topic": topic})

    def delete_topic(self, topic: str) -> None:
        self.http_post("/topic/delete", {"topic": topic})

    def tombstone_topic_producer(self, topic: str, node: str) -> None:
        """``node`` is "broadcast_address:http_port" of the nsqd to tombstone."""
        self.http_post("/topic/tombstone", {"topic": topic, "node": node})
