# pynsq's helper modules (nsq._compat, nsq.deflate_socket, nsq.snappy_socket)
# and the attributes pynsq kept as plain ones. Each helper test runs the same
# program on nsqfast and on pynsq 0.9.1 (.bench-venvs/pynsq, made by `make
# pynsq-corpus`; that half is skipped without it) and asserts the same outcome
# on both: the shims' values, the socket wrappers over a real socket pair, and
# a raw NSQ session compressed through them against real nsqd. Assigning a
# Reader/Writer/AsyncConn attribute that is computed here raises an
# AttributeError naming the supported way, except max_in_flight (it works, as
# set_max_in_flight) and conns given what the Reader already holds.
from __future__ import annotations

import collections
import functools
import json
import os
import subprocess
import sys

import pytest

import nsq
from nsq.errors import ReadOnlyAttributeError

from tests.support import waiting
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.timeout(90)

PYNSQ_PYTHON = os.path.join(REPO_ROOT, ".bench-venvs", "pynsq", "bin", "python")
WAIT = 15.0

wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)


@pytest.fixture(params=["nsqfast", "pynsq"])
def run_on(request, tmp_path):
    """run_on(source, *args) runs source as a program on nsqfast or on pynsq
    0.9.1 (argv[1:] = args) and returns its last stdout line, parsed as JSON."""
    if request.param == "pynsq":
        if not os.path.exists(PYNSQ_PYTHON):
            pytest.skip("pynsq 0.9.1 is not installed in .bench-venvs/pynsq (`make pynsq-corpus` installs it)")
        python = PYNSQ_PYTHON
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # `import nsq` is pynsq there
    else:
        python = sys.executable
        env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run(source: str, *args: str) -> dict:
        # (run from an empty folder, so that the repository's nsq/ is not on pynsq's path)
        proc = subprocess.run(
            [python, "-c", source, *args], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result.pop("nsq_is", None) == request.param
        return result

    run.impl = request.param  # type: ignore[attr-defined]
    return run


WHICH = r"""
import nsq
which = "pynsq" if nsq.__version__ == "0.9.1" else "nsqfast"
"""


# -- nsq._compat ------------------------------------------------------------------------------

COMPAT = WHICH + r"""
import inspect, json
from nsq import _compat as c

def f(a, b=1, *args, c=2, **kwargs):
    pass

class K:
    def method(self, x, y=0):
        pass

def attempt(fn, *args):
    try:
        return fn(*args).hex()
    except Exception as exc:
        return type(exc).__name__

print(json.dumps({
    "nsq_is": which,
    "names": sorted(n for n in dir(c) if not n.startswith("_")),
    "PY2": c.PY2,
    "types": [c.text_type is str, c.string_types == (str,), c.integer_types == (int,),
              c.bytes_types == (bytes, bytearray, memoryview)],
    "to_bytes": [attempt(c.to_bytes, b"ab"), attempt(c.to_bytes, bytearray(b"cd")), attempt(c.to_bytes, memoryview(b"ef")),
                 attempt(c.to_bytes, "\u00e9"), attempt(c.to_bytes, "\u00e9", "latin-1"),
                 attempt(c.to_bytes, "\u00e9", "ascii", "replace"), attempt(c.to_bytes, "\u00e9", "ascii"),
                 attempt(c.to_bytes, 1), attempt(c.to_bytes, None)],
    "to_bytes_type": type(c.to_bytes(bytearray(b"x"))).__name__,
    "structs": [c.struct_l.pack(-2).hex(), c.struct_q.pack(2 ** 40).hex(), c.struct_h.pack(7).hex(),
                c.struct_l.size, c.struct_q.size, c.struct_h.size],
    "iter": [list(c.itervalues({"a": 1, "b": 2})), [list(kv) for kv in c.iteritems({"a": 1})]],
    "url": [c.urlparse.urlsplit("http://h:4161/lookup?topic=t").netloc, c.urlencode({"topic": "t", "n": 1}),
            c.parse_qs("a=1&a=2&b=3")],
    "signature": c.signature is inspect.signature,
    "func_args": [c.func_args(f), c.func_args(K().method), c.func_args(K.method), c.func_args(lambda: None),
                  c.func_args(nsq.Reader), c.func_args(nsq.Writer)],
}))
"""


def test_compat_has_pynsqs_names_and_values(run_on):
    result = run_on(COMPAT)
    pynsq_names = {"PY2", "bytes_types", "text_type", "string_types", "integer_types", "itervalues", "iteritems",
                   "to_bytes", "struct_l", "struct_q", "struct_h", "urlparse", "urlencode", "parse_qs", "signature",
                   "func_args", "struct", "sys"}
    assert pynsq_names <= set(result.pop("names"))
    assert result == {
        "PY2": False,
        "types": [True, True, True, True],
        "to_bytes": ["6162", "6364", "6566", "c3a9", "e9", "3f", "UnicodeEncodeError", "TypeError", "TypeError"],
        "to_bytes_type": "bytes",
        "structs": ["fffffffe", "0000010000000000", "0007", 4, 8, 2],
        "iter": [[1, 2], [["a", 1]]],
        "url": ["h:4161", "topic=t&n=1", {"a": ["1", "2"], "b": ["3"]}],
        "signature": True,
        "func_args": [
            ["a", "b"], ["x", "y"], ["self", "x", "y"], [],
            ["topic", "channel", "message_handler", "name", "nsqd_tcp_addresses", "lookupd_http_addresses",
             "max_tries", "max_in_flight", "lookupd_poll_interval", "low_rdy_idle_timeout", "max_backoff_duration",
             "lookupd_poll_jitter", "lookupd_connect_timeout", "lookupd_request_timeout"],
            ["nsqd_tcp_addresses", "reconnect_interval", "name"],
        ],
    }


# -- the modules after `import nsq` -------------------------------------------------------------

AFTER_IMPORT = WHICH + r"""
import json, sys
loaded_at_import = sorted(m for m in ("nsq._compat", "nsq.deflate_socket", "nsq.snappy_socket") if m in sys.modules)
print(json.dumps({
    "nsq_is": which,
    "loaded_at_import": loaded_at_import,
    "reached": [nsq._compat.to_bytes("a").decode(), nsq.deflate_socket.DeflateSocket.__name__,
                nsq.deflate_socket.DeflateEncoder.__name__, nsq.snappy_socket.SnappySocket.__name__,
                nsq.snappy_socket.SnappyEncoder.__name__],
    "missing": hasattr(nsq, "no_such_module"),
}))
"""


def test_the_helper_modules_are_attributes_of_nsq(run_on):
    result = run_on(AFTER_IMPORT)
    assert result.pop("loaded_at_import") in ([], ["nsq._compat", "nsq.deflate_socket", "nsq.snappy_socket"])
    assert result == {
        "reached": ["a", "DeflateSocket", "DeflateEncoder", "SnappySocket", "SnappyEncoder"],
        "missing": False,
    }


def test_import_nsq_loads_no_helper_module_nor_python_snappy():
    code = (
        "import sys, nsq\n"
        "names = ('nsq._compat', 'nsq.deflate_socket', 'nsq.snappy_socket', 'nsq.compressed_socket', 'snappy', 'cramjam')\n"
        "print([m for m in names if m in sys.modules])\n"
        "nsq.snappy_socket\n"
        "print([m for m in names if m in sys.modules])\n"
    )
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert after == "['nsq.snappy_socket', 'nsq.compressed_socket']"  # python-snappy: at the first socket


WITHOUT_SNAPPY = r"""
import json, sys
sys.modules["snappy"] = None  # as if python-snappy were not installed
import nsq
try:
    import nsq.snappy_socket
    outcome = "imported"
except ImportError:
    outcome = "ImportError"
which = "pynsq" if nsq.__version__ == "0.9.1" else "nsqfast"
print(json.dumps({"nsq_is": which, "import": outcome, "attribute": hasattr(nsq, "snappy_socket"),
                  "deflate": nsq.deflate_socket.DeflateSocket.__name__}))
"""


def test_snappy_socket_without_python_snappy_is_an_import_error(run_on):
    assert run_on(WITHOUT_SNAPPY) == {"import": "ImportError", "attribute": False, "deflate": "DeflateSocket"}


# -- the socket wrappers over a real socket pair ----------------------------------------------

SOCKET_PAIR = WHICH + r"""
import errno, json, socket, sys, zlib
kind = sys.argv[1]
if kind == "deflate":
    from nsq.deflate_socket import DeflateSocket, DeflateEncoder
    new_encoder = lambda: DeflateEncoder(6)  # (one deflate stream per socket)
    wrap = lambda sock: DeflateSocket(sock, 6)
else:
    from nsq.snappy_socket import SnappySocket, SnappyEncoder
    new_encoder = lambda: SnappyEncoder
    wrap = SnappySocket
import snappy
encoder = new_encoder()

a, b = socket.socketpair()
a.settimeout(10)
b.settimeout(10)
wrapped = wrap(b)
out = {"nsq_is": which}

def would_block(fn, *args):
    try:
        return "returned %r" % (fn(*args),)
    except OSError as exc:
        return [exc.args[0] == errno.EWOULDBLOCK, exc.errno == errno.EWOULDBLOCK]

# bytes read ahead from the socket come back first, without reading it
wrapped.bootstrap(encoder.encode(b"read ahead"))
a.sendall(encoder.encode(b"next"))
out["bootstrap"] = [wrapped.recv(2).decode(), wrapped.recv(65536).decode()]
wrapped.bootstrap(b"")  # nothing read ahead: nothing changes
# a read returns all it decompresses, even beyond its size
a.sendall(encoder.encode(b"x" * 3000))
out["beyond_size"] = len(wrapped.recv(65536))
# a read that completes no frame: EWOULDBLOCK; the rest of the frame completes it
payload = encoder.encode(b"abc" * 100)
a.sendall(payload[:1])
out["partial"] = would_block(wrapped.recv, 65536)
a.sendall(payload[1:])
out["completed"] = wrapped.recv(65536) == b"abc" * 100
# recv_into: recv(nbytes, or the buffer's length) into the buffer; what does not fit comes with the next read
a.sendall(encoder.encode(b"a" * 1000))  # (well under 200 bytes compressed)
buffer = bytearray(200)
out["recv_into"] = [wrapped.recv_into(buffer), bytes(buffer) == b"a" * 200, wrapped.recv(1) == b"a" * 800]
a.sendall(encoder.encode(b"b" * 1000))
buffer = bytearray(500)
out["recv_into_nbytes"] = [wrapped.recv_into(buffer, 200), bytes(buffer) == b"b" * 200 + bytes(300),
                           wrapped.recv(1) == b"b" * 800]
# read(size) goes through the socket's read() (an SSLSocket's)
class Reading:
    def __init__(self, sock):
        self.sock = sock
    def read(self, size):
        return self.sock.recv(size)
a2, b2 = socket.socketpair()
b2.settimeout(10)
reading = wrap(Reading(b2))
a2.sendall(new_encoder().encode(b"via read"))
out["read"] = reading.read(65536).decode()
# send() writes what it is given, unchanged; other attributes are the socket's
out["send"] = [wrapped.send(b"raw bytes"), a.recv(100).decode()]
out["socket_attributes"] = [wrapped.fileno() == b.fileno(), wrapped.getsockname() == b.getsockname(),
                            wrapped._socket is b]
# the encoders
if kind == "deflate":
    inflate = zlib.decompressobj(-zlib.MAX_WBITS)
    encoder = new_encoder()
    first, second = encoder.encode(b"one"), encoder.encode(b"two")
    out["encoder"] = [first.endswith(b"\x00\x00\xff\xff"), inflate.decompress(first + second).decode()]
else:
    header = b"\xff\x06\x00\x00sNaPpY"
    first, second = encoder.encode(b"one"), encoder.encode(b"two")
    out["encoder"] = [first.startswith(header) and second.startswith(header),
                      snappy.StreamDecompressor().decompress(first + second).decode()]
# the end of the stream: b""
a.close()
out["eof"] = wrapped.recv(10).decode()
print(json.dumps(out))
"""


@pytest.mark.parametrize("kind", ["deflate", "snappy"])
def test_socket_wrapper_over_a_socket_pair(run_on, kind):
    # a read that completes no frame: an OSError whose args[0] is EWOULDBLOCK on both; nsqfast's
    # (a BlockingIOError) also has it as errno, which tornado 6 reads (pynsq's OSError(11) has none)
    assert run_on(SOCKET_PAIR, kind) == {
        "bootstrap": ["read ahead", "next"],
        "beyond_size": 3000,
        "partial": [True, run_on.impl == "nsqfast"],
        "completed": True,
        "recv_into": [200, True, True],
        "recv_into_nbytes": [200, True, True],
        "read": "via read",
        "send": [9, "raw bytes"],
        "socket_attributes": [True, True, True],
        "encoder": [True, "onetwo"],
        "eof": "",
    }


# -- a raw NSQ session through them, against real nsqd ------------------------------------------

NSQD_SESSION = WHICH + r"""
import errno, json, socket, struct, sys, time
host, port, topic, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if kind == "deflate":
    from nsq.deflate_socket import DeflateSocket, DeflateEncoder
    encoder = DeflateEncoder(6)
    wrap = lambda sock: DeflateSocket(sock, 6)
else:
    from nsq.snappy_socket import SnappySocket, SnappyEncoder
    encoder = SnappyEncoder
    wrap = SnappySocket

deadline = time.monotonic() + 20
sock = socket.create_connection((host, port), timeout=10)
sock.sendall(b"  V2")
identify = json.dumps({"feature_negotiation": True, kind: True, "deflate_level": 6}).encode()
sock.sendall(b"IDENTIFY\n" + struct.pack(">l", len(identify)) + identify)
# read the IDENTIFY response and what follows it (nsqd's compressed OK), as pynsq's connection does
raw = b""
while len(raw) < 4 or len(raw) <= 4 + struct.unpack(">l", raw[:4])[0]:
    assert time.monotonic() < deadline, "no compressed OK after the IDENTIFY response"
    raw += sock.recv(65536)
size = struct.unpack(">l", raw[:4])[0]
features = json.loads(raw[8:4 + size])
wrapped = wrap(sock)
wrapped.bootstrap(raw[4 + size:])
pending = b""

def frame():
    global pending
    while len(pending) < 4 or len(pending) < 4 + struct.unpack(">l", pending[:4])[0]:
        assert time.monotonic() < deadline, "no whole frame"
        try:
            pending += wrapped.recv(65536)
        except OSError as exc:
            if exc.args[0] != errno.EWOULDBLOCK:  # (no whole compressed frame yet: read again)
                raise
    size = struct.unpack(">l", pending[:4])[0]
    kind_, data = struct.unpack(">l", pending[4:8])[0], pending[8:4 + size]
    pending = pending[4 + size:]
    return kind_, data

out = {"nsq_is": which, "features": [features.get(kind), features.get("deflate_level") if kind == "deflate" else 0]}
out["upgraded"] = frame()[1].decode()
body = b"through the " + kind.encode() + b" wrapper" * 50
wrapped.send(encoder.encode(("PUB %s\n" % topic).encode() + struct.pack(">l", len(body)) + body))
out["pub"] = frame()[1].decode()
wrapped.send(encoder.encode(("SUB %s ch\n" % topic).encode()))
out["sub"] = frame()[1].decode()
wrapped.send(encoder.encode(b"RDY 1\n"))
frame_type, data = frame()
out["message"] = [frame_type, data[26:] == body, data[8:10].hex()]  # (attempts: 1)
wrapped.send(encoder.encode(b"FIN " + data[10:26] + b"\n"))
wrapped.send(encoder.encode(b"CLS\n"))
out["cls"] = frame()[1].decode()
print(json.dumps(out))
"""


@pytest.mark.parametrize("kind", ["deflate", "snappy"])
def test_raw_nsq_session_through_the_wrapper_on_real_nsqd(run_on, nsqd, topic, kind):
    host, port = nsqd.tcp_address.rsplit(":", 1)
    assert run_on(NSQD_SESSION, host, port, topic, kind) == {
        "features": [True, 6 if kind == "deflate" else 0],
        "upgraded": "OK",
        "pub": "OK",
        "sub": "OK",
        "message": [2, True, "0001"],
        "cls": "CLOSE_WAIT",
    }
    channel = nsqd.stats(topic, "ch")["topics"][0]["channels"][0]
    assert (channel["message_count"], channel["depth"], channel["in_flight_count"], channel["requeue_count"]) == (1, 0, 0, 0)


# -- assigning attributes pynsq kept as plain ones -------------------------------------------------

ASSIGNMENTS = WHICH + r"""
import collections, json
reader = nsq.Reader("t", "c", message_handler=lambda m: True, nsqd_tcp_addresses=["127.0.0.1:4150"], max_in_flight=2)
reader.conns = collections.OrderedDict()  # (pynsq's own unit tests do this)
reader.max_in_flight = 7
print(json.dumps({"nsq_is": which, "conns": len(reader.conns), "max_in_flight": reader.max_in_flight}))
"""


def test_assignments_that_work_on_pynsq_work(run_on):
    assert run_on(ASSIGNMENTS) == {"conns": 0, "max_in_flight": 7}


def _reader(address="127.0.0.1:1", **kwargs):
    return nsq.Reader("t", "c", message_handler=lambda m: True, nsqd_tcp_addresses=[address], backend="threads",
                      **kwargs)


@pytest.mark.parametrize("name, value, advice", [
    ("conns", {"127.0.0.1:1": object()}, "connect_to_nsqd(host, port)"),
    ("total_rdy", 3, "set_max_in_flight(n)"),
    ("backoff_timer", nsq.BackoffTimer(0, 10), "max_backoff_duration="),
    ("io_loop", object(), "pass io_loop= to Reader()"),
])
def test_assigning_a_computed_reader_attribute_names_the_supported_way(name, value, advice):
    reader = _reader()
    try:
        before = getattr(reader, name)
        with pytest.raises(ReadOnlyAttributeError) as caught:
            setattr(reader, name, value)
        assert isinstance(caught.value, AttributeError) and caught.value.name == name and caught.value.obj is reader
        assert str(caught.value).startswith("Reader.%s cannot be assigned in nsqfast: " % name)
        assert advice in str(caught.value)
        assert getattr(reader, name) is before or getattr(reader, name) == before
    finally:
        reader.close()


def test_a_subclass_assigning_max_in_flight_before_reader_init_is_told_to_pass_it():
    class Early(nsq.Reader):
        def __init__(self, **kwargs):
            self.max_in_flight = 9
            super().__init__(**kwargs)

    with pytest.raises(ReadOnlyAttributeError, match=r"Early\.max_in_flight .*pass max_in_flight= to Reader\.__init__"):
        Early(topic="t", channel="c", message_handler=lambda m: True, nsqd_tcp_addresses=["127.0.0.1:1"],
              backend="threads")


def test_a_subclass_assigning_max_in_flight_after_reader_init_sets_it():
    class Later(nsq.Reader):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.max_in_flight = 9

    reader = Later(topic="t", channel="c", message_handler=lambda m: True, nsqd_tcp_addresses=["127.0.0.1:1"],
                   backend="threads")
    try:
        assert reader.max_in_flight == 9
        with pytest.raises(nsq.errors.ConfigError):
            reader.max_in_flight = -1  # validated as set_max_in_flight's argument
        assert reader.max_in_flight == 9
    finally:
        reader.close()


def test_assigning_max_in_flight_pauses_and_resumes_as_set_max_in_flight(nsqd, topic):
    reader = _reader(nsqd.tcp_address, max_in_flight=4)
    reader.start()
    try:
        wait_for(lambda: len(reader.conns) == 1 and reader.total_rdy > 0, "threads", message="connected with RDY")
        reader.max_in_flight = 0
        conn = next(iter(reader.conns.values()))
        wait_for(lambda: reader.total_rdy == 0 and conn.last_rdy == 0, "threads", message="RDY 0 sent")
        assert reader.max_in_flight == 0
        reader.max_in_flight = 3
        wait_for(lambda: 0 < reader.total_rdy <= 3, "threads", message="RDY given again")
        assert reader.max_in_flight == 3
    finally:
        reader.close()


def test_conns_assigned_what_the_reader_holds_is_accepted_anything_else_refused():
    reader = _reader()
    try:
        reader.conns = collections.OrderedDict()
        reader.conns = {}
        assert reader.conns == {}
        with pytest.raises(ReadOnlyAttributeError, match="close\\(\\) ends them"):
            reader.conns = []  # not a mapping
    finally:
        reader.close()


def test_assigning_a_writers_io_loop_names_the_supported_way(nsqd):
    writer = nsq.Writer([nsqd.tcp_address], backend="threads")
    try:
        with pytest.raises(ReadOnlyAttributeError, match=r"Writer\.io_loop .*pass io_loop= to Writer\(\)"):
            writer.io_loop = object()
    finally:
        writer.close()


@pytest.mark.parametrize("name, advice", [("state", "connect()"), ("in_flight", "finish() or requeue()")])
def test_assigning_an_asyncconns_computed_attribute_names_the_supported_way(name, advice):
    conn = nsq.AsyncConn("127.0.0.1", 1)
    before = getattr(conn, name)
    with pytest.raises(ReadOnlyAttributeError) as caught:
        setattr(conn, name, "CONNECTING" if name == "state" else 1)
    assert str(caught.value).startswith("AsyncConn.%s cannot be assigned in nsqfast: " % name)
    assert advice in str(caught.value)
    assert getattr(conn, name) == before
