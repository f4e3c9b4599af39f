#!/usr/bin/env python3
# Puts the latest benchmark tables (benchmarks/results/latest.md, spark.json, pulsar_spark.json, pulsar_quick.json,
# import_time.json) and chart into the documentation site's benchmarks page, docs/benchmarks.md, between
# the markers <!-- bench:start --> and <!-- bench:end -->; the chart is copied beside it (docs/images/),
# since the site serves only what is in docs/. On that page the tables' headings start at level 2
# and their links are the site's (relative to docs/). Run by `make bench` after benchmarks/run.py.
# Without the markers the section is appended at the end of the page; without the page nothing is
# written. The README's few headline figures are written by hand from these tables.
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
#: where the chart goes, relative to the page's folder (docs/)
CHART = "images/benchmark-chart.png"


def _thousands(value) -> str:
    return format(value, ",") if isinstance(value, int) else str(value)


def spark_section(results_dir: str) -> str | None:
    """The nsq.spark figures written by benchmarks/bench_spark.py, if any."""
    path = os.path.join(results_dir, "spark.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    sink, source = data["sink"], data["source"]
    reader, latency = data.get("reader") or {}, data.get("latency") or {}
    n = _thousands

    lines = [
        "#### Spark (nsq.spark, `%s`, PySpark %s, source options at their defaults)" % (data["master"], data["pyspark"]),
        "",
        "| what | measured |",
        "|---|---:|",
        "| sink: `df.write.format(\"nsq\")`, %s rows | %s rows/s |" % (n(sink.get("rows", 0)), n(sink.get("rows_per_s", 0))),
        "| source: `readStream.format(\"nsq\")`, availableNow into `noop`, %s messages | %s msgs/s |"
        % (n(source.get("messages", 0)), n(source.get("messages_per_s", 0))),
    ]
    cold = source.get("cold_query")
    if cold:
        lines.append("| the same, as the warm-up query (the JVM ran the sink before it; %s messages) | %s msgs/s |"
                     % (n(cold.get("messages", 0)), n(cold.get("messages_per_s", 0))))
    fresh = source.get("cold_start")
    if fresh:
        lines.append("| **the first query of a fresh JVM** (its own process and session, nothing run before it), "
                     "availableNow into `noop`, %s messages, `start()` to its end | **%s msgs/s** (%.2f of the "
                     "Reader; session start %.1f s and `load()` %.1f s before it, not counted) |"
                     % (n(fresh.get("messages", 0)), n(fresh.get("messages_per_s", 0)), fresh.get("ratio_to_reader", 0),
                        fresh.get("session_start_s", 0), fresh.get("load_s", 0)))
    if reader:
        lines += [
            "| nsq.Reader (threads, max_in_flight %s) over the same backlog%s | %s msgs/s |"
            % (n(reader.get("max_in_flight")),
               ", median of %d runs (%s)" % (len(reader["runs_messages_per_s"]),
                                           ", ".join(n(r) for r in reader["runs_messages_per_s"]))
               if reader.get("runs_messages_per_s") else "",
               n(reader.get("messages_per_s", 0))),
            "| source / Reader | %.2f |" % source.get("ratio_to_reader", 0),
        ]
    if latency:
        lines.append(
            "| latency, publish -> memory sink, processingTime 1 s at %s msgs/s: p50 / p99 | %.2f s / %.2f s |"
            % (n(latency.get("publish_rate_per_s")), latency.get("latency_p50_s", 0), latency.get("latency_p99_s", 0))
        )
    if "driver_rss_peak_mb" in source:
        lines.append(
            "| driver RSS (source's reader process), peak: backlog run / latency run | %s MB / %s MB |"
            % (source["driver_rss_peak_mb"], latency.get("driver_rss_peak_mb", "—"))
        )
    if "load_before" in data:
        lines += ["", "Load average before / after the run: %.2f / %.2f on %s CPUs. The source's rate runs from its "
                  "first micro-batch to the end of the batch holding the last message (%s msgs/s counting the "
                  "query's start-up too), in a JVM warmed by a first query of the same shape (the "
                  "warm-up row); the Reader's from its first message to its last. Details: "
                  "`benchmarks/results/spark.json`, [Spark](spark.md#performance)."
                  % (data["load_before"][0], data.get("load_after", [0])[0], data.get("cpus"),
                     n(source.get("messages_per_s_with_start_up", 0)))]
    return "\n".join(lines)


def pulsar_spark_section(results_dir: str) -> str | None:
    """The pulsarfast.spark figures written by benchmarks/bench_pulsar_spark.py, if any."""
    path = os.path.join(results_dir, "pulsar_spark.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    source, sink = data["source"], data["sink"]
    consume, produce = data["consume"], data["produce"]

    n = _thousands

    def runs(entry: dict) -> str:
        return ", ".join(n(r) for r in entry.get("runs", []))

    return "\n".join([
        "#### Spark (pulsarfast.spark, `%s`, PySpark %s, %d partitions, %d-byte messages, warm JVM)"
        % (data["master"], data["pyspark"], data["partitions"], data["body_bytes"]),
        "",
        "| what | measured | reference (pulsarfast, same broker) | ratio | target |",
        "|---|---:|---:|---:|---:|",
        "| source: `readStream.format(\"pulsar\")`, availableNow into `noop`, %s messages, first micro-batch "
        "to the last row (runs: %s) | %s msgs/s | consumer, receive + acknowledge: %s msgs/s (runs: %s) | %.2f | "
        "0.5 |"
        % (n(source["messages"]), runs(source), n(source["messages_per_s"]), n(consume["messages_per_s"]),
           runs(consume), source["ratio_to_consumer"]),
        "| the same from `start()` to the query's end, start-up included (runs: %s) | %s msgs/s | | %.2f | |"
        % (", ".join(n(r) for r in source.get("runs_with_start_up", [])), n(source["messages_per_s_with_start_up"]),
           source["ratio_with_start_up"]),
        "| sink: `df.write.format(\"pulsar\")`, %s rows (runs: %s) | %s rows/s | batched produce: %s msgs/s "
        "(runs: %s) | %.2f | 0.5 |"
        % (n(sink["messages"]), runs(sink), n(sink["rows_per_s"]), n(produce["messages_per_s"]), runs(produce),
           sink["ratio_to_producer"]),
        "",
        "Every figure is the median of its runs. Load average before / after the run: %.2f / %.2f on %s CPUs; the "
        "broker, Spark and the references share them. Details: `benchmarks/results/pulsar_spark.json`, [Spark](spark.md#pulsar-performance)."
        % (data["load_before"][0], data["load_after"][0], data["cpus"]),
    ])


def pulsar_section(results_dir: str) -> str | None:
    """pulsarfast beside the official client, written by benchmarks/pulsar_quick.py, if any."""
    path = os.path.join(results_dir, "pulsar_quick.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    table = data["markdown"]
    cut = table.find("\n\nProfile of ")
    if cut >= 0:  # (the profiles of missed targets stay in the JSON; the page discusses them below the tables)
        table = table[:cut] + ("\n\nA missed target's profile: `benchmarks/results/pulsar_quick.json` "
                               "(`markdown`), and where a batched consume's time goes: "
                               "`benchmarks/results/pulsar_dispatch.json` (`benchmarks/pulsar_dispatch.py`); "
                               "both discussed in [Pulsar: where the time goes](#pulsar-where-the-time-goes).")
    features = os.path.join(results_dir, "pulsar_features.json")
    if os.path.exists(features):
        with open(features) as f:
            table += ("\n\n##### A schema'd topic and chunked messages (`benchmarks/pulsar_features.py`)\n\n"
                      + json.load(f)["markdown"])
    on_loop = os.path.join(results_dir, "pulsar_asyncio.json")
    if os.path.exists(on_loop):
        with open(on_loop) as f:
            table += ("\n\n##### asyncio: `pulsarfast.asyncio` beside `pulsar.asyncio` (`benchmarks/pulsar_asyncio.py`)\n\n"
                      + json.load(f)["markdown"])
    clients = data.get("meta", {}).get("clients", [])
    java = " and the Java client" if any(name.startswith("java") for name in clients) else ""
    return "#### Pulsar (pulsarfast beside the official client%s, `make bench-pulsar`)\n\n" % java + table


def import_time_section(results_dir: str) -> str | None:
    """Start-up time (`import nsq`, `import pulsarfast`) beside pynsq and the official client, written by
    benchmarks/import_time.py, if any."""
    path = os.path.join(results_dir, "import_time.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    return ("#### Start-up time (`import`, milliseconds, lower is better: `benchmarks/import_time.py`)\n\n"
            "Each row is a fresh process timing one statement; nsq and pulsarfast load their machinery at "
            "the first use of a name (the second half: the classes a program starts with).\n\n"
            + data["markdown"])


def transactions_section(results_dir: str) -> str | None:
    """Transactional produce beside plain batched produce, ours and the Java client's, written by
    benchmarks/pulsar_transactions.py, if any."""
    path = os.path.join(results_dir, "pulsar_transactions.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    rates, ratios = data["msgs_per_s"], data["ratios"]
    rows = ["| client | plain batched | %d per transaction | transactional / plain |" % data["per_txn"],
            "|---|---:|---:|---:|"]
    for client in ("pulsarfast", "java"):
        rows.append("| %s | %s | %s | %.2fx |" % (client, _thousands(round(rates["%s plain" % client])),
                                                   _thousands(round(rates["%s txn" % client])),
                                                   rates["%s txn" % client] / rates["%s plain" % client]))
    return ("#### Pulsar transactions (messages/s, `benchmarks/pulsar_transactions.py`)\n\n"
            "%s messages of %d bytes per round, median of %d; transactions by %d workers at once, each with a "
            "producer of its own; pulsarfast's transactional produce is %.2fx the Java client's.\n\n"
            % (_thousands(data["count"]), data["size"], data["rounds"], data["window"], ratios["pulsarfast txn / java txn"])
            + "\n".join(rows))


def otel_section(results_dir: str) -> str | None:
    """The OpenTelemetry instrumentation off and on, written by benchmarks/otel_cost.py, if any."""
    path = os.path.join(results_dir, "otel_cost.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    rates = data["msgs_per_s"]
    rows = ["| workload | off | on | on / off | µs added per message |", "|---|---:|---:|---:|---:|"]
    for workload in ("pulsar produce", "pulsar receive+ack", "nsq pub"):
        off, on = rates["%s, otel off" % workload], rates["%s, otel on" % workload]
        rows.append("| %s | %s | %s | %.2fx | %.0f |" % (workload, _thousands(round(off)), _thousands(round(on)), on / off,
                                                        (1 / on - 1 / off) * 1e6))
    return ("#### OpenTelemetry instrumentation (messages/s, `benchmarks/otel_cost.py`)\n\n"
            "Off: never instrumented, or after `uninstrument()` (the original methods: the same code as "
            "without the module). On: the SDK with a batching span processor and a metric reader; one span "
            "and three metric records per message. %s messages, median of %d.\n\n" % (_thousands(data["count"]), data["rounds"])
            + "\n".join(rows))


def demote(text: str) -> str:
    """The tables' headings two levels up (#### -> ##): on the page they sit right under its title."""
    return re.sub(r"^##(##+) ", r"\1 ", text, flags=re.M)


def section(results_dir: str, page_dir: str) -> str:
    with open(os.path.join(results_dir, "latest.md")) as f:
        body = f.read().strip()
    parts = [START, body]
    spark = spark_section(results_dir)
    if spark:
        parts.append(spark)
    pulsar_spark = pulsar_spark_section(results_dir)
    if pulsar_spark:
        parts.append(pulsar_spark)
    pulsar = pulsar_section(results_dir)
    if pulsar:
        parts.append(pulsar)
    import_time = import_time_section(results_dir)
    if import_time:
        parts.append(import_time)
    for extra in (transactions_section(results_dir), otel_section(results_dir)):
        if extra:
            parts.append(extra)
    png = os.path.join(results_dir, "latest.png")
    if os.path.exists(png):
        target = os.path.join(page_dir, CHART)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(png, target)
        parts.append("![benchmark chart](%s)" % CHART)
    parts.append(END)
    return demote("\n\n".join(parts))


def replace(text: str, new: str) -> str:
    start = text.find(START)
    end = text.find(END, start + len(START)) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return text[:start] + new + text[end + len(END):]
    if start >= 0 or text.find(END) >= 0:
        raise SystemExit("the page has only one of %s / %s: fix it by hand" % (START, END))
    return text.rstrip("\n") + "\n\n## Benchmarks\n\n" + new + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--page", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    if not os.path.exists(os.path.join(args.results, "latest.md")):
        print("update_docs: no %s/latest.md: run benchmarks/run.py first" % args.results, file=sys.stderr)
        return 1
    if not os.path.exists(args.page):
        print("update_docs: %s does not exist; nothing written" % args.page, file=sys.stderr)
        return 0
    with open(args.page) as f:
        text = f.read()
    new_text = replace(text, section(args.results, os.path.dirname(os.path.abspath(args.page))))
    if new_text != text:
        with open(args.page, "w") as f:
            f.write(new_text)
        print("update_docs: benchmark section of %s updated" % os.path.relpath(args.page))
    else:
        print("update_docs: %s already up to date" % os.path.relpath(args.page))
    return 0


if __name__ == "__main__":
    sys.exit(main())
