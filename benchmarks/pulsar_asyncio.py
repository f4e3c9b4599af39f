"""asyncio benchmark: ``pulsarfast.asyncio`` (the engine on the running loop, msgengine.aio) beside
the official ``pulsar.asyncio`` (C++ callbacks handed to the loop with call_soon_threadsafe).

One real Pulsar standalone broker (tests/support/pulsar_broker.py, the JVM settings of
benchmarks/pulsar_quick.py), then for each client, in its own subprocess, on fresh topics:

  produce   N 100-byte messages, ``await producer.send(body)`` from 100 concurrent tasks (batching
            on: both asyncio APIs' default, 10 ms delay), timed from the first send to the last receipt
  one by one  SEQUENTIAL more, ``await producer.send(body)`` from one coroutine, each after the last
            receipt (the common shape of an asyncio producer)
  consume   the N + SEQUENTIAL messages, ``msg = await consumer.receive()`` + ``await
            consumer.acknowledge(msg)`` one after the other, from a subscription made (and closed)
            before the produce, with a 10 ms ``asyncio.sleep`` ticker beside it: its lag (p50/p99)
            is how responsive the loop stays while the client consumes at full speed

The clients: the official module and pulsarfast.asyncio with the producer's defaults (a batch goes
when full, after its 10 ms delay or at flush(), as the official one's), and pulsarfast.asyncio with
``create_producer(topic, batching_eager=True)``, its own keyword: a batch also goes at the end of the
loop's turn when none of the producer's batches waits for its receipt. (Until issue 46 that early send
was pulsarfast's default, and the single pulsarfast row measured it: the "one by one" sends then waited
a round trip instead of the 10 ms delay.)

Checks (a row prints FAIL when one does not hold): the broker's msgInCounter equals N + SEQUENTIAL;
every send returned an id; the consumer got every payload, distinct; the subscription's backlog is 0
after close.
CPU: the client process's utime+stime over the timed part, per message. A warm-up pass (both
clients, not recorded), then the median of --runs runs, interleaved.

Usage:
    .venv/bin/python benchmarks/pulsar_asyncio.py --quick     # 5,000 messages, 1 run
    .venv/bin/python benchmarks/pulsar_asyncio.py             # 50,000 messages, 3 runs
Writes benchmarks/results/pulsar_asyncio.json and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from pulsar_quick import BROKER_JVM_ARGS, loadavg, payloads, run_child, self_cpu_seconds, tests_on_path  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "clients"))
from _common import Ticker  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "pulsar_asyncio.json")
CLIENTS = {
    "pulsarfast": {"module": "pulsarfast.asyncio", "label": "pulsarfast.asyncio (on the loop)"},
    "pulsarfast-eager": {"module": "pulsarfast.asyncio", "label": "pulsarfast.asyncio, batching_eager=True",
                         "producer_args": {"batching_eager": True}},
    "official": {"module": "pulsar.asyncio", "label": "official pulsar.asyncio 3.13"},
}
SENDERS = 100
SEQUENTIAL = 1_000  # sends awaited one by one (the "one by one" column)
SUBSCRIPTION = "bench"


# --------------------------------------------------------------------------- child: one client

async def child(cfg: dict) -> dict:
    if cfg["module"].startswith("pulsarfast"):
        sys.path.insert(0, REPO)
    aio = importlib.import_module(cfg["module"])
    client = aio.Client(cfg["service_url"])
    out: dict = {}
    try:
        topic, n = cfg["topic"], cfg["messages"]
        await (await client.subscribe(topic, SUBSCRIPTION)).close()  # (the subscription holds what follows)
        producer = await client.create_producer(topic, **cfg.get("producer_args", {}))
        bodies = payloads(n, b"a")
        ids: list = []

        async def sender(start: int) -> None:
            for index in range(start, n, SENDERS):
                ids.append(await producer.send(bodies[index]))

        cpu, began = self_cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(sender(i) for i in range(SENDERS)))
        out["produce"] = {"seconds": time.perf_counter() - began, "cpu_seconds": self_cpu_seconds() - cpu,
                          "ids": len(ids)}
        one_by_one = payloads(SEQUENTIAL, b"s")
        began = time.perf_counter()
        for body in one_by_one:
            ids.append(await producer.send(body))
        out["one_by_one"] = {"seconds": time.perf_counter() - began}
        out["produce"]["ids"] = len(ids)  # (every send's, both phases')
        await producer.close()
        consumer = await client.subscribe(topic, SUBSCRIPTION)
        seen = set()
        error = None
        ticker = Ticker()
        ticker.counting = True
        ticking = asyncio.ensure_future(ticker.run())
        async def consume_all() -> None:
            for _ in range(n + SEQUENTIAL):
                message = await consumer.receive()
                seen.add(message.data())
                await consumer.acknowledge(message)

        cpu, began = self_cpu_seconds(), time.perf_counter()
        try:  # (one bound for the whole loop, as a program has: a wait_for per receive is a Task per message)
            await asyncio.wait_for(consume_all(), 60 + n / 1000)
        except Exception as exc:  # (a timeout: fewer messages than produced)
            error = "%s: %s" % (type(exc).__name__, exc)
        seconds = time.perf_counter() - began
        ticker.running = False
        await ticking
        out["consume"] = dict(ticker.summary(), seconds=seconds, cpu_seconds=self_cpu_seconds() - cpu,
                              distinct=len(seen), error=error)
        await consumer.close()
    finally:
        await client.close()
    return out


# --------------------------------------------------------------------------- parent

def check(broker, cfg: dict, result: dict) -> dict:
    n = cfg["messages"]
    produce, consume = result.get("produce"), result.get("consume")
    if produce is None or consume is None:
        return {"failures": [result.get("error", "no result"), result.get("stderr_tail", "")[-500:]]}
    stats = broker.topic_stats(cfg["topic"])
    fails = []
    total = n + SEQUENTIAL
    if stats["msgInCounter"] != total:
        fails.append("broker msgInCounter %d != %d" % (stats["msgInCounter"], total))
    if produce["ids"] != total:
        fails.append("%d ids of %d sends" % (produce["ids"], total))
    if consume["error"] or consume["distinct"] != total:
        fails.append("received %d distinct of %d (%s)" % (consume["distinct"], total, consume["error"]))
    backlog = stats["subscriptions"][SUBSCRIPTION]["msgBacklog"]
    if backlog:
        fails.append("backlog %d after the consumer closed" % backlog)
    return {"produce_rate": n / produce["seconds"], "consume_rate": total / consume["seconds"],
            "one_by_one_rate": SEQUENTIAL / result["one_by_one"]["seconds"],
            "ticker_p50_ms": consume.get("ticker_p50_ms"), "ticker_p99_ms": consume.get("ticker_p99_ms"),
            "produce_cpu_us": produce["cpu_seconds"] / n * 1e6, "consume_cpu_us": consume["cpu_seconds"] / n * 1e6,
            "failures": fails}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5,000 messages, 1 run")
    parser.add_argument("--json", default=DEFAULT_JSON)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.stdout.write("RESULT " + json.dumps(asyncio.run(child(json.loads(args.child)))) + "\n")
        return 0
    if args.quick:
        args.messages, args.runs = 5_000, 1

    sys.dont_write_bytecode = True
    tests_on_path()
    from tests.support.pulsar_broker import PULSAR_VERSION, PulsarBroker

    meta = {"pulsar_version": PULSAR_VERSION, "messages": args.messages, "runs": args.runs, "senders": SENDERS,
            "loadavg_before": loadavg(), "python": sys.version.split()[0],
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    broker = PulsarBroker(jvm_args=BROKER_JVM_ARGS)
    print("starting Pulsar %s standalone ..." % PULSAR_VERSION, flush=True)
    broker.start()
    timeout = 300 + args.messages * 0.01
    runs = []
    try:
        for name in CLIENTS:  # (warm-up, not recorded)
            run_child(dict(CLIENTS[name], service_url=broker.service_url, messages=args.messages,
                           topic="warm-aio-" + name), timeout, __file__)
        for run in range(args.runs):
            for name in CLIENTS:
                cfg = dict(CLIENTS[name], service_url=broker.service_url, messages=args.messages,
                           topic="bench-aio-%s-r%d-%s" % (name, run, uuid.uuid4().hex[:6]))
                row = check(broker, cfg, run_child(cfg, timeout, __file__))
                runs.append({"client": name, "run": run, "row": row})
                print("  %s: %s" % (name, "FAIL " + "; ".join(row["failures"]) if row["failures"] else
                                    "produce %.0f/s, consume %.0f/s" % (row["produce_rate"], row["consume_rate"])),
                      flush=True)
    finally:
        broker.kill()
    summary = {}
    for name in CLIENTS:
        ok = [r["row"] for r in runs if r["client"] == name and not r["row"]["failures"]]
        summary[name] = {key: (statistics.median(r[key] for r in ok if r[key] is not None) if ok else None)
                         for key in ("produce_rate", "one_by_one_rate", "consume_rate", "produce_cpu_us",
                                     "consume_cpu_us", "ticker_p50_ms", "ticker_p99_ms")}
    ours, theirs = summary["pulsarfast"], summary["official"]
    lines = ["Median of %d runs, %s messages of 100 bytes; produce: `await send` from %d tasks; one by one: "
             "%s sends awaited in turn by one coroutine; consume: `await receive` + `await acknowledge`, with "
             "the lag of a 10 ms `asyncio.sleep` ticker meanwhile. Batching on (10 ms), both APIs' default; "
             "`batching_eager=True` also sends a batch at the end of the loop's turn when none is on its way. "
             "`benchmarks/pulsar_asyncio.py`."
             % (args.runs, format(args.messages, ","), SENDERS, format(SEQUENTIAL, ",")), "",
             "| client | produce | one by one | consume | ticker lag p50 / p99 | CPU µs/msg (produce / consume) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, row in summary.items():
        if row["produce_rate"] is None:
            lines.append("| %s | FAIL | FAIL | FAIL | - | - |" % CLIENTS[name]["label"])
            continue
        lines.append("| %s | %s msgs/s | %s msgs/s | %s msgs/s | %.2f / %.2f ms | %.0f / %.0f |" % (
            CLIENTS[name]["label"], format(round(row["produce_rate"]), ","), format(round(row["one_by_one_rate"]), ","),
            format(round(row["consume_rate"]), ","), row["ticker_p50_ms"] or 0, row["ticker_p99_ms"] or 0,
            row["produce_cpu_us"], row["consume_cpu_us"]))
    eager = summary["pulsarfast-eager"]
    if ours["produce_rate"] and theirs["produce_rate"]:
        lines += ["", "pulsarfast.asyncio / official: produce %.2fx, one by one %.2fx, consume %.2fx "
                  "(targets: 2x produce and consume)" % (
                      ours["produce_rate"] / theirs["produce_rate"],
                      ours["one_by_one_rate"] / theirs["one_by_one_rate"],
                      ours["consume_rate"] / theirs["consume_rate"])]
    if eager["produce_rate"] and theirs["produce_rate"]:
        lines += ["", "with batching_eager=True / official: produce %.2fx, one by one %.2fx" % (
            eager["produce_rate"] / theirs["produce_rate"], eager["one_by_one_rate"] / theirs["one_by_one_rate"])]
    table = "\n".join(lines)
    print("\n" + table)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "summary": summary, "markdown": table, "runs": runs}, f, indent=1)
    print("\nwrote %s" % args.json)
    return 0 if all(not r["row"]["failures"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
