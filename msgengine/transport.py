"""Byte streams under a connection: plain TCP, TLS, and the snappy (framed) and
deflate (raw) compression layers a protocol may switch to mid-stream (NSQ
does after IDENTIFY). Each
offers send(bytes), recv() -> bytes-like (empty at EOF), settimeout() and
close(); the two that sit directly on the socket (plain and TLS) also offer
recv_exact(n), which never reads past what it returns, for the handshake.
The plain stream also reads without waiting (poll_recv) and with a deadline
(recv_within), what a caller that reads its own answer needs.

Costs on the hot path: one recv syscall of up to read_size (256 KiB) per
recv() on every layer. TLS runs OpenSSL over in-memory BIOs, so a single
socket read brings in up to 256 KiB of records and recv() decrypts all of
them into one buffer (an SSLSocket would hand out one 16 KiB record per call
and, on gevent, go through gevent's Python-level SSL wrapper). Decompression
is C/Rust (zlib; python-snappy over cramjam).
"""
from __future__ import annotations

import _socket
import math
import os
import select
import socket
import ssl
import zlib
from typing import Any, Callable, Mapping

from msgengine.errors import EngineConfigError as ConfigError
from msgengine.runtime import DEFAULT_READ_SIZE, monotonic, os_lock
from msgengine.sockio import recv_nowait, send_nowait



def send_all(sock: Any, data: Any) -> None:
    """sock.sendall(data), cheaper on gevent: its sendall() asks the kernel for
    the send buffer's size on every call, so one send() goes first and only
    what it left (rare: a full buffer) goes through sendall()."""
    sent = sock.send(data)
    if sent < len(data):
        sock.sendall(memoryview(data)[sent:])


class _OnSocket:
    """settimeout() and close() for the streams that own the socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._owner_pid = os.getpid()

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def close(self) -> None:
        # shutdown() acts on the TCP connection that a forked child shares with
        # its parent; only the process that opened it may end it. Elsewhere
        # closing drops this process's descriptor and nothing else.
        if os.getpid() == self._owner_pid:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.sock.close()


class PlainStream(_OnSocket):
    """A TCP socket; recv() reuses one buffer and returns a view valid until the next call.

    The socket is an OS socket in blocking mode (threads) or a cooperative
    one (gevent's, non-blocking underneath, waiting in the hub). On an OS
    socket, a read or a send first tries the call that does not wait and keeps
    the GIL (``msgengine.sockio``), and only waits, letting the GIL go, when it
    has to: under threads, every release of the GIL while other threads want it
    costs the caller two context switches to get it back."""

    def __init__(self, sock: socket.socket, read_size: int = DEFAULT_READ_SIZE) -> None:
        super().__init__(sock)
        self._buffer = bytearray(read_size)
        self._view = memoryview(self._buffer)
        self._os_socket = isinstance(sock, _socket.socket)  # (gevent's socket wraps one, it is not one)
        self._poller: Any = None
        if self._os_socket:
            self._poller = select.poll()
            self._poller.register(sock.fileno(), select.POLLIN)

    def poll_recv(self, until: float) -> memoryview | None:
        """Reads that never wait, tried until ``until`` (monotonic): what arrived, or None."""
        sock = self.sock
        buffer = self._buffer
        if self._os_socket:
            while True:
                try:
                    return self._view[: sock.recv_into(buffer, 0, socket.MSG_DONTWAIT)]
                except BlockingIOError:
                    if monotonic() >= until:
                        return None
        sock.settimeout(0.0)  # (a cooperative socket's reads do not wait with a timeout of 0)
        try:
            while True:
                try:
                    return self._view[: sock.recv_into(buffer)]
                except BlockingIOError:
                    if monotonic() >= until:
                        return None
        finally:
            sock.settimeout(None)

    def recv_within(self, timeout: float) -> memoryview | None:
        """One read that waits at most ``timeout`` seconds: None when nothing came."""
        sock = self.sock
        if self._os_socket:
            n = recv_nowait(sock, self._buffer)
            if n >= 0:
                return self._view[:n]
            if not self._poller.poll(max(1, math.ceil(timeout * 1000))):
                return None
            return self._view[: sock.recv_into(self._buffer)]  # readable (or at its end): does not wait
        sock.settimeout(timeout)
        try:
            return self._view[: sock.recv_into(self._buffer)]
        except socket.timeout:
            return None
        finally:
            sock.settimeout(None)

    def send(self, data: bytes) -> None:
        sock = self.sock
        if self._os_socket:
            sent = send_nowait(sock, data)
            if sent < len(data):
                sock.sendall(memoryview(data)[sent:])
        else:
            send_all(sock, data)

    def recv(self) -> memoryview:
        if self._os_socket:
            n = recv_nowait(self.sock, self._buffer)
            if n >= 0:
                return self._view[:n]
        return self._view[: self.sock.recv_into(self._buffer)]

    def recv_exact(self, size: int) -> bytes:
        """Read exactly size bytes (used while negotiating, so nothing is read ahead)."""
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise EOFError("connection closed after %d of %d bytes" % (len(chunks), size))
            chunks += chunk
        return bytes(chunks)



class TLSStream(_OnSocket):
    """TLS client over a plain (OS or gevent) socket, through an ssl.SSLObject and memory BIOs.

    The socket I/O stays on the socket given (so it is cooperative on gevent
    without gevent.ssl); OpenSSL only ever sees memory. recv() reads up to
    read_size bytes of records in one syscall and decrypts all that are
    complete into one buffer, returning a view valid until the next call.

    One task may be in recv() while another is in send() (the connection's
    reader and writer). Their OpenSSL calls are serialised by a lock that is
    only ever held around memory-only work (never across socket I/O, so it
    cannot block a gevent hub); TLS bytes that OpenSSL produces while reading
    (a TLS 1.3 key update answer) leave with the next send().
    """

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        server_hostname: str | None,
        read_size: int = DEFAULT_READ_SIZE,
    ) -> None:
        super().__init__(sock)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._incoming, self._outgoing, server_side=False, server_hostname=server_hostname)
        self._raw = bytearray(read_size)
        self._raw_view = memoryview(self._raw)
        self._buffer = bytearray(read_size)
        self._view = memoryview(self._buffer)
        self._eof = False
        self._lock = os_lock()  # held only around non-blocking OpenSSL calls, never across a yield

    # -- handshake ------------------------------------------------------

    def handshake(self) -> None:
        """Run the TLS handshake; raises ssl.SSLError (e.g. SSLCertVerificationError) on failure."""
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._send_pending()
                if not self._fill():
                    raise ssl.SSLEOFError("the server closed the connection during the TLS handshake") from None
        self._send_pending()

    def version(self) -> str | None:
        return self.tls.version()

    def cipher(self) -> Any:
        return self.tls.cipher()

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self.tls.getpeercert(binary_form)

    # -- plumbing -------------------------------------------------------

    def _fill(self) -> bool:
        """One socket read into the incoming BIO; False at EOF."""
        n = self.sock.recv_into(self._raw)
        if not n:
            self._eof = True
            return False
        with self._lock:
            self._incoming.write(self._raw_view[:n])
        return True

    def _send_pending(self) -> None:
        if self._outgoing.pending:
            send_all(self.sock, self._outgoing.read())

    # -- stream API -----------------------------------------------------

    def send(self, data: bytes) -> None:
        tls = self.tls
        view = memoryview(data)
        total = len(view)
        with self._lock:
            done = tls.write(view)
            while done < total:  # not reached without SSL_MODE_ENABLE_PARTIAL_WRITE; kept for safety
                done += tls.write(view[done:])
            records = self._outgoing.read()
        send_all(self.sock, records)

    def recv(self) -> memoryview:
        view = self._view
        size = len(view)
        # (with a buffer, SSLObject.read returns a count, which typeshed does not say)
        read: Callable[[int, memoryview], int] = self.tls.read  # type: ignore[assignment]
        lock = self._lock
        n = 0
        while True:
            with lock:
                try:
                    while n < size:
                        got = read(size - n, view[n:])
                        if not got:  # close_notify from the server
                            self._eof = True
                            break
                        n += got
                except ssl.SSLWantReadError:
                    pass
            if n or self._eof:
                return view[:n]
            if not self._fill():  # EOF without close_notify: treated as EOF, as SSLSocket does
                return view[:0]

    def recv_exact(self, size: int) -> bytes:
        """Exactly size bytes of plaintext; what follows stays buffered for recv()."""
        chunks = bytearray()
        read = self.tls.read
        while len(chunks) < size:
            try:
                with self._lock:
                    data = read(size - len(chunks))
            except ssl.SSLWantReadError:
                if self._eof or not self._fill():
                    raise EOFError("connection closed after %d of %d bytes" % (len(chunks), size)) from None
                continue
            if not data:
                raise EOFError("connection closed after %d of %d bytes" % (len(chunks), size))
            chunks += data
        return bytes(chunks)



def import_snappy() -> Any:
    """python-snappy, or a ConfigError that says how to get it."""
    try:
        import snappy
    except ImportError as exc:
        raise ConfigError("snappy compression needs the python-snappy package (pip install python-snappy)") from exc
    if not hasattr(snappy, "StreamDecompressor"):
        raise ConfigError("the installed 'snappy' module is not python-snappy (no StreamDecompressor)")
    return snappy


class _Compressed:
    """A compression layer over another stream: recv() returns the next
    non-empty decompressed chunk (b"" at EOF); subclasses set _decompress."""

    inner: Any
    _decompress: Any

    def recv(self) -> bytes:
        decompress = self._decompress
        while True:
            raw = self.inner.recv()
            if not raw:
                return b""
            out = decompress(raw)
            if out:
                return out

    def settimeout(self, timeout: float | None) -> None:
        self.inner.settimeout(timeout)

    def close(self) -> None:
        self.inner.close()


class SnappyStream(_Compressed):
    """Snappy compression as NSQ uses it: the framed snappy stream format in both directions.

    python-snappy's stream classes (0.7: a short Python loop per 64 KiB chunk
    around cramjam's Rust codec, CRC-32C checked) decode at several GB/s, far
    from being the bottleneck.
    """

    def __init__(self, inner: Any) -> None:
        snappy = import_snappy()
        self.inner = inner
        self._compressor = snappy.StreamCompressor()
        decompress = snappy.StreamDecompressor().decompress
        self._decompress = lambda raw: decompress(bytes(raw))

    def send(self, data: bytes) -> None:
        self.inner.send(self._compressor.add_chunk(bytes(data)))


class DeflateStream(_Compressed):
    """Deflate compression as NSQ uses it: raw DEFLATE (no zlib header) with a sync flush per write."""

    def __init__(self, inner: Any, level: int) -> None:
        self.inner = inner
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._decompress = zlib.decompressobj(-zlib.MAX_WBITS).decompress

    def send(self, data: bytes) -> None:
        compressor = self._compressor
        self.inner.send(compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH))


# pynsq passes tls_options to ssl.wrap_socket / tornado's ssl_options_to_context:
# these are the keys those accept, plus check_hostname and password.
_TLS_OPTION_KEYS = {"cert_reqs", "ca_certs", "certfile", "keyfile", "check_hostname", "ciphers", "ssl_version", "password"}

# ssl_version values that pin one protocol version (pynsq's default was PROTOCOL_TLSv1_2).
_PINNED_VERSIONS = {
    getattr(ssl, name): version
    for name, version in (
        ("PROTOCOL_TLSv1", ssl.TLSVersion.TLSv1),
        ("PROTOCOL_TLSv1_1", ssl.TLSVersion.TLSv1_1),
        ("PROTOCOL_TLSv1_2", ssl.TLSVersion.TLSv1_2),
    )
    if hasattr(ssl, name)
}
_AUTO_VERSIONS = {getattr(ssl, name) for name in ("PROTOCOL_TLS", "PROTOCOL_TLS_CLIENT", "PROTOCOL_SSLv23") if hasattr(ssl, name)}


def make_ssl_context(tls_options: Mapping[str, Any] | ssl.SSLContext | None) -> ssl.SSLContext:
    """An SSLContext from pynsq's tls_options dict (or the context itself, used as is).

    Certificates and host names are verified (against ca_certs, else the
    system's CAs) unless the options turn it off explicitly: cert_reqs=
    ssl.CERT_NONE (which also turns off the host name check), or
    check_hostname=False. certfile/keyfile(/password) give a client
    certificate; ssl_version=ssl.PROTOCOL_TLSv1_2 pins that version.
    """
    if isinstance(tls_options, ssl.SSLContext):
        return tls_options
    if tls_options is not None and not isinstance(tls_options, Mapping):
        raise ConfigError("tls_options must be a dict or an ssl.SSLContext, not %s" % type(tls_options).__name__)
    options = dict(tls_options or {})
    unknown = set(options) - _TLS_OPTION_KEYS
    if unknown:
        raise ConfigError("unknown tls_options: %s" % ", ".join(sorted(unknown)))
    cert_reqs = options.get("cert_reqs", ssl.CERT_REQUIRED)
    if cert_reqs is None:
        cert_reqs = ssl.CERT_REQUIRED
    if cert_reqs not in (ssl.CERT_NONE, ssl.CERT_OPTIONAL, ssl.CERT_REQUIRED):
        raise ConfigError("tls_options: cert_reqs must be ssl.CERT_NONE, CERT_OPTIONAL or CERT_REQUIRED, not %r" % (cert_reqs,))
    check_hostname = options.get("check_hostname")
    if check_hostname is None:
        check_hostname = cert_reqs != ssl.CERT_NONE
    if check_hostname and cert_reqs == ssl.CERT_NONE:
        raise ConfigError("tls_options: check_hostname=True needs certificate verification (cert_reqs other than CERT_NONE)")
    try:
        context = ssl.create_default_context(cafile=options.get("ca_certs"))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("tls_options: cannot load ca_certs %r: %s" % (options.get("ca_certs"), exc)) from exc
    context.check_hostname = False
    context.verify_mode = ssl.VerifyMode(cert_reqs)
    context.check_hostname = bool(check_hostname)
    version = options.get("ssl_version")
    if version is not None and version not in _AUTO_VERSIONS:
        if version not in _PINNED_VERSIONS:
            raise ConfigError("tls_options: unsupported ssl_version %r" % (version,))
        pinned = _PINNED_VERSIONS[version]
        context.minimum_version = pinned
        context.maximum_version = pinned
    if options.get("certfile"):
        try:
            context.load_cert_chain(options["certfile"], options.get("keyfile"), options.get("password"))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("tls_options: cannot load the client certificate %r: %s" % (options["certfile"], exc)) from exc
    elif options.get("keyfile"):
        raise ConfigError("tls_options: keyfile given without certfile")
    if options.get("ciphers"):
        try:
            context.set_ciphers(options["ciphers"])
        except ssl.SSLError as exc:
            raise ConfigError("tls_options: bad ciphers %r: %s" % (options["ciphers"], exc)) from exc
    return context
