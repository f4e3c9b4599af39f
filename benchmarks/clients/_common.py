# What every Python benchmark client shares (stdlib only: each client runs in
# its own virtualenv): the command line, the READY/start handshake with
# benchmarks/run.py, the message body, and the one JSON result line.
#
# Protocol: the client imports and sets up, prints "READY", then waits for one
# line on stdin before it connects and runs. When done it prints one JSON line
# ({"count": .., "seconds": .., "errors": .., ...}) and then waits until stdin
# is closed, so that the driver can read the process's CPU time from /proc
# while nothing else runs in it.
from __future__ import annotations

import argparse
import json
import math
import ssl
import sys
import time
from typing import Any

now = time.perf_counter


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mode", choices=("consume", "pub", "concurrent", "mpub", "pubmany", "feed"), required=True)
    p.add_argument("--nsqd", required=True, help="nsqd TCP address(es), host:port[,host:port...]")
    p.add_argument("--nsqd-http", default="", help="nsqd HTTP address (feed mode: watches the channel depth)")
    p.add_argument("--topic", required=True)
    p.add_argument("--channel", default="bench")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--max-in-flight", type=int, default=2500)
    p.add_argument("--backend", choices=("gevent", "threads", "asyncio"), default="gevent")
    p.add_argument("--no-patch", action="store_true", help="gevent backend without monkey.patch_all()")
    p.add_argument("--concurrency", type=int, default=64, help="publishers (concurrent mode)")
    p.add_argument("--batch", type=int, default=100, help="messages per MPUB (mpub, pubmany and feed modes)")
    p.add_argument("--size", type=int, default=100, help="message body size")
    p.add_argument("--max-depth", type=int, default=200_000, help="feed mode: pause while the channel holds this many")
    p.add_argument("--snappy", action="store_true")
    p.add_argument("--tls", action="store_true")
    p.add_argument("--output-buffer-timeout", type=int, default=0, help="ms asked of nsqd in IDENTIFY (0: the client's default)")
    p.add_argument("--ca", default="", help="CA certificate to verify nsqd with (TLS); none: no verification")
    return p


def parse(description: str) -> argparse.Namespace:
    args = parser(description).parse_args()
    args.addresses = [a for a in args.nsqd.split(",") if a]
    return args


def body(size: int) -> bytes:
    return bytes(ord("a") + i % 26 for i in range(size))


def shares(count: int, parts: int) -> list[int]:
    """count split into parts nearly equal shares."""
    return [count // parts + (1 if i < count % parts else 0) for i in range(parts)]


def wait_for_start() -> None:
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    if not sys.stdin.readline():
        sys.exit("benchmark client: stdin closed before the start line")


def report(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the driver has read our CPU time and closes stdin


def latency_summary(per_caller: list[list[float]]) -> dict:
    """p50, p99 and max (ms) of every call's duration (seconds, one list per caller)."""
    merged = [d for durations in per_caller for d in durations]
    if not merged:
        return {}
    merged.sort()
    n = len(merged)

    def rank(q: float) -> float:  # nearest rank: the smallest with at least q of the calls at or under it
        return merged[min(n - 1, max(0, math.ceil(q * n - 1e-9) - 1))] * 1000

    return {
        "p50_latency_ms": rank(0.50),
        "p99_latency_ms": rank(0.99),
        "max_latency_ms": merged[-1] * 1000,
        "latency_samples": n,
    }


def peak_rss_mb() -> float | None:
    """This process's VmHWM (peak resident set), in MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def depth_of(http_address: str, topic: str, channel: str) -> int | None:
    """The channel's depth from nsqd's /stats (None when it is not there yet)."""
    import urllib.request

    url = "http://%s/stats?format=json&topic=%s&channel=%s" % (http_address, topic, channel)
    with urllib.request.urlopen(url, timeout=5) as response:
        stats = json.loads(response.read())
    stats = stats.get("data", stats)  # nsqd < 1.0 wrapped it in "data"
    for t in stats.get("topics") or []:
        if t.get("topic_name") == topic:
            for c in t.get("channels") or []:
                if c.get("channel_name") == channel:
                    return int(c.get("depth", 0)) + int(c.get("in_flight_count", 0))
    return None


def conn_options(args: argparse.Namespace) -> dict:
    """The connection keyword arguments pynsq, gnsq and nsqfast share, from the flags."""
    options: dict = {}
    if args.output_buffer_timeout:
        options["output_buffer_timeout"] = args.output_buffer_timeout
    if args.snappy:
        options["snappy"] = True
    if args.tls:
        options["tls_v1"] = True
        if args.ca:
            options["tls_options"] = {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": args.ca}
        else:
            options["tls_options"] = {"cert_reqs": ssl.CERT_NONE}
    return options


TICK = 0.010  # the ticker's period (seconds): see Ticker


class Ticker:
    """A 10 ms ``asyncio.sleep`` ticker on the running loop: how late each tick wakes up tells how
    responsive the loop stays while a client works on it. ``summary()``: p50/p99/max lag in ms."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.running = True
        self.counting = False  # ticks count from when the work starts (set it then)

    async def run(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        while self.running:
            counted = self.counting
            t0 = loop.time()
            await asyncio.sleep(TICK)
            if counted:
                self.lags.append(max(0.0, loop.time() - t0 - TICK))

    def summary(self) -> dict:
        lags = sorted(self.lags)
        if not lags:
            return {}
        return {"ticker_ticks": len(lags), "ticker_p50_ms": round(lags[len(lags) // 2] * 1000, 2),
                "ticker_p99_ms": round(lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000, 2),
                "ticker_max_ms": round(lags[-1] * 1000, 2)}


class Tally:
    """What a consume workload's handler records: messages seen, bodies of the wrong size, the
    time of the first and of the last; and the ticker's window (from the first message to the
    last), when the workload runs one."""

    def __init__(self, count: int, size: int, ticker: "Ticker | None" = None) -> None:
        self.count, self.size, self.ticker = count, size, ticker
        self.n = self.bad = 0
        self.start = self.end = 0.0

    def seen(self, message: Any) -> bool:
        """Count one message; True when it is the last one the workload waits for."""
        self.n += 1
        if self.n == 1:
            self.start = now()
            if self.ticker is not None:
                self.ticker.counting = True
        if len(message.body) != self.size:
            self.bad += 1
        if self.n != self.count:
            return False
        self.end = now()
        if self.ticker is not None:
            self.ticker.running = False
        return True

    def result(self) -> dict:
        summary = self.ticker.summary() if self.ticker is not None else {}
        return dict(summary, count=self.n, seconds=self.end - self.start, errors=self.bad)
