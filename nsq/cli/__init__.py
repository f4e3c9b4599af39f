"""``nsqfast``: NSQ's command-line tools on this client: ``tail`` (messages
of a topic, like ``nsq_tail``), ``pub`` (lines to a topic, like ``to_nsq``)
and ``stat`` (channel depths and rates, like ``nsq_stat``). This module
describes the tool, one module per subcommand; ``msgengine.cli`` builds the
command line and runs it (errors as one line, signals, exit statuses)."""
from __future__ import annotations

from msgengine.cli.tool import Tool

from nsq.cli import pub, stat, tail
from nsq.errors import Error
from nsq.version import __version__

EXAMPLE = """example:
  seq 1000 | nsqfast pub events --nsqd-tcp-address 127.0.0.1:4150
  nsqfast tail events --nsqd-tcp-address 127.0.0.1:4150 -n 3
  nsqfast stat --nsqd-http-address 127.0.0.1:4151 --topic events

'nsqfast COMMAND --help' tells more about each command."""

TOOL = Tool(prog="nsqfast", description="Command-line tools for NSQ.", version=__version__, epilog=EXAMPLE,
            commands=(tail, pub, stat), known_errors=(Error,))

#: the argparse parser of the command line
build_parser = TOOL.build_parser
#: main(argv=None) -> exit status
main = TOOL.main
#: the ``nsqfast`` console script
console_main = TOOL.console_main
