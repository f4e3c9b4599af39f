# Byte streams under a connection: plain TCP, TLS, and the snappy (framed) and
# deflate (raw) compression layers that nsqd switches to after IDENTIFY. Each
# offers send(bytes), recv() -> bytes-like (empty at EOF) and close().
from __future__ import annotations

import socket
import ssl
import zlib
from typing import Any, Mapping

from .errors import ConfigError

DEFAULT_READ_SIZE = 256 * 1024


class PlainStream:
    """A TCP socket; recv() reuses one buffer and returns a view valid until the next call."""

    def __init__(self, sock: socket.socket, read_size: int = DEFAULT_READ_SIZE) -> None:
        self.sock = sock
        self._buffer = bytearray(read_size)
        self._view = memoryview(self._buffer)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> memoryview:
        n = self.sock.recv_into(self._buffer)
        return self._view[:n]

    def recv_exact(self, size: int) -> bytes:
        """Read exactly size bytes (used while negotiating, so nothing is read ahead)."""
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise EOFError("connection closed after %d of %d bytes" % (len(chunks), size))
            chunks += chunk
        return bytes(chunks)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class SnappyStream:
    """nsqd's snappy mode: the framed snappy stream format in both directions."""

    def __init__(self, inner: PlainStream) -> None:
        import snappy

        self.inner = inner
        self._compressor = snappy.StreamCompressor()
        self._decompressor = snappy.StreamDecompressor()

    def send(self, data: bytes) -> None:
        self.inner.send(self._compressor.add_chunk(bytes(data)))

    def recv(self) -> bytes:
        while True:
            raw = self.inner.recv()
            if not raw:
                return b""
            out = self._decompressor.decompress(bytes(raw))
            if out:
                return out

    def settimeout(self, timeout: float | None) -> None:
        self.inner.settimeout(timeout)

    def close(self) -> None:
        self.inner.close()


class DeflateStream:
    """nsqd's deflate mode: raw DEFLATE (no zlib header) with a sync flush per write."""

    def __init__(self, inner: PlainStream, level: int) -> None:
        self.inner = inner
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)

    def send(self, data: bytes) -> None:
        compressor = self._compressor
        self.inner.send(compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH))

    def recv(self) -> bytes:
        while True:
            raw = self.inner.recv()
            if not raw:
                return b""
            out = self._decompressor.decompress(raw)
            if out:
                return out

    def settimeout(self, timeout: float | None) -> None:
        self.inner.settimeout(timeout)

    def close(self) -> None:
        self.inner.close()


_TLS_OPTION_KEYS = {"cert_reqs", "ca_certs", "certfile", "keyfile", "check_hostname", "ciphers", "ssl_version", "password"}


def make_ssl_context(tls_options: Mapping[str, Any] | ssl.SSLContext | None) -> ssl.SSLContext:
    """An SSLContext from pynsq's tls_options dict (or the context itself).

    Certificates and host names are verified unless the options turn it off
    explicitly (cert_reqs=ssl.CERT_NONE, or check_hostname=False).
    """
    if isinstance(tls_options, ssl.SSLContext):
        return tls_options
    options = dict(tls_options or {})
    unknown = set(options) - _TLS_OPTION_KEYS
    if unknown:
        raise ConfigError("unknown tls_options: %s" % ", ".join(sorted(unknown)))
    context = ssl.create_default_context(cafile=options.get("ca_certs"))
    cert_reqs = options.get("cert_reqs", ssl.CERT_REQUIRED)
    check_hostname = options.get("check_hostname", cert_reqs != ssl.CERT_NONE)
    if check_hostname and cert_reqs == ssl.CERT_NONE:
        raise ConfigError("tls_options: check_hostname needs cert_reqs other than CERT_NONE")
    context.check_hostname = False
    context.verify_mode = cert_reqs
    context.check_hostname = bool(check_hostname)
    if options.get("certfile"):
        context.load_cert_chain(options["certfile"], options.get("keyfile"), options.get("password"))
    if options.get("ciphers"):
        context.set_ciphers(options["ciphers"])
    return context
