"""``nsqfast``: NSQ's command-line tools on this client: ``tail`` (messages
of a topic, like ``nsq_tail``), ``pub`` (lines to a topic, like ``to_nsq``)
and ``stat`` (channel depths and rates, like ``nsq_stat``). This module
builds the command line from one module per subcommand; ``msgengine.cli``
runs it (errors as one line, signals, exit statuses)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from msgengine.cli.app import run_main

from ..errors import Error
from ..version import __version__
from . import pub, stat, tail

EXAMPLE = """example:
  seq 1000 | nsqfast pub events --nsqd-tcp-address 127.0.0.1:4150
  nsqfast tail events --nsqd-tcp-address 127.0.0.1:4150 -n 3
  nsqfast stat --nsqd-http-address 127.0.0.1:4151 --topic events

'nsqfast COMMAND --help' tells more about each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nsqfast", description="Command-line tools for NSQ.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="nsqfast %s" % __version__)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in (tail, pub, stat):
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), argv, known_errors=(Error,))


def console_main() -> None:
    """The ``nsqfast`` console script."""
    sys.exit(main())
