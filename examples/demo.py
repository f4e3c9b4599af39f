"""make demo: start a private nsqlookupd and nsqd on loopback, publish 100,000
messages with a Writer (many concurrent publishers on one Writer), consume them
with a Reader that finds nsqd through nsqlookupd, print both rates, and exit.

Runs once per backend (gevent, then threads) unless --backend is given.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repo: tests.support.servers, the real-server launcher of the tests

import nsq  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402
from tests.support.servers import Nsqd, Nsqlookupd  # noqa: E402

BODY = b"x" * 100


def publish(writer: nsq.Writer, topic: str, count: int, publishers: int, backend_name: str) -> float:
    backend = get_backend(backend_name)
    shares = [count // publishers + (1 if i < count % publishers else 0) for i in range(publishers)]

    def publisher(share: int) -> None:
        for _ in range(share):
            writer.pub(topic, BODY)

    started = time.perf_counter()
    tasks = [backend.spawn(publisher, share) for share in shares]
    for task in tasks:
        task.join()
    return time.perf_counter() - started


def consume(lookupd: Nsqlookupd, topic: str, count: int, backend_name: str) -> tuple[float, int]:
    received = 0
    first = [0.0]

    def handler(message: nsq.Message) -> bool:
        nonlocal received
        if received == 0:
            first[0] = time.perf_counter()
        received += 1
        if received == count:
            reader.close()
        return True

    reader = nsq.Reader(
        topic,
        "demo",
        handler,
        lookupd_http_addresses=[lookupd.http_address],
        max_in_flight=2500,
        backend=backend_name,
    )
    reader.run()
    return time.perf_counter() - first[0], received


def run_demo(backend_name: str, count: int, nsqd: Nsqd, lookupd: Nsqlookupd) -> None:
    topic = "demo_%s" % backend_name
    publishers = 64 if backend_name == "gevent" else 8
    with nsq.Writer([nsqd.tcp_address], backend=backend_name) as writer:
        writer.wait_connected(10)
        pub_seconds = publish(writer, topic, count, publishers, backend_name)
    nsqd.http_post("/channel/create", params={"topic": topic, "channel": "demo"})
    sub_seconds, received = consume(lookupd, topic, count, backend_name)
    channel = nsqd.channel_stats(topic, "demo") or {}
    print(
        "%-7s published %d msgs in %.2fs (%8.0f msgs/s, %d concurrent publishers on one Writer)"
        % (backend_name, count, pub_seconds, count / pub_seconds, publishers)
    )
    print(
        "%-7s consumed  %d msgs in %.2fs (%8.0f msgs/s); nsqd: depth=%s in_flight=%s requeued=%s timed_out=%s"
        % (
            backend_name,
            received,
            sub_seconds,
            received / sub_seconds,
            channel.get("depth"),
            channel.get("in_flight_count"),
            channel.get("requeue_count"),
            channel.get("timeout_count"),
        )
    )
    if received != count or channel.get("depth") or channel.get("in_flight_count"):
        raise SystemExit("demo failed: not every message was consumed and finished")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--backend", choices=["gevent", "threads"], action="append")
    args = parser.parse_args()
    print("nsqfast %s, codec: %s" % (nsq.__version__, nsq.codec.IMPLEMENTATION))
    with Nsqlookupd() as lookupd, Nsqd(lookupd=lookupd) as nsqd:
        for backend_name in args.backend or ["gevent", "threads"]:
            run_demo(backend_name, args.count, nsqd, lookupd)


if __name__ == "__main__":
    main()
