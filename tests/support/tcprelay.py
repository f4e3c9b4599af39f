"""A plain TCP relay on a fixed loopback port that can go away and come back.

``TcpRelay(target_port)`` listens on 127.0.0.1:<free port> and forwards each
connection to 127.0.0.1:target_port (two threads per connection). Unlike
``FaultProxy`` (whose ``refuse`` still accepts), ``down()`` closes the
listening socket and every relayed connection, so a TCP connect to the port
is refused, as when a host is gone; ``up()`` listens on the same port again.
``accepted`` counts the connections it relayed; ``open_connections()`` says
how many are open now. Threads are daemons; ``close()`` ends everything.
"""
from __future__ import annotations

import socket
import threading

from .ports import LOOPBACK

_CHUNK = 65536


class TcpRelay:
    def __init__(self, target_port: int, target_host: str = LOOPBACK) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener: socket.socket | None = None
        self.accepted = 0
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return "pulsar://%s:%d" % (LOOPBACK, self.port)

    def up(self) -> None:
        """Listen (on the same port as before, after down())."""
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((LOOPBACK, self.port))
            listener.listen(64)
            self.port = listener.getsockname()[1]
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="tcprelay-%d" % self.port, daemon=True).start()

    def down(self) -> None:
        """Stop listening and close every relayed connection: connecting is refused until up()."""
        with self._lock:
            listener, self._listener = self._listener, None
            pairs, self._pairs = self._pairs, []
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # (wakes the accept)
            except OSError:
                pass
            listener.close()
        for pair in pairs:
            for sock in pair:
                _close(sock)

    close = down

    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5.0)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self.accepted += 1
                pair = (client, server)
                self._pairs.append(pair)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink, pair), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pair: tuple[socket.socket, socket.socket]) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        for sock in pair:
            _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
