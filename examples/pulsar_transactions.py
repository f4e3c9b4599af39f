"""Consume, transform, produce, exactly once, with a Pulsar transaction.

Each round takes up to --batch messages from the input topic, writes their transformed copies
to the output topic and acknowledges the inputs, all in one transaction: either the outputs
appear and the inputs are acknowledged together, or (the transform raised, the process died
before commit) neither happens and the inputs are delivered again.

    python examples/pulsar_transactions.py --service-url pulsar://localhost:6650 \\
        --input orders --output orders-upper --subscription uppercaser

The broker needs its transaction coordinator: ``transactionCoordinatorEnabled=true``.
Ctrl-C stops it (a round under way is aborted: its inputs come back). A round left open by a
process that died holds its inputs back (acknowledged in a pending transaction) until the
coordinator aborts it, --txn-timeout-ms after it began.
"""
from __future__ import annotations

import argparse
import sys

import pulsarfast as pulsar


def transform(data: bytes) -> bytes:
    return data.upper()


def run(service_url: str, input_topic: str, output_topic: str, subscription: str, batch: int,
        idle_ms: int, rounds: int | None, txn_timeout_ms: int = 30000) -> int:
    client = pulsar.Client(service_url)
    consumer = client.subscribe(input_topic, subscription, initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(output_topic)
    moved = 0
    try:
        while rounds is None or rounds > 0:
            if rounds is not None:
                rounds -= 1
            messages = []
            try:
                while len(messages) < batch:
                    messages.append(consumer.receive(timeout_millis=idle_ms))
            except pulsar.Timeout:
                pass  # (the input is drained for now: this round takes what came)
            if not messages:
                continue
            try:
                with client.new_transaction(timeout_ms=txn_timeout_ms) as txn:  # (commits at the end, aborts on error)
                    for message in messages:
                        producer.send_async(transform(message.data()), None, transaction=txn)
                        consumer.acknowledge(message, transaction=txn)
            except pulsar.PulsarException as exc:
                print("round aborted (%s): its %d messages come again" % (exc, len(messages)), file=sys.stderr)
                consumer.redeliver_unacknowledged_messages()
                continue
            moved += len(messages)
            print("committed %d messages (%d in all)" % (len(messages), moved), flush=True)
    except KeyboardInterrupt:
        print("stopped after %d messages" % moved)
    finally:
        client.close()
    return moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--service-url", default="pulsar://localhost:6650")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--subscription", default="transformer")
    parser.add_argument("--batch", type=int, default=100, help="messages per transaction at most")
    parser.add_argument("--idle-ms", type=int, default=1000, help="how long a round waits for its next message")
    parser.add_argument("--txn-timeout-ms", type=int, default=30000,
                        help="how long a round left open by a dead process holds its inputs back")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds (default: never)")
    args = parser.parse_args()
    run(args.service_url, args.input, args.output, args.subscription, args.batch, args.idle_ms, args.rounds, args.txn_timeout_ms)


if __name__ == "__main__":
    main()
