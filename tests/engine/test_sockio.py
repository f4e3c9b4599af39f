# The socket calls that never wait (msgengine.sockio), both twins held to the same answers on
# real sockets (a socketpair and a loopback TCP connection), and the plain stream that uses them:
# what it sends arrives whole, what arrives is read, past a full send buffer too.
from __future__ import annotations

import os
import select
import signal
import socket
import threading

import pytest

import msgengine.sockio as sockio_module
from msgengine.transport import PlainStream

from tests.support.twins import twin

WAIT = 10.0


@pytest.fixture(params=["python", "cython"])
def sockio(request):
    return twin(sockio_module, "msgengine._sockio", request.param)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.settimeout(WAIT)
    b.settimeout(WAIT)
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("timeout", [None, WAIT], ids=["blocking", "with-timeout"])
def test_recv_nowait_says_minus_one_when_nothing_has_come(sockio, pair, timeout):
    a, _ = pair
    a.settimeout(timeout)  # (either way, no wait: the suite's own timeout ends a wait)
    assert sockio.recv_nowait(a, bytearray(16)) == -1


def test_recv_nowait_reads_what_has_come_into_the_buffers_start(sockio, pair):
    a, b = pair
    b.sendall(b"hello")
    buffer = bytearray(b"." * 16)
    assert sockio.recv_nowait(a, buffer) == 5
    assert bytes(buffer) == b"hello" + b"." * 11


def test_recv_nowait_reads_at_most_the_buffers_size(sockio, pair):
    a, b = pair
    b.sendall(b"0123456789")
    view = memoryview(bytearray(4))
    assert sockio.recv_nowait(a, view) == 4
    assert bytes(view) == b"0123"


def test_recv_nowait_says_zero_when_the_peer_closed(sockio, pair):
    a, b = pair
    b.close()
    assert sockio.recv_nowait(a, bytearray(16)) == 0


def test_recv_nowait_refuses_a_read_only_buffer(sockio, pair):
    a, _ = pair
    with pytest.raises(TypeError, match="read-write bytes-like object"):
        sockio.recv_nowait(a, b"read only")


def test_both_calls_raise_bad_file_descriptor_on_a_closed_socket(sockio, pair):
    a, _ = pair
    a.close()
    with pytest.raises(OSError) as recv_error:
        sockio.recv_nowait(a, bytearray(16))
    with pytest.raises(OSError) as send_error:
        sockio.send_nowait(a, b"x")
    assert recv_error.value.errno == send_error.value.errno == 9


def test_recv_nowait_raises_connection_reset_as_the_socket_does(sockio):
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname(), timeout=WAIT)
    accepted, _ = server.accept()
    try:
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        accepted.close()  # (linger 0: a reset)
        client.settimeout(WAIT)
        select.select([client], [], [], WAIT)  # (the reset has come: the socket reads as ready)
        with pytest.raises(ConnectionResetError):
            sockio.recv_nowait(client, bytearray(16))
    finally:
        client.close()
        server.close()


def test_send_nowait_sends_what_the_buffer_takes_and_says_how_much(sockio, pair):
    a, b = pair
    assert sockio.send_nowait(a, b"hello") == 5
    assert b.recv(16) == b"hello"
    assert sockio.send_nowait(a, memoryview(b"abcdef")[2:]) == 4
    assert b.recv(16) == b"cdef"


@pytest.mark.parametrize("timeout", [None, WAIT], ids=["blocking", "with-timeout"])
def test_send_nowait_says_zero_when_the_buffer_is_full(sockio, pair, timeout):
    a, _ = pair
    a.settimeout(timeout)
    chunk = b"x" * 65536
    total = 0
    for _ in range(10000):  # (a socketpair's buffers hold a few hundred KiB)
        sent = sockio.send_nowait(a, chunk)
        if sent == 0:
            break
        total += sent
    else:
        pytest.fail("the send buffer never filled")
    assert total > 0


def test_send_nowait_raises_broken_pipe_without_a_signal(sockio, pair):
    a, b = pair
    b.close()
    previous = signal.getsignal(signal.SIGPIPE)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (a SIGPIPE would end this process)
    try:
        with pytest.raises(BrokenPipeError):
            sockio.send_nowait(a, b"x")
    finally:
        signal.signal(signal.SIGPIPE, previous)


def test_both_calls_refuse_what_is_not_bytes(sockio, pair):
    a, _ = pair
    with pytest.raises(TypeError):
        sockio.send_nowait(a, "text")
    with pytest.raises(TypeError):
        sockio.recv_nowait(a, "text")


def test_plain_stream_moves_more_than_a_send_buffer_holds_both_ways(pair):
    a, b = pair
    a.settimeout(None)
    b.settimeout(None)
    sender, receiver = PlainStream(a, 65536), PlainStream(b, 65536)
    data = os.urandom(4 * 1024 * 1024)  # (the first send fills the buffer; the rest waits in sendall)
    received = bytearray()

    def read() -> None:
        while len(received) < len(data):
            chunk = receiver.recv()
            if not chunk:
                break
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sender.send(data)
    reader.join(WAIT)
    assert not reader.is_alive()
    assert bytes(received) == data
    receiver.send(b"back")
    assert bytes(sender.recv_within(WAIT)) == b"back"
    assert sender.recv_within(0.001) is None
    sender.close()
    assert bytes(receiver.recv()) == b""


def test_the_compiled_calls_are_chosen_when_built():
    if sockio_module.compiled_impl is None:
        pytest.skip("compiled msgengine._sockio is not importable: %s" % sockio_module.compiled_import_error)
    expected = "python" if os.environ.get("NSQFAST_PURE_PYTHON", "") not in ("", "0") else "cython"
    assert sockio_module.IMPLEMENTATION == expected
    chosen = sockio_module.compiled_impl if expected == "cython" else sockio_module.python_impl
    assert sockio_module.recv_nowait is chosen.recv_nowait
    assert sockio_module.send_nowait is chosen.send_nowait
