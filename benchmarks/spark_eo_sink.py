"""The pulsar Spark sink, at-least-once (the default) beside exactly-once
(deliveryGuarantee=exactly-once: each task's rows in a transaction, committed by the
driver), on the same data: --messages 100-byte rows written by one batch job
(df.write) into a 4-partition topic of its own, on a local Spark (local[2]) and a
real Pulsar broker of its own with its transaction coordinator on
(tests/support/txn_broker.py). A warm-up write of each kind first; then one run of
each, the rows cached before the clock starts. Every run's output is counted on the
broker: the topic's msgInCounter, and for exactly-once also what a plain reader
gets from each partition (the committed messages). Prints one JSON object;
benchmarks/results/spark_eo_sink.json keeps the last one.

    .venv/bin/python benchmarks/spark_eo_sink.py [--messages 200000] [--tasks 4]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_spark import make_spark  # noqa: E402

PARTITIONS = 4
BODY = 100


def readable(broker, topic: str) -> int:
    """The messages a plain reader gets from each partition of topic, read to its end."""
    import pulsarfast

    client = pulsarfast.Client(broker.service_url, backend="threads", operation_timeout_seconds=30)
    count = 0
    try:
        for index in range(PARTITIONS):
            reader = client.create_reader("persistent://public/default/%s-partition-%d" % (topic, index),
                                          pulsarfast.MessageId.earliest, receiver_queue_size=5000)
            while reader.has_message_available():
                reader.read_next(timeout_millis=10_000)
                count += 1
            reader.close()
    finally:
        client.close()
    return count


def write(spark, broker, topic: str, messages: int, tasks: int, guarantee: str) -> float:
    """One df.write of messages rows into a new 4-partition topic: rows/s, every count checked."""
    broker.create_partitioned_topic(topic, PARTITIONS)
    df = spark.range(0, messages, 1, tasks).selectExpr(
        "cast(concat(lpad(cast(id as string), 12, '0'), '%s') as binary) as value" % ("x" * (BODY - 12)))
    df.cache().count()  # (the rows are made before the clock starts)
    started = time.perf_counter()
    df.write.format("pulsar").mode("append").option("service_url", broker.service_url) \
        .option("topic", topic).option("deliveryGuarantee", guarantee).save()
    elapsed = time.perf_counter() - started
    df.unpersist()
    stored = int(broker.partitioned_stats(topic, per_partition=False)["msgInCounter"])
    assert stored == messages, "%s: the broker stored %d of %d" % (guarantee, stored, messages)
    if guarantee == "exactly-once":
        seen = readable(broker, topic)
        assert seen == messages, "exactly-once: a reader gets %d of %d" % (seen, messages)
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--warmup-messages", type=int, default=50_000)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    import pyspark

    import pulsarfast.spark
    from tests.support.txn_broker import TxnPulsarBroker

    broker = TxnPulsarBroker().start()
    try:
        spark = make_spark(args.master)
        pulsarfast.spark.register(spark)
        result: dict = {
            "benchmark": "pulsarfast.spark sink: at-least-once vs exactly-once",
            "date": datetime.date.today().isoformat(),
            "pyspark": pyspark.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "master": args.master,
            "messages": args.messages,
            "tasks": args.tasks,
            "partitions": PARTITIONS,
            "body_bytes": BODY,
            "load_before": os.getloadavg(),
        }
        for guarantee in ("at-least-once", "exactly-once"):
            write(spark, broker, "warmup-" + guarantee, args.warmup_messages, args.tasks, guarantee)
        rates = {guarantee: write(spark, broker, "run-" + guarantee, args.messages, args.tasks, guarantee)
                 for guarantee in ("at-least-once", "exactly-once")}
        result.update({
            "at_least_once_rows_per_s": round(rates["at-least-once"]),
            "exactly_once_rows_per_s": round(rates["exactly-once"]),
            "ratio": round(rates["exactly-once"] / rates["at-least-once"], 2),
            "load_after": os.getloadavg(),
        })
        print(json.dumps(result, indent=2))
        spark.stop()
    finally:
        broker.kill()


if __name__ == "__main__":
    main()
