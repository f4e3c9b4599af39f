"""``nsqfast tail``: print the messages of a topic as they arrive (nsq's
``nsq_tail``). It consumes on an ephemeral channel of its own unless given
one, prints each message (its raw body, or a JSON line), then finishes
(FIN) it; ``-n`` stops after that many. Ctrl-C, SIGTERM and a closed stdout
(``| head``) end it cleanly; more messages than ``-n`` that were already
on their way are given back to nsqd at once (REQ without delay), and near
the end RDY shrinks to the messages still to print, so that with one nsqd
none is delivered beyond ``-n``."""
from __future__ import annotations

import argparse
import random
import threading
from typing import Any

from msgengine.cli.app import EXIT_OK, CliError, add_common_options
from msgengine.cli.output import MessageWriter

from nsq.cli import addresses
from nsq.errors import InvalidArgumentError
from nsq.message import Message
from nsq.names import check_channel, check_topic
from nsq.reader import Reader

EXAMPLE = """example:
  nsqfast tail events --nsqd-tcp-address 127.0.0.1:4150 -n 10
  nsqfast tail events --lookupd-http-address 127.0.0.1:4161 --json | jq .body

With --json each line is {"id", "attempts", "timestamp" (ns since the epoch),
"body", "body_encoding"}: the body is text when it is UTF-8, else base64."""

DEFAULT_MAX_IN_FLIGHT = 200


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "tail", help="print a topic's messages as they arrive",
        description="Consume a topic on a channel (an ephemeral one of its own by default) and print every message.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument("--channel", help="the channel to consume on (default: tail<random>#ephemeral)")
    parser.add_argument("--nsqd-tcp-address", action="append", default=[], metavar="HOST:PORT",
                        help="an nsqd to consume from (repeatable)")
    parser.add_argument("--lookupd-http-address", action="append", default=[], metavar="HOST:PORT",
                        help="an nsqlookupd to discover the topic's nsqd with (repeatable)")
    parser.add_argument("-n", "--count", type=int, default=0, metavar="N",
                        help="exit after N messages (default: run until interrupted)")
    parser.add_argument("--json", action="store_true", help="print a JSON object per message instead of the body")
    parser.add_argument("--max-in-flight", type=int, default=DEFAULT_MAX_IN_FLIGHT, metavar="N",
                        help="messages nsqd may send ahead (default: %(default)s, or N when -n N is smaller)")
    parser.add_argument("--lookupd-poll-interval", type=float, default=15.0, metavar="SECONDS",
                        help="how often to ask nsqlookupd for new nsqd (default: %(default)s)")
    add_common_options(parser)
    parser.set_defaults(run=run, prog=parser.prog)


class Printer:
    """The Reader's handler: print, then FIN; stop after ``limit`` messages."""

    def __init__(self, output: MessageWriter, limit: int) -> None:
        self.output = output
        self.limit = limit
        self.printed = 0
        self.reader: Reader | None = None
        self.broken_pipe = False
        self._lock = threading.Lock()  # (one handler at a time; this guards the count against close races)

    def __call__(self, message: Message) -> bool:
        with self._lock:
            if self.broken_pipe or (self.limit and self.printed >= self.limit):
                message.requeue(backoff=False, delay=0)  # not printed: give it back at once
                return False
            try:
                self.output.write(message.body, {
                    "id": message.id.decode("ascii", "replace") if isinstance(message.id, bytes) else message.id,
                    "attempts": message.attempts,
                    "timestamp": message.timestamp,
                })
            except BrokenPipeError:
                self.broken_pipe = True
                self._stop()
                message.requeue(backoff=False, delay=0)
                return False
            self.printed += 1
            if self.limit:
                self._near_the_end(self.limit - self.printed)
            return True

    def _near_the_end(self, remaining: int) -> None:
        """Ask nsqd for no more than the messages still to print (RDY before
        this message's FIN): with one nsqd, none is delivered beyond -n."""
        reader = self.reader
        if reader is None:
            return
        if remaining <= 0:
            self._stop()
        elif remaining < reader.max_in_flight:
            reader.set_max_in_flight(remaining)

    def _stop(self) -> None:
        if self.reader is not None:
            # RDY 0 first, so that nsqd sends nothing more after the message being finished now
            # (one already on its way, from another nsqd, is left to nsqd's message timeout)
            self.reader.set_max_in_flight(0)
            self.reader.close()  # (from a handler: starts the close and returns)


def run(args: argparse.Namespace) -> int:
    try:
        topic = check_topic(args.topic)
        channel = check_channel(args.channel) if args.channel else "tail%06d#ephemeral" % random.randrange(1000000)
    except InvalidArgumentError as exc:
        raise CliError(str(exc)) from None
    if args.count < 0 or args.max_in_flight < 1 or args.connect_timeout <= 0:
        raise CliError("-n must be >= 0, --max-in-flight >= 1 and --connect-timeout > 0")
    nsqd = [addresses.tcp_address(a) for a in args.nsqd_tcp_address]
    lookupd = [addresses.http_url(a, "--lookupd-http-address") for a in args.lookupd_http_address]
    if not nsqd and not lookupd:
        raise CliError("give at least one --nsqd-tcp-address or --lookupd-http-address")
    for address in nsqd:  # fail now, with the reason, rather than retry an unreachable server forever
        addresses.check_nsqd(address, args.connect_timeout)
    for url in lookupd:
        addresses.check_http(url, args.connect_timeout, "nsqlookupd")

    printer = Printer(MessageWriter(args.json), args.count)
    max_in_flight = min(args.max_in_flight, args.count) if args.count else args.max_in_flight
    reader = Reader(
        topic, channel, printer,
        nsqd_tcp_addresses=nsqd, lookupd_http_addresses=lookupd,
        max_in_flight=max_in_flight, max_tries=0,  # (0: never give up on a message unseen)
        lookupd_poll_interval=args.lookupd_poll_interval,
        lookupd_connect_timeout=args.connect_timeout, lookupd_request_timeout=args.connect_timeout,
        timeout=args.connect_timeout, close_timeout=5.0,
    )
    printer.reader = reader
    try:
        reader.run()  # until -n is reached, the pipe breaks, or Ctrl-C / SIGTERM (a graceful close)
    except KeyboardInterrupt:  # (one that came just outside run()'s own handling: close the same way)
        reader.close()
    if printer.broken_pipe:
        raise BrokenPipeError
    return EXIT_OK
