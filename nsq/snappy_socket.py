"""pynsq's ``nsq.snappy_socket``: ``SnappySocket``, a socket whose reads are
decompressed from the snappy framing format (nsqd's ``--snappy``), and
``SnappyEncoder``, which compresses what is to be written to it, on
msgengine.transport's SnappyStream (the codec nsqfast's connections use).

As pynsq's, importing it without python-snappy installed raises ImportError
(``import nsq`` does not load it, nor python-snappy until a socket or an
encoding needs it)."""
from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from msgengine.transport import SnappyStream

from nsq.compressed_socket import CompressedSocket, StreamDecoder, StreamEncoder

if find_spec("snappy") is None:
    raise ImportError("nsq.snappy_socket needs the python-snappy package (pip install python-snappy)", name="snappy")


class SnappySocket(CompressedSocket):
    """``socket`` with its reads decompressed (see CompressedSocket)."""

    def __init__(self, socket: Any) -> None:
        super().__init__(socket, StreamDecoder(SnappyStream))


class SnappyEncoder:
    """``SnappyEncoder.encode(data)``: ``data`` as one snappy stream of its own
    (the stream identifier, then its frames)."""

    @staticmethod
    def encode(data: bytes) -> bytes:
        return StreamEncoder(SnappyStream).encode(data)
