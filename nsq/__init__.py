"""nsqfast: a fast NSQ client, importable as `nsq` with pynsq's public names."""
from __future__ import annotations

from typing import TYPE_CHECKING

from msgengine.lazy import LazyNames

from nsq.errors import (
    ConnectionClosedError,
    Error,
    IntegrityError,
    PartialPublishError,
    ProtocolError,
    SendError,
)
from nsq.run import run  # (eager: the name is also its module's, which importing would bind here)
from nsq.version import __version__

if TYPE_CHECKING:  # (at run time these load when first used: _HOMES below)
    from nsq import codec, protocol
    from nsq.backoff_timer import BackoffTimer
    from nsq.conn import AsyncConn, Connection
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
    from nsq.sync import SyncConn
    from nsq.writer import Writer

#: where each name loaded at its first use lives (import time, issue 49); the errors, run and
#: the version above load with the package
_HOMES = {
    "nsq.reader": ("Reader",),
    "nsq.writer": ("Writer",),
    "nsq.legacy_reader": ("LegacyReader",),
    "nsq.conn": ("AsyncConn", "Connection"),
    "nsq.sync": ("SyncConn",),
    "nsq.message": ("Message",),
    "nsq.backoff_timer": ("BackoffTimer",),
    "nsq.protocol": ("FRAME_TYPE_ERROR", "FRAME_TYPE_MESSAGE", "FRAME_TYPE_RESPONSE", "auth", "decode_message", "dpub",
                     "finish", "identify", "mpub", "nop", "pub", "ready", "requeue", "subscribe", "touch",
                     "unpack_response", "valid_channel_name", "valid_topic_name"),
}
#: the sub-modules shown as attributes (those importing nsq used to load); and pynsq's helper
#: modules, which nsqfast itself does not use, absent when the library they need is missing
#: (nsq.snappy_socket without python-snappy, as on pynsq)
_SUBMODULES = ("backoff_timer", "client", "codec", "config", "conn", "errors", "hooks", "legacy_reader", "lookupd",
               "loops", "message", "names", "protocol", "publishing", "rdy", "reader", "sansio", "subscription",
               "sync", "version", "writer")
_ON_DEMAND = ("_compat", "deflate_socket", "snappy_socket")
_lazy = LazyNames(globals(), {name: home for home, names in _HOMES.items() for name in names}, _SUBMODULES,
                  _ON_DEMAND)
__dir__ = _lazy.dir

if not TYPE_CHECKING:  # (so that mypy still reports a misspelt nsq.<name>)
    __getattr__ = _lazy.getattr

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
