"""The engine's exceptions, under one root, ``EngineError``.

A client package translates the ones a user can meet into its own root
where it validates settings (``nsq.config``); the runtime's debugging
errors (``HubThreadError``, ``HubStateError``) reach users as they are, and
a client package re-exports them under its own ``errors`` module.
"""
from __future__ import annotations

import builtins


class EngineError(Exception):
    """Root of every exception raised by msgengine."""


class EngineConfigError(EngineError, ValueError):
    """A setting the engine cannot use (backend name, TLS options, a missing codec library)."""


class HubThreadError(EngineError, AssertionError):
    """A gevent primitive was used from an OS thread other than its hub's
    (raised only with the NSQ_CHECK_HUB_THREAD=1 debug switch)."""


class HubStateError(EngineError):
    """The gevent hub can no longer schedule (its loop's count of active watchers went wrong)."""


class CallTimeoutError(EngineError, builtins.TimeoutError):
    """A call handed to the runtime from another OS thread did not finish in time."""


class StreamClosedError(EngineError, ConnectionError):
    """A stream or driver is closed, or closed while a caller waited on it."""
