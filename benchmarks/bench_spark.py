# nsq.spark on a local Spark (local[2] by default) and a real nsqd (from
# .nsq-bin, started through tests/support/servers.py), with the source's options at
# their defaults. Prints one JSON object with:
#
#   sink     batch df.write.format("nsq"), rows/s
#   reader   this package's nsq.Reader (threads backend, max_in_flight 2500, as
#            in make bench's consume row) draining the same backlog as the
#            source, in a process of its own: the reference rate, the median
#            of --reader-runs runs (each on a channel of its own; one run
#            moves by a third from run to run on a busy 2-core VM)
#   source   readStream.format("nsq") with Trigger.AvailableNow into the noop
#            sink over that backlog (every message a copy of the Reader's, on a
#            channel of its own), msgs/s, its ratio to the Reader's rate, and
#            the driver-side reader process's resident memory. A warm-up query
#            of the same shape (--warmup-messages on a topic of its own) runs
#            first, as the Pulsar bench warms its broker: a fresh JVM spends
#            the first seconds of its first query compiling the plan's hot
#            paths on the same two cores, which a long-running query pays
#            once; its rate is reported too ("cold_query")
#   cold_start  issue 35's headline: the source as the first query of a fresh
#            JVM (a SparkSession of its own, in a process of its own: no sink
#            run, no warm-up, no Python worker started before it), draining
#            --cold-messages with Trigger.AvailableNow into noop, timed from
#            start() to the query's termination (the end-of-run idle wait
#            included), beside the session's start-up and load(), which it
#            excludes; its ratio to the Reader's rate
#   latency  a processingTime("1 second") query into the memory sink while a
#            publisher sends a steady 10,000 msgs/s: publish -> row in the sink
#            (p50/p99), and the driver's resident memory at that rate
#
#   python benchmarks/bench_spark.py [--sink-rows 1000000] [--source-messages 1000000]
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.support.spark_processes import jvm_pid, source_runner_pids  # noqa: E402

READER_MAX_IN_FLIGHT = 2500


def make_spark(master: str):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "10000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import nsq.spark

    nsq.spark.register(spark)
    return spark


def bodies_df(spark, rows: int, body_size: int):
    pad = "x" * max(0, body_size - 12)
    return spark.range(rows).selectExpr("concat(lpad(cast(id as string), 12, '0'), '%s') as body" % pad)


# ----------------------------------------------------------------------------- driver memory


class DriverMemory:
    """Samples the resident memory of the Python processes of this JVM that
    run a streaming source's driver-side reader (python_streaming_source_runner)."""

    def __init__(self, spark, interval: float = 0.1) -> None:
        self.jvm_pid = jvm_pid(spark)
        self.interval = interval
        self.peak_rss_kb = 0
        self.samples_kb: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for pid in source_runner_pids(self.jvm_pid):
                try:
                    with open("/proc/%s/status" % pid) as f:
                        fields = dict(line.split(":", 1) for line in f if ":" in line)
                except OSError:
                    continue
                rss = int(fields.get("VmRSS", "0 kB").split()[0])
                hwm = int(fields.get("VmHWM", "0 kB").split()[0])
                self.samples_kb.append(rss)
                self.peak_rss_kb = max(self.peak_rss_kb, rss, hwm)

    def __enter__(self) -> "DriverMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def report(self) -> dict:
        samples = sorted(self.samples_kb)
        return {
            "driver_rss_peak_mb": round(self.peak_rss_kb / 1024, 1),
            "driver_rss_median_mb": round(samples[len(samples) // 2] / 1024, 1) if samples else None,
        }


# ----------------------------------------------------------------------------- sink


def bench_sink(spark, nsqd, rows: int, body_size: int, repeats: int) -> dict:
    df = bodies_df(spark, rows, body_size)
    df.write.format("noop").mode("overwrite").save()  # warm up the JVM side of the plan
    runs = []
    for i in range(repeats + 1):  # the first run also starts the Python workers: reported apart
        topic = "sink_%d" % i
        started = time.perf_counter()
        df.write.format("nsq").mode("append").option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address).save()
        elapsed = time.perf_counter() - started
        assert nsqd.message_count(topic) == rows, (topic, nsqd.message_count(topic))
        runs.append(elapsed)
        nsqd.delete_topic(topic)
    warm = runs[1:] or runs
    best = min(warm)
    return {
        "rows": rows,
        "body_bytes": body_size,
        "first_run_s": round(runs[0], 3),
        "best_s": round(best, 3),
        "rows_per_s": round(rows / best),
        "first_run_rows_per_s": round(rows / runs[0]),
    }


# ----------------------------------------------------------------------------- nsq.Reader


def reader_rate(address: str, topic: str, channel: str, messages: int, timeout: float) -> dict:
    """Drain `messages` with nsq.Reader (run in a process of its own by main)."""
    import nsq

    state = {"count": 0, "first": None, "last": None}
    done = threading.Event()

    def handler(message) -> bool:
        now = time.perf_counter()
        if state["first"] is None:
            state["first"] = now
        state["count"] += 1
        if state["count"] >= messages:
            state["last"] = now
            done.set()
        return True

    reader = nsq.Reader(topic, channel, handler, nsqd_tcp_addresses=[address],
                        max_in_flight=READER_MAX_IN_FLIGHT, backend="threads")
    reader.start()
    try:
        finished = done.wait(timeout)
    finally:
        reader.close()
    if not finished:
        raise SystemExit("nsq.Reader read %d of %d messages in %ss" % (state["count"], messages, timeout))
    elapsed = state["last"] - state["first"]
    return {
        "messages": state["count"],
        "max_in_flight": READER_MAX_IN_FLIGHT,
        "backend": "threads",
        "elapsed_s": round(elapsed, 3),
        "messages_per_s": round(state["count"] / elapsed),
    }


def bench_reader(nsqd, topic: str, channel: str, messages: int) -> dict:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--reader-only", nsqd.tcp_address, topic, channel, str(messages)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    return json.loads(out.stdout)


# ----------------------------------------------------------------------------- source


def progress_time(progress: dict) -> float:
    """Epoch seconds of a progress event's trigger start."""
    stamp = datetime.datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def batch_end(progress: dict) -> float:
    """Epoch seconds when a micro-batch ended (its rows in the sink, its commit log written)."""
    return progress_time(progress) + progress["durationMs"].get("triggerExecution", 0) / 1000.0


def bench_source(spark, nsqd, topic: str, channel: str, messages: int, body_size: int, options: dict) -> dict:
    checkpoint = tempfile.mkdtemp(prefix="nsq-spark-bench-")
    reader = (
        spark.readStream.format("nsq").option("topic", topic).option("channel", channel)
        .option("nsqd_tcp_addresses", nsqd.tcp_address)
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    with DriverMemory(spark) as memory:
        started_wall = time.time()
        started = time.perf_counter()
        query = reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint) \
            .trigger(availableNow=True).start()
        query.awaitTermination()
        elapsed = time.perf_counter() - started
    progress = query.recentProgress
    total = sum(p["numInputRows"] for p in progress)
    data_batches = [p for p in progress if p["numInputRows"]]
    # From the first batch's trigger to the end of the batch holding the last
    # message, as the Reader's rate runs from its first message to its last;
    # with the query's start-up (start() -> first trigger) too, reported apart.
    # The run then waits available_now_idle_ms to see that nothing more comes.
    last_row = max(batch_end(p) for p in data_batches)
    first_trigger = min(progress_time(p) for p in progress)
    to_last_row = last_row - first_trigger
    busy_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in data_batches)
    stats = nsqd.channel_stats(topic, channel)
    phases: dict = {}
    for p in data_batches:
        for phase, ms in p["durationMs"].items():
            phases[phase] = phases.get(phase, 0) + ms
    return {
        "messages": messages,
        "read": total,
        "body_bytes": body_size,
        "options": options or "defaults",
        "first_trigger_to_last_row_s": round(to_last_row, 3),
        "messages_per_s": round(total / to_last_row),
        "start_to_last_row_s": round(last_row - started_wall, 3),
        "messages_per_s_with_start_up": round(total / (last_row - started_wall)),
        "elapsed_with_end_of_run_s": round(elapsed, 3),
        "batches": len(progress),
        "data_batches": len(data_batches),
        "mean_batch_rows": round(total / len(data_batches)) if data_batches else 0,
        "messages_per_s_in_batches": round(total / (busy_ms / 1000.0)) if busy_ms else None,
        "mean_batch_ms_by_phase": {k: round(v / len(data_batches)) for k, v in sorted(phases.items())} if data_batches else {},
        "left_in_nsqd": stats["depth"] + stats["in_flight_count"],
        **memory.report(),
    }


def cold_start(address: str, topic: str, channel: str, messages: int, options: dict) -> dict:
    """Run by main in a process of its own (--cold-only): a fresh SparkSession
    whose first query drains the backlog with availableNow into noop."""
    started = time.perf_counter()
    spark = make_spark("local[2]")
    session_s = time.perf_counter() - started
    try:
        checkpoint = tempfile.mkdtemp(prefix="nsq-spark-cold-")
        reader = (spark.readStream.format("nsq").option("topic", topic).option("channel", channel)
                  .option("nsqd_tcp_addresses", address))
        for key, value in options.items():
            reader = reader.option(key, str(value))
        loading = time.perf_counter()
        frame = reader.load()
        starting = time.perf_counter()
        query = frame.writeStream.format("noop").option("checkpointLocation", checkpoint) \
            .trigger(availableNow=True).start()
        query.awaitTermination()
        ended = time.perf_counter()
        progress = query.recentProgress
        total = sum(p["numInputRows"] for p in progress)
        data_batches = [p for p in progress if p["numInputRows"]]
        first_trigger = min(progress_time(p) for p in progress)
        last_row = max(batch_end(p) for p in data_batches)
        end_wall = time.time()
        start_wall = end_wall - (ended - starting)
        return {
            "messages": messages,
            "read": total,
            "options": options or "defaults",
            "session_start_s": round(session_s, 3),
            "load_s": round(starting - loading, 3),
            "start_to_end_s": round(ended - starting, 3),
            "messages_per_s": round(total / (ended - starting)),
            "start_to_first_trigger_s": round(first_trigger - start_wall, 3),
            "first_trigger_to_last_row_s": round(last_row - first_trigger, 3),
            "last_row_to_end_s": round(end_wall - last_row, 3),
            "data_batches": len(data_batches),
            "first_batch_ms_by_phase": data_batches[0]["durationMs"] if data_batches else {},
        }
    finally:
        spark.stop()


def bench_cold_start(nsqd, topic: str, channel: str, messages: int, options: dict) -> dict:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--cold-only", nsqd.tcp_address, topic, channel, str(messages),
         json.dumps(options)],
        check=True, capture_output=True, text=True, timeout=900,
    )
    result = json.loads(out.stdout)
    stats = nsqd.channel_stats(topic, channel)
    result["left_in_nsqd"] = stats["depth"] + stats["in_flight_count"]
    return result


# ----------------------------------------------------------------------------- latency


class Publisher(threading.Thread):
    """Publishes `rate` msgs/s in MPUBs every 10 ms; each body starts with its publish time (ns)."""

    def __init__(self, address: str, topic: str, rate: int, body_size: int) -> None:
        super().__init__(daemon=True)
        import nsq

        self.writer = nsq.Writer([address], backend="threads")
        self.topic = topic
        self.per_tick = max(1, rate // 100)
        self.pad = b"x" * max(0, body_size - 20)
        self.published = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        tick = time.monotonic()
        try:
            while not self.stop_event.is_set():
                now_ns = time.time_ns()
                self.writer.mpub(self.topic, [b"%020d%s" % (now_ns, self.pad)] * self.per_tick)
                self.published += self.per_tick
                tick += 0.01
                delay = tick - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as exc:  # reported by the bench
            self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        self.writer.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_latency(spark, nsqd, rate: int, seconds: float, warmup: float, body_size: int) -> dict:
    topic, channel, name = "latency", "spark", "latency_rows"
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, channel)
    checkpoint = tempfile.mkdtemp(prefix="nsq-spark-latency-")
    query = (
        spark.readStream.format("nsq").option("topic", topic).option("channel", channel)
        .option("nsqd_tcp_addresses", nsqd.tcp_address).load()
        .selectExpr("cast(substring(cast(body as string), 1, 20) as bigint) as published_ns",
                    "current_timestamp() as batch_ts")
        .writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second").start()
    )
    publisher = Publisher(nsqd.tcp_address, topic, rate, body_size)
    with DriverMemory(spark) as memory:
        time.sleep(2)  # the query's first (empty) batches and the reader's connections
        publisher.start()
        time.sleep(seconds)
        publisher.stop()
        if publisher.error is not None:
            raise publisher.error
        count = lambda: spark.sql("select count(*) from %s" % name).collect()[0][0]  # noqa: E731
        deadline = time.monotonic() + 60
        while count() < publisher.published and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2.5)  # the last batch's commit and its progress event
    query.stop()
    rows = spark.sql("select published_ns, cast(batch_ts as double) as batch_s from %s" % name).collect()
    assert len(rows) >= publisher.published, (len(rows), publisher.published)
    # rows -> micro-batch: current_timestamp() is the batch's timestamp; batches carrying rows, in order
    data = sorted((p for p in query.recentProgress if p["numInputRows"]), key=lambda p: p["batchId"])
    stamps = sorted({r.batch_s for r in rows})
    per_stamp = {s: 0 for s in stamps}
    for r in rows:
        per_stamp[r.batch_s] += 1
    assert [per_stamp[s] for s in stamps] == [p["numInputRows"] for p in data], "rows do not match the batches"
    end_of = {s: batch_end(p) for s, p in zip(stamps, data)}
    first_counted = min(r.published_ns for r in rows) / 1e9 + warmup
    latencies = [end_of[r.batch_s] - r.published_ns / 1e9 for r in rows if r.published_ns / 1e9 >= first_counted]
    return {
        "trigger": "processingTime 1 second",
        "publish_rate_per_s": rate,
        "published": publisher.published,
        "rows": len(rows),
        "measured_rows": len(latencies),
        "warmup_s": warmup,
        "latency_p50_s": round(_percentile(latencies, 0.5), 3),
        "latency_p99_s": round(_percentile(latencies, 0.99), 3),
        "latency_max_s": round(max(latencies), 3),
        "batches": len(data),
        "mean_batch_rows": round(len(rows) / len(data)),
        **memory.report(),
    }


# ----------------------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--reader-only":
        address, topic, channel, messages = sys.argv[2:6]
        print(json.dumps(reader_rate(address, topic, channel, int(messages), timeout=600)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--cold-only":
        address, topic, channel, messages, options = sys.argv[2:7]
        print(json.dumps(cold_start(address, topic, channel, int(messages), json.loads(options))))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sink-rows", type=int, default=1_000_000)
    parser.add_argument("--sink-repeats", type=int, default=3)
    parser.add_argument("--source-messages", type=int, default=1_000_000)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--reader-runs", type=int, default=3, help="nsq.Reader runs; their median is the reference")
    parser.add_argument("--warmup-messages", type=int, default=300_000,
                        help="messages of the warm-up source query (0: none, the source query runs cold)")
    parser.add_argument("--cold-messages", type=int, default=500_000,
                        help="messages of the first query of a fresh JVM, timed from start() to its end (0: none)")
    parser.add_argument("--latency-rate", type=int, default=10_000, help="msgs/s published during the latency run")
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a source option (the figures are for the defaults)")
    args = parser.parse_args()

    from tests.support.servers import Nsqd

    import pyspark

    # mem-queue-size: keep the whole run in memory, so nsqd's disk does not set the pace
    nsqd = Nsqd("--mem-queue-size=%d" % max(args.sink_rows, args.source_messages, 10000))
    spark = make_spark(args.master)
    try:
        options = dict(item.split("=", 1) for item in args.option)
        result: dict = {
            "benchmark": "nsq.spark",
            "pyspark": pyspark.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "master": args.master,
            "load_before": os.getloadavg(),
        }
        result["sink"] = bench_sink(spark, nsqd, args.sink_rows, args.body_size, args.sink_repeats)
        # one backlog, a channel per Reader run and one for the source: each gets every message
        topic = "source"
        nsqd.create_topic(topic)
        reader_channels = ["reader%d" % run for run in range(max(1, args.reader_runs))]
        for channel in reader_channels:
            nsqd.create_channel(topic, channel)
        nsqd.create_channel(topic, "spark")
        (bodies_df(spark, args.source_messages, args.body_size).write.format("nsq").mode("append")
         .option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address).save())
        reader_runs = [bench_reader(nsqd, topic, channel, args.source_messages) for channel in reader_channels]
        result["reader"] = dict(sorted(reader_runs, key=lambda run: run["messages_per_s"])[len(reader_runs) // 2],
                                runs_messages_per_s=[run["messages_per_s"] for run in reader_runs])
        cold = None
        if args.warmup_messages:
            nsqd.create_topic("warmup")
            nsqd.create_channel("warmup", "spark")
            (bodies_df(spark, args.warmup_messages, args.body_size).write.format("nsq").mode("append")
             .option("topic", "warmup").option("nsqd_tcp_addresses", nsqd.tcp_address).save())
            cold = bench_source(spark, nsqd, "warmup", "spark", args.warmup_messages, args.body_size, options)
        source = bench_source(spark, nsqd, topic, "spark", args.source_messages, args.body_size, options)
        source["ratio_to_reader"] = round(source["messages_per_s"] / result["reader"]["messages_per_s"], 3)
        if cold is not None:
            source["cold_query"] = {key: cold[key] for key in ("messages", "read", "messages_per_s",
                                                              "messages_per_s_with_start_up", "left_in_nsqd")}
        if args.cold_messages:
            nsqd.create_topic("cold")
            nsqd.create_channel("cold", "spark")
            (bodies_df(spark, args.cold_messages, args.body_size).write.format("nsq").mode("append")
             .option("topic", "cold").option("nsqd_tcp_addresses", nsqd.tcp_address).save())
            cold_start_run = bench_cold_start(nsqd, "cold", "spark", args.cold_messages, options)
            cold_start_run["ratio_to_reader"] = round(
                cold_start_run["messages_per_s"] / result["reader"]["messages_per_s"], 3)
            source["cold_start"] = cold_start_run
        result["source"] = source
        result["latency"] = bench_latency(spark, nsqd, args.latency_rate, args.latency_seconds, 3.0, args.body_size)
        result["load_after"] = os.getloadavg()
    finally:
        spark.stop()
        nsqd.close()
    print(json.dumps(result, indent=2))
    print(summary(result), file=sys.stderr)  # (make bench sends stdout to spark.json: the console gets this)


def summary(result: dict) -> str:
    """One line with the figures the Spark table of docs/benchmarks.md shows."""
    source, reader, latency, sink = result["source"], result["reader"], result["latency"], result["sink"]
    cold = source.get("cold_query")
    fresh = source.get("cold_start")
    return (
        "nsq.spark: source %s msgs/s, nsq.Reader %s msgs/s (median of %d), source/Reader %.2f%s%s; latency p50 %.2f s "
        "p99 %.2f s at %s msgs/s; driver RSS %s MB (backlog) / %s MB (latency run); sink %s rows/s"
        % (format(source["messages_per_s"], ","), format(reader["messages_per_s"], ","),
           len(reader.get("runs_messages_per_s", [1])), source["ratio_to_reader"],
           "; warm-up query %s msgs/s" % format(cold["messages_per_s"], ",") if cold else "",
           "; first query of a fresh JVM, start() to end, %s msgs/s (%.2f of the Reader)"
           % (format(fresh["messages_per_s"], ","), fresh["ratio_to_reader"]) if fresh else "",
           latency["latency_p50_s"], latency["latency_p99_s"], format(latency["publish_rate_per_s"], ","),
           source["driver_rss_peak_mb"], latency["driver_rss_peak_mb"], format(sink["rows_per_s"], ","))
    )


if __name__ == "__main__":
    main()
