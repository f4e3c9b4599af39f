"""``nsqfast stat``: the depth, in-flight, deferred, requeue and timeout
counts and the message rate of each topic and channel (nsq's ``nsq_stat``),
refreshed every ``--interval`` seconds; ``--count N`` stops after N
refreshes. Rates are messages per second between two refreshes (from
nsqd's ``message_count``), so the first refresh has none."""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import Any

from msgengine.cli.app import EXIT_OK, CliError, add_common_options

from nsq.cli import addresses
from nsq.cli.stats_source import Counts, Key, StatsSource

EXAMPLE = """example:
  nsqfast stat --nsqd-http-address 127.0.0.1:4151 --topic events --count 1
  nsqfast stat --lookupd-http-address 127.0.0.1:4161 --interval 5

Columns: DEPTH (MEM + DISK) messages waiting, IN-FLT sent and not yet finished,
DEFER deferred, REQ requeued and T-O timed out since nsqd started, MSGS every
message so far, MSGS/S the rate since the previous refresh; a topic's own row
(no /channel) counts what waits on the topic for its first channel."""

COLUMNS = ("TOPIC/CHANNEL", "DEPTH", "MEM", "DISK", "IN-FLT", "DEFER", "REQ", "T-O", "MSGS", "MSGS/S", "CLIENTS")


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "stat", help="show depths, counts and rates of topics and channels",
        description="Poll nsqd's /stats and print every topic's and channel's numbers, refreshed every --interval.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nsqd-http-address", action="append", default=[], metavar="HOST:PORT",
                        help="an nsqd's HTTP address (repeatable)")
    parser.add_argument("--lookupd-http-address", action="append", default=[], metavar="HOST:PORT",
                        help="an nsqlookupd whose nsqd to ask (repeatable)")
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--channel", help="only this channel (of --topic, or of every topic)")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between refreshes (default: %(default)s)")
    parser.add_argument("--count", type=int, default=0, metavar="N",
                        help="exit after N refreshes (default: run until interrupted)")
    parser.add_argument("--json", action="store_true", help="one JSON object per topic/channel and refresh")
    add_common_options(parser)
    parser.set_defaults(run=run, prog=parser.prog)


def _rate(key: Key, counts: Counts, now: float, previous: dict[Key, tuple[int, float]]) -> float | None:
    before = previous.get(key)
    if before is None or counts.messages < before[0] or now <= before[1]:
        return None  # (first sight, or nsqd restarted and its counters did too)
    return (counts.messages - before[0]) / (now - before[1])


def _row(key: Key, counts: Counts, rate: float | None) -> list[str]:
    topic, channel = key
    per_channel = channel is not None
    cells = [
        topic if channel is None else "%s/%s" % (topic, channel),
        str(counts.depth), str(counts.memory), str(counts.disk),
        str(counts.in_flight) if per_channel else "",
        str(counts.deferred) if per_channel else "",
        str(counts.requeued) if per_channel else "",
        str(counts.timed_out) if per_channel else "",
        str(counts.messages),
        "-" if rate is None else "%.1f" % rate,
        str(counts.clients) if per_channel else "",
    ]
    return cells


def render_table(stamp: str, rows: list[list[str]], nodes: int) -> str:
    table = [list(COLUMNS)] + rows
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["%s  %d nsqd" % (stamp, nodes)]
    for r in table:
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
    if not rows:
        lines.append("(no topics%s)" % (" matching the filters" if nodes else ""))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0 or args.count < 0 or args.connect_timeout <= 0:
        raise CliError("--interval and --connect-timeout must be > 0 and --count >= 0")
    nsqd = [addresses.http_url(a, "--nsqd-http-address") for a in args.nsqd_http_address]
    lookupd = [addresses.http_url(a, "--lookupd-http-address") for a in args.lookupd_http_address]
    if not nsqd and not lookupd:
        raise CliError("give at least one --nsqd-http-address or --lookupd-http-address")
    source = StatsSource(nsqd, lookupd, args.connect_timeout, topic=args.topic, channel=args.channel)
    previous: dict[Key, tuple[int, float]] = {}
    refreshes = 0
    try:
        while True:
            snapshot = source.fetch()
            counts, problems = snapshot.counts, snapshot.problems
            now = time.monotonic()
            if problems and refreshes == 0:
                raise CliError(problems[0])  # (at start: say it; later, a restarting nsqd is only a warning)
            for problem in problems:
                sys.stderr.write("%s: warning: %s\n" % (args.prog, problem))
            stamp = datetime.datetime.now().isoformat(timespec="seconds")
            keys = sorted(counts, key=lambda k: (k[0], k[1] is not None, k[1] or ""))
            if args.channel is not None:
                keys = [k for k in keys if k[1] is not None]
            rates = {k: _rate(k, counts[k], now, previous) for k in keys}
            if args.json:
                for key in keys:
                    c = counts[key]
                    record = {"time": stamp, "topic": key[0], "channel": key[1], "depth": c.depth,
                              "memory": c.memory, "disk": c.disk, "messages": c.messages, "rate": rates[key]}
                    if key[1] is not None:
                        record.update(in_flight=c.in_flight, deferred=c.deferred, requeued=c.requeued,
                                      timed_out=c.timed_out, clients=c.clients)
                    sys.stdout.write(json.dumps(record) + "\n")
            else:
                sys.stdout.write(render_table(stamp, [_row(k, counts[k], rates[k]) for k in keys], snapshot.nodes))
            sys.stdout.flush()
            previous = {k: (counts[k].messages, now) for k in keys}
            refreshes += 1
            if args.count and refreshes >= args.count:
                return EXIT_OK
            time.sleep(args.interval)
    except KeyboardInterrupt:  # the normal way to stop watching
        return EXIT_OK
