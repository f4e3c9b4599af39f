"""Test harness that runs REAL nsqd / nsqlookupd processes (pinned v1.3.0 from ci/install-nsq.sh) on
loopback ports in private temp dirs, plus small HTTP helpers (pub, mpub, stats, lookup). No fakes.
The process handling (spawn, readiness wait, stop, kill, close, log) is ServerProcess's (processes.py).
"""
from __future__ import annotations

import os
import struct
import threading
import time
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import requests

from .ports import LOOPBACK, free_port
from .processes import ServerProcess, ServerStartError, refuse_in_unit_run

__all__ = [
    "REPO_ROOT",
    "PROGRAMS_DIR",
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

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the programs the tests run as subprocesses (tests/support/programs/)
PROGRAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
REQUIRED_BINARIES = ("nsqd", "nsqlookupd")
DEFAULT_START_TIMEOUT = 15.0
HTTP_TIMEOUT = 10.0
# nsqd's default --max-body-size is 5 MiB; keep each binary /mpub request well below it
_MPUB_BATCH_BYTES = 4 * 1024 * 1024


class NsqBinaryNotFound(RuntimeError):
    """The pinned nsq binaries are not installed."""


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


# --------------------------------------------------------------------------- nsq servers


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


class _Server(ServerProcess):
    """What nsqd and nsqlookupd share: ports and temp dir picked at construction, kept by stop() /
    kill() / start() (a restart is on the same ports and data) until close(); HTTP helpers."""

    ping_path = "/ping"
    ready_check = "GET /ping answers OK"

    def __init__(self, extra_flags: Iterable[str] = (), start: bool = True, start_timeout: float = DEFAULT_START_TIMEOUT):
        refuse_in_unit_run(self.binary_name)
        self._bin = nsq_binary(self.binary_name)
        super().__init__(start_timeout)
        self.extra_flags = [str(f) for f in extra_flags]
        self._local = threading.local()
        self._session_gen = 0
        self._has_run = False  # (once it has, a start keeps its ports: clients know them)
        self.tcp_port = free_port()
        self.http_port = free_port()
        self._make_dir()
        if start:
            try:
                self._start()
            except BaseException:
                self.close()
                raise

    # -- addresses
    @property
    def http_address(self) -> str:
        return f"{LOOPBACK}:{self.http_port}"

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    def _addresses(self) -> str:
        return f"tcp={self.tcp_address} http={self.http_address}"

    # -- process
    def _ready(self) -> bool:
        try:
            r = requests.get(self.http_url + self.ping_path, timeout=1.0)
        except requests.RequestException:
            return False
        return r.status_code == 200 and r.text.strip() == "OK"

    def _start(self) -> None:
        with self._lock:
            if self.running:
                return
            deadline = time.monotonic() + self.start_timeout
            attempt = 0
            while True:
                attempt += 1
                log_offset = self._spawn()
                try:
                    self._wait_ready(max(deadline, time.monotonic() + 1.0), log_offset)
                    self._has_run = True
                    return
                except ServerStartError:
                    if ("address already in use" not in self._log_since(log_offset)
                            or time.monotonic() >= deadline or attempt >= 50):
                        raise
                    if not self._has_run:
                        # first-ever start: a port got taken between free_port() and bind: pick new ones
                        self.tcp_port = free_port()
                        self.http_port = free_port()
                    else:
                        time.sleep(0.1)  # restart must keep its ports: retry briefly

    def start(self) -> "_Server":
        """(Re)start on the SAME ports (and data dir) and wait for /ping. No-op if already running.
        (The first-ever start, of a server made with ``start=False``, may still move to new ports.)"""
        self._start()
        return self

    def _end(self, timeout: Optional[float]) -> Optional[int]:
        code = super()._end(timeout)
        self._reset_sessions()  # (their keep-alive connections were to the process that ended)
        return code

    def restart(self) -> "_Server":
        self.stop()
        return self.start()

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
        return self._ready()


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
