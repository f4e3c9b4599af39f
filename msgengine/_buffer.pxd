# cython: language_level=3
#
# The reassembly buffer of the compiled frame decoders (nsq/_frame.pyx and
# pulsarfast/wire/_codec.pyx): where the one unfinished frame at the end of a feed()
# waits for the bytes that complete it. The decoders parse complete frames
# straight from the caller's buffer and copy only that tail here.
#
# A struct and inline functions, no module of its own: `cimport` compiles them
# into each decoder, so the hot path makes no call it did not make before (and
# no Python-level one). The pure-Python twins keep a bytearray instead.

from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy

cdef enum:
    REASSEMBLY_KEEP_CAP = 65536   # capacity kept between frames; a larger one is freed when emptied
    REASSEMBLY_MIN_CAP = 256      # the first allocation, unless the frame needs less


cdef struct Reassembly:
    unsigned char* data   # the start of the one unfinished frame (NULL until first needed)
    Py_ssize_t len        # bytes held in data
    Py_ssize_t cap        # bytes allocated for data
    Py_ssize_t need       # the bytes the decoder waits for: what it needs before its next check,
                          # or the whole frame once its length is known; growth stops there


cdef inline int reassembly_append(Reassembly* b, const unsigned char* p, Py_ssize_t k) except -1:
    """Copy k bytes to the buffer, growing it geometrically up to b.need (or to what
    the bytes take, when more)."""
    cdef Py_ssize_t want = b.len + k, cap
    cdef unsigned char* grown
    if want > b.cap:
        cap = b.cap * 2
        if cap < REASSEMBLY_MIN_CAP:
            cap = REASSEMBLY_MIN_CAP
        if cap > b.need:
            cap = b.need
        if cap < want:
            cap = want
        grown = <unsigned char*>PyMem_Realloc(b.data, cap)
        if grown == NULL:
            raise MemoryError()
        b.data = grown
        b.cap = cap
    memcpy(b.data + b.len, p, k)
    b.len = want
    return 0


cdef inline void reassembly_clear(Reassembly* b) noexcept:
    """Empty the buffer once its frame is out, freeing a capacity past REASSEMBLY_KEEP_CAP."""
    b.len = 0
    if b.cap > REASSEMBLY_KEEP_CAP:
        PyMem_Free(b.data)
        b.data = NULL
        b.cap = 0


cdef inline void reassembly_free(Reassembly* b) noexcept:
    """Free the memory (the decoder's end, or a broken stream); the buffer is empty after."""
    PyMem_Free(b.data)
    b.data = NULL
    b.cap = 0
    b.len = 0
