# Fault-injecting TCP relay for tests (threads, loopback only): sits between a client and a real
# server and can delay, stall, cut (FIN), reset (RST), reset mid-stream, refuse, or inject bytes;
# it can also keep what a client sent (``record_upstream``) for a test to read the commands.
from __future__ import annotations

import ipaddress
import os
import select
import socket
import struct
import threading
import time
from typing import List, Optional

__all__ = ["FaultProxy"]

_CHUNK = 65536
_POLL_MS = 20  # how often a stalled/held pump re-checks its state
_READ = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITE = select.POLLOUT | select.POLLHUP | select.POLLERR

UP = "upstream"  # client -> server
DOWN = "downstream"  # server -> client

_CUT = "cut"
_RESET = "reset"


def _require_loopback(host: str) -> None:
    for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
        if not ipaddress.ip_address(info[4][0]).is_loopback:
            raise ValueError(f"FaultProxy only relays to loopback addresses, not {host!r}")


def _unsent_bytes(sock: socket.socket) -> int:
    """Bytes still in the kernel send queue (Linux SIOCOUTQ); 0 where unsupported."""
    try:
        import fcntl
        import termios

        buf = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
        return struct.unpack("i", buf)[0]
    except (ImportError, OSError, AttributeError, ValueError):
        return 0


class _Stop(Exception):
    """Raised inside a pump when its connection has been told to end."""


class _Conn:
    """One relayed client<->server pair: two sockets, two pump threads, a wake pipe."""

    def __init__(self, proxy: "FaultProxy", client: socket.socket, server: socket.socket, cid: int):
        self.proxy = proxy
        self.id = cid
        self.sock = {UP: server, DOWN: client}  # destination socket of each direction
        self.src = {UP: client, DOWN: server}
        self.client = client
        self.server = server
        for s in (client, server):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lock = threading.Lock()
        self.send_lock = {UP: threading.Lock(), DOWN: threading.Lock()}
        self.action: Optional[str] = None  # _CUT / _RESET once the pair must end
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.alive_pumps = 2
        self.finished = threading.Event()
        self.closed = False
        # bytes left before a reset_after fires, per direction (None = not armed)
        self.reset_budget = {UP: None, DOWN: None}
        self.threads = [
            threading.Thread(target=self._pump, args=(UP,), name=f"faultproxy-{proxy.port}-{cid}-up", daemon=True),
            threading.Thread(target=self._pump, args=(DOWN,), name=f"faultproxy-{proxy.port}-{cid}-down", daemon=True),
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    # -- control (any thread)
    def end(self, action: str) -> None:
        with self.lock:
            if self.closed:
                return  # its fds are gone (and their numbers may be reused)
            if self.action is None:
                self.action = action
            try:
                os.write(self.wake_w, b"x")  # never drained: once ended, pumps always see it
            except OSError:
                pass

    def _check(self) -> None:
        if self.action is not None or self.proxy._closing:
            raise _Stop()

    def _wait(self, fd_events: list, timeout_ms: int) -> list:
        """poll() the given (fd, events) plus the wake pipe; raise _Stop when woken."""
        p = select.poll()
        for fd, ev in fd_events:
            p.register(fd, ev)
        p.register(self.wake_r, select.POLLIN)
        try:
            ready = p.poll(timeout_ms)
        except InterruptedError:
            ready = []
        self._check()
        return ready

    def _wait_not_held(self) -> None:
        while self.proxy._held:
            self._wait([], _POLL_MS)
        self._check()

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wait([], max(1, min(int(left * 1000), 200)))

    def send_all(self, direction: str, data: bytes, check_stop: bool = True) -> None:
        dst = self.sock[direction]
        view = memoryview(data)
        while view:
            try:
                n = dst.send(view)
                view = view[n:]
            except (BlockingIOError, InterruptedError):
                if check_stop:
                    self._wait([(dst.fileno(), _WRITE)], 200)
                else:
                    p = select.poll()
                    p.register(dst.fileno(), _WRITE)
                    p.poll(200)
                    if self.action is not None:
                        raise _Stop()

    # -- pumps
    def _pump(self, direction: str) -> None:
        src = self.src[direction]
        dst = self.sock[direction]
        proxy = self.proxy
        try:
            while True:
                self._wait_not_held()
                ready = self._wait([(src.fileno(), _READ)], 200)
                if not ready or all(fd == self.wake_r for fd, _ in ready):
                    continue
                try:
                    data = src.recv(_CHUNK)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    self.end(_RESET)  # the peer reset us: pass the reset on
                    return
                if not data:
                    # orderly EOF from src: pass a FIN on and let the other direction finish
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                delay = proxy._delay
                if delay > 0:
                    self._sleep(delay)
                self._wait_not_held()
                self._forward(direction, data)
        except _Stop:
            return
        except OSError:
            self.end(_RESET)
        except Exception as exc:  # keep threads quiet; surface through proxy.errors
            proxy.errors.append(exc)
            self.end(_RESET)
        finally:
            self._pump_done()

    def _forward(self, direction: str, data: bytes) -> None:
        proxy = self.proxy
        fire = False
        with self.lock:
            budget = self.reset_budget[direction]
            if budget is not None:
                if len(data) >= budget:
                    data = data[:budget]
                    fire = True
                    self.reset_budget[direction] = None
                else:
                    self.reset_budget[direction] = budget - len(data)
        if data:
            with self.send_lock[direction]:
                self._check()
                # counted before sending so a receiver that sees the bytes also sees the counter
                proxy._count(direction, len(data))
                if direction == UP:
                    proxy._record(self.id, data)
                try:
                    self.send_all(direction, data)
                except OSError:
                    self.end(_RESET)
                    raise _Stop()
        if fire:
            # let the forwarded prefix actually leave before the RST discards the send queue
            dst = self.sock[direction]
            deadline = time.monotonic() + 1.0
            while _unsent_bytes(dst) > 0 and time.monotonic() < deadline:
                time.sleep(0.002)
            proxy._reset_fired()
            self.end(_RESET)
            raise _Stop()

    def _pump_done(self) -> None:
        with self.lock:
            self.alive_pumps -= 1
            last = self.alive_pumps == 0
        if last:  # the other pump is gone too: nobody else touches the sockets now
            self._finalize()

    def _finalize(self) -> None:
        try:
            with self.send_lock[UP], self.send_lock[DOWN]:
                with self.lock:
                    self.closed = True
                if (self.action or _CUT) == _RESET:
                    self._close_reset()
                else:
                    self._close_fin()
        except Exception as exc:
            self.proxy.errors.append(exc)
        finally:
            with self.lock:
                self.closed = True
                for fd in (self.wake_r, self.wake_w):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self.proxy._forget(self)
            self.finished.set()

    def _close_reset(self) -> None:
        for s in (self.client, self.server):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            s.close()

    def _close_fin(self, linger: float = 0.25) -> None:
        """FIN both ways, then briefly drain until the peers close too: closing a socket with
        unread received data would make the kernel send RST instead of a clean FIN."""
        socks = [self.client, self.server]
        for s in socks:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        pending = {s.fileno(): s for s in socks if s.fileno() >= 0}
        deadline = time.monotonic() + linger
        p = select.poll()
        for fd in pending:
            p.register(fd, _READ)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ready = p.poll(max(1, int(left * 1000)))
            except InterruptedError:
                continue
            for fd, _ev in ready:
                s = pending.get(fd)
                if s is None:
                    continue
                try:
                    if s.recv(_CHUNK):
                        continue
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    pass
                p.unregister(fd)
                del pending[fd]
        for s in socks:
            s.close()


class FaultProxy:
    """TCP relay on 127.0.0.1:<free port> forwarding to ``target_host:target_port`` (loopback only).

    Modes (``set_delay``, ``hold``/``release``, ``refuse``, ``reset_after``) apply to current and
    future connections; ``cut``/``reset``/``inject_downstream`` act on current connections.
    """

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1",
                 connect_timeout: float = 5.0):
        _require_loopback(target_host)
        _require_loopback(listen_host)
        self.target_host = target_host
        self.target_port = int(target_port)
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._conns: List[_Conn] = []
        self._all_threads: List[threading.Thread] = []
        self._closing = False
        self._closed = False
        self._delay = 0.0
        self._held = False
        self._refuse = False
        self._reset_after: Optional[tuple] = None  # (n_bytes, direction, once)
        self._next_id = 0
        self.errors: list = []
        self.connections_accepted = 0
        self.connections_refused = 0
        self.resets_fired = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.bytes_injected = 0
        self._recorded: Optional[dict] = None  # connection id -> what its client sent, while recording
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((listen_host, 0))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"faultproxy-{self.port}-accept",
                                               daemon=True)
        self._accept_thread.start()

    # ------------------------------------------------------------------ info
    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def active_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def wait_for_connections(self, n: int = 1, timeout: float = 10.0) -> None:
        """Block until at least ``n`` connections have been accepted in total."""
        deadline = time.monotonic() + timeout
        while self.connections_accepted < n:
            if time.monotonic() >= deadline:
                raise AssertionError(f"proxy accepted {self.connections_accepted} connections, expected {n}")
            time.sleep(0.01)

    def __repr__(self) -> str:
        return (f"<FaultProxy {self.address} -> {self.target_host}:{self.target_port} "
                f"conns={self.active_connections} up={self.bytes_up} down={self.bytes_down}>")

    # ------------------------------------------------------------------ modes
    def set_target(self, host: str, port: int) -> None:
        """Relay FUTURE connections to another loopback target."""
        _require_loopback(host)
        self.target_host, self.target_port = host, int(port)

    def set_delay(self, seconds: float) -> None:
        """Delay each forwarded chunk by ``seconds`` (both directions, 0 to disable)."""
        self._delay = max(0.0, float(seconds))

    def hold(self) -> None:
        """Stall: keep connections open but forward nothing in either direction (until release())."""
        self._held = True

    def release(self) -> None:
        """End a hold(): everything held back is forwarded."""
        self._held = False

    def refuse(self, on: bool = True) -> None:
        """While on, new connections are accepted and immediately closed."""
        self._refuse = bool(on)

    def reset_after(self, n_bytes: Optional[int], direction: str = DOWN, once: bool = False) -> None:
        """Forward ``n_bytes`` more bytes in ``direction`` ("downstream": server->client, or "upstream")
        on each connection, then reset it (RST both ways). Applies to current connections (counted
        from now) and new ones (from their start). ``once=True`` disarms after the first reset;
        ``reset_after(None)`` disarms."""
        if direction not in (UP, DOWN):
            raise ValueError("direction must be 'downstream' or 'upstream'")
        with self._lock:
            if n_bytes is None:
                self._reset_after = None
                conns = list(self._conns)
                for c in conns:
                    with c.lock:
                        c.reset_budget = {UP: None, DOWN: None}
                return
            n = int(n_bytes)
            if n < 0:
                raise ValueError("n_bytes must be >= 0")
            self._reset_after = (n, direction, once)
            for c in self._conns:
                with c.lock:
                    c.reset_budget[direction] = n

    def _reset_fired(self) -> None:
        with self._lock:
            self.resets_fired += 1
            if self._reset_after is not None and self._reset_after[2]:
                self._reset_after = None
                for c in self._conns:
                    with c.lock:
                        c.reset_budget = {UP: None, DOWN: None}

    # ------------------------------------------------------------------ actions on current connections
    def _current(self) -> List[_Conn]:
        with self._lock:
            return list(self._conns)

    def _end_all(self, action: str, wait: bool, timeout: float = 5.0) -> int:
        conns = self._current()
        for c in conns:
            c.end(action)
        if wait:
            deadline = time.monotonic() + timeout
            for c in conns:
                c.finished.wait(max(0.0, deadline - time.monotonic()))
        return len(conns)

    def cut(self, wait: bool = True) -> int:
        """Close all current connections cleanly (FIN to both client and server). Returns how many."""
        return self._end_all(_CUT, wait)

    def reset(self, wait: bool = True) -> int:
        """Abort all current connections with RST (SO_LINGER 0) to both sides. Returns how many."""
        return self._end_all(_RESET, wait)

    def inject_downstream(self, data: bytes) -> int:
        """Send ``data`` to every current client as if it came from the server (ignores hold/delay).
        Returns the number of connections it was written to."""
        return self._inject(DOWN, data)

    def inject_upstream(self, data: bytes) -> int:
        """Send ``data`` to the server of every current connection as if it came from the client."""
        return self._inject(UP, data)

    def _inject(self, direction: str, data: bytes) -> int:
        data = bytes(data)
        sent = 0
        for c in self._current():
            with c.send_lock[direction]:
                if c.action is not None or c.closed:
                    continue
                with self._lock:
                    self.bytes_injected += len(data)
                try:
                    c.send_all(direction, data, check_stop=False)
                except (OSError, _Stop):
                    continue
            sent += 1
        return sent

    def record_upstream(self) -> None:
        """From now on keep every byte clients send through the relay (``recorded_upstream``)."""
        with self._lock:
            if self._recorded is None:
                self._recorded = {}

    def recorded_upstream(self) -> List[bytes]:
        """What each connection's client sent since ``record_upstream``, one bytes per connection
        in the order they were accepted (a stream as the server got it, not split into writes)."""
        with self._lock:
            recorded = dict(self._recorded or {})
        return [bytes(recorded[cid]) for cid in sorted(recorded)]

    # ------------------------------------------------------------------ internals
    def _record(self, cid: int, data: bytes) -> None:
        with self._lock:
            if self._recorded is not None:
                self._recorded.setdefault(cid, bytearray()).extend(data)

    def _count(self, direction: str, n: int) -> None:
        with self._lock:
            if direction == UP:
                self.bytes_up += n
            else:
                self.bytes_down += n

    def _forget(self, conn: _Conn) -> None:
        with self._lock:
            try:
                self._conns.remove(conn)
            except ValueError:
                pass

    def _accept_loop(self) -> None:
        p = select.poll()
        p.register(self._listener.fileno(), select.POLLIN)
        p.register(self._wake_r, select.POLLIN)
        while not self._closing:
            try:
                ready = p.poll(500)
            except InterruptedError:
                continue
            if self._closing:
                break
            if not any(fd == self._listener.fileno() for fd, _ in ready):
                continue
            try:
                client, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                if self._closing:
                    break
                continue
            try:
                self._handle_new(client)
            except Exception as exc:  # never let the accept thread die loudly
                self.errors.append(exc)
                try:
                    client.close()
                except OSError:
                    pass

    def _handle_new(self, client: socket.socket) -> None:
        with self._lock:
            self.connections_accepted += 1
            refuse = self._refuse
        if refuse:
            with self._lock:
                self.connections_refused += 1
            client.close()
            return
        client.setblocking(True)
        try:
            server = socket.create_connection((self.target_host, self.target_port), timeout=self.connect_timeout)
        except OSError:
            # target down: the client sees its connection closed right away
            client.close()
            return
        with self._lock:
            if self._closing:
                server.close()
                client.close()
                return
            self._next_id += 1
            conn = _Conn(self, client, server, self._next_id)
            if self._reset_after is not None:
                n, direction, _once = self._reset_after
                conn.reset_budget[direction] = n
            self._conns.append(conn)
            self._all_threads = [t for t in self._all_threads if t.is_alive()] + conn.threads
        conn.start()

    # ------------------------------------------------------------------ teardown
    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection (FIN), and join all threads."""
        if self._closed:
            return
        self._closed = True
        self._closing = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        self._accept_thread.join(timeout)
        try:
            self._listener.close()
        except OSError:
            pass
        self._end_all(_CUT, wait=True, timeout=timeout)
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._all_threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        leaked = [t.name for t in threads + [self._accept_thread] if t.is_alive()]
        if leaked:
            raise RuntimeError(f"FaultProxy threads did not stop: {leaked}")

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
