"""The skeleton of a command-line tool (``nsqfast``, ``pulsarfast``): its
parser, with ``--version`` and one subcommand per module, its ``main`` and its
console script. A client describes its tool once as a ``Tool``; ``app`` runs
the command (errors as one line, signals, exit statuses)."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from msgengine.cli.app import run_main

__all__ = ["Subcommand", "Tool"]


class Subcommand(Protocol):
    """A subcommand's module: ``register`` adds its parser to the tool's
    subparsers and sets ``run`` (and ``prog``) as the parser's defaults."""

    def register(self, commands: Any) -> None: ...


@dataclass(frozen=True)
class Tool:
    """One command-line tool: what its parser says and which errors of its
    library are reported as one line (exit status 1) rather than as a bug."""

    prog: str
    description: str
    version: str
    #: the epilog of ``--help`` (examples), printed as written
    epilog: str
    commands: tuple[Subcommand, ...]
    known_errors: tuple[type[BaseException], ...] = ()

    def build_parser(self) -> argparse.ArgumentParser:
        """The tool's parser: ``--version`` and the subcommands, in order."""
        parser = argparse.ArgumentParser(
            prog=self.prog, description=self.description,
            epilog=self.epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--version", action="version", version="%s %s" % (self.prog, self.version))
        commands = parser.add_subparsers(title="commands", metavar="COMMAND")
        for command in self.commands:
            command.register(commands)
        return parser

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Run the command argv (sys.argv[1:] when None) names; return the exit status."""
        return run_main(self.build_parser(), argv, known_errors=self.known_errors)

    def console_main(self) -> None:
        """The console script: main() on sys.argv, then exit with its status."""
        sys.exit(self.main())
