"""pynsq's ``nsq.deflate_socket``: ``DeflateSocket``, a socket whose reads are
inflated (raw DEFLATE, as nsqd's ``--deflate``), and ``DeflateEncoder``, which
deflates what is to be written to it, on msgengine.transport's DeflateStream
(the codec nsqfast's connections use). ``import nsq`` does not load it."""
from __future__ import annotations

from typing import Any

from msgengine.transport import DeflateStream

from nsq.compressed_socket import CompressedSocket, StreamDecoder, StreamEncoder

# the inflating side has no level; a valid one for the stream object it runs on
_ANY_LEVEL = 6


class DeflateSocket(CompressedSocket):
    """``socket`` with its reads inflated (see CompressedSocket). ``level`` is
    accepted as pynsq's is, and unused: only the encoder compresses."""

    def __init__(self, socket: Any, level: int) -> None:
        super().__init__(socket, StreamDecoder(lambda inner: DeflateStream(inner, _ANY_LEVEL)))


class DeflateEncoder(StreamEncoder):
    """``encode(data)`` deflates ``data`` at ``level`` (1 to 9) and flushes
    (Z_SYNC_FLUSH), continuing one stream across calls."""

    def __init__(self, level: int) -> None:
        super().__init__(lambda inner: DeflateStream(inner, level))
