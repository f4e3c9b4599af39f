# Tests of the sans-I/O frame codec, run against both implementations: the
# pure-Python twin (nsq._frame_py) and the compiled module (nsq._frame).
from __future__ import annotations

import array
import json
import os
import random
import struct
import subprocess
import sys
import tracemalloc

import pytest

from msgengine.twins import PURE_PYTHON_ALIASES, PURE_PYTHON_ENV
from nsq import codec as codec_module
from nsq.errors import InvalidArgumentError, InvalidBodyError, ProtocolError

from tests.support.twins import twin

BROKEN = "decoder is unusable after a protocol error"
MID = b"0123456789abcdef"
MODES = ("whole", "bytes", "random")


@pytest.fixture(params=["python", "cython"])
def codec(request):
    return twin(codec_module, "nsq._frame", request.param)


def frame(frame_type: int, data: bytes) -> bytes:
    return struct.pack(">II", 4 + len(data), frame_type) + data


def message(timestamp: int, attempts: int, message_id: bytes, body: bytes) -> bytes:
    return frame(2, struct.pack(">qH16s", timestamp, attempts, message_id) + body)


def split(data: bytes, mode: str, seed: int = 0) -> list[bytes]:
    if mode == "whole":
        return [data]
    if mode == "bytes":
        return [data[i : i + 1] for i in range(len(data))]
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 40))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def decode(codec, stream: bytes, **kwargs) -> list:
    """Decode stream fed whole, byte by byte, at random splits, and with a partial
    next frame after it; check that every way gives the same frames; return them."""
    results = []
    for mode in MODES:
        for seed in range(3 if mode == "random" else 1):
            decoder = codec.FrameDecoder(**kwargs)
            frames = []
            for chunk in split(stream, mode, seed):
                frames.extend(decoder.feed(chunk))
            assert decoder.buffered == 0
            results.append(frames)
    partial_next = frame(0, b"next response")
    for cut in (1, 3, 4, 7, 8, len(partial_next) - 1):
        for mode in ("whole", "random"):
            decoder = codec.FrameDecoder(**kwargs)
            frames = []
            for chunk in split(stream + partial_next[:cut], mode, seed=cut):
                frames.extend(decoder.feed(chunk))
            assert decoder.buffered == cut
            results.append(frames)
            assert decoder.feed(partial_next[cut:]) == [(0, b"next response")]
            assert decoder.buffered == 0
    for frames in results[1:]:
        assert frames == results[0]
    for _, payload in results[0]:
        items = payload if isinstance(payload, tuple) else (payload,)
        assert all(type(item) in (int, bytes) for item in items)
    return results[0]


def assert_protocol_error(codec, stream: bytes, trigger: int, text: str, **kwargs) -> None:
    """Feeding stream must raise ProtocolError(text) exactly at the feed() call
    that brings the fed byte count to trigger, however the stream is split (with
    or without more bytes after it); then the decoder stays broken."""
    for tail in (b"", b"\x00\x00\x00\x06\x00\x00\x00\x00OK"):
        for mode in MODES:
            decoder = codec.FrameDecoder(**kwargs)
            fed = 0
            for chunk in split(stream + tail, mode, seed=len(stream)):
                fed += len(chunk)
                if fed < trigger:
                    decoder.feed(chunk)
                    continue
                with pytest.raises(ProtocolError) as info:
                    decoder.feed(chunk)
                assert str(info.value) == text
                break
            else:
                pytest.fail("no ProtocolError after %d bytes" % fed)
            assert decoder.buffered == 0
            for later in (b"", b"\x00", frame(0, b"OK")):
                with pytest.raises(ProtocolError) as info:
                    decoder.feed(later)
                assert str(info.value) == BROKEN


# --- decoder: valid streams ---------------------------------------------------


def test_constants(codec):
    assert codec.MAGIC_V2 == b"  V2"
    assert (codec.FRAME_TYPE_RESPONSE, codec.FRAME_TYPE_ERROR, codec.FRAME_TYPE_MESSAGE) == (0, 1, 2)
    assert codec.MESSAGE_HEADER_SIZE == 26
    assert codec.DEFAULT_MAX_FRAME_SIZE == 16 * 1024 * 1024
    assert codec.FrameDecoder().max_frame_size == codec.DEFAULT_MAX_FRAME_SIZE


def test_response_frames(codec):
    stream = frame(0, b"OK") + frame(0, b"_heartbeat_") + frame(0, b"")
    assert decode(codec, stream) == [(0, b"OK"), (0, b"_heartbeat_"), (0, b"")]


def test_error_frame(codec):
    assert decode(codec, frame(1, b"E_INVALID cannot SUB")) == [(1, b"E_INVALID cannot SUB")]


@pytest.mark.parametrize(
    "timestamp, attempts, body",
    [
        (1_700_000_000_123_456_789, 1, b"hello"),
        (-1, 40000, b"x"),  # attempts > 32767 is unsigned
        (-(2**63), 65535, b""),  # empty body
        (2**63 - 1, 0, bytes(range(256))),
    ],
)
def test_message_frame(codec, timestamp, attempts, body):
    stream = message(timestamp, attempts, MID, body)
    assert decode(codec, stream) == [(2, (timestamp, attempts, MID, body))]


def test_one_megabyte_body(codec):
    body = random.Random(7).randbytes(1 << 20)
    stream = message(5, 2, MID, body) + frame(0, b"OK")
    assert decode(codec, stream) == [(2, (5, 2, MID, body)), (0, b"OK")]


def test_many_frames_in_one_chunk(codec):
    rng = random.Random(3)
    stream, expected = [], []
    for i in range(1000):
        kind = rng.randrange(3)
        if kind == 2:
            item = (i, rng.randrange(65536), b"%016d" % i, rng.randbytes(rng.randrange(200)))
            stream.append(message(*item))
        else:
            item = rng.randbytes(rng.randrange(50))
            stream.append(frame(kind, item))
        expected.append((kind, item))
    assert decode(codec, b"".join(stream)) == expected


def test_frame_of_exactly_max_size(codec):
    stream = frame(0, b"a" * 96) + message(1, 1, MID, b"")
    assert decode(codec, stream, max_frame_size=100) == [(0, b"a" * 96), (2, (1, 1, MID, b""))]


def test_buffer_and_view_inputs(codec):
    stream = message(9, 3, MID, b"body") + frame(0, b"OK")
    expected = [(2, (9, 3, MID, b"body")), (0, b"OK")]
    for make in (bytes, bytearray, memoryview, lambda b: memoryview(bytearray(b))):
        decoder = codec.FrameDecoder()
        frames = decoder.feed(make(stream[:20])) + decoder.feed(make(stream[20:]))
        assert frames == expected
        assert type(frames[0][1][3]) is bytes and type(frames[1][1]) is bytes
    words = array.array("I")
    words.frombytes(stream + b"\x00" * (-len(stream) % 4))
    decoder = codec.FrameDecoder()
    assert decoder.feed(memoryview(words)) == expected  # any C-contiguous buffer, as raw bytes
    assert decoder.buffered == len(words) * 4 - len(stream)


def test_bad_input_types(codec):
    decoder = codec.FrameDecoder()
    with pytest.raises(InvalidArgumentError) as info:
        decoder.feed("OK")
    assert str(info.value) == "feed() needs a bytes-like object, not str"
    with pytest.raises(InvalidArgumentError) as info:
        decoder.feed(memoryview(frame(0, b"OK") * 2)[::2])
    assert str(info.value) == "feed() needs a C-contiguous buffer"
    assert decoder.feed(frame(0, b"OK")) == [(0, b"OK")]  # a type error does not break it


def test_empty_feed(codec):
    decoder = codec.FrameDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.feed(bytearray()) == []
    assert decoder.buffered == 2
    assert decoder.feed(b"\x00\x06\x00\x00\x00\x00OK") == [(0, b"OK")]


def test_buffer_holds_only_the_incomplete_frame(codec):
    decoder = codec.FrameDecoder(max_frame_size=1000)
    stream = frame(0, b"x" * 992) * 3  # 1000-byte frames
    for i in range(0, len(stream), 700):
        decoder.feed(stream[i : i + 700])
        assert decoder.buffered == min(i + 700, len(stream)) % 1000
        assert decoder.buffered <= 1004


def test_huge_max_frame_size_does_not_preallocate(codec):
    decoder = codec.FrameDecoder(max_frame_size=2**40)
    assert decoder.max_frame_size == 2**40
    tracemalloc.start()
    try:
        assert decoder.feed(b"\xff\xff\xff\xff\x00\x00\x00\x00" + b"x" * 100) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.buffered == 108
    assert peak < 1 << 20


def test_max_frame_size_validation(codec):
    for bad in (29, 0, -1, True, 30.0, "100", None):
        with pytest.raises(InvalidArgumentError) as info:
            codec.FrameDecoder(bad)
        assert str(info.value) == "max_frame_size must be an int >= 30, got %r" % (bad,)
    assert codec.FrameDecoder(30).max_frame_size == 30
    assert codec.FrameDecoder(max_frame_size=4096).max_frame_size == 4096
    decoder = codec.FrameDecoder()
    with pytest.raises(AttributeError):
        decoder.max_frame_size = 100
    with pytest.raises(AttributeError):
        decoder.buffered = 1


def test_decode_message(codec):
    payload = struct.pack(">qH16s", -7, 50000, MID) + b"data"
    assert codec.decode_message(payload) == (-7, 50000, MID, b"data")
    assert codec.decode_message(memoryview(bytearray(payload))) == (-7, 50000, MID, b"data")
    assert codec.decode_message(payload[:26]) == (-7, 50000, MID, b"")
    with pytest.raises(ProtocolError) as info:
        codec.decode_message(payload[:25])
    assert str(info.value) == "message frame of 25 bytes is shorter than the 26-byte message header"
    with pytest.raises(InvalidArgumentError) as info:
        codec.decode_message(12)
    assert str(info.value) == "decode_message() needs a bytes-like object, not int"


# --- decoder: protocol errors --------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 2, 3])
def test_size_too_small(codec, size):
    text = "frame size %d is too small to hold a frame type" % size
    bad = struct.pack(">II", size, 0)
    assert_protocol_error(codec, bad, 4, text)
    # frames completed earlier in the same feed are dropped: the stream is dead
    assert_protocol_error(codec, frame(0, b"OK") + bad, 14, text)


def test_size_over_maximum(codec):
    assert_protocol_error(codec, struct.pack(">II", 101, 0), 4,
                          "frame size 101 exceeds the maximum of 100", max_frame_size=100)
    big = struct.pack(">II", 16 * 1024 * 1024 + 1, 0)
    assert_protocol_error(codec, message(1, 1, MID, b"m") + big, 35 + 4,
                          "frame size 16777217 exceeds the maximum of 16777216")


@pytest.mark.parametrize("size", [0x80000000, 0xFFFFFFFF])
def test_huge_length_prefix_fails_without_allocating(codec, size):
    text = "frame size %d exceeds the maximum of %d" % (size, 16 * 1024 * 1024)
    tracemalloc.start()
    try:
        assert_protocol_error(codec, struct.pack(">II", size, 0) + b"x" * 64, 4, text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_size_is_checked_before_type(codec):
    assert_protocol_error(codec, struct.pack(">II", 3, 9), 4,
                          "frame size 3 is too small to hold a frame type")


@pytest.mark.parametrize("frame_type", [3, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF])
def test_unknown_frame_type(codec, frame_type):
    bad = struct.pack(">II", 100, frame_type) + b"x" * 10
    text = "unknown frame type %d" % frame_type
    assert_protocol_error(codec, bad, 8, text)
    assert_protocol_error(codec, frame(1, b"E_BAD") + bad, 13 + 8, text)


@pytest.mark.parametrize("data_size", [0, 1, 25])
def test_message_shorter_than_header(codec, data_size):
    text = "message frame of %d bytes is shorter than the 26-byte message header" % data_size
    assert_protocol_error(codec, frame(2, b"m" * data_size), 8, text)
    assert_protocol_error(codec, frame(0, b"OK") + frame(2, b"m" * data_size), 18, text)


def test_poisoned_decoder_stays_broken(codec):
    decoder = codec.FrameDecoder()
    assert decoder.feed(frame(0, b"OK")) == [(0, b"OK")]
    with pytest.raises(ProtocolError):
        decoder.feed(b"\x00\x00\x00\x00")
    for _ in range(3):
        with pytest.raises(ProtocolError) as info:
            decoder.feed(frame(0, b"OK"))
        assert str(info.value) == BROKEN
    assert decoder.buffered == 0


# --- encoders ------------------------------------------------------------------


def test_simple_commands(codec):
    assert codec.encode_cls() == b"CLS\n"
    assert codec.encode_nop() == b"NOP\n"
    assert codec.encode_rdy(0) == b"RDY 0\n"
    assert codec.encode_rdy(2500) == b"RDY 2500\n"
    assert codec.encode_sub("events", "archive#ephemeral") == b"SUB events archive#ephemeral\n"
    assert codec.encode_sub(b"t", bytearray(b"c")) == b"SUB t c\n"
    assert codec.encode_fin(MID) == b"FIN 0123456789abcdef\n"
    assert codec.encode_fin(MID.decode()) == b"FIN 0123456789abcdef\n"
    assert codec.encode_fin(bytearray(MID)) == b"FIN 0123456789abcdef\n"
    assert codec.encode_req(MID, 0) == b"REQ 0123456789abcdef 0\n"
    assert codec.encode_req(MID, 60000) == b"REQ 0123456789abcdef 60000\n"
    assert codec.encode_touch(MID) == b"TOUCH 0123456789abcdef\n"


def test_fin_many(codec):
    ids = [b"%016d" % i for i in range(3)]
    expected = b"".join(b"FIN " + i + b"\n" for i in ids)
    assert codec.encode_fin_many(ids) == expected
    assert codec.encode_fin_many(iter(ids)) == expected
    assert codec.encode_fin_many(tuple(i.decode() for i in ids)) == expected
    assert codec.encode_fin_many([]) == b""
    with pytest.raises(InvalidArgumentError) as info:
        codec.encode_fin_many([ids[0], b"short", ids[1]])
    assert str(info.value) == "message id must be 16 bytes, got 5"
    for bad in (MID, MID.decode(), 5):
        with pytest.raises(InvalidArgumentError) as info:
            codec.encode_fin_many(bad)
        assert str(info.value) == (
            "encode_fin_many() needs an iterable of message ids, not %s" % type(bad).__name__
        )


def test_identify(codec):
    data = {"client_id": "worker-1", "feature_negotiation": True, "heartbeat_interval": 30000}
    body = json.dumps(data).encode()
    assert body == b'{"client_id": "worker-1", "feature_negotiation": true, "heartbeat_interval": 30000}'
    assert codec.encode_identify(data) == b"IDENTIFY\n" + struct.pack(">I", len(body)) + body
    assert codec.encode_identify({"user_agent": "n\u00e9"}) == (
        b'IDENTIFY\n\x00\x00\x00\x19{"user_agent": "n\\u00e9"}'
    )
    with pytest.raises(InvalidArgumentError) as info:
        codec.encode_identify([("client_id", "x")])
    assert str(info.value) == "IDENTIFY data must be a dict, not list"


def test_auth(codec):
    assert codec.encode_auth(b"s3cret") == b"AUTH\n\x00\x00\x00\x06s3cret"
    assert codec.encode_auth("s\u00e9") == b"AUTH\n\x00\x00\x00\x03s\xc3\xa9"
    assert codec.encode_auth(b"") == b"AUTH\n\x00\x00\x00\x00"
    with pytest.raises(InvalidArgumentError) as info:
        codec.encode_auth(None)
    assert str(info.value) == "auth secret must be bytes or str, not NoneType"


def test_pub_and_dpub(codec):
    assert codec.encode_pub("t", b"hello") == b"PUB t\n\x00\x00\x00\x05hello"
    assert codec.encode_pub(b"t", b"") == b"PUB t\n\x00\x00\x00\x00"
    assert codec.encode_pub("t", bytearray(b"ab")) == b"PUB t\n\x00\x00\x00\x02ab"
    assert codec.encode_pub("t", memoryview(b"abcd")[::2]) == b"PUB t\n\x00\x00\x00\x02ac"
    assert codec.encode_pub("t", memoryview(array.array("H", [1]))) == b"PUB t\n\x00\x00\x00\x02" + bytes(array.array("H", [1]))
    assert codec.encode_dpub("t", 1500, b"later") == b"DPUB t 1500\n\x00\x00\x00\x05later"
    assert codec.encode_dpub("t", 0, b"") == b"DPUB t 0\n\x00\x00\x00\x00"


def test_mpub(codec):
    expected = b"MPUB t\n" + struct.pack(">II", 4 + 5 + 6, 2) + b"\x00\x00\x00\x01a\x00\x00\x00\x02bc"
    assert codec.encode_mpub("t", [b"a", b"bc"]) == expected
    assert codec.encode_mpub("t", (b for b in [b"a", bytearray(b"bc")])) == expected
    assert codec.encode_mpub("t", [b""]) == b"MPUB t\n" + struct.pack(">III", 8, 1, 0)
    with pytest.raises(InvalidArgumentError) as info:
        codec.encode_mpub("t", [])
    assert str(info.value) == "MPUB needs at least one message"
    with pytest.raises(InvalidArgumentError) as info:
        codec.encode_mpub("t", b"ab")
    assert str(info.value) == "MPUB needs an iterable of message bodies, not bytes"
    with pytest.raises(InvalidBodyError) as info:
        codec.encode_mpub("t", [b"a", "b"])
    assert str(info.value) == "message body must be bytes, not str"


@pytest.mark.parametrize("body", ["text", 5, None, [b"a"]])
def test_body_type_errors(codec, body):
    text = "message body must be bytes, not %s" % type(body).__name__
    for call in (
        lambda: codec.encode_pub("t", body),
        lambda: codec.encode_dpub("t", 10, body),
        lambda: codec.encode_mpub("t", [b"ok", body]),
    ):
        with pytest.raises(InvalidBodyError) as info:
            call()
        assert str(info.value) == text
        assert isinstance(info.value, TypeError) and isinstance(info.value, InvalidArgumentError)


@pytest.mark.parametrize(
    "value, text",
    [
        (-1, "%s must be >= 0, got -1"),
        (True, "%s must be an int, not bool"),
        (1.5, "%s must be an int, not float"),
        ("5", "%s must be an int, not str"),
    ],
)
def test_count_and_delay_errors(codec, value, text):
    for name, call in (
        ("count", lambda: codec.encode_rdy(value)),
        ("delay_ms", lambda: codec.encode_req(MID, value)),
        ("delay_ms", lambda: codec.encode_dpub("t", value, b"x")),
    ):
        with pytest.raises(InvalidArgumentError) as info:
            call()
        assert str(info.value) == text % name


@pytest.mark.parametrize(
    "value, text",
    [
        (b"0123456789abcde", "message id must be 16 bytes, got 15"),
        (b"0123456789abcdef0", "message id must be 16 bytes, got 17"),
        (b"0123456789 abcde", "message id must not contain a space or newline, got b'0123456789 abcde'"),
        ("0123456789abcde\n", "message id must not contain a space or newline, got '0123456789abcde\\n'"),
        ("0123456789abcd\u00e9f", "message id must be ASCII, got '0123456789abcd\u00e9f'"),
        (12, "message id must be bytes or str, not int"),
    ],
)
def test_message_id_errors(codec, value, text):
    for call in (
        lambda: codec.encode_fin(value),
        lambda: codec.encode_req(value, 0),
        lambda: codec.encode_touch(value),
        lambda: codec.encode_fin_many([MID, value]),
    ):
        with pytest.raises(InvalidArgumentError) as info:
            call()
        assert str(info.value) == text


@pytest.mark.parametrize(
    "value, text",
    [
        ("a b", "%s must not contain a space or newline, got 'a b'"),
        (b"a\n", "%s must not contain a space or newline, got b'a\\n'"),
        ("caf\u00e9", "%s must be ASCII, got 'caf\u00e9'"),
        (None, "%s must be str or bytes, not NoneType"),
    ],
)
def test_name_errors(codec, value, text):
    for name, call in (
        ("topic", lambda: codec.encode_sub(value, "c")),
        ("channel", lambda: codec.encode_sub("t", value)),
        ("topic", lambda: codec.encode_pub(value, b"x")),
        ("topic", lambda: codec.encode_mpub(value, [b"x"])),
        ("topic", lambda: codec.encode_dpub(value, 0, b"x")),
    ):
        with pytest.raises(InvalidArgumentError) as info:
            call()
        assert str(info.value) == text % name


# --- implementation selection ----------------------------------------------------


def test_codec_module_reexports_chosen_implementation():
    impl = codec_module.python_impl if codec_module.IMPLEMENTATION == "python" else codec_module.compiled_impl
    assert codec_module.IMPLEMENTATION in ("python", "cython")
    for name in codec_module.python_impl.__all__:
        assert getattr(codec_module, name) is getattr(impl, name)
    if codec_module.compiled_impl is not None:
        assert sorted(codec_module.compiled_impl.__all__) == sorted(codec_module.python_impl.__all__)


@pytest.mark.parametrize("pure, expected", [("1", "python"), ("", None)])
def test_nsq_pure_python_env(pure, expected):
    from nsq import publishing

    if expected is None:
        expected = "python" if codec_module.compiled_impl is None else "cython"
        expected_publish = "python" if publishing.compiled_impl is None else "cython"
    else:
        expected_publish = expected
    # (the switch's other names cleared: the suite itself may run with one of them set)
    env = {k: v for k, v in os.environ.items() if k not in (PURE_PYTHON_ENV, *PURE_PYTHON_ALIASES)}
    env["NSQ_PURE_PYTHON"] = pure
    out = subprocess.run(
        [sys.executable, "-c",
         "from nsq import codec, publishing; print(codec.IMPLEMENTATION, publishing.IMPLEMENTATION)"],
        cwd=os.path.dirname(os.path.dirname(codec_module.__file__)),
        env=env, capture_output=True, text=True, timeout=30, check=True,
    )
    assert out.stdout.split() == [expected, expected_publish]
