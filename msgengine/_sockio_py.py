"""Socket calls that never wait, in pure Python: the twin of the compiled
``msgengine._sockio`` (``msgengine.sockio`` chooses). They behave the same;
the compiled ones only keep the GIL through the system call, which the
socket's methods used here let go of.
"""
from __future__ import annotations

import select
import socket
from typing import Any

__all__ = ["recv_nowait", "send_nowait"]

_NOWAIT = socket.MSG_DONTWAIT
_NOWAIT_NOSIGNAL = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL


def recv_nowait(sock: Any, buffer: Any) -> int:
    """Read what sock has into buffer (writable, from its start) without
    waiting: the byte count (0: the peer closed), or -1 when nothing is there
    yet (or a signal came: the caller's waiting read handles it). Other
    errors raise OSError, as sock.recv_into does."""
    if sock.gettimeout() is not None and not _ready(sock, buffer, False):
        return -1
    try:
        return sock.recv_into(buffer, 0, _NOWAIT)
    except (BlockingIOError, InterruptedError):
        return -1


def send_nowait(sock: Any, data: Any) -> int:
    """Send what sock's buffer takes of data now, without waiting: the byte
    count (0 when it takes nothing yet, or a signal came). Errors raise
    OSError, as sock.send does."""
    if sock.gettimeout() is not None and not _ready(sock, data, True):
        return 0
    try:
        return sock.send(data, _NOWAIT_NOSIGNAL)
    except (BlockingIOError, InterruptedError):
        return 0


def _ready(sock: Any, data: Any, writing: bool) -> bool:
    """Whether a call on sock, which has a timeout, would go ahead at once: a socket with a timeout
    waits for it before the call, whatever its flags. (False only for good arguments on an open
    socket, so that the call itself raises what it raises.)"""
    try:
        view = memoryview(data)
    except TypeError:
        return True
    if (not writing and view.readonly) or sock.fileno() < 0:
        return True
    readable, writable, _ = select.select([] if writing else [sock], [sock] if writing else [], [], 0)
    return bool(writable if writing else readable)
