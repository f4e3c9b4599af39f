#!/usr/bin/env python3
# `make bench`: nsqfast against pynsq, gnsq, go-nsq and nsq's own bench_reader /
# bench_writer, side by side, in one run against the same real nsqd processes.
#
# Every client runs as its own subprocess (benchmarks/clients/*.py, the go-nsq
# program in benchmarks/gonsq/), so that its CPU time can be read from /proc
# on its own. Each figure is the median of --repeats accepted runs; a run is
# accepted only when nsqd's /stats agree that every message was published or
# finished exactly as the client says (no requeue, no timeout), and otherwise
# it is printed as REJECTED with the reason and recorded in the JSON.
#
# nsqfast runs on its gevent and threads backends and, made inside asyncio.run(),
# on the loop's asyncio backend ("nsqfast-cy-asyncio"); the consumers that share
# their loop with the program (pynsq, nsqfast asyncio) also report the lag of a
# 10 ms asyncio.sleep ticker beside them (the "Loop responsiveness" table).
#
# Outputs: benchmarks/results/latest.json, latest.md and latest.png (the chart,
# drawn by benchmarks/chart.py with matplotlib from .bench-venvs/tools), or in
# --out DIR. A partial run: --clients KEY,... and --workloads KEY,... (the keys
# of make_clients / make_workloads), e.g. a smoke run:
#   run.py --quick --rss-run 0 --clients pynsq,nsqfast-cy-asyncio \
#          --workloads consume-2500,pub --out /tmp/bench
# Logs of every client and nsqd go to benchmarks/results/tmp/ (git-ignored).
from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import os
import platform
import queue
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS_DIR = os.path.join(HERE, "clients")
RESULTS_DIR = os.path.join(HERE, "results")
VENVS = os.path.join(ROOT, ".bench-venvs")
NSQ_BIN = os.path.join(ROOT, ".nsq-bin")
GONSQ_BIN = os.path.join(VENVS, "bin", "gonsq-bench")
CLK_TCK = os.sysconf("SC_CLK_TCK")
BODY_SIZE = 100
CHANNEL = "bench"

PYNSQ_VERSION = "0.9.1"
GNSQ_VERSION = "1.0.2"


def log(msg: str) -> None:
    print(msg, flush=True)


# -- sizes -----------------------------------------------------------------------

FULL = {
    "consume": 200_000,
    "pub": 50_000,
    "concurrent": 200_000,
    "mpub": 200_000,
    "callers": 200_000,
    "rss": 5_000_000,
    "bench_writer_runfor": 1.0,
    "rss_interval": 1.0,
    "feed_max_depth": 200_000,
}
QUICK = {
    "consume": 20_000,
    "pub": 5_000,
    "concurrent": 20_000,
    "mpub": 20_000,
    "callers": 20_000,
    "rss": 300_000,
    "bench_writer_runfor": 0.3,
    "rss_interval": 0.25,
    "feed_max_depth": 50_000,
}


# -- workloads and clients ------------------------------------------------------


@dataclass
class Workload:
    key: str
    label: str
    mode: str  # consume | pub | concurrent | mpub | pubmany
    count: int
    nsqds: int = 1
    max_in_flight: int = 2500
    snappy: bool = False
    tls: bool = False
    # concurrent mode: callers for every client (None: each client's own, Client.concurrency)
    concurrency: int | None = None


def make_workloads(sizes: dict) -> list[Workload]:
    c = sizes["consume"]
    return [
        Workload("consume-2500", "consume, max_in_flight 2500", "consume", c, 1, 2500),
        Workload("consume-200", "consume, max_in_flight 200", "consume", c, 1, 200),
        Workload("consume-2500-3nsqd", "consume, max_in_flight 2500, 3 nsqd", "consume", c, 3, 2500),
        Workload("consume-200-3nsqd", "consume, max_in_flight 200, 3 nsqd", "consume", c, 3, 200),
        Workload("consume-snappy", "consume with snappy, max_in_flight 2500", "consume", c, 1, 2500, snappy=True),
        Workload("consume-tls", "consume with TLS, max_in_flight 2500", "consume", c, 1, 2500, tls=True),
        Workload("pub", "PUB one at a time (blocking)", "pub", sizes["pub"]),
        Workload("concurrent", "concurrent publishers, one writer", "concurrent", sizes["concurrent"]),
        Workload("mpub", "MPUB of 100 (blocking)", "mpub", sizes["mpub"]),
        Workload("pub-many", "MPUB of 100, pipelined from one caller (`pub_many`, 8 in flight)", "pubmany", sizes["mpub"]),
        Workload("callers-1000", "1,000 concurrent blocking callers, one writer", "concurrent", sizes["callers"], concurrency=1000),
    ]


@dataclass
class Client:
    key: str
    label: str
    kind: str  # nsqfast | pynsq | gnsq | go | benchtools
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    available: bool = True
    reason: str = ""
    expect_impl: str | None = None  # nsqfast: "cython" or "python"
    backend: str | None = None
    module_prefix: str | None = None  # peers: where `nsq`/`gnsq` must come from
    versions: dict[str, Any] = field(default_factory=dict)
    # how this client does "concurrent publishers"
    concurrency: int = 64
    concurrency_note: str = ""
    concurrency_unit: str = ""  # "greenlets", "threads", "coroutines", "goroutines": for Workload.concurrency

    def supports(self, wl: Workload) -> tuple[bool, str]:
        if self.kind == "benchtools":
            if wl.mode == "consume" and wl.nsqds == 1 and not wl.snappy and not wl.tls:
                return True, ""
            if wl.mode in ("mpub", "pubmany"):  # pub-many: its usual MPUB of 100, as the reference
                return True, ""
            return False, "n/a"
        if wl.mode == "pubmany" and (self.kind != "nsqfast" or self.backend == "asyncio"):
            return False, "n/a"
        if wl.concurrency is not None and not self.concurrency_unit:
            return False, "n/a"  # pynsq (no blocking publish), gnsq: kept out of the many-callers rows
        return True, ""

    def callers(self, wl: Workload) -> int:
        return wl.concurrency if wl.concurrency is not None else self.concurrency

    def note_for(self, wl: Workload) -> str:
        if wl.concurrency is not None:
            return "%d %s" % (wl.concurrency, self.concurrency_unit)
        return self.concurrency_note


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTHONPATH", "NSQ_PURE_PYTHON", "NSQ_REQUIRE_COMPILED", "PYTHONHOME"):
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def unavailable_reason(name: str) -> str:
    path = os.path.join(VENVS, name + ".unavailable")
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            text = f.read().strip()
        return text[-600:] or "setup failed"
    return ""


_PROBES: dict[tuple[str, str, str], str] = {}


def probe_nsqfast(python: str, env: dict[str, str], impl: str) -> str:
    """Why this interpreter cannot run nsqfast with codec impl ("" when it can)."""
    key = (python, impl, env.get("PYTHONPATH", ""))
    if key not in _PROBES:
        code = (
            "import nsq.codec as c, gevent, snappy; "
            "print(c.IMPLEMENTATION, c.compiled_import_error)"
        )
        try:
            proc = subprocess.run([python, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                _PROBES[key] = "cannot import nsq with %s: %s" % (python, proc.stderr.strip()[-300:])
            elif proc.stdout.split()[0] != impl:
                _PROBES[key] = "the %s codec is not importable with %s: %s" % (impl, python, proc.stdout.strip())
            else:
                _PROBES[key] = ""
        except (OSError, subprocess.TimeoutExpired) as exc:
            _PROBES[key] = "cannot run %s: %s" % (python, exc)
    return _PROBES[key]


def nsqfast_asyncio_client(python: str, script: str) -> Client:
    """nsqfast made inside a running asyncio loop (the loop's asyncio backend, no threads), as
    an asyncio program uses it: compiled codec only (the pure-Python codec says nothing more
    here than on the other backends), no gevent patch. No pub_many (not an asyncio call)."""
    env = base_env()
    env["PYTHONPATH"] = ROOT
    reason = probe_nsqfast(python, env, "cython")
    return Client(
        key="nsqfast-cy-asyncio",
        label="nsqfast (cython, asyncio)",
        kind="nsqfast",
        argv=[python, script, "--backend", "asyncio"],
        env=env,
        expect_impl="cython",
        available=not reason,
        reason=reason,
        backend="asyncio",
        concurrency=64,
        concurrency_note="64 coroutines",
        concurrency_unit="coroutines",
    )


def baseline_clients(python: str, gevent_patch: bool, tree: str) -> list[Client]:
    """Every nsqfast client from another checkout (--baseline TREE: a tree with its extensions
    built in place), keyed "...-base": the code before a change, measured in the same run and
    interleaved with it, by the same client script."""
    clients = []
    for client in make_clients(python, gevent_patch):
        if client.kind != "nsqfast":
            continue
        env = dict(client.env, PYTHONPATH=tree)
        reason = probe_nsqfast(python, env, client.expect_impl or "cython")
        clients.append(Client(**dict(
            client.__dict__, key=client.key + "-base", label=client.label + " (baseline)",
            env=env, available=not reason, reason=reason, module_prefix=tree + os.sep,
        )))
    return clients


def make_clients(python: str, gevent_patch: bool) -> list[Client]:
    clients: list[Client] = []
    script = os.path.join(CLIENTS_DIR, "nsqfast_client.py")
    for impl, short in (("cython", "cy"), ("python", "py")):
        for backend in ("gevent", "threads"):
            env = base_env()
            env["PYTHONPATH"] = ROOT
            if impl == "python":
                env["NSQ_PURE_PYTHON"] = "1"
            reason = probe_nsqfast(python, env, impl)
            argv = [python, script, "--backend", backend]
            if backend == "gevent" and not gevent_patch:
                argv.append("--no-patch")
            clients.append(
                Client(
                    key="nsqfast-%s-%s" % (short, backend),
                    label="nsqfast %s %s" % ({"cython": "compiled", "python": "pure-Py"}[impl], backend),
                    kind="nsqfast",
                    argv=argv,
                    env=env,
                    expect_impl=impl,
                    available=not reason,
                    reason=reason,
                    backend=backend,
                    concurrency=64 if backend == "gevent" else 8,
                    concurrency_note="64 greenlets" if backend == "gevent" else "8 threads",
                    concurrency_unit="greenlets" if backend == "gevent" else "threads",
                )
            )
    clients.append(nsqfast_asyncio_client(python, script))
    for name, version, script_name, note in (
        ("pynsq", PYNSQ_VERSION, "pynsq_client.py", "64 async pubs outstanding"),
        ("gnsq", GNSQ_VERSION, "gnsq_client.py", "64 greenlets"),
    ):
        venv_python = os.path.join(VENVS, name, "bin", "python")
        reason = unavailable_reason(name)
        available = not reason and os.path.exists(venv_python) and os.path.exists(os.path.join(VENVS, name, ".bench-stamp"))
        if not available and not reason:
            reason = "%s is not set up (run benchmarks/setup_peers.sh)" % venv_python
        clients.append(
            Client(
                key=name,
                label="%s %s" % (name, version),
                kind=name,
                argv=[venv_python, os.path.join(CLIENTS_DIR, script_name)],
                env=base_env(),
                available=available,
                reason=reason,
                module_prefix=os.path.join(VENVS, name),
                concurrency=64,
                concurrency_note=note,
            )
        )
    reason = unavailable_reason("gonsq")
    available = not reason and os.access(GONSQ_BIN, os.X_OK)
    if not available and not reason:
        reason = "%s is not built (run benchmarks/setup_peers.sh)" % GONSQ_BIN
    clients.append(
        Client(
            key="go-nsq",
            label="go-nsq",
            kind="go",
            argv=[GONSQ_BIN],
            env=base_env(),
            available=available,
            reason=reason,
            concurrency=64,
            concurrency_note="64 goroutines",
            concurrency_unit="goroutines",
        )
    )
    tools_ok = all(os.access(os.path.join(NSQ_BIN, b), os.X_OK) for b in ("bench_reader", "bench_writer"))
    env = base_env()
    env["GOMAXPROCS"] = "1"  # one connection, like the one Python process it stands beside
    clients.append(
        Client(
            key="bench-tools",
            label="nsq bench_reader / bench_writer",
            kind="benchtools",
            env=env,
            available=tools_ok,
            reason="" if tools_ok else "bench_reader/bench_writer missing from %s" % NSQ_BIN,
        )
    )
    return clients


# -- /proc ---------------------------------------------------------------------------


def proc_cpu(pid: int) -> float | None:
    """utime+stime of a process (all its threads), in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_kb(pid: int) -> int | None:
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- nsqd ------------------------------------------------------------------------------


class Nsqd:
    def __init__(self, name: str, logdir: str, mem_queue_size: int, tls: tuple[str, str] | None, output_buffer_timeout: int) -> None:
        self.name = name
        self.data = tempfile.mkdtemp(prefix="nsqfast-bench-%s-" % name)
        self.tcp_port = free_port()
        self.http_port = free_port()
        self.https_port = free_port()
        args = [
            os.path.join(NSQ_BIN, "nsqd"),
            "--tcp-address=127.0.0.1:%d" % self.tcp_port,
            "--http-address=127.0.0.1:%d" % self.http_port,
            "--https-address=127.0.0.1:%d" % self.https_port,
            "--broadcast-address=127.0.0.1",
            "--data-path=%s" % self.data,
            "--mem-queue-size=%d" % mem_queue_size,
            "--log-level=warn",
            "--max-rdy-count=2500",
        ]
        if output_buffer_timeout:
            ms = "%dms" % output_buffer_timeout
            args += ["--min-output-buffer-timeout=" + ms, "--output-buffer-timeout=" + ms]
        if tls:
            args += ["--tls-cert=%s" % tls[0], "--tls-key=%s" % tls[1]]
        self.logfile = open(os.path.join(logdir, "nsqd-%s.log" % name), "ab")
        self.proc = subprocess.Popen(args, stdout=self.logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._http: http.client.HTTPConnection | None = None
        deadline = time.monotonic() + 15
        while True:
            try:
                if self.request("GET", "/ping") == b"OK":
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("nsqd %s did not start (see %s)" % (name, self.logfile.name))
            time.sleep(0.05)

    @property
    def tcp(self) -> str:
        return "127.0.0.1:%d" % self.tcp_port

    @property
    def http(self) -> str:
        return "127.0.0.1:%d" % self.http_port

    def cpu(self) -> float:
        return proc_cpu(self.proc.pid) or 0.0

    def request(self, method: str, path: str, body: bytes | None = None, timeout: float = 30) -> bytes:
        for attempt in (0, 1):
            if self._http is None:
                self._http = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout)
            try:
                self._http.request(method, path, body=body)
                response = self._http.getresponse()
                data = response.read()
                if response.status != 200:
                    raise RuntimeError("nsqd %s %s %s: HTTP %d %r" % (self.name, method, path, response.status, data[:200]))
                return data
            except (OSError, http.client.HTTPException):
                self._http.close()
                self._http = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def stats(self, topic: str) -> dict:
        data = json.loads(self.request("GET", "/stats?format=json&topic=%s" % topic))
        data = data.get("data", data)
        for t in data.get("topics") or []:
            if t.get("topic_name") == topic:
                return t
        return {}

    def version(self) -> str:
        data = json.loads(self.request("GET", "/info"))
        return data.get("data", data).get("version", "?")

    def create(self, topic: str, channel: str | None) -> None:
        self.request("POST", "/topic/create?topic=%s" % topic)
        if channel:
            self.request("POST", "/channel/create?topic=%s&channel=%s" % (topic, channel))

    def delete(self, topic: str) -> None:
        try:
            self.request("POST", "/topic/delete?topic=%s" % topic)
        except Exception:
            pass

    def prefill(self, topic: str, count: int) -> None:
        """count 100-byte messages through HTTP /mpub?binary=true, in bodies under nsqd's 5 MiB limit."""
        body = bench_body()
        item = struct.pack(">I", len(body)) + body
        chunk = 40_000
        full = struct.pack(">I", chunk) + item * chunk
        left = count
        while left > 0:
            n = min(chunk, left)
            payload = full if n == chunk else struct.pack(">I", n) + item * n
            self.request("POST", "/mpub?topic=%s&binary=true" % topic, payload)
            left -= n

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logfile.close()
        shutil.rmtree(self.data, ignore_errors=True)


def bench_body() -> bytes:
    return bytes(ord("a") + i % 26 for i in range(BODY_SIZE))


def channel_of(topic_stats: dict, channel: str) -> dict:
    for c in topic_stats.get("channels") or []:
        if c.get("channel_name") == channel:
            return c
    return {}


def sum_channel(nsqds: list[Nsqd], topic: str) -> dict:
    keys = ("depth", "in_flight_count", "deferred_count", "message_count", "requeue_count", "timeout_count")
    total = {k: 0 for k in keys}
    total["finish_count"] = 0
    for n in nsqds:
        c = channel_of(n.stats(topic), CHANNEL)
        for k in keys:
            total[k] += int(c.get(k, 0) or 0)
        for client in c.get("clients") or []:
            total["finish_count"] += int(client.get("finish_count", 0) or 0)
    return total


def wait_depth(nsqds: list[Nsqd], topic: str, shares: list[int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    for n, share in zip(nsqds, shares):
        while True:
            c = channel_of(n.stats(topic), CHANNEL)
            if int(c.get("depth", 0) or 0) >= share:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("prefill of %s on nsqd %s stuck at depth %s of %d" % (topic, n.name, c.get("depth"), share))
            time.sleep(0.01)


def check_consumed(nsqds: list[Nsqd], topic: str, count: int, settle: float = 10.0) -> tuple[dict, list[str]]:
    """Wait (up to settle seconds) for the channel to drain, then compare with count."""
    deadline = time.monotonic() + settle
    while True:
        s = sum_channel(nsqds, topic)
        if (s["depth"] == 0 and s["in_flight_count"] == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    problems = []
    if s["message_count"] != count:
        problems.append("channel message_count %d != %d" % (s["message_count"], count))
    for k in ("depth", "in_flight_count", "deferred_count", "requeue_count", "timeout_count"):
        if s[k]:
            problems.append("channel %s %d != 0" % (k, s[k]))
    return s, problems


def check_published(nsqd: Nsqd, topic: str, count: int) -> tuple[dict, list[str]]:
    t = nsqd.stats(topic)
    got = int(t.get("message_count", 0) or 0)
    problems = [] if got == count else ["topic message_count %d != %d" % (got, count)]
    return {"message_count": got, "depth": int(t.get("depth", 0) or 0)}, problems


# -- client subprocesses ------------------------------------------------------------


class ClientProc:
    """A benchmark client: READY, a start line, one JSON result line, stdin closed."""

    def __init__(self, argv: list[str], env: dict[str, str], logpath: str) -> None:
        self.logpath = logpath
        self.log = open(logpath, "wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        ACTIVE.add(self)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))
        self.lines.put(None)

    def expect(self, what: Callable[[str], bool], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out after %.0fs" % timeout)
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(5)
                raise RuntimeError("client exited with code %s before answering" % self.proc.returncode)
            if what(line):
                return line
            self.log.write(("stdout: %s\n" % line).encode())
            self.log.flush()

    def start(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict:
        line = self.expect(lambda l: l.startswith("{"), timeout)
        return json.loads(line)

    def cpu(self) -> float | None:
        return proc_cpu(self.proc.pid)

    def finish(self, timeout: float = 10) -> None:
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.close_log()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.close_log()

    def close_log(self) -> None:
        ACTIVE.discard(self)
        if not self.log.closed:
            self.log.close()

    def stderr_tail(self, n: int = 400) -> str:
        try:
            with open(self.logpath, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - n))
                return f.read().decode(errors="replace").strip().replace("\n", " | ")
        except OSError:
            return ""


ACTIVE: set[ClientProc] = set()


class Rejected(Exception):
    pass


# -- the bench ----------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = dict(QUICK if args.quick else FULL)
        if args.rss_run is not None:
            self.sizes["rss"] = args.rss_run
        self.repeats = args.repeats
        self.seq = 0
        stamp = time.strftime("%Y%m%d-%H%M%S")
        logroot = os.path.join(RESULTS_DIR, "tmp")
        self.logdir = os.path.join(logroot, stamp)
        os.makedirs(self.logdir, exist_ok=True)
        for old in sorted(os.listdir(logroot))[:-5]:  # keep the logs of the last 5 runs
            shutil.rmtree(os.path.join(logroot, old), ignore_errors=True)
        self.nsqds: list[Nsqd] = []
        self.cert: tuple[str, str] | None = None
        self.cert_error = ""
        self.records: dict[str, dict[str, dict]] = {}
        self.rejections: list[dict] = []
        self.clients = make_clients(args.python, not args.gevent_no_patch)
        if args.baseline:
            self.clients += baseline_clients(args.python, not args.gevent_no_patch, os.path.abspath(args.baseline))
        if args.clients:
            wanted = set(args.clients.split(","))
            self.clients = [c for c in self.clients if c.key in wanted]
        self.workloads = make_workloads(self.sizes)
        if args.workloads:
            wanted = set(args.workloads.split(","))
            self.workloads = [w for w in self.workloads if w.key in wanted]
        self.failures_in_a_row: dict[tuple[str, str], int] = {}  # (client, mode)
        self.rss: list[dict] = []

    # -- setup ------------------------------------------------------------------

    def make_cert(self) -> None:
        certdir = tempfile.mkdtemp(prefix="nsqfast-bench-tls-")
        cert = os.path.join(certdir, "cert.pem")
        key = os.path.join(certdir, "key.pem")
        openssl = shutil.which("openssl")
        if not openssl:
            self.cert_error = "openssl not found: no certificate for the TLS workload"
            return
        proc = subprocess.run(
            [
                openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-addext", "basicConstraints=critical,CA:TRUE",
            ],
            capture_output=True,
        )
        if proc.returncode != 0:
            self.cert_error = "openssl failed: %s" % proc.stderr.decode(errors="replace")[-300:]
            return
        self.cert = (cert, key)
        self.certdir = certdir

    def start_nsqds(self) -> None:
        count = 3 if any(w.nsqds == 3 for w in self.workloads) else 1
        for i in range(count):
            self.nsqds.append(Nsqd("n%d" % (i + 1), self.logdir, self.args.mem_queue_size, self.cert, self.args.output_buffer_timeout))
        log("nsqd %s: tcp %s" % (self.nsqds[0].version(), ", ".join(n.tcp for n in self.nsqds)))

    def stop(self) -> None:
        for c in list(ACTIVE):
            c.kill()
        for n in self.nsqds:
            n.stop()
        if getattr(self, "certdir", None):
            shutil.rmtree(self.certdir, ignore_errors=True)

    def next_topic(self, prefix: str) -> str:
        self.seq += 1
        return "%s%04d" % (prefix, self.seq)

    def timeout_for(self, count: int) -> float:
        base = self.args.timeout_base if self.args.timeout_base is not None else (10.0 if self.args.quick else 20.0)
        return base + count / self.args.min_rate

    # -- one run ----------------------------------------------------------------------

    def client_args(self, client: Client, wl: Workload, topic: str, nsqds: list[Nsqd], count: int) -> list[str]:
        args = [
            "--mode", wl.mode,
            "--nsqd", ",".join(n.tcp for n in nsqds),
            "--topic", topic,
            "--channel", CHANNEL,
            "--count", str(count),
            "--max-in-flight", str(wl.max_in_flight),
            "--concurrency", str(client.callers(wl)),
            "--batch", "100",
            "--size", str(BODY_SIZE),
        ]
        if wl.mode == "consume" and self.args.output_buffer_timeout:
            args += ["--output-buffer-timeout", str(self.args.output_buffer_timeout)]
        if wl.snappy:
            args.append("--snappy")
        if wl.tls:
            args += ["--tls", "--ca", self.cert[0]] if self.cert else ["--tls"]
        return args

    def run_once(self, client: Client, wl: Workload, attempt: int) -> dict:
        if client.kind == "benchtools":
            if wl.mode == "consume":
                return self.run_bench_reader(client, wl)
            return self.run_bench_writer(client, wl)
        nsqds = self.nsqds[: wl.nsqds]
        topic = self.next_topic("t")
        logpath = os.path.join(self.logdir, "%s-%s-%d.log" % (wl.key, client.key, attempt))
        shares = [wl.count // wl.nsqds + (1 if i < wl.count % wl.nsqds else 0) for i in range(wl.nsqds)]
        try:
            if wl.mode == "consume":
                for n, share in zip(nsqds, shares):
                    n.create(topic, CHANNEL)
                    n.prefill(topic, share)
                wait_depth(nsqds, topic, shares)
            else:
                nsqds[0].create(topic, None)
            proc = ClientProc(client.argv + self.client_args(client, wl, topic, nsqds, wl.count), client.env, logpath)
            try:
                try:
                    proc.expect(lambda l: l == "READY", 60)
                except (TimeoutError, RuntimeError) as exc:
                    raise Rejected("client did not start: %s; stderr: %s" % (exc, proc.stderr_tail()))
                cpu0 = proc.cpu() or 0.0
                ncpu0 = sum(n.cpu() for n in nsqds)
                wall0 = time.monotonic()
                proc.start()
                try:
                    result = proc.result(self.timeout_for(wl.count))
                except TimeoutError as exc:
                    proc.kill()
                    raise Rejected("%s (killed); stderr: %s" % (exc, proc.stderr_tail()))
                except (RuntimeError, ValueError) as exc:
                    raise Rejected("%s; stderr: %s" % (exc, proc.stderr_tail()))
                cpu1 = proc.cpu()
                ncpu1 = sum(n.cpu() for n in nsqds)
                wall = time.monotonic() - wall0
            finally:
                proc.finish()
            if cpu1 is None:
                raise Rejected("client CPU time unreadable")
            problems = []
            if result.get("count") != wl.count:
                problems.append("client counted %s of %d" % (result.get("count"), wl.count))
            if result.get("errors"):
                problems.append("client reported %s errors" % result.get("errors"))
            if not result.get("seconds") or result["seconds"] <= 0:
                problems.append("client measured %r seconds" % result.get("seconds"))
            if client.expect_impl and result.get("impl") != client.expect_impl:
                problems.append("codec is %r, expected %r" % (result.get("impl"), client.expect_impl))
            if client.backend == "asyncio" and result.get("clients_backend") != "asyncio":
                # made in a coroutine, the clients must run on the loop, not on a bridge to threads
                problems.append("clients ran on the %r backend, expected 'asyncio'" % result.get("clients_backend"))
            if client.module_prefix and not str(result.get("module", "")).startswith(client.module_prefix):
                problems.append("imported %s, not from %s" % (result.get("module"), client.module_prefix))
            if wl.mode == "consume":
                stats, more = check_consumed(nsqds, topic, wl.count)
            else:
                stats, more = check_published(nsqds[0], topic, wl.count)
            problems += more
            record = {
                "count": wl.count,
                "seconds": result.get("seconds"),
                "rate": wl.count / result["seconds"] if result.get("seconds") else None,
                "client_cpu": cpu1 - cpu0,
                "nsqd_cpu": ncpu1 - ncpu0,
                "wall": wall,
                "stats": stats,
                "client_result": result,
            }
            if problems:
                raise Rejected("; ".join(problems), record)
            for k in ("version", "tornado", "gevent", "impl", "backend", "patched", "gomaxprocs"):
                if k in result:
                    client.versions[k] = result[k]
            return record
        finally:
            for n in nsqds:
                n.delete(topic)

    def run_bench_reader(self, client: Client, wl: Workload) -> dict:
        nsqd = self.nsqds[0]
        rdy = wl.max_in_flight
        # bench_reader flushes its FINs only while (count % rdy) > 0.75*rdy (and
        # when its 4 KiB buffer fills); a backlog that ends inside that window
        # lets every FIN out.
        count = wl.count
        while count % rdy <= 0.75 * rdy:
            count -= 1
        topic = self.next_topic("r")
        logpath = os.path.join(self.logdir, "%s-bench_reader-%d.log" % (wl.key, self.seq))
        try:
            nsqd.create(topic, CHANNEL)
            nsqd.prefill(topic, count)
            wait_depth([nsqd], topic, [count])
            ncpu0 = nsqd.cpu()
            argv = [
                os.path.join(NSQ_BIN, "bench_reader"),
                "--nsqd-tcp-address=%s" % nsqd.tcp,
                "--topic=%s" % topic,
                "--channel=%s" % CHANNEL,
                "--size=%d" % BODY_SIZE,
                "--rdy=%d" % rdy,
                "--runfor=%ds" % int(self.timeout_for(wl.count) + 30),
            ]
            proc = ClientProc(argv, client.env, logpath)
            # bench_reader keeps running until --runfor: time it by polling nsqd.
            deadline = time.monotonic() + self.timeout_for(wl.count)
            start = end = None
            try:
                while True:
                    now = time.monotonic()
                    c = channel_of(nsqd.stats(topic), CHANNEL)
                    depth = int(c.get("depth", 0) or 0)
                    in_flight = int(c.get("in_flight_count", 0) or 0)
                    if start is None and depth < count:
                        start = now
                    if depth == 0 and in_flight == 0:
                        end = now
                        break
                    if now > deadline:
                        raise Rejected("timed out (killed) with depth %d in_flight %d; stderr: %s" % (depth, in_flight, proc.stderr_tail()))
                    if proc.proc.poll() is not None:
                        raise Rejected("bench_reader exited early (%s): %s" % (proc.proc.returncode, proc.stderr_tail()))
                    time.sleep(0.002)
                cpu1 = proc.cpu()
                ncpu1 = nsqd.cpu()
            finally:
                proc.kill()
            stats, problems = check_consumed([nsqd], topic, count, settle=2)
            seconds = end - start if end and start else 0
            record = {
                "count": count,
                "seconds": seconds,
                "rate": count / seconds if seconds > 0 else None,
                "client_cpu": cpu1 or 0.0,
                "nsqd_cpu": ncpu1 - ncpu0,
                "stats": stats,
                "note": "timed by polling nsqd /stats every ~2 ms; backlog %d" % count,
            }
            if seconds <= 0:
                problems.append("no measurable duration")
            if problems:
                raise Rejected("; ".join(problems), record)
            client.versions["bench_reader"] = "nsq " + (nsqd.version())
            return record
        finally:
            nsqd.delete(topic)

    def run_bench_writer(self, client: Client, wl: Workload) -> dict:
        nsqd = self.nsqds[0]
        topic = self.next_topic("w")
        runfor = self.sizes["bench_writer_runfor"]
        logpath = os.path.join(self.logdir, "%s-bench_writer-%d.log" % (wl.key, self.seq))
        try:
            nsqd.create(topic, None)
            ncpu0 = nsqd.cpu()
            argv = [
                os.path.join(NSQ_BIN, "bench_writer"),
                "--nsqd-tcp-address=%s" % nsqd.tcp,
                "--topic=%s" % topic,
                "--size=%d" % BODY_SIZE,
                "--batch-size=100",
                "--runfor=%gs" % runfor,
            ]
            with open(logpath, "wb") as logf:
                proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=client.env, start_new_session=True)
                deadline = time.monotonic() + runfor + 60
                while True:
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        proc.returncode = os.waitstatus_to_exitcode(status)
                        break
                    if time.monotonic() > deadline:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        raise Rejected("bench_writer timed out (killed)")
                    time.sleep(0.01)
            ncpu1 = nsqd.cpu()
            with open(logpath, errors="replace") as f:
                text = f.read()
            if proc.returncode != 0:
                raise Rejected("bench_writer exited %d: %s" % (proc.returncode, text[-300:]))
            seconds, rate = parse_bench_log(text)
            if not seconds:
                raise Rejected("cannot parse bench_writer output: %r" % text[-300:])
            count = int(round(rate * seconds))
            stats, problems = check_published(nsqd, topic, count)
            record = {
                "count": count,
                "seconds": seconds,
                "rate": rate,
                "client_cpu": usage.ru_utime + usage.ru_stime,
                "nsqd_cpu": ncpu1 - ncpu0,
                "stats": stats,
                "note": "GOMAXPROCS=1 (one connection), --runfor %gs" % runfor,
            }
            if problems:
                raise Rejected("; ".join(problems), record)
            client.versions["bench_writer"] = "nsq " + nsqd.version()
            return record
        finally:
            nsqd.delete(topic)

    # -- the matrix --------------------------------------------------------------------

    def cell(self, wl: Workload, client: Client) -> dict:
        return self.records.setdefault(wl.key, {}).setdefault(client.key, {"runs": [], "rejected": []})

    def run_matrix(self) -> None:
        for wl in self.workloads:
            log("\n== %s (%s messages)" % (wl.label, f"{wl.count:,}"))
            if wl.tls and not self.cert:
                for client in self.clients:
                    self.cell(wl, client).update(status="unavailable", reason=self.cert_error)
                log("   skipped: %s" % self.cert_error)
                continue
            todo = []
            for client in self.clients:
                cell = self.cell(wl, client)
                if not client.available:
                    cell.update(status="unavailable", reason=client.reason)
                    continue
                ok, why = client.supports(wl)
                if not ok:
                    cell.update(status="n/a", reason=why)
                    continue
                if self.failures_in_a_row.get((client.key, wl.mode), 0) >= self.args.give_up_after:
                    reason = "skipped after %d rejected %s runs in a row" % (self.args.give_up_after, wl.mode)
                    cell.update(status="skipped", reason=reason)
                    log("   %-34s %s" % (client.label, reason))
                    continue
                todo.append(client)
            attempts = {c.key: 0 for c in todo}
            max_attempts = self.repeats + 2
            while True:
                round_clients = [
                    c for c in todo
                    if len(self.cell(wl, c)["runs"]) < self.repeats
                    and attempts[c.key] < max_attempts
                    and not (attempts[c.key] >= 2 and not self.cell(wl, c)["runs"])
                ]
                if not round_clients:
                    break
                for client in round_clients:
                    attempts[client.key] += 1
                    self.one(wl, client, attempts[client.key])
            for client in todo:
                self.summarize(wl, client)

    def one(self, wl: Workload, client: Client, attempt: int) -> None:
        cell = self.cell(wl, client)
        try:
            record = self.run_once(client, wl, attempt)
        except Rejected as exc:
            reason = exc.args[0]
            record = exc.args[1] if len(exc.args) > 1 else {}
            self.reject(wl, client, attempt, reason, record)
            return
        except Exception as exc:  # a bug or an nsqd problem: still only this run
            self.reject(wl, client, attempt, "%s: %s" % (type(exc).__name__, exc), {"traceback": traceback.format_exc()})
            return
        self.failures_in_a_row[(client.key, wl.mode)] = 0
        cell["runs"].append(record)
        log(
            "   %-34s run %d: %12s msgs/s  client %7.2f µs/msg  nsqd %6.2f µs/msg"
            % (client.label, attempt, f"{record['rate']:,.0f}", us(record["client_cpu"], record["count"]), us(record["nsqd_cpu"], record["count"]))
        )

    def reject(self, wl: Workload, client: Client, attempt: int, reason: str, record: dict) -> None:
        key = (client.key, wl.mode)
        self.failures_in_a_row[key] = self.failures_in_a_row.get(key, 0) + 1
        entry = {"workload": wl.key, "client": client.key, "attempt": attempt, "reason": reason}
        entry.update({k: v for k, v in record.items() if k != "traceback"})
        self.cell(wl, client)["rejected"].append(entry)
        self.rejections.append(entry)
        log("   %-34s run %d: REJECTED: %s" % (client.label, attempt, reason))
        if "traceback" in record:
            log(record["traceback"])

    def summarize(self, wl: Workload, client: Client) -> None:
        cell = self.cell(wl, client)
        runs = cell["runs"]
        if not runs:
            reasons = [r["reason"] for r in cell["rejected"]]
            cell.update(status="rejected", reason=reasons[-1] if reasons else "no run")
            return
        cell.update(
            status="ok",
            accepted=len(runs),
            rate=statistics.median(r["rate"] for r in runs),
            client_us=statistics.median(us(r["client_cpu"], r["count"]) for r in runs),
            nsqd_us=statistics.median(us(r["nsqd_cpu"], r["count"]) for r in runs),
        )
        if client.kind in ("nsqfast", "pynsq", "gnsq", "go") and wl.mode == "concurrent":
            cell["note"] = client.note_for(wl)
            # per-call latency and peak RSS (nsqfast and go-nsq clients report them)
            cell.update(median_fields(runs, LATENCY_FIELDS))
        if wl.mode == "consume":
            cell.update(median_fields(runs, TICKER_FIELDS))  # pynsq and nsqfast asyncio report them
        if any(r.get("note") for r in runs):
            cell["note"] = runs[0]["note"]
        log(
            "   %-34s median of %d: %s msgs/s, client %.2f µs/msg, nsqd %.2f µs/msg%s"
            % (
                client.label, len(runs), f"{cell['rate']:,.0f}", cell["client_us"], cell["nsqd_us"],
                "; latency p50 %.2f / p99 %.2f / max %.2f ms, peak RSS %.1f MB"
                % (cell["p50_latency_ms"], cell["p99_latency_ms"], cell["max_latency_ms"], cell["peak_rss_mb"])
                if all(k in cell for k in LATENCY_FIELDS) else "",
            )
            + ("; ticker lag p50 %.2f / p99 %.2f / max %.2f ms" % (cell["ticker_p50_ms"], cell["ticker_p99_ms"], cell["ticker_max_ms"])
               if all(k in cell for k in TICKER_FIELDS) else "")
        )

    # -- RSS ---------------------------------------------------------------------------

    def run_rss(self) -> None:
        count = self.sizes["rss"]
        if count <= 0:
            return
        by_key = {c.key: c for c in make_clients(self.args.python, not self.args.gevent_no_patch)}
        feeder = by_key["nsqfast-cy-threads"]
        for key in ("nsqfast-cy-gevent", "nsqfast-cy-threads"):
            client = by_key[key]
            if self.args.clients and key not in self.args.clients.split(","):
                continue
            log("\n== RSS of %s consuming %s messages while another process feeds nsqd" % (client.label, f"{count:,}"))
            try:
                entry = self.rss_once(client, feeder, count)
                entry["status"] = "ok"
                log(
                    "   RSS start %.1f MB, peak %.1f MB, end %.1f MB, max-min after warm-up %.1f MB (%d samples, %s msgs/s)"
                    % (entry["start_mb"], entry["peak_mb"], entry["end_mb"], entry["spread_after_warmup_mb"], len(entry["samples_mb"]), f"{entry['rate']:,.0f}")
                )
            except Rejected as exc:
                entry = {"status": "rejected", "reason": exc.args[0]}
                entry.update(exc.args[1] if len(exc.args) > 1 else {})
                self.rejections.append({"workload": "rss", "client": key, "attempt": 1, "reason": exc.args[0]})
                log("   REJECTED: %s" % exc.args[0])
            except Exception as exc:
                entry = {"status": "rejected", "reason": "%s: %s" % (type(exc).__name__, exc)}
                self.rejections.append({"workload": "rss", "client": key, "attempt": 1, "reason": entry["reason"]})
                log("   REJECTED: %s\n%s" % (entry["reason"], traceback.format_exc()))
            entry.update(client=key, label=client.label, count=count, feeder=feeder.label + " (MPUB of 100)")
            self.rss.append(entry)

    def rss_once(self, client: Client, feeder: Client, count: int) -> dict:
        nsqd = self.nsqds[0]
        topic = self.next_topic("m")
        interval = self.sizes["rss_interval"]
        nsqd.create(topic, CHANNEL)
        wl = Workload("rss", "rss", "consume", count)
        consumer = feed = None
        try:
            consumer = ClientProc(
                client.argv + self.client_args(client, wl, topic, [nsqd], count),
                client.env,
                os.path.join(self.logdir, "rss-%s.log" % client.key),
            )
            feed_args = self.client_args(feeder, Workload("feed", "feed", "feed", count), topic, [nsqd], count)
            feed_args += ["--nsqd-http", nsqd.http, "--max-depth", str(self.sizes["feed_max_depth"])]
            feed = ClientProc(feeder.argv + feed_args, feeder.env, os.path.join(self.logdir, "rss-feeder-%s.log" % client.key))
            for p, what in ((consumer, "consumer"), (feed, "feeder")):
                try:
                    p.expect(lambda l: l == "READY", 60)
                except (TimeoutError, RuntimeError) as exc:
                    raise Rejected("%s did not start: %s; stderr: %s" % (what, exc, p.stderr_tail()))
            cpu0 = consumer.cpu() or 0.0
            wall0 = time.monotonic()
            consumer.start()
            feed.start()
            samples: list[tuple[float, int]] = []
            deadline = wall0 + self.timeout_for(count // 10)
            result = None
            next_sample = wall0
            while result is None:
                now = time.monotonic()
                if now >= next_sample:
                    rss = proc_rss_kb(consumer.proc.pid)
                    if rss is not None:
                        samples.append((now - wall0, rss))
                    next_sample += interval
                try:
                    line = consumer.lines.get(timeout=max(0.0, min(next_sample - time.monotonic(), 0.5)))
                except queue.Empty:
                    line = ""
                if line is None:
                    raise Rejected("consumer exited before answering; stderr: %s" % consumer.stderr_tail())
                if line.startswith("{"):
                    result = json.loads(line)
                if time.monotonic() > deadline:
                    raise Rejected("consumer timed out (killed); stderr: %s" % consumer.stderr_tail())
            final_rss = proc_rss_kb(consumer.proc.pid)
            if final_rss is not None:
                samples.append((time.monotonic() - wall0, final_rss))
            cpu1 = consumer.cpu() or 0.0
            try:
                fed = feed.result(60)
            except Exception as exc:
                raise Rejected("feeder did not finish: %s; stderr: %s" % (exc, feed.stderr_tail()))
            consumer.finish()
            feed.finish()
            stats, problems = check_consumed([nsqd], topic, count)
            if result.get("count") != count:
                problems.append("consumer counted %s of %d" % (result.get("count"), count))
            if fed.get("count") != count or fed.get("errors"):
                problems.append("feeder published %s of %d (%s errors)" % (fed.get("count"), count, fed.get("errors")))
            total = samples[-1][0] if samples else 0
            warm = max(total * 0.1, 3.0 if not self.args.quick else interval)
            after = [kb for t, kb in samples if t >= warm] or [kb for _, kb in samples]
            mb = [kb / 1024 for _, kb in samples]
            entry = {
                "seconds": result.get("seconds"),
                "rate": count / result["seconds"] if result.get("seconds") else 0,
                "client_us": us(cpu1 - cpu0, count),
                "interval": interval,
                "warmup_seconds": warm,
                "samples_mb": [round(x, 2) for x in mb],
                "start_mb": mb[0] if mb else 0,
                "peak_mb": max(mb) if mb else 0,
                "end_mb": mb[-1] if mb else 0,
                "spread_after_warmup_mb": (max(after) - min(after)) / 1024 if after else 0,
                "stats": stats,
            }
            if len(samples) < 2:
                problems.append("fewer than 2 RSS samples")
            if problems:
                raise Rejected("; ".join(problems), entry)
            return entry
        finally:
            for p in (consumer, feed):
                if p is not None:
                    p.kill()
            nsqd.delete(topic)


LATENCY_FIELDS = ("p50_latency_ms", "p99_latency_ms", "max_latency_ms", "peak_rss_mb")
# consume on a loop (pynsq, nsqfast asyncio): how late a 10 ms asyncio.sleep ticker woke up
TICKER_FIELDS = ("ticker_p50_ms", "ticker_p99_ms", "ticker_max_ms", "ticker_ticks")
TICKER_P99_GOAL_MS = 5.0


def median_fields(runs: list[dict], keys: tuple[str, ...]) -> dict:
    """For each key the clients reported: the median over the accepted runs of each run's figure."""
    medians = {}
    for k in keys:
        values = [r["client_result"][k] for r in runs if isinstance(r.get("client_result", {}).get(k), (int, float))]
        if values:
            medians[k] = statistics.median(values)
    return medians


def us(cpu: float, count: int) -> float:
    return cpu * 1e6 / count if count else 0.0


def parse_bench_log(text: str) -> tuple[float, float]:
    """(seconds, ops/s) from bench_writer's 'duration: 1.0001s - 105.9mb/s - 1111395.024ops/s - ...' line."""
    for line in text.splitlines():
        if "duration:" not in line:
            continue
        parts = [p.strip() for p in line.split("duration:", 1)[1].split(" - ")]
        seconds = go_duration(parts[0])
        for p in parts:
            if p.endswith("ops/s"):
                return seconds, float(p[: -len("ops/s")])
    return 0.0, 0.0


def go_duration(text: str) -> float:
    units = [("ms", 1e-3), ("µs", 1e-6), ("us", 1e-6), ("ns", 1e-9), ("h", 3600.0), ("m", 60.0), ("s", 1.0)]
    total = 0.0
    rest = text
    while rest:
        i = 0
        while i < len(rest) and (rest[i].isdigit() or rest[i] == "."):
            i += 1
        number = float(rest[:i])
        rest = rest[i:]
        for unit, scale in units:
            if rest.startswith(unit):
                total += number * scale
                rest = rest[len(unit) :]
                break
        else:
            raise ValueError("bad Go duration %r" % text)
    return total


# -- machine ------------------------------------------------------------------------------


def machine(python: str) -> dict:
    info: dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cores"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["ram_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    info["kernel"] = platform.release()
    info["os"] = platform.platform()

    def out(argv: list[str]) -> str:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            return proc.stdout.strip() or proc.stderr.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "unavailable"

    info["python"] = out([python, "-c", "import sys; print(sys.version.split()[0])"])
    info["go"] = out(["go", "version"]) if shutil.which("go") else "go not found"
    info["nsqd"] = out([os.path.join(NSQ_BIN, "nsqd"), "--version"])
    return info


# -- reporting -----------------------------------------------------------------------------


def fmt_rate(cell: dict) -> str:
    status = cell.get("status")
    if status == "ok":
        text = f"{cell['rate']:,.0f}"
        if cell.get("accepted", 0) < 3:
            text += " (n=%d)" % cell["accepted"]
        return text
    return {"n/a": "—", "unavailable": "unavailable", "rejected": "REJECTED", "skipped": "skipped"}.get(status, "?")


def fmt_cpu(cell: dict) -> str:
    if cell.get("status") != "ok":
        return fmt_rate(cell)
    return "%.2f / %.2f" % (cell["client_us"], cell["nsqd_us"])


ASYNCIO = "nsqfast-cy-asyncio"


def ticker_row(cell: dict, wl: str) -> dict:
    """The asyncio consumer keeps its loop responsive: the ticker's p99 lag under the goal."""
    value = cell.get("ticker_p99_ms") if cell.get("status") == "ok" else None
    return {
        "target": "asyncio backend consume: ticker p99 lag < %g ms" % TICKER_P99_GOAL_MS,
        "workload": wl,
        "ours": ASYNCIO,
        "theirs": None,
        "value": value,
        "goal": TICKER_P99_GOAL_MS,
        "unit": "ms p99",
        "pass": None if value is None else value < TICKER_P99_GOAL_MS,
    }


def targets(report: dict) -> list[dict]:
    res = report["results"]

    def rate(wl: str, client: str) -> float | None:
        cell = res.get(wl, {}).get(client, {})
        return cell.get("rate") if cell.get("status") == "ok" else None

    rows = []

    def ratio_row(name: str, wl: str, ours: str, theirs: str, goal: float) -> None:
        a, b = rate(wl, ours), rate(wl, theirs)
        value = a / b if a and b else None
        rows.append(
            {
                "target": name,
                "workload": wl,
                "ours": ours,
                "theirs": theirs,
                "value": value,
                "goal": goal,
                "unit": "x",
                "pass": None if value is None else value >= goal,
            }
        )

    for wl in ("consume-2500", "consume-200", "consume-2500-3nsqd", "consume-200-3nsqd", "consume-snappy", "consume-tls"):
        if wl not in res:
            continue
        ratio_row("consume ≥ 5x pynsq", wl, "nsqfast-cy-gevent", "pynsq", 5.0)
        ratio_row("consume ≥ 1.5x go-nsq Consumer", wl, "nsqfast-cy-gevent", "go-nsq", 1.5)
        ratio_row("threads backend consume ≥ 3x pynsq", wl, "nsqfast-cy-threads", "pynsq", 3.0)
        ratio_row("asyncio backend consume ≥ 5x pynsq", wl, ASYNCIO, "pynsq", 5.0)
        rows.append(ticker_row(res[wl].get(ASYNCIO, {}), wl))
    compiled = ("nsqfast-cy-gevent", "nsqfast-cy-threads")
    if "pub" in res:
        for ours in compiled:
            ratio_row("one-at-a-time publish ≥ 1.5x go-nsq Producer", "pub", ours, "go-nsq", 1.5)
    if "concurrent" in res:
        ratio_row("concurrent publishers (gevent) ≥ 2x go-nsq", "concurrent", "nsqfast-cy-gevent", "go-nsq", 2.0)
        ratio_row("concurrent publishers (threads) ≥ 1x go-nsq", "concurrent", "nsqfast-cy-threads", "go-nsq", 1.0)
    for wl in ("mpub", "pub-many"):
        if wl in res:
            for ours in compiled:
                ratio_row("MPUB of 100 ≥ 90% of bench_writer", wl, ours, "bench-tools", 0.9)
    if "callers-1000" in res:
        limit_ms = 10_000.0  # the Writer's default publish_timeout
        for ours in compiled + (ASYNCIO,):
            cell = res["callers-1000"].get(ours, {})
            ok = cell.get("status") == "ok"
            value = cell.get("max_latency_ms") if ok else None
            if ok:
                passed = value is not None and value < limit_ms
            else:  # rejected: some call was not answered (or failed); n/a, unavailable: no verdict
                passed = False if cell.get("status") == "rejected" else None
            rows.append(
                {
                    "target": "1,000 callers: every call answered, max latency under publish_timeout (10 s)",
                    "workload": "callers-1000",
                    "ours": ours,
                    "theirs": None,
                    "value": value,
                    "goal": limit_ms,
                    "unit": "ms",
                    "pass": passed,
                }
            )
    for entry in report.get("rss", []):
        value = entry.get("spread_after_warmup_mb") if entry.get("status") == "ok" else None
        rows.append(
            {
                "target": "RSS flat within 20 MB over %s messages" % f"{entry['count']:,}",
                "workload": "rss",
                "ours": entry["client"],
                "theirs": None,
                "value": value,
                "goal": 20.0,
                "unit": "MB",
                "pass": None if value is None else value <= 20.0,
            }
        )
    return rows


def markdown(report: dict) -> str:
    clients = report["clients"]
    columns = [c for c in clients if any(report["results"][w["key"]].get(c["key"], {}).get("status") != "n/a" for w in report["workloads"])]
    labels = {c["key"]: c["label"] for c in clients}
    lines = []
    m = report["machine"]
    lines.append(
        "Measured %s with `make bench%s` (%s run, %s): every figure is the median of %d accepted runs "
        "(a run is accepted only when nsqd's `/stats` show every message published or finished, "
        "none requeued or timed out); 100-byte messages; each client is its own process on the same "
        "nsqd %s."
        % (
            report["generated"][:16].replace("T", " ") + " UTC",
            " BENCH_ARGS=--quick" if report["quick"] else "",
            "quick" if report["quick"] else "full",
            "%s s" % f"{report['duration_seconds']:,.0f}",
            report["repeats"],
            m.get("nsqd", "?").split(" (")[0].replace("nsqd ", ""),
        )
    )
    lines.append("")
    lines.append(
        "**Machine:** %s, %s cores, %s GiB RAM, Linux %s; Python %s; %s."
        % (m.get("cpu", "?"), m.get("cores"), m.get("ram_gib"), m.get("kernel"), m.get("python"), m.get("go", "").replace("go version ", ""))
    )
    lines.append("")
    versions = []
    for c in clients:
        if c.get("versions"):
            versions.append("%s (%s)" % (c["label"], ", ".join("%s %s" % (k, v) for k, v in sorted(c["versions"].items()))))
    if versions:
        lines.append("**Clients:** " + "; ".join(versions) + ".")
        lines.append("")
    lines.append("#### Throughput (messages/s, higher is better)")
    lines.append("")
    lines.append("| workload | " + " | ".join(labels[c["key"]] for c in columns) + " |")
    lines.append("|---|" + "---:|" * len(columns))
    for w in report["workloads"]:
        row = report["results"][w["key"]]
        label = "%s — %s msgs" % (w["label"], f"{w['count']:,}")
        lines.append("| " + label + " | " + " | ".join(fmt_rate(row.get(c["key"], {})) for c in columns) + " |")
    lines.append("")
    lines.append("#### CPU per message (µs of CPU, client / nsqd, lower is better)")
    lines.append("")
    lines.append("| workload | " + " | ".join(labels[c["key"]] for c in columns) + " |")
    lines.append("|---|" + "---:|" * len(columns))
    for w in report["workloads"]:
        row = report["results"][w["key"]]
        lines.append("| " + w["label"] + " | " + " | ".join(fmt_cpu(row.get(c["key"], {})) for c in columns) + " |")
    lines.append("")
    lines.extend(ticker_table(report, labels))
    latency_rows = []
    for w in report["workloads"]:
        if w["key"] not in ("concurrent", "callers-1000"):
            continue
        for c in clients:
            cell = report["results"][w["key"]].get(c["key"], {})
            if cell.get("status") in (None, "n/a"):
                continue
            if cell.get("status") == "ok" and all(k in cell for k in LATENCY_FIELDS):
                latency_rows.append(
                    "| %s | %s | %s | %s | %.2f / %.2f / %s | %.1f |"
                    % (
                        w["label"], c["label"], cell.get("note", ""), fmt_rate(cell),
                        cell["p50_latency_ms"], cell["p99_latency_ms"], f"{cell['max_latency_ms']:,.2f}", cell["peak_rss_mb"],
                    )
                )
            elif cell.get("status") == "ok":
                latency_rows.append("| %s | %s | %s | %s | not reported | |" % (w["label"], c["label"], cell.get("note", ""), fmt_rate(cell)))
            else:
                latency_rows.append("| %s | %s | %s | %s | | |" % (w["label"], c["label"], cell.get("note", ""), fmt_rate(cell)))
    if latency_rows:
        lines.append("#### Many callers: latency and memory")
        lines.append("")
        lines.append("| workload | client | callers | msgs/s | latency p50 / p99 / max (ms) | peak RSS (MB) |")
        lines.append("|---|---|---|---:|---:|---:|")
        lines.extend(latency_rows)
        lines.append("")
        lines.append(
            "Latency: each blocking publish timed by its caller (medians over the accepted runs of each run's p50, p99 and slowest call); "
            "peak RSS: the client process's VmHWM at the end of the run."
        )
        lines.append("")
    if report.get("rss"):
        lines.append("#### Consumer memory over a long run (VmRSS)")
        lines.append("")
        lines.append("| consumer | messages | msgs/s | start | peak | end | max − min after warm-up |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for e in report["rss"]:
            if e.get("status") == "ok":
                lines.append(
                    "| %s | %s | %s | %.1f MB | %.1f MB | %.1f MB | %.1f MB |"
                    % (e["label"], f"{e['count']:,}", f"{e['rate']:,.0f}", e["start_mb"], e["peak_mb"], e["end_mb"], e["spread_after_warmup_mb"])
                )
            else:
                lines.append("| %s | %s | REJECTED: %s | | | | |" % (e["label"], f"{e['count']:,}", md_escape(e.get("reason", ""))[:200]))
        lines.append("")
        lines.append("Fed meanwhile by %s in another process; sampled every %gs; warm-up excluded from max − min." % (report["rss"][0].get("feeder", "?"), report["rss"][0].get("interval", 1)))
        lines.append("")
    lines.append("#### Targets")
    lines.append("")
    lines.append("| target | workload | measured | result |")
    lines.append("|---|---|---:|---|")
    for t in report["targets"]:
        ours = labels.get(t["ours"], t["ours"])
        if t["value"] is None:
            measured = "n/a" if t["pass"] is not False else "REJECTED (%s)" % ours
        elif t["unit"] == "x":
            measured = "%.2fx (%s vs %s)" % (t["value"], ours, labels.get(t["theirs"], t["theirs"]))
        elif t["unit"] == "msgs/s":
            measured = "%s msgs/s (%s)" % (f"{t['value']:,.0f}", ours)
        elif t["unit"] == "ms":
            measured = "max %s ms (%s)" % (f"{t['value']:,.2f}", ours)
        elif t["unit"] == "ms p99":
            measured = "p99 %s ms (%s)" % (f"{t['value']:,.2f}", ours)
        else:
            measured = "%.1f MB (%s)" % (t["value"], ours)
        verdict = "—" if t["pass"] is None else ("PASS" if t["pass"] else "**FAIL**")
        lines.append("| %s | %s | %s | %s |" % (t["target"], t["workload"], measured, verdict))
    lines.append("")
    notes = [
        "Consume: a backlog put in nsqd before the client starts (split evenly over 3 nsqd in the 3-nsqd rows), every message finished; the time runs from the first message to the last one handled. Publish: the time runs from the first publish to the last OK.",
        "CPU: utime+stime from /proc of the client process and of the nsqd process(es), from the start signal to the client's result (the client's interpreter start-up is not counted).",
        "Concurrent publishers: nsqfast gevent 64 greenlets, nsqfast threads 8 threads, nsqfast asyncio 64 coroutines, gnsq 64 greenlets, go-nsq 64 goroutines, all on one writer/producer; pynsq (no blocking publish) 64 async pubs kept outstanding with callbacks. "
        "The 1,000-caller row puts 1,000 greenlets (nsqfast gevent), 1,000 threads (nsqfast threads), 1,000 coroutines (nsqfast asyncio) or 1,000 goroutines (go-nsq) on one writer/producer, each blocking on (or awaiting) its own PUBs; pynsq and gnsq do not run it.",
        "nsqfast asyncio: the Reader / Writer are made inside `asyncio.run()`, so they run on the loop's asyncio backend (no threads); pub, concurrent and mpub `await writer.pub()` / `await writer.mpub()`, one at a time per coroutine; it has no `pub_many`.",
        "MPUB of 100 pipelined: one caller hands nsqfast's `Writer.pub_many` every body (batch_size 100, window 8: up to 8 MPUBs awaiting nsqd's answer), timed until it returns; the bench_writer figure in that row is its usual MPUB of 100, as the reference. Other clients have no such call.",
        "nsqfast gevent clients run after `gevent.monkey.patch_all()`%s." % (" (disabled for this run: --gevent-no-patch)" if report.get("gevent_no_patch") else ""),
        "bench_reader / bench_writer are nsq's own raw-protocol tools, run with GOMAXPROCS=1 (one connection); bench_reader's rate is timed by polling nsqd `/stats` every ~2 ms, bench_writer's is its own report over --runfor.",
    ]
    unavailable = [c for c in clients if not c["available"]]
    for c in unavailable:
        notes.append("%s unavailable: %s" % (c["label"], md_escape(c["reason"])[:300]))
    load = m.get("loadavg_before")
    if load and load[0] > 0.5 * (m.get("cores") or 1):
        notes.append(
            "**The machine was busy**: load average %.2f before the run and %.2f after it, on %s cores; other work skews these figures."
            % (load[0], (m.get("loadavg_after") or [0])[0], m.get("cores"))
        )
    if report.get("interrupted"):
        notes.append("**This run was interrupted**: the tables hold what was measured before that.")
    lines.append("Notes:")
    lines.append("")
    for n in notes:
        lines.append("- " + n)
    lines.append("")
    if report["rejections"]:
        lines.append("#### REJECTED runs (left out of the medians; details in latest.json)")
        lines.append("")
        shown = report["rejections"][:25]
        for r in shown:
            lines.append("- %s / %s, run %s: %s" % (r["workload"], labels.get(r["client"], r["client"]), r["attempt"], md_escape(str(r["reason"]))[:240]))
        if len(report["rejections"]) > len(shown):
            lines.append("- … and %d more" % (len(report["rejections"]) - len(shown)))
        lines.append("")
    return "\n".join(lines)


def ticker_table(report: dict, labels: dict[str, str]) -> list[str]:
    """Loop responsiveness of the two consumers that share their loop with the program (pynsq on
    tornado's asyncio loop, nsqfast asyncio), and the asyncio one's throughput against pynsq."""
    rows = []
    for w in report["workloads"]:
        if w["mode"] != "consume":
            continue
        cells = [report["results"][w["key"]].get(key, {}) for key in ("pynsq", ASYNCIO)]
        if all(c.get("status") in (None, "n/a") for c in cells):
            continue
        ratio = cells[1]["rate"] / cells[0]["rate"] if all(c.get("status") == "ok" for c in cells) else None
        # ticks: a fast consume of a quick run lasts tens of ms, so its p99 is of a handful of ticks
        ticks = " / ".join("%d" % c["ticker_ticks"] if c.get("status") == "ok" and "ticker_ticks" in c else "—" for c in cells)
        rows.append(
            "| %s | %s | %s | %s | %s |"
            % (w["label"], fmt_ticker(cells[0]), fmt_ticker(cells[1]), ticks, "—" if ratio is None else "%.2fx" % ratio)
        )
    if not rows:
        return []
    return [
        "#### Loop responsiveness while consuming (lag of a 10 ms asyncio.sleep ticker, p50 / p99 ms)",
        "",
        "| workload | %s | %s | ticks per run (pynsq / asyncio) | msgs/s, asyncio / pynsq |" % (labels.get("pynsq", "pynsq"), labels.get(ASYNCIO, ASYNCIO)),
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        "The ticker runs on the consumer's own loop from the first message to the last (tornado's asyncio loop for pynsq); "
        "lag: how much later than 10 ms each `asyncio.sleep(0.01)` returned, medians over the accepted runs of each run's p50, p99 and tick count "
        "(with few ticks the p99 is the slowest tick). "
        "Issue targets: asyncio consume ≥ 5x pynsq, ticker p99 < %g ms (see Targets)." % TICKER_P99_GOAL_MS,
        "",
    ]


def fmt_ticker(cell: dict) -> str:
    if cell.get("status") != "ok":
        return fmt_rate(cell)
    if "ticker_p50_ms" not in cell or "ticker_p99_ms" not in cell:
        return "not reported"
    return "%.2f / %.2f" % (cell["ticker_p50_ms"], cell["ticker_p99_ms"])


def md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def draw_chart(json_path: str, png_path: str) -> str:
    candidates = [os.path.join(VENVS, "tools", "bin", "python"), sys.executable]
    errors = []
    for python in candidates:
        if not os.path.exists(python):
            continue
        proc = subprocess.run([python, os.path.join(HERE, "chart.py"), json_path, png_path], capture_output=True, text=True, timeout=300)
        if proc.returncode == 0:
            return ""
        errors.append("%s: %s" % (python, proc.stderr.strip()[-300:]))
    return "; ".join(errors) or "no python with matplotlib (run benchmarks/setup_peers.sh)"


# -- main -----------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description="nsqfast vs pynsq, gnsq, go-nsq and nsq's bench tools on one nsqd")
    p.add_argument("--quick", action="store_true", help="small counts everywhere: a smoke run of a few minutes")
    p.add_argument("--repeats", type=int, default=3, help="accepted runs per figure (median), default 3")
    p.add_argument("--rss-run", type=int, default=None, help="messages for the RSS run (default 5,000,000; quick 300,000; 0 skips)")
    p.add_argument("--clients", default="", help="comma-separated client keys to run (default all)")
    p.add_argument("--workloads", default="", help="comma-separated workload keys to run (default all)")
    p.add_argument("--python", default=sys.executable, help="interpreter for the nsqfast clients (default: this one)")
    p.add_argument("--gevent-no-patch", action="store_true", help="run nsqfast's gevent clients without monkey.patch_all()")
    p.add_argument("--mem-queue-size", type=int, default=2_000_000, help="nsqd --mem-queue-size (keeps every run in memory)")
    p.add_argument(
        "--output-buffer-timeout", type=int, default=1,
        help="ms: consumers ask nsqd for this output_buffer_timeout (nsqd runs with it as minimum and default); 0 leaves every default",
    )
    p.add_argument("--timeout-base", type=float, default=None, help="client timeout: base seconds (default 20, quick 10) ...")
    p.add_argument("--min-rate", type=float, default=2000.0, help="... plus count / this rate")
    p.add_argument("--give-up-after", type=int, default=4, help="skip a client's workloads of one mode after this many rejected runs in a row")
    p.add_argument("--out", default=RESULTS_DIR, help="where latest.json/.md/.png go")
    p.add_argument(
        "--baseline", default="",
        help="another checkout (extensions built in place) whose nsqfast clients run beside this one's, keyed "
             "KEY-base (nsqfast-cy-threads-base, ...): before/after in one run, interleaved",
    )
    args = p.parse_args()
    if args.repeats < 1:
        p.error("--repeats must be at least 1")

    if not os.access(os.path.join(NSQ_BIN, "nsqd"), os.X_OK):
        print("nsqd not found in %s: run `make nsq` (ci/install-nsq.sh) first" % NSQ_BIN, file=sys.stderr)
        return 2
    started = time.monotonic()
    load_before = os.getloadavg()
    bench = Bench(args)
    if load_before[0] > 0.5 * (os.cpu_count() or 1):
        log("WARNING: load average %.2f before the run: other work on this machine will skew the figures" % load_before[0])
    log("nsqfast benchmark (%s): logs in %s" % ("quick" if args.quick else "full", os.path.relpath(bench.logdir, ROOT)))
    for c in bench.clients:
        if not c.available:
            log("UNAVAILABLE %s: %s" % (c.label, c.reason))

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    interrupted = False
    try:
        bench.make_cert()
        if bench.cert_error:
            log("TLS: %s" % bench.cert_error)
        bench.start_nsqds()
        bench.run_matrix()
        bench.run_rss()
    except KeyboardInterrupt:
        interrupted = True
        log("\ninterrupted: writing what was measured so far")
    finally:
        bench.stop()

    report = {
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "interrupted": interrupted,
        "repeats": args.repeats,
        "gevent_no_patch": args.gevent_no_patch,
        "duration_seconds": time.monotonic() - started,
        "sizes": bench.sizes,
        "machine": dict(machine(args.python), loadavg_before=load_before, loadavg_after=os.getloadavg()),
        "clients": [
            {"key": c.key, "label": c.label, "available": c.available, "reason": c.reason, "versions": c.versions}
            for c in bench.clients
        ],
        "workloads": [w.__dict__ for w in bench.workloads],
        "results": {w.key: bench.records.get(w.key, {}) for w in bench.workloads},
        "rss": bench.rss,
        "rejections": bench.rejections,
    }
    report["targets"] = targets(report)
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "latest.json")
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1, default=str)
    md = markdown(report)
    with open(os.path.join(args.out, "latest.md"), "w") as f:
        f.write(md)
    chart_error = draw_chart(json_path, os.path.join(args.out, "latest.png"))
    log("\n" + md)
    if chart_error:
        log("chart not drawn: %s" % chart_error)
    log("wrote %s, latest.md%s in %s (%.0f s)" % ("latest.json", "" if chart_error else ", latest.png", os.path.relpath(args.out, ROOT), report["duration_seconds"]))
    if report["rejections"]:
        log("%d run(s) REJECTED:" % len(report["rejections"]))
        for r in report["rejections"]:
            log("  REJECTED %s / %s run %s: %s" % (r["workload"], r["client"], r["attempt"], r["reason"]))
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
