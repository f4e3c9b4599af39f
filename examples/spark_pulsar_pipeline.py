"""Pulsar -> Spark -> NSQ, and NSQ -> Spark -> Pulsar, with pulsarfast.spark and nsq.spark.

The first query reads JSON readings like {"sensor": "s1", "celsius": 21.5} from a
Pulsar topic, drops what does not parse, and publishes
{"sensor": "s1", "fahrenheit": 70.7} to an NSQ topic. The second reads that NSQ
topic (a channel of its own) and produces each message back to a Pulsar topic,
keyed by sensor, so that one sensor's readings stay in order on one partition.

The Pulsar source is exactly once into the NSQ sink's input: after a crash, the
query reads again exactly the entries after its last committed offsets. The NSQ
and Pulsar sinks are at least once: a batch retried after a crash may be
published twice.

    pip install 'nsqfast[spark]'        # pyspark + pyarrow; Spark needs Java 17+
    python examples/spark_pulsar_pipeline.py --service-url pulsar://127.0.0.1:6650 \\
        --admin-url http://127.0.0.1:8080 --nsqd 127.0.0.1:4150 --checkpoint /tmp/pulsar-pipeline-ck

Add --available-now to process what is there now and stop.
"""
from __future__ import annotations

import argparse
import json
from typing import Iterable


def to_fahrenheit(readings):
    """The Spark transformation: rows of the pulsar source -> rows with the nsq sink's `body`."""
    from pyspark.sql import functions as F

    parsed = readings.select(F.from_json(F.col("value").cast("string"), "sensor STRING, celsius DOUBLE").alias("r"))
    return parsed.where(F.col("r.sensor").isNotNull() & F.col("r.celsius").isNotNull()).select(
        F.to_json(F.struct(F.col("r.sensor").alias("sensor"),
                           F.round(F.col("r.celsius") * 9 / 5 + 32, 1).alias("fahrenheit"))).alias("body"))


def to_fahrenheit_locally(values: Iterable[bytes]) -> list[dict]:
    """The same transformation in plain Python (what the tests compare against)."""
    out = []
    for value in values:
        try:
            reading = json.loads(value)
        except ValueError:
            continue
        if not isinstance(reading, dict) or not isinstance(reading.get("sensor"), str):
            continue
        if not isinstance(reading.get("celsius"), (int, float)):
            continue
        out.append({"sensor": reading["sensor"], "fahrenheit": round(reading["celsius"] * 9 / 5 + 32, 1)})
    return out


def _trigger(writer, available_now: bool):
    return writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")


def pulsar_to_nsq(spark, *, service_url: str, admin_url: str, pulsar_topic: str, nsqd: str, nsq_topic: str,
                  checkpoint: str, available_now: bool = False):
    """Start the Pulsar -> NSQ query (both formats registered in `spark`) and return it."""
    readings = (
        spark.readStream.format("pulsar")
        .option("service_url", service_url)
        .option("admin_url", admin_url)
        .option("topic", pulsar_topic)
        .option("startingOffsets", "earliest")
        .option("subscriptionName", "spark-pipeline")  # its backlog shows what the query has not read yet
        .load()
    )
    writer = (to_fahrenheit(readings).writeStream.format("nsq")
              .option("nsqd_tcp_addresses", nsqd).option("topic", nsq_topic)
              .option("checkpointLocation", checkpoint))
    return _trigger(writer, available_now).start()


def nsq_to_pulsar(spark, *, nsqd: str, nsq_topic: str, channel: str, service_url: str, pulsar_topic: str,
                  checkpoint: str, available_now: bool = False):
    """Start the NSQ -> Pulsar query and return it: each body goes on, keyed by its sensor."""
    from pyspark.sql import functions as F

    messages = (spark.readStream.format("nsq").option("nsqd_tcp_addresses", nsqd)
                .option("topic", nsq_topic).option("channel", channel).load())
    keyed = messages.select(
        F.col("body").alias("value"),
        F.get_json_object(F.col("body").cast("string"), "$.sensor").alias("key"),
        F.create_map(F.lit("nsq_id"), F.col("id")).alias("properties"),
    )
    writer = (keyed.writeStream.format("pulsar").option("service_url", service_url)
              .option("topic", pulsar_topic).option("checkpointLocation", checkpoint))
    return _trigger(writer, available_now).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--service-url", default="pulsar://127.0.0.1:6650")
    parser.add_argument("--admin-url", default="http://127.0.0.1:8080")
    parser.add_argument("--nsqd", default="127.0.0.1:4150", help="nsqd TCP address(es), comma-separated")
    parser.add_argument("--readings", default="readings", help="the Pulsar topic read")
    parser.add_argument("--nsq-topic", default="readings_f")
    parser.add_argument("--channel", default="spark")
    parser.add_argument("--back", default="readings_f", help="the Pulsar topic written back")
    parser.add_argument("--checkpoint", default="/tmp/pulsar-spark-pipeline-checkpoint")
    parser.add_argument("--available-now", action="store_true", help="process what is there now, then stop")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import nsq.spark
    import pulsarfast.spark

    spark = SparkSession.builder.appName("pulsar-pipeline").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    nsq.spark.register(spark)
    pulsarfast.spark.register(spark)
    queries = [
        pulsar_to_nsq(spark, service_url=args.service_url, admin_url=args.admin_url, pulsar_topic=args.readings,
                      nsqd=args.nsqd, nsq_topic=args.nsq_topic, checkpoint=args.checkpoint + "/to-nsq",
                      available_now=args.available_now),
        nsq_to_pulsar(spark, nsqd=args.nsqd, nsq_topic=args.nsq_topic, channel=args.channel,
                      service_url=args.service_url, pulsar_topic=args.back,
                      checkpoint=args.checkpoint + "/to-pulsar", available_now=args.available_now),
    ]
    try:
        for query in queries:
            query.awaitTermination()
    except KeyboardInterrupt:
        for query in queries:
            query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
