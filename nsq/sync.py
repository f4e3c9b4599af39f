"""pynsq's SyncConn: a plain blocking socket to one nsqd, for programs that
build commands by hand with nsq.protocol and read raw responses.
"""
from __future__ import annotations

import socket
import struct

from nsq import codec
from nsq.errors import ConnectionClosedError


class SyncConn:
    """Blocking connection: connect(), send(bytes), read_response() -> frame bytes."""

    def __init__(self, timeout: float = 1.0) -> None:
        self.buffer = b""
        self.timeout = timeout
        self.s: socket.socket | None = None

    def connect(self, host: str, port: int) -> None:
        assert isinstance(host, str), "host must be a string"
        assert isinstance(port, int), "port must be an int"
        self.s = socket.create_connection((host, port), timeout=self.timeout)
        self.s.sendall(codec.MAGIC_V2)

    def send(self, data: bytes) -> None:
        assert self.s is not None, "not connected"
        self.s.sendall(data)

    def _readn(self, size: int) -> bytes:
        assert self.s is not None, "not connected"
        while len(self.buffer) < size:
            chunk = self.s.recv(max(4096, size - len(self.buffer)))
            if not chunk:
                raise ConnectionClosedError("failed to read %d" % size)
            self.buffer += chunk
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def read_response(self) -> bytes:
        """One frame without its size prefix: frame type + data (see nsq.unpack_response)."""
        size = struct.unpack(">l", self._readn(4))[0]
        return self._readn(size)

    def close(self) -> None:
        if self.s is not None:
            self.s.close()
            self.s = None
