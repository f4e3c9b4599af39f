# cython: language_level=3
"""Socket calls that never wait, made without letting go of the GIL: the
compiled twin of ``msgengine/_sockio_py.py`` (``msgengine.sockio`` chooses).

CPython's socket methods release the GIL around every system call, even one
that cannot wait (``MSG_DONTWAIT``). Under threads, a release while other
threads want the GIL hands it to one of them, and the caller then waits for
it back: two context switches for a call of a microsecond. A blocking
publisher's thread and a connection's reader make such calls on every
command; these two keep the GIL and leave the waiting to the callers'
fallbacks (the socket's own methods, which do release it).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.exc cimport PyErr_SetFromErrno
from libc.errno cimport EAGAIN, EINTR, errno


cdef extern from "errno.h":
    int EWOULDBLOCK


cdef extern from "sys/socket.h" nogil:
    ssize_t c_recv "recv"(int fd, void* buf, size_t n, int flags)
    ssize_t c_send "send"(int fd, const void* buf, size_t n, int flags)
    int MSG_DONTWAIT
    int MSG_NOSIGNAL


cdef inline int _fd(sock) except -2:
    cdef int fd = sock.fileno()
    if fd < 0:
        raise OSError(9, "Bad file descriptor")  # (a closed socket, as its own methods say)
    return fd


def recv_nowait(sock, buffer):
    """Read what sock has into buffer (writable, from its start) without
    waiting: the byte count (0: the peer closed), or -1 when nothing is there
    yet (or a signal came: the caller's waiting read handles it). Other
    errors raise OSError, as sock.recv_into does."""
    cdef Py_buffer view
    cdef ssize_t n
    cdef int fd
    try:
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
    except BufferError:
        raise TypeError("recv_into() argument 1 must be read-write bytes-like object, not %s"
                        % type(buffer).__name__) from None
    try:
        fd = _fd(sock)
        n = c_recv(fd, view.buf, <size_t>view.len, MSG_DONTWAIT)
    finally:
        PyBuffer_Release(&view)
    if n >= 0:
        return n
    if errno == EAGAIN or errno == EWOULDBLOCK or errno == EINTR:
        return -1
    PyErr_SetFromErrno(OSError)


def send_nowait(sock, data):
    """Send what sock's buffer takes of data now, without waiting: the byte
    count (0 when it takes nothing yet, or a signal came). Errors raise
    OSError, as sock.send does."""
    cdef Py_buffer view
    cdef ssize_t n
    cdef int fd
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        fd = _fd(sock)
        n = c_send(fd, view.buf, <size_t>view.len, MSG_DONTWAIT | MSG_NOSIGNAL)
    finally:
        PyBuffer_Release(&view)
    if n >= 0:
        return n
    if errno == EAGAIN or errno == EWOULDBLOCK or errno == EINTR:
        return 0
    PyErr_SetFromErrno(OSError)

