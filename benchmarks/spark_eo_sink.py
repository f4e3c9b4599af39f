"""The pulsar Spark sink, at-least-once (the default) beside exactly-once
(deliveryGuarantee=exactly-once: each task's rows in a transaction, committed by the
driver), on the same data: --messages 100-byte rows written by one batch job
(df.write) into a 4-partition topic of its own, on a local Spark (local[2]) and a
real Pulsar broker of its own with its transaction coordinator on
(tests/support/txn_broker.py). A warm-up write of each kind first; then one run of
each, the rows cached before the clock starts. Every write's output is counted on
the broker afterwards: what a plain reader gets from each partition (exactly the
rows for exactly-once, at least them for at-least-once), and the topic's
msgInCounter. Prints one JSON object;
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
    """One df.write of messages rows into a new 4-partition topic: rows/s."""
    broker.create_partitioned_topic(topic, PARTITIONS)
    df = spark.range(0, messages, 1, tasks).selectExpr(
        "cast(concat(lpad(cast(id as string), 12, '0'), '%s') as binary) as value" % ("x" * (BODY - 12)))
    df.cache().count()  # (the rows are made before the clock starts)
    started = time.perf_counter()
    df.write.format("pulsar").mode("append").option("service_url", broker.service_url) \
        .option("admin_url", broker.web_url).option("topic", topic).option("deliveryGuarantee", guarantee).save()
    elapsed = time.perf_counter() - started
    df.unpersist()
    return messages / elapsed


def check(broker, topic: str, messages: int, guarantee: str) -> dict:
    """The output's counts: what a plain reader gets (exactly the rows for exactly-once, at least
    them for at-least-once) and the topic's msgInCounter (which counts a message sent again after
    a reconnection once more)."""
    taken_in = int(broker.partitioned_stats(topic, per_partition=False)["msgInCounter"])
    seen = readable(broker, topic)
    assert taken_in >= messages, "%s: the broker took in %d of %d" % (guarantee, taken_in, messages)
    if guarantee == "exactly-once":
        assert seen == messages, "exactly-once: a reader gets %d of %d" % (seen, messages)
    else:
        assert seen >= messages, "at-least-once: a reader gets %d of %d" % (seen, messages)
    return {"taken_in": taken_in, "read": seen}


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
        kinds = ("at-least-once", "exactly-once")
        for guarantee in kinds:
            write(spark, broker, "warmup-" + guarantee, args.warmup_messages, args.tasks, guarantee)
        # (the runs one right after the other, the counts after both: a Python worker idle for a
        # minute, while a count reads the output, is stopped, and the next job would start new ones)
        rates = {guarantee: write(spark, broker, "run-" + guarantee, args.messages, args.tasks, guarantee)
                 for guarantee in kinds}
        runs = {guarantee: check(broker, "run-" + guarantee, args.messages, guarantee) for guarantee in kinds}
        for guarantee in kinds:
            check(broker, "warmup-" + guarantee, args.warmup_messages, guarantee)
        result.update({
            "at_least_once_rows_per_s": round(rates["at-least-once"]),
            "exactly_once_rows_per_s": round(rates["exactly-once"]),
            "ratio": round(rates["exactly-once"] / rates["at-least-once"], 2),
            "counts": runs,
            "load_after": os.getloadavg(),
        })
        print(json.dumps(result, indent=2))
        with open(os.path.join(ROOT, "benchmarks", "results", "spark_eo_sink.json"), "w") as out:
            json.dump(result, out, indent=2)
        spark.stop()
    finally:
        broker.kill()


if __name__ == "__main__":
    main()
