"""How a command-line tool starts and ends: options every command has
(``--verbose``, ``--connect-timeout``), the library's logging kept off the
terminal unless asked for, SIGTERM handled as Ctrl-C, and every failure the
user can act on reported as ONE line on stderr with a non-zero exit status
(never a traceback, unless ``--verbose``). A closed stdout (``| head``) ends
the command quietly.

Exit statuses: 0 done, 1 failed (``CliError`` or a library error), 2 bad
usage (argparse), 130 interrupted where stopping early is a failure (a
publish that did not finish)."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Callable, Sequence

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

#: the function a subcommand registers with ``parser.set_defaults(run=...)``
Command = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A failure to report to the user as one line (the message says what to do)."""


def add_common_options(parser: argparse.ArgumentParser, connect_timeout: float = 5.0) -> None:
    """The options every subcommand has."""
    parser.add_argument(
        "--connect-timeout", type=float, default=connect_timeout, metavar="SECONDS",
        help="give up when a server does not answer within this time (default: %(default)s)",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0,
        help="show the client library's log on stderr (-vv: debug), and tracebacks",
    )


def one_line(text: object) -> str:
    """A message squeezed onto one line."""
    return " ".join(str(text).split()) or "unknown error"


def _configure_logging(verbose: int) -> None:
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
        logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        # A handler on the root logger keeps logging's last resort (warnings to stderr) quiet:
        # reconnect attempts and the like are the library's business, errors reach the user as one line.
        logging.basicConfig(handlers=[logging.NullHandler()])


def _sigterm_as_interrupt() -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's
    final flush does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def run_main(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    known_errors: tuple[type[BaseException], ...] = (),
) -> int:
    """Parse argv, run the chosen command, and turn its outcome into an exit status."""
    args = parser.parse_args(argv)
    command: Command | None = getattr(args, "run", None)
    if command is None:  # (no subcommand given)
        parser.print_help(sys.stderr)
        return 2
    verbose = getattr(args, "verbose", 0)
    _configure_logging(verbose)
    _sigterm_as_interrupt()
    prog = getattr(args, "prog", parser.prog)
    failures: tuple[type[BaseException], ...] = (CliError, OSError, *known_errors)
    try:
        status = command(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # the reader of our output went away (| head): nothing left to do
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except failures as exc:
        if verbose:
            logging.getLogger(prog).exception("failed")
        sys.stderr.write("%s: error: %s\n" % (prog, one_line(exc)))
        return EXIT_FAILED
    except Exception as exc:  # a bug: still one line, the traceback with --verbose
        if verbose:
            raise
        sys.stderr.write(
            "%s: internal error: %s: %s (run with --verbose for the traceback)\n"
            % (prog, type(exc).__name__, one_line(exc))
        )
        return EXIT_FAILED
