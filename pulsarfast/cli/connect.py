"""The options both pulsarfast commands take to reach a cluster
(``--service-url``, ``--token``, ``--connect-timeout``), and the ``Client``
made from them: the URL checked before anything connects, connections
bounded by the connect timeout."""
from __future__ import annotations

import argparse
import math
import os

from msgengine.cli.app import CliError, add_common_options, one_line

from pulsarfast.base.results import PulsarException
from pulsarfast.base.topics import parse_service_url
from pulsarfast.client import Client
from pulsarfast.endpoints.auth import AuthenticationToken

DEFAULT_SERVICE_URL = "pulsar://localhost:6650"


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-u", "--service-url", default=os.environ.get("PULSAR_SERVICE_URL", DEFAULT_SERVICE_URL),
                        metavar="URL", help="pulsar://host:port or pulsar+ssl://host:port "
                        "(default: $PULSAR_SERVICE_URL or %s)" % DEFAULT_SERVICE_URL)
    parser.add_argument("--token", default=os.environ.get("PULSAR_TOKEN"),
                        help="an authentication token (default: $PULSAR_TOKEN)")
    add_common_options(parser)


def make_client(args: argparse.Namespace) -> Client:
    """A Client for the options; CliError when the URL or a timeout is not usable."""
    if args.connect_timeout <= 0:
        raise CliError("--connect-timeout must be > 0")
    try:
        parse_service_url(args.service_url)
        return Client(
            args.service_url,
            authentication=AuthenticationToken(args.token) if args.token else None,
            connection_timeout_ms=max(1, int(args.connect_timeout * 1000)),
            # lookups and creating a producer or consumer: bounded too, with room for a broker that is busy
            operation_timeout_seconds=max(1, math.ceil(args.connect_timeout * 3)),
        )
    except (PulsarException, ValueError) as exc:
        raise CliError("--service-url %r: %s" % (args.service_url, one_line(exc))) from None
