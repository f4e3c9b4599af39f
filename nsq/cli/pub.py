"""``nsqfast pub``: publish lines from stdin or files to a topic, one
message per line (nsq's ``to_nsq``), in MPUBs of up to ``--batch-size`` lines
and ``--batch-bytes`` bytes; a batch also leaves when the input pauses
(``--linger``). Each MPUB blocks until nsqd acknowledges it, so when the
command exits 0 every line is in nsqd; any failure exits non-zero and says
how many lines were acknowledged before it. Empty lines are skipped: nsqd
refuses empty messages."""
from __future__ import annotations

import argparse
from typing import Any

from msgengine.cli.app import EXIT_INTERRUPTED, EXIT_OK, CliError, add_common_options, one_line
from msgengine.cli.lines import LineBatches
from msgengine.cli.progress import Progress, summary

from nsq.cli import addresses
from nsq.errors import Error, InvalidArgumentError
from nsq.names import check_topic
from nsq.writer import Writer

EXAMPLE = """example:
  seq 100000 | nsqfast pub events --nsqd-tcp-address 127.0.0.1:4150
  nsqfast pub events --nsqd-tcp-address 127.0.0.1:4150 access.log errors.log
  tail -F app.log | nsqfast pub logs --nsqd-tcp-address 127.0.0.1:4150 --linger 0.05

When it is done it prints the count and rate on stderr (a live counter too,
when stderr is a terminal); it exits 0 only when nsqd acknowledged every line."""


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "pub", help="publish lines from stdin or files to a topic",
        description="Publish each line of the input as one message (empty lines are skipped).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("topic", help="the topic to publish to")
    parser.add_argument("files", nargs="*", metavar="FILE", help="files to read ('-' or none: stdin)")
    parser.add_argument("--nsqd-tcp-address", action="append", default=[], metavar="HOST:PORT",
                        help="an nsqd to publish to (repeatable: batches go round-robin)")
    parser.add_argument("--batch-size", type=int, default=200, metavar="N",
                        help="lines per MPUB at most (default: %(default)s)")
    parser.add_argument("--batch-bytes", type=int, default=512 * 1024, metavar="BYTES",
                        help="bytes of lines per MPUB at most (default: %(default)s)")
    parser.add_argument("--linger", type=float, default=0.1, metavar="SECONDS",
                        help="send a partial batch when the input pauses this long (default: %(default)s)")
    parser.add_argument("--publish-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="fail when nsqd does not acknowledge a batch within this time (default: %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary on stderr")
    add_common_options(parser)
    parser.set_defaults(run=run, prog=parser.prog)


def run(args: argparse.Namespace) -> int:
    try:
        topic = check_topic(args.topic)
    except InvalidArgumentError as exc:
        raise CliError(str(exc)) from None
    if args.batch_size < 1 or args.batch_bytes < 1 or args.linger < 0 or args.publish_timeout <= 0 \
            or args.connect_timeout <= 0:
        raise CliError("--batch-size and --batch-bytes must be >= 1, --linger >= 0, the timeouts > 0")
    nsqd = [addresses.tcp_address(a) for a in args.nsqd_tcp_address]
    if not nsqd:
        raise CliError("give at least one --nsqd-tcp-address")
    for path in args.files:  # a missing file is said before anything is published
        if path != "-":
            open(path, "rb").close()
    for address in nsqd:  # fail now, with the reason, rather than after the publish timeout
        addresses.check_nsqd(address, args.connect_timeout)

    batches = LineBatches(args.files, args.batch_size, args.batch_bytes, linger=args.linger, skip_empty=True)
    progress = Progress(quiet=args.quiet)
    published = 0
    writer = Writer(nsqd, publish_timeout=args.publish_timeout, timeout=args.connect_timeout)
    try:
        if not writer.wait_connected(args.connect_timeout):
            raise CliError("could not connect to nsqd (%s) within %ss" % (", ".join(nsqd), args.connect_timeout))
        for batch in batches:
            writer.mpub(topic, batch)  # blocks until nsqd acknowledges it; raises otherwise
            published += len(batch)
            progress.update(published)
    except KeyboardInterrupt:
        progress.finish("interrupted: " + summary("published", published, topic, progress.elapsed())
                        + ", each acknowledged by nsqd")
        return EXIT_INTERRUPTED
    except (Error, OSError) as exc:
        progress.finish("")  # (the counter goes; the error line says how far it got)
        raise CliError("%s (%d lines were published and acknowledged before this)"
                       % (one_line(exc), published)) from None
    finally:
        writer.close()
    skipped = " (%d empty lines skipped)" % batches.skipped if batches.skipped else ""
    progress.finish(summary("published", published, topic, progress.elapsed()) + skipped)
    return EXIT_OK
