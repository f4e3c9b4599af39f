"""The socket wrapper behind pynsq's ``SnappySocket`` and ``DeflateSocket``
(``nsq.snappy_socket``, ``nsq.deflate_socket``): reads from the wrapped socket
come back decompressed, writes pass through as they are (the caller compresses
them with the module's encoder), and every other attribute is the socket's.

The codecs are msgengine.transport's ``SnappyStream``/``DeflateStream``, the
ones a Connection runs on: this module feeds them one socket read at a time
and collects what they write, so it only adapts them to pynsq's socket-shaped
API. nsqfast's own connections do not use it (``import nsq`` does not load it).
"""
from __future__ import annotations

import errno
from typing import Any, Callable


class _Pipe:
    """The inner stream a codec stream runs on here: ``recv()`` hands it the one
    chunk put in ``chunk`` (then b"", as at the end of a stream), and what it
    ``send()``s is kept in ``sent``."""

    def __init__(self) -> None:
        self.chunk = b""
        self.sent: list[bytes] = []

    def recv(self) -> bytes:
        chunk, self.chunk = self.chunk, b""
        return chunk

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    def settimeout(self, timeout: float | None) -> None:
        pass

    def close(self) -> None:
        pass


class StreamDecoder:
    """Decompresses a stream fed in pieces with a codec stream's ``recv()``:
    ``decode(chunk)`` returns what the chunk completes (b"" while a frame is
    still partial)."""

    def __init__(self, make_stream: Callable[[Any], Any]) -> None:
        self._pipe = _Pipe()
        self._stream = make_stream(self._pipe)

    def decode(self, chunk: bytes) -> bytes:
        self._pipe.chunk = bytes(chunk)
        return bytes(self._stream.recv())


class StreamEncoder:
    """Compresses with a codec stream's ``send()``: ``encode(data)`` returns
    the bytes the stream would have written for ``data``."""

    def __init__(self, make_stream: Callable[[Any], Any]) -> None:
        self._pipe = _Pipe()
        self._stream = make_stream(self._pipe)

    def encode(self, data: bytes) -> bytes:
        self._stream.send(data)
        sent = self._pipe.sent
        out = b"".join(sent)
        sent.clear()
        return out


class CompressedSocket:
    """A socket whose reads are decompressed with ``decoder`` (pynsq's API).

    ``recv(size)``/``read(size)`` read up to ``size`` compressed bytes and
    return all they decompress to (possibly more than ``size`` bytes); a read
    that completes no frame raises ``BlockingIOError`` (EWOULDBLOCK), so a
    non-blocking caller tries again later; at the end of the stream they
    return b"". ``bootstrap(data)`` decompresses bytes already read from the
    socket (the start of the compressed stream): the next read returns them
    first. ``send`` and every other attribute are the wrapped socket's.
    """

    def __init__(self, socket: Any, decoder: StreamDecoder) -> None:
        self._socket = socket  # (pynsq's name; its tests read it)
        self._decoder = decoder
        self._bootstrapped: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        sock = self.__dict__.get("_socket")
        if sock is None:
            raise AttributeError(name)
        return getattr(sock, name)

    def bootstrap(self, data: bytes) -> None:
        """Decompress ``data``, read ahead from the socket; the next read returns it."""
        if data:
            self._bootstrapped = self._decoder.decode(data)

    def recv(self, size: int) -> bytes:
        return self._read(size, self._socket.recv)

    def read(self, size: int) -> bytes:
        """As ``recv``, through the socket's ``read`` (an ``ssl.SSLSocket``'s)."""
        return self._read(size, self._socket.read)

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        """``recv`` into ``buffer`` (up to ``nbytes``, or its length); what does
        not fit is returned by the next read."""
        size = nbytes or len(buffer)
        data = self.recv(size)
        if len(data) > size:
            self._bootstrapped = data[size:]
            data = data[:size]
        buffer[: len(data)] = data
        return len(data)

    def send(self, data: bytes) -> int:
        return self._socket.send(data)

    def _read(self, size: int, read: Callable[[int], bytes]) -> bytes:
        pending = self._bootstrapped
        if pending:
            self._bootstrapped = None
            return pending
        chunk = read(size)
        if not chunk:
            return chunk
        data = self._decoder.decode(chunk)
        if not data:
            raise BlockingIOError(errno.EWOULDBLOCK, "no complete compressed frame yet")
        return data
