"""``pulsarfast``: command-line tools for Pulsar with the feel of
``nsqfast``'s: ``tail`` (print a topic's messages) and ``pub`` (publish
lines). This module builds the command line from one module per subcommand;
``msgengine.cli`` runs it (errors as one line, signals, exit statuses)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from msgengine.cli.app import run_main

from ..errors import PulsarException
from ..version import __version__
from . import pub, tail

EXAMPLE = """example:
  seq 1000 | pulsarfast pub events --service-url pulsar://127.0.0.1:6650
  pulsarfast tail events --service-url pulsar://127.0.0.1:6650 --position earliest -n 3

'pulsarfast COMMAND --help' tells more about each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pulsarfast", description="Command-line tools for Apache Pulsar.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="pulsarfast %s" % __version__)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in (tail, pub):
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), argv, known_errors=(PulsarException,))


def console_main() -> None:
    """The ``pulsarfast`` console script."""
    sys.exit(main())
