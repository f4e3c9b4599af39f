#!/usr/bin/env python3
"""Long run: publish and consume --count messages through one real nsqd, per backend.

One process publishes with a Writer (pipelined MPUBs, or single PUBs joined by
the Writer) while a Reader consumes the same topic. It checks that

* every message is consumed (a bitmap of message numbers: duplicates counted,
  losses = messages never seen),
* resident memory stays flat: VmRSS is sampled the whole run; its growth from
  the end of the warm-up (10% of the messages) to the end must stay under
  --max-rss-growth-mb,
* nothing is left over after close(): OS threads (/proc/self/task), Python
  threads, live greenlets, open file descriptors and sockets are counted
  before the clients are made and after they are closed.

Usage:
  python soak/soak.py --count 10000000 --json build/reliability/soak.json
  python soak/soak.py --count 200000 --backend threads       # a quick look

Exit status 0 when every check passed. Needs the nsq binaries (.nsq-bin/ or
NSQ_BIN_DIR), as the tests do.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import nsq  # noqa: E402
from nsq import codec  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402
from tests.support.servers import Nsqd  # noqa: E402

CHANNEL = "soak"
DIGITS = 10  # message number at the start of each body


# -- process resources ---------------------------------------------------------------------


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds() -> dict:
    result = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            result[int(name)] = os.readlink("/proc/self/fd/" + name)
        except OSError:
            pass  # the listing's own fd, closed meanwhile
    return result


def live_greenlets() -> int:
    try:
        import greenlet
    except ImportError:
        return 0
    return sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet) and bool(o) and not o.dead)


def open_socket_objects() -> int:
    count = 0
    for o in gc.get_objects():
        try:
            if isinstance(o, socket.socket) or type(o).__module__.startswith("gevent._socket"):
                if o.fileno() != -1:
                    count += 1
        except Exception:  # noqa: BLE001 - half-built objects
            pass
    return count


def snapshot() -> dict:
    gc.collect()
    descriptors = fds()
    return {
        "os_threads": len(os.listdir("/proc/self/task")),
        "python_threads": sorted(t.name for t in threading.enumerate()),
        "greenlets": live_greenlets(),
        "fds": len(descriptors),
        "socket_fds": sum(1 for target in descriptors.values() if target.startswith("socket:")),
        "socket_objects": open_socket_objects(),
    }


def leftovers(before: dict, after: dict) -> dict:
    result = {}
    for key in ("os_threads", "greenlets", "fds", "socket_fds", "socket_objects"):
        if after[key] > before[key]:
            result[key] = after[key] - before[key]
    extra = sorted(set(after["python_threads"]) - set(before["python_threads"]))
    if extra:
        result["python_threads"] = extra
    return result


# -- one run ---------------------------------------------------------------------------------


def warm_up(backend) -> None:
    """Create what a backend keeps for the process's lifetime (the gevent hub and
    its resolver pool), so that the snapshots compare only the clients."""
    backend.sleep(0)
    if backend.name == "gevent":
        import gevent.socket

        gevent.socket.getaddrinfo("127.0.0.1", 4150)


def run(backend_name: str, nsqd: Nsqd, count: int, body_size: int, batch: int, max_in_flight: int,
        sample_interval: float, max_rss_growth_mb: float, log=print) -> dict:
    backend = get_backend(backend_name)
    warm_up(backend)
    topic = "soak_%s_%d_%d" % (backend_name, os.getpid(), int(time.time()))
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, CHANNEL)
    padding = b"x" * max(0, body_size - DIGITS)
    before = snapshot()
    log("[%s] %d messages of %d bytes; before: %s" % (backend_name, count, DIGITS + len(padding), before))

    seen = bytearray(count // 8 + 1)
    state = {"received": 0, "distinct": 0, "duplicates": 0, "ok": 0, "errors": 0, "answered": 0, "sent": 0}

    def handler(message):
        n = int(message.body[:DIGITS])
        byte, bit = divmod(n, 8)
        mask = 1 << bit
        state["received"] += 1
        if seen[byte] & mask:
            state["duplicates"] += 1
        else:
            seen[byte] |= mask
            state["distinct"] += 1
        return True

    def answered(size):
        def callback(conn, data):
            state["answered"] += size
            if data == b"OK":
                state["ok"] += size
            else:
                state["errors"] += size

        return callback

    reader = nsq.Reader(topic, CHANNEL, handler, nsqd_tcp_addresses=[nsqd.tcp_address],
                        max_in_flight=max_in_flight, backend=backend)
    writer = nsq.Writer([nsqd.tcp_address], backend=backend)
    samples = []  # (seconds, rss kB, messages received)
    started = time.monotonic()
    next_sample = started
    deadline = started + 120 + count / 2000.0
    published_at = None
    failure = None
    try:
        if not writer.wait_connected(30):
            raise RuntimeError("the Writer did not connect")
        reader.start()
        n = 0
        outstanding_limit = 64 * batch if batch > 1 else 2000
        while True:
            now = time.monotonic()
            if now >= next_sample:
                samples.append((round(now - started, 2), rss_kb(), state["received"]))
                next_sample = now + sample_interval
                if len(samples) % 30 == 0:
                    log("[%s] %5.0fs published %d received %d rss %d kB"
                        % (backend_name, now - started, state["ok"], state["received"], samples[-1][1]))
            if now > deadline:
                raise RuntimeError("deadline passed: published %d, consumed %d distinct of %d"
                                   % (state["ok"], state["distinct"], count))
            if n < count:
                if state["sent"] - state["answered"] >= outstanding_limit:
                    backend.sleep(0.001)
                    continue
                if batch > 1:
                    size = min(batch, count - n)
                    bodies = [b"%010d" % i + padding for i in range(n, n + size)]
                    state["sent"] += size
                    writer.mpub(topic, bodies, answered(size))
                else:
                    size = 1
                    state["sent"] += 1
                    writer.pub(topic, b"%010d" % n + padding, answered(1))
                n += size
                if n % (batch * 20) < size:
                    backend.sleep(0)
                continue
            if published_at is None and state["answered"] >= count:
                published_at = now
            if published_at is not None and state["distinct"] + state["errors"] >= count:
                break
            backend.sleep(0.05)
        samples.append((round(time.monotonic() - started, 2), rss_kb(), state["received"]))
    except Exception as exc:  # noqa: BLE001 - reported in the figures
        failure = "%s: %s" % (type(exc).__name__, exc)
    finally:
        consumed_at = time.monotonic()
        reader.close(timeout=10)
        writer.close()
    # Let the closed clients' tasks finish; then count what is left.
    settle_deadline = time.monotonic() + 15
    after = snapshot()
    while leftovers(before, after) and time.monotonic() < settle_deadline:
        backend.sleep(0.2)
        after = snapshot()
    left = leftovers(before, after)

    elapsed = consumed_at - started
    warm = [s for s in samples if s[2] >= count // 10] or samples
    rss_warm = warm[0][1]
    rss_end = samples[-1][1] if samples else rss_kb()
    growth_mb = (rss_end - rss_warm) / 1024.0
    lost = count - state["distinct"] - state["errors"] if failure is None else count - state["distinct"]
    step = max(1, len(samples) // 60)
    result = {
        "backend": backend_name, "messages": count, "body_bytes": DIGITS + len(padding),
        "publish": "mpub x%d" % batch if batch > 1 else "pub (joined by the Writer)",
        "max_in_flight": max_in_flight, "seconds": round(elapsed, 1),
        "messages_per_s": round(state["received"] / max(elapsed, 1e-9)),
        "published_ok": state["ok"], "publish_errors": state["errors"], "received": state["received"],
        "distinct": state["distinct"], "duplicates": state["duplicates"], "lost": lost,
        "rss_kb": {"start": samples[0][1] if samples else None, "after_warmup": rss_warm, "peak": max(s[1] for s in samples) if samples else None, "end": rss_end, "after_close": rss_kb()},
        "rss_growth_mb": round(growth_mb, 1), "max_rss_growth_mb": max_rss_growth_mb,
        "rss_samples": samples[::step],
        "before": before, "after": after, "leftovers": left, "failure": failure,
    }
    result["passed"] = bool(failure is None and lost == 0 and state["errors"] == 0 and not left
                            and growth_mb <= max_rss_growth_mb)
    log("[%s] %s: %d messages in %.0fs (%d/s), lost %d, duplicates %d, rss growth %.1f MB, leftovers %s%s"
        % (backend_name, "PASSED" if result["passed"] else "FAILED", state["distinct"], elapsed,
           result["messages_per_s"], lost, state["duplicates"], growth_mb, left or "none",
           ", " + failure if failure else ""))
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000_000, help="messages per backend (default 10,000,000)")
    parser.add_argument("--backend", choices=("gevent", "threads", "both"), default="both")
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100, help="messages per MPUB; 1 publishes single PUBs")
    parser.add_argument("--max-in-flight", type=int, default=1000)
    parser.add_argument("--sample-interval", type=float, default=1.0)
    parser.add_argument("--max-rss-growth-mb", type=float, default=32.0)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    backends = ["gevent", "threads"] if args.backend == "both" else [args.backend]
    runs = []
    nsqd = Nsqd()
    try:
        for name in backends:
            runs.append(run(name, nsqd, args.count, args.body_size, args.batch, args.max_in_flight,
                            args.sample_interval, args.max_rss_growth_mb))
    finally:
        nsqd.close()
    figures = {"kind": "soak", "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "python": sys.version.split()[0],
               "codec": codec.IMPLEMENTATION, "runs": runs, "passed": all(r["passed"] for r in runs)}
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0 if figures["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
