"""``pulsarfast tail``: print a topic's messages as they arrive. By default
it reads through a non-durable subscription (a ``Reader``) that the broker
forgets when the command ends, from ``--position latest`` (new messages) or
``earliest``; ``--subscription NAME`` consumes on a durable subscription
instead and acknowledges each message once it is printed. ``-n`` stops after
that many; Ctrl-C, SIGTERM and a closed stdout (``| head``) end it cleanly."""
from __future__ import annotations

import argparse
from typing import Any

from msgengine.cli.app import EXIT_OK, CliError
from msgengine.cli.output import MessageWriter

from pulsarfast.base.enums import ConsumerType, InitialPosition
from pulsarfast.base.results import Timeout
from pulsarfast.cli.connect import add_connection_options, make_client
from pulsarfast.wire.message import Message, MessageId

EXAMPLE = """example:
  pulsarfast tail events -u pulsar://127.0.0.1:6650
  pulsarfast tail events -u pulsar://127.0.0.1:6650 --position earliest -n 10 --json

With --json each line is {"message_id", "topic", "publish_timestamp" (ms since the
epoch), "event_timestamp" (ms, or null), "properties", "key" (the partition key, or
null), "body", "body_encoding"}: the body is text when it is UTF-8, else base64."""

POLL_MS = 500  # how long one wait for a message lasts (between two, signals are looked at)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "tail", help="print a topic's messages as they arrive",
        description="Read a topic (through a non-durable subscription by default) and print every message.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("topic", help="the topic to read (a short name is persistent://public/default/NAME)")
    parser.add_argument("--position", choices=("latest", "earliest"), default="latest",
                        help="where to start: new messages only, or the oldest kept (default: %(default)s)")
    parser.add_argument("--subscription", metavar="NAME",
                        help="consume on this durable subscription, acknowledging each message printed "
                             "(default: a non-durable one, gone when the command ends)")
    parser.add_argument("-n", "--count", type=int, default=0, metavar="N",
                        help="exit after N messages (default: run until interrupted)")
    parser.add_argument("--json", action="store_true", help="print a JSON object per message instead of the body")
    add_connection_options(parser)
    parser.set_defaults(run=run, prog=parser.prog)


def message_fields(message: Message) -> dict[str, Any]:
    """The JSON fields of a message (besides its body)."""
    return {
        "message_id": str(message.message_id()),
        "topic": message.topic_name(),
        "publish_timestamp": message.publish_timestamp(),
        "event_timestamp": message.event_timestamp() or None,
        "properties": message.properties(),
        "key": message.partition_key() if message.has_partition_key() else None,
    }


def run(args: argparse.Namespace) -> int:
    if args.count < 0:
        raise CliError("-n must be >= 0")
    output = MessageWriter(args.json)
    client = make_client(args)
    try:
        if args.subscription:
            initial = InitialPosition.Earliest if args.position == "earliest" else InitialPosition.Latest
            consumer = client.subscribe(args.topic, args.subscription, consumer_type=ConsumerType.Exclusive,
                                        initial_position=initial)
            receive, acknowledge = consumer.receive, consumer.acknowledge
        else:
            start = MessageId.earliest if args.position == "earliest" else MessageId.latest
            reader = client.create_reader(args.topic, start)
            receive, acknowledge = reader.read_next, None
        printed = 0
        while not args.count or printed < args.count:
            try:
                message = receive(POLL_MS)
            except Timeout:
                continue
            output.write(message.data(), message_fields(message))
            if acknowledge is not None:
                acknowledge(message)
            printed += 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the normal way to stop a tail
        pass
    finally:
        client.close()
    return EXIT_OK
