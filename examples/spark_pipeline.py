"""NSQ topic -> Spark Structured Streaming -> NSQ topic, with nsq.spark.

Reads JSON events like {"user": "u1", "amount": 250} from one topic, drops
what does not parse, keeps amounts of at least 100 and publishes
{"user": "U1", "amount_cents": 25000} to another topic. Every input message is
finished in nsqd only after Spark has committed the micro-batch that carried it
and the output has been published (at least once: after a crash, a batch may be
published twice).

    pip install 'nsqfast[spark]'        # pyspark + pyarrow; Spark needs Java 17+
    python examples/spark_pipeline.py --nsqd 127.0.0.1:4150 \
        --in-topic events --channel spark --out-topic big_spenders --checkpoint /tmp/pipeline-ck

Add --available-now to process what is in nsqd now and stop.
"""
from __future__ import annotations

import argparse
import json
from typing import Iterable

MIN_AMOUNT = 100


def transform(events):
    """The Spark transformation: DataFrame of nsq rows -> DataFrame with a `body` column."""
    from pyspark.sql import functions as F

    parsed = events.select(F.from_json(F.col("body").cast("string"), "user STRING, amount BIGINT").alias("e"))
    return (
        parsed.where(F.col("e.user").isNotNull() & (F.col("e.amount") >= MIN_AMOUNT))
        .select(
            F.to_json(
                F.struct(F.upper(F.col("e.user")).alias("user"), (F.col("e.amount") * 100).alias("amount_cents"))
            ).alias("body")
        )
    )


def transform_locally(bodies: Iterable[bytes]) -> list[bytes]:
    """The same transformation in plain Python (what the tests compare against)."""
    out = []
    for body in bodies:
        try:
            event = json.loads(body)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("user") is None or not isinstance(event.get("amount"), int):
            continue
        if event["amount"] >= MIN_AMOUNT:
            record = {"user": str(event["user"]).upper(), "amount_cents": event["amount"] * 100}
            out.append(json.dumps(record, separators=(",", ":")).encode())
    return out


def start_pipeline(spark, *, nsqd_tcp_addresses: str, in_topic: str, channel: str, out_topic: str,
                   checkpoint: str, available_now: bool = False):
    """Start the streaming query and return it (nsq.spark must be registered in `spark`)."""
    events = (
        spark.readStream.format("nsq")
        .option("nsqd_tcp_addresses", nsqd_tcp_addresses)
        .option("topic", in_topic)
        .option("channel", channel)
        .option("max_messages_per_batch", "20000")
        .load()
    )
    writer = (
        transform(events)
        .writeStream.format("nsq")
        .option("nsqd_tcp_addresses", nsqd_tcp_addresses)
        .option("topic", out_topic)
        .option("checkpointLocation", checkpoint)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")
    return writer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nsqd", default="127.0.0.1:4150", help="nsqd TCP address(es), comma-separated")
    parser.add_argument("--in-topic", default="events")
    parser.add_argument("--channel", default="spark")
    parser.add_argument("--out-topic", default="big_spenders")
    parser.add_argument("--checkpoint", default="/tmp/nsq-spark-pipeline-checkpoint")
    parser.add_argument("--available-now", action="store_true", help="process what nsqd holds now, then stop")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import nsq.spark

    spark = SparkSession.builder.appName("nsq-pipeline").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    nsq.spark.register(spark)
    query = start_pipeline(
        spark, nsqd_tcp_addresses=args.nsqd, in_topic=args.in_topic, channel=args.channel,
        out_topic=args.out_topic, checkpoint=args.checkpoint, available_now=args.available_now,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
