# Throughput of nsq.spark on a local Spark (local[2] by default) and a real nsqd
# (from .nsq-bin, started through tests/servers.py): the sink (batch
# df.write.format("nsq"), rows/s) and the streaming source
# (readStream.format("nsq") with Trigger.AvailableNow into the noop sink,
# messages/s). Prints one JSON object.
#
#   python benchmarks/bench_spark.py [--sink-rows 1000000] [--source-messages 300000]
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def make_spark(master: str):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import nsq.spark

    nsq.spark.register(spark)
    return spark


def bench_sink(spark, nsqd, rows: int, body_size: int, repeats: int) -> dict:
    pad = "x" * max(0, body_size - 12)
    df = spark.range(rows).selectExpr("concat(lpad(cast(id as string), 12, '0'), '%s') as body" % pad)
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


def bench_source(spark, nsqd, messages: int, body_size: int, options: dict) -> dict:
    topic = "source"
    pad = "x" * max(0, body_size - 12)
    (spark.range(messages).selectExpr("concat(lpad(cast(id as string), 12, '0'), '%s') as body" % pad)
     .write.format("nsq").mode("append").option("topic", topic).option("nsqd_tcp_addresses", nsqd.tcp_address).save())
    nsqd.create_channel(topic, "bench")
    checkpoint = tempfile.mkdtemp(prefix="nsq-spark-bench-")
    reader = (
        spark.readStream.format("nsq").option("topic", topic).option("channel", "bench")
        .option("nsqd_tcp_addresses", nsqd.tcp_address).option("available_now_idle_ms", "300")
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    started = time.perf_counter()
    query = reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    progress = query.recentProgress
    total = sum(p["numInputRows"] for p in progress)
    data_batches = [p for p in progress if p["numInputRows"]]
    busy_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in data_batches)
    stats = nsqd.channel_stats(topic, "bench")
    phases: dict = {}
    for p in data_batches:
        for phase, ms in p["durationMs"].items():
            phases[phase] = phases.get(phase, 0) + ms
    return {
        "messages": messages,
        "read": total,
        "body_bytes": body_size,
        "options": options,
        "elapsed_s": round(elapsed, 3),
        "messages_per_s": round(total / elapsed),
        "batches": len(progress),
        "data_batches": len(data_batches),
        "messages_per_s_in_batches": round(total / (busy_ms / 1000.0)) if busy_ms else None,
        "mean_batch_ms_by_phase": {k: round(v / len(data_batches)) for k, v in sorted(phases.items())} if data_batches else {},
        "left_in_nsqd": stats["depth"] + stats["in_flight_count"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sink-rows", type=int, default=1_000_000)
    parser.add_argument("--sink-repeats", type=int, default=3)
    parser.add_argument("--source-messages", type=int, default=300_000)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--max-in-flight", type=int, default=None, help="source option max_in_flight")
    parser.add_argument("--max-messages-per-batch", type=int, default=None, help="source option max_messages_per_batch")
    args = parser.parse_args()

    from servers import Nsqd

    import pyspark

    # mem-queue-size: keep the whole run in memory, so nsqd's disk does not set the pace
    nsqd = Nsqd("--mem-queue-size=%d" % max(args.sink_rows, args.source_messages, 10000))
    spark = make_spark(args.master)
    try:
        options = {}
        if args.max_in_flight:
            options["max_in_flight"] = args.max_in_flight
        if args.max_messages_per_batch:
            options["max_messages_per_batch"] = args.max_messages_per_batch
        result = {
            "benchmark": "nsq.spark",
            "pyspark": pyspark.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "master": args.master,
            "sink": bench_sink(spark, nsqd, args.sink_rows, args.body_size, args.sink_repeats),
            "source": bench_source(spark, nsqd, args.source_messages, args.body_size, options),
        }
    finally:
        spark.stop()
        nsqd.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
