"""``pulsarfast pub``: publish lines from stdin or files to a topic, one
message per line (empty lines too: Pulsar carries empty messages), through
a batching producer: batches of up to ``--batch-size`` lines and
``--batch-bytes`` bytes, sent at the latest ``--linger`` seconds after their
first line. It exits 0 only once the broker acknowledged every line; a
failure exits non-zero and says how many were acknowledged."""
from __future__ import annotations

import argparse
import threading
from typing import Any

from msgengine.cli.app import EXIT_INTERRUPTED, EXIT_OK, CliError, one_line
from msgengine.cli.lines import LineBatches
from msgengine.cli.progress import Progress, summary

from pulsarfast.base.results import PulsarException, Result
from pulsarfast.cli.connect import add_connection_options, make_client
from pulsarfast.wire.message import MessageId

EXAMPLE = """example:
  seq 100000 | pulsarfast pub events -u pulsar://127.0.0.1:6650
  pulsarfast pub events -u pulsar://127.0.0.1:6650 --key user-1 --property source=cli access.log

When it is done it prints the count and rate on stderr (a live counter too,
when stderr is a terminal); it exits 0 only when the broker acknowledged every line."""


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "pub", help="publish lines from stdin or files to a topic",
        description="Publish each line of the input as one message.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("topic", help="the topic to publish to (a short name is persistent://public/default/NAME)")
    parser.add_argument("files", nargs="*", metavar="FILE", help="files to read ('-' or none: stdin)")
    parser.add_argument("--key", help="the partition key of every message")
    parser.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                        help="a property of every message (repeatable)")
    parser.add_argument("--batch-size", type=int, default=1000, metavar="N",
                        help="messages per batch at most; 1 turns batching off (default: %(default)s)")
    parser.add_argument("--batch-bytes", type=int, default=128 * 1024, metavar="BYTES",
                        help="bytes per batch at most (default: %(default)s)")
    parser.add_argument("--linger", type=float, default=0.01, metavar="SECONDS",
                        help="send a partial batch this long after its first line (default: %(default)s)")
    parser.add_argument("--publish-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="fail when the broker does not acknowledge a message within this time "
                             "(default: %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary on stderr")
    add_connection_options(parser)
    parser.set_defaults(run=run, prog=parser.prog)


class Receipts:
    """Counts the broker's answers to ``send_async`` (they come on the client's threads)."""

    def __init__(self) -> None:
        self.acknowledged = 0
        self.answered = 0
        self.failure: Result | None = None
        self._changed = threading.Condition()

    def __call__(self, result: Result, message_id: MessageId | None) -> None:
        with self._changed:
            self.answered += 1
            if result == Result.Ok:
                self.acknowledged += 1
            elif self.failure is None:
                self.failure = result
            self._changed.notify_all()

    def wait_for(self, sent: int, timeout: float) -> bool:
        """Wait until every one of sent messages has its answer."""
        with self._changed:
            return self._changed.wait_for(lambda: self.answered >= sent, timeout)


def _properties(pairs: list[str]) -> dict[str, str]:
    properties = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError("--property %r is not NAME=VALUE" % (pair,))
        properties[name] = value
    return properties


def run(args: argparse.Namespace) -> int:
    if args.batch_size < 1 or args.batch_bytes < 1 or args.linger < 0 or args.publish_timeout <= 0:
        raise CliError("--batch-size and --batch-bytes must be >= 1, --linger >= 0, --publish-timeout > 0")
    properties = _properties(args.property) or None
    batches = LineBatches(args.files, args.batch_size, args.batch_bytes, linger=args.linger)
    receipts = Receipts()
    sent = 0
    client = make_client(args)
    progress: Progress | None = None
    try:
        producer = client.create_producer(
            args.topic, batching_enabled=args.batch_size > 1, batching_max_messages=args.batch_size,
            batching_max_allowed_size_in_bytes=args.batch_bytes,
            batching_max_publish_delay_ms=int(args.linger * 1000),
            send_timeout_millis=max(1, int(args.publish_timeout * 1000)),
            max_pending_messages=max(1000, 4 * args.batch_size), block_if_queue_full=True,
        )
        progress = Progress(quiet=args.quiet)
        for batch in batches:
            for line in batch:
                producer.send_async(line, receipts, properties=properties, partition_key=args.key)
            sent += len(batch)
            if receipts.failure is not None:
                break
            progress.update(receipts.acknowledged)
        producer.flush()
        if not receipts.wait_for(sent, args.publish_timeout):
            raise CliError("the broker did not answer %d messages within %ss" % (sent - receipts.answered,
                                                                                 args.publish_timeout))
        if receipts.failure is not None:
            raise CliError("the broker refused a message: %s" % receipts.failure)
    except KeyboardInterrupt:
        if progress is not None:
            progress.finish("interrupted: " + summary("published", receipts.acknowledged, args.topic,
                                                      progress.elapsed()) + ", each acknowledged by the broker")
        return EXIT_INTERRUPTED
    except (CliError, PulsarException, OSError) as exc:
        if progress is None:  # (could not even create the producer)
            raise
        progress.finish("")
        raise CliError("%s (%d lines were published and acknowledged before this)"
                       % (one_line(exc), receipts.acknowledged)) from None
    finally:
        client.close()
    progress.finish(summary("published", receipts.acknowledged, args.topic, progress.elapsed()))
    return EXIT_OK
