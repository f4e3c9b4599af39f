"""Transactional produce beside plain batched produce, pulsarfast and the Java client, on one real
Pulsar broker with its transaction coordinator on (issue 48's targets: batches of 100 messages per
transaction at least 0.5x plain batched produce).

Each round produces --count messages of --size bytes on a topic of its own, with batching producers
(1,000 messages or 10 ms, blocking when 10,000 wait): plain (send_async, then flush) or in one
transaction per --per-txn messages (new_transaction, send_async in it, commit) by --window
workers at once, each a thread with a producer of its own (Java: the same, its blocking calls). pulsarfast runs in this
process on the threads backend; the Java client (.pulsar-lib) runs benchmarks/java/TxnBench.java,
compiled here with javac, timed inside its JVM (start-up excluded). Rounds are interleaved, the
median of --rounds is reported, and every round's count is checked on the broker (the topic's
msgInCounter). Results: benchmarks/results/pulsar_transactions.json.

    .venv/bin/python benchmarks/pulsar_transactions.py [--count 20000] [--rounds 3] [--quick]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import pulsarfast  # noqa: E402
from tests.support.pulsar_broker import require_pulsar_lib  # noqa: E402
from tests.support.txn_broker import TxnPulsarBroker  # noqa: E402

JAVA_SOURCE = os.path.join(ROOT, "benchmarks", "java", "TxnBench.java")
JAVA_BUILD = os.path.join(ROOT, "build", "java_bench")
RESULTS = os.path.join(ROOT, "benchmarks", "results", "pulsar_transactions.json")


def compile_java() -> str:
    os.makedirs(JAVA_BUILD, exist_ok=True)
    classpath = os.path.join(require_pulsar_lib(), "*")
    target = os.path.join(JAVA_BUILD, "TxnBench.class")
    if not os.path.exists(target) or os.path.getmtime(target) < os.path.getmtime(JAVA_SOURCE):
        subprocess.run(["javac", "-cp", classpath, "-d", JAVA_BUILD, JAVA_SOURCE], check=True)
    return JAVA_BUILD + os.pathsep + classpath


def ours(url: str, topic: str, count: int, size: int, mode: str, per_txn: int, window: int) -> float:
    client = pulsarfast.Client(url, backend="threads")
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                          batching_max_publish_delay_ms=10, max_pending_messages=10000,
                                          block_if_queue_full=True)
        body = b"x" * size
        start = time.perf_counter()
        if mode == "plain":
            for _ in range(count):
                producer.send_async(body, None)
            producer.flush()
        else:
            # `window` workers (threads), each with a producer of its own, each opening a transaction,
            # sending its share of messages in it and committing it, in turn: one worker's NEW_TXN and
            # END_TXN (each a write of the coordinator's log) overlap the others' sends
            producers = [producer] + [client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                                             batching_max_publish_delay_ms=10,
                                                             max_pending_messages=10000, block_if_queue_full=True)
                                      for _ in range(window - 1)]
            chunks = list(range(0, count, per_txn))
            failed: list = []

            def work(worker_producer, mine) -> None:
                try:
                    for done in mine:
                        txn = client.new_transaction()
                        for _ in range(min(per_txn, count - done)):
                            worker_producer.send_async(body, None, transaction=txn)
                        txn.commit()
                except pulsarfast.PulsarException as exc:
                    failed.append(exc)

            start = time.perf_counter()
            workers = [threading.Thread(target=work, args=(producers[i], chunks[i::window])) for i in range(window)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            if failed:
                raise SystemExit("transactions failed: %s" % failed[:3])
        return time.perf_counter() - start
    finally:
        client.close()


def java(classpath: str, url: str, topic: str, count: int, size: int, mode: str, per_txn: int, window: int) -> float:
    out = subprocess.run(["java", "-Xmx512m", "-cp", classpath, "TxnBench", url, topic, str(count), str(size), mode,
                          str(per_txn), str(window)], check=True, capture_output=True, text=True, timeout=600)
    line = [line for line in out.stdout.splitlines() if line.startswith("{")][-1]
    return float(json.loads(line)["seconds"])


def stored(broker: TxnPulsarBroker, topic: str) -> int:
    stats = broker.admin("GET", "/admin/v2/persistent/public/default/%s/stats" % topic)
    return int(stats["msgInCounter"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--per-txn", type=int, default=100)
    parser.add_argument("--window", type=int, default=16, help="workers opening, filling and committing transactions at once")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 messages, one round")
    args = parser.parse_args()
    if args.quick:
        args.count, args.rounds = 2000, 1
    classpath = compile_java()
    broker = TxnPulsarBroker().start()
    rows: dict[str, list[float]] = {}
    try:
        for round_index in range(args.rounds + 1):  # (the first round warms the broker and the JIT: not counted)
            for client_name in ("pulsarfast", "java"):
                for mode in ("plain", "txn"):
                    topic = "bench-%s-%s-%s" % (client_name, mode, uuid.uuid4().hex[:8])
                    if client_name == "pulsarfast":
                        seconds = ours(broker.service_url, topic, args.count, args.size, mode, args.per_txn,
                                       args.window)
                    else:
                        seconds = java(classpath, broker.service_url, topic, args.count, args.size, mode,
                                       args.per_txn, args.window)
                    count = stored(broker, topic)
                    if count != args.count:
                        raise SystemExit("%s %s: the broker stored %d messages, not %d" % (client_name, mode, count,
                                                                                         args.count))
                    if round_index:
                        rows.setdefault("%s %s" % (client_name, mode), []).append(args.count / seconds)
    finally:
        broker.stop()
    result = {name: statistics.median(rates) for name, rates in rows.items()}
    ratios = {
        "pulsarfast txn / plain": result["pulsarfast txn"] / result["pulsarfast plain"],
        "java txn / plain": result["java txn"] / result["java plain"],
        "pulsarfast txn / java txn": result["pulsarfast txn"] / result["java txn"],
    }
    report = {"count": args.count, "size": args.size, "per_txn": args.per_txn, "window": args.window,
              "rounds": args.rounds,
              "msgs_per_s": result, "runs": rows, "ratios": ratios}
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as out:
        json.dump(report, out, indent=2)
    print("%-22s %12s" % ("", "msgs/s (median)"))
    for name, rate in result.items():
        print("%-22s %12.0f" % (name, rate))
    for name, ratio in ratios.items():
        print("%-28s %.2fx" % (name, ratio))


if __name__ == "__main__":
    main()
