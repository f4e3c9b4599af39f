"""Where pulsarfast logs: the official ``LoggerLevel``, ``ConsoleLogger`` and
``FileLogger``, and what ``Client(logger=...)`` does with them.

pulsarfast logs through Python's ``logging``, on the ``pulsarfast`` logger
and its children (``pulsarfast.client``, ``pulsarfast.consuming.consumer``, ...).
Without a ``logger`` argument nothing is changed: those records propagate as
any library's do. With one, ``route_logs`` sends every record of the
``pulsarfast`` tree there, and only there:

* a ``logging.Logger``: the records go to it (its level and handlers decide,
  and it propagates them as it is configured to), as the official client
  hands its C++ library's logs to that logger;
* ``ConsoleLogger(level)``: to standard output, from ``level`` up;
* ``FileLogger(level, path)``: appended to the file, from ``level`` up.

As in the official client (whose C++ library keeps one logger for the whole
process), this is process-wide: the last Client created with a ``logger``
decides. ``reset_logs`` undoes it.
"""
from __future__ import annotations

import logging
import sys
from typing import Any

from pulsarfast.base.enums import OfficialEnum

#: the logger whose tree pulsarfast's modules log on
ROOT_LOGGER_NAME = "pulsarfast"


class LoggerLevel(OfficialEnum):
    """The official ``pulsar.LoggerLevel``."""

    Debug = 0
    Info = 1
    Warn = 2
    Error = 3


#: each LoggerLevel as a level of the logging module
LOGGING_LEVELS = {
    LoggerLevel.Debug: logging.DEBUG,
    LoggerLevel.Info: logging.INFO,
    LoggerLevel.Warn: logging.WARNING,
    LoggerLevel.Error: logging.ERROR,
}

#: the official message of Client(logger=...) for anything else
WRONG_LOGGER = "Logger is expected to be either None, logger.Logger, pulsar.ConsoleLogger or pulsar.FileLogger"


def check_level(value: Any) -> LoggerLevel:
    """log_level, which must be a LoggerLevel (ValueError, the official message, otherwise)."""
    if not isinstance(value, LoggerLevel):
        raise ValueError("Argument log_level is expected to be of type 'LoggerLevel' and not '%s'"
                         % type(value).__name__)
    return value


class ConsoleLogger:
    """Logs written on standard output, from ``log_level`` up (the official ``pulsar.ConsoleLogger``)."""

    def __init__(self, log_level: LoggerLevel = LoggerLevel.Info) -> None:
        self.log_level = check_level(log_level)


class FileLogger:
    """Logs appended to the file ``log_file``, from ``log_level`` up (the official ``pulsar.FileLogger``)."""

    def __init__(self, log_level: LoggerLevel, log_file: str) -> None:
        self.log_level = check_level(log_level)
        if not isinstance(log_file, str):
            raise ValueError("Argument log_file is expected to be of type 'str' and not '%s'"
                             % type(log_file).__name__)
        self.log_file = log_file


def logger_arg(_name: str, value: Any) -> Any:
    """Check of Client(logger=...): None, a logging.Logger, a ConsoleLogger or a FileLogger."""
    if value is not None and not isinstance(value, (logging.Logger, ConsoleLogger, FileLogger)):
        raise ValueError(WRONG_LOGGER)
    return value


class ForwardHandler(logging.Handler):
    """Hands each record to another logger (if that logger is enabled for its level)."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__(logging.NOTSET)
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


class Routing:
    """What route_logs changed on the pulsarfast logger (to undo it)."""

    def __init__(self) -> None:
        self.handler: logging.Handler | None = None
        self.propagate = True
        self.level = logging.NOTSET


_routing = Routing()


def _handler_for(logger: Any) -> tuple[logging.Handler, int] | None:
    """(the handler, the pulsarfast logger's level) for a Client's logger argument; None: the default."""
    if isinstance(logger, logging.Logger):
        if logger.name == ROOT_LOGGER_NAME or logger.name.startswith(ROOT_LOGGER_NAME + "."):
            return None  # (pulsarfast's own tree: that is where the records are already)
        return ForwardHandler(logger), logger.getEffectiveLevel()
    if isinstance(logger, ConsoleLogger):
        handler: logging.Handler = logging.StreamHandler(sys.stdout)
    elif isinstance(logger, FileLogger):
        handler = logging.FileHandler(logger.log_file, delay=True)
    else:
        raise ValueError(WRONG_LOGGER)
    level = LOGGING_LEVELS[logger.log_level]
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    return handler, level


def route_logs(logger: Any) -> None:
    """Sends the pulsarfast logger's records where a Client's ``logger`` argument says (process-wide;
    None leaves everything as it is)."""
    if logger is None:
        return
    chosen = _handler_for(logger)
    reset_logs()
    if chosen is None:
        return
    handler, level = chosen
    tree = logging.getLogger(ROOT_LOGGER_NAME)
    _routing.handler = handler
    _routing.propagate = tree.propagate
    _routing.level = tree.level
    tree.addHandler(handler)
    tree.propagate = False
    tree.setLevel(level)


def reset_logs() -> None:
    """Undoes route_logs: the pulsarfast logger as it was before."""
    handler = _routing.handler
    if handler is None:
        return
    tree = logging.getLogger(ROOT_LOGGER_NAME)
    tree.removeHandler(handler)
    tree.propagate = _routing.propagate
    tree.setLevel(_routing.level)
    handler.close()
    _routing.handler = None
