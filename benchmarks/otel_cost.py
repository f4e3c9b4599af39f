"""What the OpenTelemetry instrumentation costs: the same workloads with nsq.otel / pulsarfast.otel
off (never instrumented, and after uninstrument()) and on (the SDK with a batching span processor
and an exporter that drops what it gets, and a metric reader), interleaved, medians of --rounds.

Workloads (threads backend, 100-byte messages, --count each): Pulsar batched produce (send_async
without callback, then flush), Pulsar receive + acknowledge, NSQ Writer.pub (blocking, one caller),
each on a real broker / nsqd started here, counts checked on the server. Results:
benchmarks/results/otel_cost.json.

    .venv/bin/python benchmarks/otel_cost.py [--count 20000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nsq  # noqa: E402
import nsq.otel  # noqa: E402
import pulsarfast  # noqa: E402
import pulsarfast.otel  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from tests.support.pulsar_broker import PulsarBroker  # noqa: E402
from tests.support.servers import Nsqd  # noqa: E402

RESULTS = os.path.join(ROOT, "benchmarks", "results", "otel_cost.json")


class Dropping(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans) -> SpanExportResult:  # type: ignore[no-untyped-def]
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def pulsar_produce(url: str, count: int) -> tuple[float, str]:
    client = pulsarfast.Client(url, backend="threads")
    topic = "otel-bench-" + uuid.uuid4().hex[:8]
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=10, block_if_queue_full=True)
    body = b"x" * 100
    start = time.perf_counter()
    for _ in range(count):
        producer.send_async(body, None)
    producer.flush()
    seconds = time.perf_counter() - start
    client.close()
    return seconds, topic


def pulsar_consume(url: str, topic: str, count: int) -> float:
    client = pulsarfast.Client(url, backend="threads")
    consumer = client.subscribe(topic, "bench", initial_position=pulsarfast.InitialPosition.Earliest)
    start = time.perf_counter()
    for _ in range(count):
        consumer.acknowledge(consumer.receive(15000))
    seconds = time.perf_counter() - start
    client.close()
    return seconds


def nsq_pub(address: str, count: int) -> tuple[float, str]:
    topic = "otel_bench_" + uuid.uuid4().hex[:8]
    with nsq.Writer([address], backend="threads") as writer:
        body = b"x" * 100
        writer.pub(topic, body)
        start = time.perf_counter()
        for _ in range(count - 1):
            writer.pub(topic, body)
        seconds = time.perf_counter() - start
    return seconds, topic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    exporter = Dropping()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    broker = PulsarBroker().start()
    nsqd = Nsqd()
    rates: dict[str, list[float]] = {}
    try:
        for round_index in range(args.rounds + 1):
            for mode in ("off", "on"):
                if mode == "on":
                    pulsarfast.otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
                    nsq.otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
                try:
                    produce, topic = pulsar_produce(broker.service_url, args.count)
                    consume = pulsar_consume(broker.service_url, topic, args.count)
                    stats = broker.admin("GET", "/admin/v2/persistent/public/default/%s/stats" % topic)
                    assert stats["msgInCounter"] == args.count, stats["msgInCounter"]
                    publish, nsq_topic = nsq_pub(nsqd.tcp_address, args.count)
                    assert nsqd.topic_stats(nsq_topic)["message_count"] == args.count
                finally:
                    pulsarfast.otel.uninstrument()
                    nsq.otel.uninstrument()
                if round_index:  # (the first round warms up: not counted)
                    for name, seconds in (("pulsar produce", produce), ("pulsar receive+ack", consume),
                                          ("nsq pub", publish)):
                        rates.setdefault("%s, otel %s" % (name, mode), []).append(args.count / seconds)
    finally:
        broker.stop()
        nsqd.stop()
    tracer_provider.shutdown()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    report = {"count": args.count, "rounds": args.rounds, "msgs_per_s": medians, "runs": rates,
              "spans_exported": exporter.count}
    with open(RESULTS, "w") as out:
        json.dump(report, out, indent=2)
    for workload in ("pulsar produce", "pulsar receive+ack", "nsq pub"):
        off, on = medians["%s, otel off" % workload], medians["%s, otel on" % workload]
        print("%-20s off %9.0f msgs/s   on %9.0f msgs/s   on/off %.2f" % (workload, off, on, on / off))


if __name__ == "__main__":
    main()
