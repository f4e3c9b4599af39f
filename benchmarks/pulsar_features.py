"""Pulsar feature benchmark: a schema'd topic and chunked messages, pulsarfast beside the official client.

One real Pulsar standalone broker (tests/support/pulsar_broker.py, the JVM settings of
benchmarks/pulsar_quick.py) whose maxMessageSize is 256 KiB, then for each client, in its own
subprocess, on fresh topics:

  json      N small ``Record``s (a str, a float and an int field) through ``JsonSchema``:
            produce with send_async() + flush() (batching on, both clients' batching defaults), then
            consume them from the subscription made (and closed) before the produce, receive() +
            value() + acknowledge() (timed separately: first send .. flush returns; first receive ..
            last ack; the consumer subscribes after the produce, so it reads a backlog)
  chunked   M messages of 1 MiB with chunking_enabled=True (batching off): each is cut into 5 chunks
            for the broker's 256 KiB limit; produce with send_async() + flush(), consume with receive()
            + acknowledge() (the consumer puts each message back together)

Checks (a row prints FAIL when one does not hold): the broker's msgInCounter of the topic (N
messages; M x 5 chunks); every send callback reported Ok; the consumer got every message whole
and distinct (the records' sequence numbers, the payloads' heads); the subscription's backlog is 0
after the consumer closed.

CPU: the client process's own utime+stime across the timed part, per message.
A warm-up pass (pulsarfast and the official client, not recorded) lets the broker's JIT compile its
paths first; each figure is then the median of --runs runs (interleaved across clients).

Usage:
    .venv/bin/python benchmarks/pulsar_features.py --quick      # 5,000 records, 10 chunked, 1 run
    .venv/bin/python benchmarks/pulsar_features.py              # 50,000 records, 50 chunked, 3 runs
Writes benchmarks/results/pulsar_features.json and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from pulsar_quick import BROKER_JVM_ARGS, loadavg, run_child, self_cpu_seconds, tests_on_path  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "pulsar_features.json")
CLIENTS = {
    "pulsarfast-gevent": {"lib": "pulsarfast", "backend": "gevent", "label": "pulsarfast gevent"},
    "pulsarfast-threads": {"lib": "pulsarfast", "backend": "threads", "label": "pulsarfast threads"},
    "official": {"lib": "official", "backend": None, "label": "official 3.13"},
}
MAX_MESSAGE_SIZE = 256 * 1024
CHUNKED_SIZE = 1024 * 1024
CHUNKS_PER_MESSAGE = 5  # (1 MiB in chunks of a little under 256 KiB)
SUBSCRIPTION = "bench"
RECEIVE_MS = 30_000


# --------------------------------------------------------------------------- child: one client

def _client(cfg: dict):
    if cfg["lib"] == "pulsarfast":
        sys.path.insert(0, REPO)
        import pulsarfast as pulsar
        from pulsarfast import schema
        return pulsar, schema, pulsar.Client(cfg["service_url"], backend=cfg["backend"])
    import pulsar
    from pulsar import schema
    return pulsar, schema, pulsar.Client(cfg["service_url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))


def _produce(pulsar, producer, items) -> dict:
    done = {"ok": 0, "err": 0}

    def callback(res, _msg_id):
        done["ok" if res == pulsar.Result.Ok else "err"] += 1

    cpu, began = self_cpu_seconds(), time.perf_counter()
    for item in items:
        producer.send_async(item, callback)
    producer.flush()
    seconds, cpu = time.perf_counter() - began, self_cpu_seconds() - cpu
    deadline = time.monotonic() + 10
    while done["ok"] + done["err"] < len(items) and time.monotonic() < deadline:
        time.sleep(0.01)  # (the last callbacks may still be on their way: not timed)
    return {"seconds": seconds, "cpu_seconds": cpu, "callbacks_ok": done["ok"], "callbacks_err": done["err"]}


def _consume(consumer, count: int, identify) -> dict:
    seen = set()
    error = None
    cpu, began = self_cpu_seconds(), time.perf_counter()
    try:
        for _ in range(count):
            msg = consumer.receive(RECEIVE_MS)
            seen.add(identify(msg))
            consumer.acknowledge(msg)
    except Exception as exc:  # (a Timeout: fewer messages than produced)
        error = "%s: %s" % (type(exc).__name__, exc)
    seconds, cpu = time.perf_counter() - began, self_cpu_seconds() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, "distinct": len(seen), "error": error}


def child_main(cfg: dict) -> dict:
    pulsar, schema, client = _client(cfg)

    class Reading(schema.Record):
        sensor = schema.String()
        value = schema.Double()
        seq = schema.Long()

    out: dict = {}
    try:
        if "json" in cfg["workloads"]:
            topic, n = cfg["topic_json"], cfg["records"]
            json_schema = schema.JsonSchema(Reading)
            client.subscribe(topic, SUBSCRIPTION, schema=json_schema).close()  # (it holds what follows)
            producer = client.create_producer(topic, schema=json_schema, batching_enabled=True,
                                              block_if_queue_full=True)
            records = [Reading(sensor="sensor-%d" % (i % 64), value=i * 0.5, seq=i) for i in range(n)]
            out["json_produce"] = _produce(pulsar, producer, records)
            producer.close()
            consumer = client.subscribe(topic, SUBSCRIPTION, schema=json_schema)
            out["json_consume"] = _consume(consumer, n, lambda msg: msg.value().seq)
            consumer.close()
        if "chunked" in cfg["workloads"]:
            topic, m = cfg["topic_chunked"], cfg["chunked"]
            client.subscribe(topic, SUBSCRIPTION).close()
            producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                                              block_if_queue_full=True)
            filler = os.urandom(CHUNKED_SIZE)
            bodies = [b"%08d" % i + filler[8:] for i in range(m)]
            out["chunked_produce"] = _produce(pulsar, producer, bodies)
            producer.close()
            consumer = client.subscribe(topic, SUBSCRIPTION)
            out["chunked_consume"] = _consume(
                consumer, m, lambda msg: msg.data()[:8] if len(msg.data()) == CHUNKED_SIZE else b"short")
            consumer.close()
    finally:
        client.close()
    return out


# --------------------------------------------------------------------------- parent

def check(broker, cfg: dict, result: dict) -> dict:
    """Rates and the checks' failures, per workload of one run."""
    rows = {}
    for what, count, expected_in in (("json", cfg["records"], cfg["records"]),
                                     ("chunked", cfg["chunked"], cfg["chunked"] * CHUNKS_PER_MESSAGE)):
        if what not in cfg["workloads"]:
            continue
        topic = cfg["topic_" + what]
        stats = broker.topic_stats(topic)
        produce, consume = result.get(what + "_produce"), result.get(what + "_consume")
        fails = []
        if result.get("error"):
            fails.append(result["error"])
        if produce is None or consume is None:
            rows[what] = {"failures": fails or ["no result"]}
            continue
        if stats["msgInCounter"] != expected_in:
            fails.append("broker msgInCounter %d != %d" % (stats["msgInCounter"], expected_in))
        if produce["callbacks_ok"] != count:
            fails.append("%d Ok callbacks of %d" % (produce["callbacks_ok"], count))
        if consume["error"] or consume["distinct"] != count:
            fails.append("received %d distinct whole messages of %d (%s)" % (consume["distinct"], count,
                                                                             consume["error"]))
        backlog = stats["subscriptions"][SUBSCRIPTION]["msgBacklog"]
        if backlog:
            fails.append("backlog %d after the consumer closed" % backlog)
        rows[what] = {
            "produce_rate": count / produce["seconds"], "consume_rate": count / consume["seconds"],
            "produce_cpu_us": produce["cpu_seconds"] / count * 1e6,
            "consume_cpu_us": consume["cpu_seconds"] / count * 1e6, "failures": fails,
        }
    return rows


def summarize(runs: list, clients: list) -> list:
    rows = []
    for name in clients:
        for what in ("json", "chunked"):
            got = [run["rows"][what] for run in runs if run["client"] == name and what in run["rows"]]
            ok = [row for row in got if not row["failures"]]
            row = {"client": name, "workload": what, "runs": len(got),
                   "failures": [f for row in got for f in row["failures"]]}
            for key in ("produce_rate", "consume_rate", "produce_cpu_us", "consume_cpu_us"):
                row[key] = statistics.median(r[key] for r in ok) if ok else None
            rows.append(row)
    return rows


def markdown(rows: list, meta: dict) -> str:
    def cell(row, key, unit):
        value = row[key]
        return "FAIL" if value is None else ("%s %s" % (format(round(value), ","), unit) if unit
                                              else "%.0f" % value)

    official = {row["workload"]: row for row in rows if row["client"] == "official"}
    lines = [
        "Median of %d runs; JSON: %s records, batching on; chunked: %d messages of 1 MiB, broker limit 256 KiB "
        "(5 chunks each). `benchmarks/pulsar_features.py`." % (meta["runs"], format(meta["records"], ","),
                                                              meta["chunked"]),
        "",
        "| client | workload | produce | consume | vs official (produce / consume) | CPU µs/msg (produce / consume) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ref = official.get(row["workload"])
        ratio = "-"
        if row["client"] != "official" and ref and None not in (row["produce_rate"], row["consume_rate"],
                                                                  ref["produce_rate"], ref["consume_rate"]):
            ratio = "%.2fx / %.2fx" % (row["produce_rate"] / ref["produce_rate"],
                                       row["consume_rate"] / ref["consume_rate"])
        cpu = ("-" if row["produce_cpu_us"] is None else
               "%.0f / %.0f" % (row["produce_cpu_us"], row["consume_cpu_us"]))
        label = {"json": "JsonSchema Record", "chunked": "1 MiB chunked"}[row["workload"]]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            CLIENTS[row["client"]]["label"], label, cell(row, "produce_rate", "msgs/s"),
            cell(row, "consume_rate", "msgs/s"), ratio, cpu))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000, help="JSON-schema records produced and consumed")
    parser.add_argument("--chunked", type=int, default=50, help="1 MiB chunked messages produced and consumed")
    parser.add_argument("--runs", type=int, default=3, help="runs per client (the figures are medians)")
    parser.add_argument("--quick", action="store_true", help="5,000 records, 10 chunked messages, 1 run")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated: " + ", ".join(CLIENTS))
    parser.add_argument("--json", default=DEFAULT_JSON, help="where to write the results")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.stdout.write("RESULT " + json.dumps(child_main(json.loads(args.child))) + "\n")
        return 0
    if args.quick:
        args.records, args.chunked, args.runs = 5_000, 10, 1
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for c in clients:
        if c not in CLIENTS:
            parser.error("unknown client %r" % c)

    sys.dont_write_bytecode = True
    tests_on_path()
    from tests.support.pulsar_broker import PULSAR_VERSION, PulsarBroker

    meta = {"pulsar_version": PULSAR_VERSION, "records": args.records, "chunked": args.chunked, "runs": args.runs,
            "clients": clients, "max_message_size": MAX_MESSAGE_SIZE, "loadavg_before": loadavg(),
            "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    broker = PulsarBroker(config={"maxMessageSize": MAX_MESSAGE_SIZE}, jvm_args=BROKER_JVM_ARGS)
    print("starting Pulsar %s standalone ..." % PULSAR_VERSION, flush=True)
    broker.start()
    runs = []
    try:
        # a warm-up pass per library (not recorded): the broker's JIT compiles its paths for both
        for name in ("pulsarfast-threads", "official"):
            cfg = dict(CLIENTS[name], service_url=broker.service_url, records=args.records, chunked=args.chunked,
                       workloads=["json", "chunked"], topic_json="warm-json-" + name,
                       topic_chunked="warm-chunked-" + name)
            run_child(cfg, script=__file__, timeout=300 + args.records * 0.005 + args.chunked * 1.0)
        for run in range(args.runs):
            for name in clients:
                tag = "%s-r%d-%s" % (name, run, uuid.uuid4().hex[:6])
                cfg = dict(CLIENTS[name], service_url=broker.service_url, records=args.records,
                           chunked=args.chunked, workloads=["json", "chunked"],
                           topic_json="bench-json-" + tag, topic_chunked="bench-chunked-" + tag)
                result = run_child(cfg, script=__file__, timeout=300 + args.records * 0.005 + args.chunked * 1.0)
                rows = check(broker, cfg, result)
                runs.append({"client": name, "run": run, "rows": rows, "result": result})
                for what, row in rows.items():
                    if row["failures"]:
                        print("  %s %s: FAIL %s" % (name, what, "; ".join(row["failures"])), flush=True)
                    else:
                        print("  %s %s: produce %.0f/s, consume %.0f/s" % (
                            name, what, row["produce_rate"], row["consume_rate"]), flush=True)
    finally:
        broker.kill()
    rows = summarize(runs, clients)
    table = markdown(rows, meta)
    print("\n" + table)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "summary": rows, "markdown": table, "runs": runs}, f, indent=1)
    print("\nwrote %s" % args.json)
    return 0 if not any(row["failures"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
