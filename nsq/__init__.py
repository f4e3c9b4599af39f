"""nsqfast: a fast NSQ client, importable as `nsq` with pynsq's public names."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nsq import codec, protocol
from nsq.backoff_timer import BackoffTimer
from nsq.conn import AsyncConn, Connection
from nsq.errors import (
    ConnectionClosedError,
    Error,
    IntegrityError,
    PartialPublishError,
    ProtocolError,
    SendError,
)
from nsq.legacy_reader import LegacyReader
from nsq.message import Message
from nsq.protocol import (
    FRAME_TYPE_ERROR,
    FRAME_TYPE_MESSAGE,
    FRAME_TYPE_RESPONSE,
    auth,
    decode_message,
    dpub,
    finish,
    identify,
    mpub,
    nop,
    pub,
    ready,
    requeue,
    subscribe,
    touch,
    unpack_response,
    valid_channel_name,
    valid_topic_name,
)
from nsq.reader import Reader
from nsq.run import run
from nsq.sync import SyncConn
from nsq.version import __version__
from nsq.writer import Writer

__author__ = "nsqfast developers"
__all__ = [
    "Reader",
    "Writer",
    "run",
    "BackoffTimer",
    "Message",
    "Error",
    "LegacyReader",
    "SyncConn",
    "AsyncConn",
    "unpack_response",
    "decode_message",
    "identify",
    "subscribe",
    "ready",
    "finish",
    "touch",
    "requeue",
    "nop",
    "pub",
    "mpub",
    "valid_topic_name",
    "valid_channel_name",
    "FRAME_TYPE_RESPONSE",
    "FRAME_TYPE_ERROR",
    "FRAME_TYPE_MESSAGE",
]

# pynsq's helper modules, loaded when first asked for (nsqfast itself does not use them)
_ON_DEMAND = ("_compat", "deflate_socket", "snappy_socket")

if not TYPE_CHECKING:  # (so that mypy still reports a misspelt nsq.<name>)

    def __getattr__(name: str) -> Any:
        if name in _ON_DEMAND:
            try:
                return importlib.import_module("." + name, __name__)
            except ImportError as exc:  # (nsq.snappy_socket without python-snappy: absent, as on pynsq)
                raise AttributeError("module 'nsq' has no attribute %r (%s)" % (name, exc)) from exc
        raise AttributeError("module 'nsq' has no attribute %r" % (name,))
