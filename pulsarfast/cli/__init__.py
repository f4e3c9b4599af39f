"""``pulsarfast``: command-line tools for Pulsar with the feel of
``nsqfast``'s: ``tail`` (print a topic's messages) and ``pub`` (publish
lines). This module describes the tool, one module per subcommand;
``msgengine.cli`` builds the command line and runs it (errors as one line,
signals, exit statuses)."""
from __future__ import annotations

from msgengine.cli.tool import Tool

from pulsarfast.base.results import PulsarException
from pulsarfast.cli import pub, tail
from pulsarfast.version import __version__

EXAMPLE = """example:
  seq 1000 | pulsarfast pub events --service-url pulsar://127.0.0.1:6650
  pulsarfast tail events --service-url pulsar://127.0.0.1:6650 --position earliest -n 3

'pulsarfast COMMAND --help' tells more about each command."""

TOOL = Tool(prog="pulsarfast", description="Command-line tools for Apache Pulsar.", version=__version__,
            epilog=EXAMPLE, commands=(tail, pub), known_errors=(PulsarException,))

#: the argparse parser of the command line
build_parser = TOOL.build_parser
#: main(argv=None) -> exit status
main = TOOL.main
#: the ``pulsarfast`` console script
console_main = TOOL.console_main
