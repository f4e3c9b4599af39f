# Tests of the Pulsar wire codec (no server), run against both implementations:
# the pure-Python twin (pulsarfast.wire._codec_py) and the compiled module
# (pulsarfast.wire._codec); then property tests that the two give identical results,
# ProtocolError included, on any input.
from __future__ import annotations

import array
import gc
import os
import random
import struct
import subprocess
import sys
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msgengine.twins import PURE_PYTHON_ALIASES, PURE_PYTHON_ENV, pure_python_forced

from pulsarfast.base.results import ProtocolError
from pulsarfast.wire import codec as wire_module

pytestmark = [pytest.mark.pure, pytest.mark.timeout(60)]

py = wire_module.python_impl
cy = wire_module.compiled_impl
MODES = ("whole", "bytes", "random")
KINDS = (bytes, bytearray, memoryview)
# (the `both` fixture is stateless: it may serve every example)
HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=HEALTH)


def _compiled_missing():
    reason = "compiled pulsarfast.wire._codec is not importable: %s" % wire_module.compiled_import_error
    if os.environ.get("NSQ_REQUIRE_COMPILED") == "1" or os.environ.get("PULSARFAST_REQUIRE_COMPILED") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(params=["python", "cython"])
def wire(request):
    if request.param == "python":
        return py
    if cy is None:
        _compiled_missing()
    return cy


@pytest.fixture
def both():
    if cy is None:
        _compiled_missing()
    return py, cy


# --- hand-built wire bytes (independent of the encoders under test) ------------------------


def simple(command: bytes) -> bytes:
    return struct.pack(">II", 4 + len(command), len(command)) + command


def payload_frame(command: bytes, metadata: bytes, payload: bytes, crc: int | str | None = "good") -> bytes:
    """A payload frame; crc "good" (the right checksum), an int (that checksum) or None (no magic)."""
    checked = struct.pack(">I", len(metadata)) + metadata + payload
    if crc is None:
        body = checked
    else:
        value = py.crc32c(checked) if crc == "good" else crc
        body = struct.pack(">HI", 0x0E01, value) + checked
    inner = struct.pack(">I", len(command)) + command + body
    return struct.pack(">I", len(inner)) + inner


def raw_frame(inner: bytes) -> bytes:
    """A frame of exactly these bytes after its total size."""
    return struct.pack(">I", len(inner)) + inner


def split(data: bytes, mode: str, seed: int = 0) -> list[bytes]:
    if mode == "whole":
        return [data]
    if mode == "bytes":
        return [data[i : i + 1] for i in range(len(data))]
    rng = random.Random(seed)
    if len(data) < 2:
        return [data]
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 40))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def feed_reused(decoder, chunk: bytes) -> list:
    """feed() a memoryview of a scratch buffer that is overwritten afterwards, as the transport does."""
    scratch = bytearray(chunk)
    view = memoryview(scratch)
    try:
        return decoder.feed(view)
    finally:
        view.release()
        scratch[:] = b"\xa5" * len(scratch)


def feed_as(decoder, chunk: bytes, kind) -> list:
    if kind is memoryview:
        return feed_reused(decoder, chunk)
    return decoder.feed(kind(chunk))


def decode(wire, stream: bytes, **kwargs) -> list:
    """Decode stream fed whole, byte by byte and at random splits, as bytes, bytearray and a
    reused memoryview, and with a partial next frame after it; check every way gives the
    same frames; return them."""
    results = []
    for mode in MODES:
        for kind in KINDS:
            decoder = wire.FrameDecoder(**kwargs)
            frames = []
            for chunk in split(stream, mode, seed=len(stream)):
                frames.extend(feed_as(decoder, chunk, kind))
            assert decoder.pending_bytes() == 0
            results.append(frames)
    following = payload_frame(b"\x08\x05", b"meta", b"next")
    for cut in (1, 3, 4, 5, 8, 12, len(following) - 1):
        for mode in ("whole", "random"):
            decoder = wire.FrameDecoder(**kwargs)
            frames = []
            for chunk in split(stream + following[:cut], mode, seed=cut):
                frames.extend(feed_reused(decoder, chunk))
            assert decoder.pending_bytes() == cut
            results.append(frames)
            assert feed_reused(decoder, following[cut:]) == [(b"\x08\x05", b"meta", b"next", True)]
            assert decoder.pending_bytes() == 0
    for frames in results[1:]:
        assert frames == results[0]
    for frame in results[0]:
        assert type(frame) is tuple and len(frame) == 4
        command, metadata, payload, checksum_ok = frame
        assert type(command) is bytes and type(checksum_ok) is bool
        assert (metadata is None) == (payload is None)
        assert metadata is None or (type(metadata) is bytes and type(payload) is bytes)
    return results[0]


def assert_protocol_error(wire, stream: bytes, trigger: int, **kwargs) -> None:
    """Feeding stream must raise ProtocolError at the feed() call that brings the fed byte
    count to trigger, however it is split and whatever follows; then the decoder stays broken."""
    for tail in (b"", simple(b"after")):
        for mode in MODES:
            decoder = wire.FrameDecoder(**kwargs)
            fed = 0
            for chunk in split(stream + tail, mode, seed=len(stream)):
                fed += len(chunk)
                if fed < trigger:
                    decoder.feed(chunk)
                    continue
                held = decoder.pending_bytes()
                with pytest.raises(ProtocolError):
                    decoder.feed(chunk)
                break
            else:
                pytest.fail("no ProtocolError after %d bytes" % fed)
            assert decoder.pending_bytes() == held + len(chunk)  # the twin's count
            for later in (b"", b"\x00", simple(b"ok")):
                with pytest.raises(ProtocolError):
                    decoder.feed(later)


# --- the chooser ---------------------------------------------------------------------------


def test_chooser_exports():
    for name in py.__all__:
        assert getattr(wire_module, name) is getattr(wire_module._impl, name)
        if cy is not None:
            assert hasattr(cy, name)
            if name.isupper():
                assert getattr(cy, name) == getattr(py, name)
    assert wire_module.Frame is tuple
    assert {"IMPLEMENTATION", "python_impl", "compiled_impl"} <= set(wire_module.__all__)
    expected = "python" if pure_python_forced() or cy is None else "cython"
    assert wire_module.IMPLEMENTATION == expected


def test_chooser_environment():
    code = (
        "import sys, pulsarfast; had = 'nsq' in sys.modules; import pulsarfast.wire.codec as w; "
        "print(w.IMPLEMENTATION, had or 'nsq' not in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in (PURE_PYTHON_ENV, *PURE_PYTHON_ALIASES)}
    compiled = "cython" if cy is not None else "python"
    for extra, expected in (
        ({}, compiled),
        ({"NSQFAST_PURE_PYTHON": "1"}, "python"),
        ({"PULSARFAST_PURE_PYTHON": "1"}, "python"),
        ({"NSQ_PURE_PYTHON": "1"}, "python"),
        ({"PULSARFAST_PURE_PYTHON": "0"}, compiled),
    ):
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()
        assert out == [expected, "True"], extra  # and pulsarfast.wire.codec does not import nsq


# --- crc32c --------------------------------------------------------------------------------


@pytest.mark.parametrize("data, expected", [
    (b"123456789", 0xE3069283),
    (b"", 0),
    (b"a", 0xC1D04330),
    (bytes(32), 0x8A9136AA),  # RFC 3720 B.4
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
])
def test_crc32c_vectors(wire, data, expected):
    assert wire.crc32c(data) == expected
    assert wire.crc32c(bytearray(data)) == expected
    assert wire.crc32c(memoryview(data)) == expected


def test_crc32c_continuation(wire):
    data = b"123456789"
    for cut in range(len(data) + 1):
        assert wire.crc32c(data[cut:], wire.crc32c(data[:cut])) == 0xE3069283
    assert wire.crc32c(b"", 0x12345678) == 0x12345678
    # the value is taken modulo 2**32, as the twin does
    assert wire.crc32c(b"abc", 0x1_2345_6789) == wire.crc32c(b"abc", 0x2345_6789)
    assert wire.crc32c(b"abc", -1) == wire.crc32c(b"abc", 0xFFFFFFFF)


def test_crc32c_inputs(wire):
    words = array.array("I", [1, 2, 3, 0xDEADBEEF])
    assert wire.crc32c(words) == wire.crc32c(words.tobytes())
    strided = memoryview(bytes(range(40)))[::3]
    assert wire.crc32c(strided) == wire.crc32c(bytes(range(0, 40, 3)))
    assert wire.crc32c([49, 50, 51]) == wire.crc32c(b"123")
    for bad in ("text", None, 1.5):
        with pytest.raises(TypeError):
            wire.crc32c(bad)
    with pytest.raises(TypeError):
        wire.crc32c(b"x", 1.5)


def test_crc32c_long_buffers(both):
    """Every length around the compiled hardware path's block sizes, at every alignment."""
    rng = random.Random(7)
    data = rng.randbytes(3 * 8192 + 3 * 256 + 40)
    for n in (0, 1, 7, 8, 9, 767, 768, 769, 1000, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 777, len(data) - 3):
        for offset in (0, 1, 3):
            chunk = memoryview(data)[offset : offset + n]
            expected = py.crc32c(chunk, 0xABCDEF)
            assert cy.crc32c(chunk, 0xABCDEF) == expected
            assert cy._crc32c_software(chunk, 0xABCDEF) == expected
    big = rng.randbytes(200_000)  # released GIL path
    assert cy.crc32c(big) == cy._crc32c_software(big) == cy.crc32c(big[77_777:], cy.crc32c(big[:77_777]))


# --- varint and read_fields ----------------------------------------------------------------


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (150, b"\x96\x01"),
    (300, b"\xac\x02"),
    (2**32, b"\x80\x80\x80\x80\x10"),
    (2**63 - 1, b"\xff" * 8 + b"\x7f"),
    (2**64 - 1, b"\xff" * 9 + b"\x01"),
    (-1, b"\xff" * 9 + b"\x01"),
    (-2, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (-(2**63), b"\x80" * 9 + b"\x01"),
    (2**64, b"\x80" * 9 + b"\x02"),  # larger than 64 bits: written whole
    (True, b"\x01"),
])
def test_varint(wire, value, encoded):
    assert wire.varint(value) == encoded


def test_varint_errors(wire):
    for bad in (1.5, None, "1"):
        with pytest.raises(TypeError):
            wire.varint(bad)


def test_read_fields_hand_built(wire):
    assert wire.read_fields(b"") == []
    assert wire.read_fields(b"\x08\x96\x01") == [1, 150]
    assert wire.read_fields(b"\x12\x07testing") == [2, b"testing"]
    message = (
        b"\x08\xfe" + b"\xff" * 8 + b"\x01"  # 1: int64 -2 as a 10-byte varint
        + b"\x11" + struct.pack("<Q", 2**64 - 3)  # 2: fixed64
        + b"\x1d" + struct.pack("<I", 0xFEDCBA98)  # 3: fixed32
        + b"\x22\x05" + b"\x08\x01\x12\x01z"  # 4: nested message
        + b"\x2a\x00"  # 5: empty bytes
        + b"\x80\x01\x07"  # 16: a two-byte key
        + b"\xf8\xff\xff\xff\x0f\x00"  # 536870911: the largest field number
        + b"\x08\x02"  # 1 again: every occurrence, in wire order
    )
    fields = wire.read_fields(message)
    assert fields == [1, 2**64 - 2, 2, 2**64 - 3, 3, 0xFEDCBA98, 4, b"\x08\x01\x12\x01z", 5, b"",
                      16, 7, 2**29 - 1, 0, 1, 2]
    assert wire.read_fields(fields[7]) == [1, 1, 2, b"z"]
    assert all(type(item) in (int, bytes) for item in fields)
    assert wire.read_fields(bytearray(message)) == fields
    assert wire.read_fields(memoryview(b"??" + message)[2:]) == fields


def test_read_fields_varint_limits(wire):
    # a 10th byte with more than the 64th bit: the bits past 64 are dropped
    assert wire.read_fields(b"\x08" + b"\xff" * 9 + b"\x7f") == [1, 2**64 - 1]
    assert wire.read_fields(b"\x08" + b"\x80" * 9 + b"\x00") == [1, 0]
    # an 11-byte varint is refused
    with pytest.raises(ProtocolError):
        wire.read_fields(b"\x08" + b"\x80" * 10 + b"\x00")


@pytest.mark.parametrize("data", [
    b"\x08",  # no value
    b"\x08\x80",  # value cut short
    b"\x80",  # key cut short
    b"\x12\x05abc",  # bytes past the end
    b"\x12\x80",  # size cut short
    b"\x12" + b"\xff" * 9 + b"\x01",  # size 2**64 - 1
    b"\x11\x00\x00\x00\x00\x00\x00\x00",  # fixed64 cut short
    b"\x1d\x00\x00\x00",  # fixed32 cut short
    b"\x0b",  # wire type 3 (start group)
    b"\x0c",  # wire type 4 (end group)
    b"\x0e\x00",  # wire type 6
    b"\x0f\x00",  # wire type 7
    b"\x00\x01",  # field 0
    b"\x02\x00",  # field 0, bytes
    b"\x08\x01\x00",  # a good field, then field 0
    b"\x08" + b"\xff" * 10 + b"\x01",  # 11-byte varint
])
def test_read_fields_errors(wire, data):
    with pytest.raises(ProtocolError):
        wire.read_fields(data)


# --- frames --------------------------------------------------------------------------------


def test_constants(wire):
    assert wire.MAGIC_CRC32C == 0x0E01
    assert wire.DEFAULT_MAX_FRAME_SIZE == 5 * 1024 * 1024 + 10 * 1024
    assert (wire.WIRE_VARINT, wire.WIRE_FIXED64, wire.WIRE_BYTES, wire.WIRE_FIXED32) == (0, 1, 2, 5)
    assert wire.FrameDecoder().max_frame_size == wire.DEFAULT_MAX_FRAME_SIZE
    assert wire.FrameDecoder().pending_bytes() == 0


def test_encoders_match_hand_built(wire):
    assert wire.encode_simple(b"\x08\x12") == simple(b"\x08\x12")
    assert wire.encode_simple(b"") == simple(b"")
    for command, metadata, payload in ((b"cmd", b"meta", b"payload"), (b"", b"", b""), (b"c" * 300, b"m", b"p" * 999)):
        assert wire.encode_payload(command, metadata, payload) == payload_frame(command, metadata, payload)
        assert wire.encode_payload(bytearray(command), memoryview(metadata), bytearray(payload)) == \
            payload_frame(command, metadata, payload)
    assert wire.encode_batch_entry(b"meta", b"body") == b"\x00\x00\x00\x04metabody"


def test_encoders_count_bytes_not_items(wire):
    words = array.array("I", [1, 2])
    assert wire.encode_simple(words) == simple(words.tobytes())
    assert wire.encode_simple(memoryview(words)) == simple(words.tobytes())
    assert wire.encode_payload(words, words, words) == payload_frame(words.tobytes(), words.tobytes(), words.tobytes())
    assert wire.encode_batch_entry(words, b"") == struct.pack(">I", 8) + words.tobytes()
    for bad in (5, None, "text"):
        with pytest.raises(TypeError):
            wire.encode_simple(bad)
        with pytest.raises(TypeError):
            wire.encode_payload(b"c", bad, b"p")
        with pytest.raises(TypeError):
            wire.encode_batch_entry(bad, b"")


def test_simple_frames(wire):
    stream = simple(b"\x08\x12\x92\x01\x00") + simple(b"") + simple(b"x" * 1000)
    assert decode(wire, stream) == [(b"\x08\x12\x92\x01\x00", None, None, True), (b"", None, None, True),
                                    (b"x" * 1000, None, None, True)]


def test_payload_frames(wire):
    stream = (
        payload_frame(b"send", b"metadata", b"payload")
        + payload_frame(b"send", b"", b"")
        + payload_frame(b"", b"m", b"p" * 500)
        + wire.encode_payload(b"enc", b"md", b"body")
    )
    assert decode(wire, stream) == [
        (b"send", b"metadata", b"payload", True),
        (b"send", b"", b"", True),
        (b"", b"m", b"p" * 500, True),
        (b"enc", b"md", b"body", True),
    ]


def test_bad_checksum(wire):
    good = py.crc32c(struct.pack(">I", 4) + b"meta" + b"payload")
    stream = payload_frame(b"send", b"meta", b"payload", crc=good ^ 1) + payload_frame(b"send", b"meta", b"payload")
    assert decode(wire, stream) == [(b"send", b"meta", b"payload", False), (b"send", b"meta", b"payload", True)]
    # a flipped payload byte is caught by the checksum, not by the framing
    frame = bytearray(wire.encode_payload(b"c", b"m", b"payload"))
    frame[-1] ^= 0x20
    assert wire.FrameDecoder().feed(bytes(frame)) == [(b"c", b"m", b"payloaD", False)]


def test_payload_frame_without_magic(wire):
    stream = payload_frame(b"send", b"metadata", b"payload", crc=None) + payload_frame(b"c", b"", b"", crc=None)
    assert decode(wire, stream) == [(b"send", b"metadata", b"payload", True), (b"c", b"", b"", True)]


def test_large_frame_in_chunks(wire):
    payload = random.Random(3).randbytes(300_000)
    frame = wire.encode_payload(b"send", b"meta", payload)
    decoder = wire.FrameDecoder()
    frames = []
    for start in range(0, len(frame), 65536):
        frames.extend(feed_reused(decoder, frame[start : start + 65536]))
    assert frames == [(b"send", b"meta", payload, True)]
    assert decoder.pending_bytes() == 0
    assert decoder.feed(simple(b"next")) == [(b"next", None, None, True)]


def test_frames_per_feed(wire):
    decoder = wire.FrameDecoder()
    frame = simple(b"abc")
    assert decoder.feed(frame[:3]) == []
    assert decoder.pending_bytes() == 3
    assert decoder.feed(b"") == []
    assert decoder.feed(frame[3:] + frame + frame[:5]) == [(b"abc", None, None, True)] * 2
    assert decoder.pending_bytes() == 5
    assert decoder.feed(frame[5:]) == [(b"abc", None, None, True)]
    assert decoder.pending_bytes() == 0


def test_max_frame_size(wire):
    frame = simple(b"x" * 20)  # a size of 24: the command size and the command
    assert decode(wire, frame, max_frame_size=24) == [(b"x" * 20, None, None, True)]
    assert_protocol_error(wire, frame, 4, max_frame_size=23)  # refused as soon as its size is read
    assert_protocol_error(wire, simple(b"ok") + struct.pack(">I", 2**32 - 1), 14)
    assert_protocol_error(wire, struct.pack(">I", wire.DEFAULT_MAX_FRAME_SIZE + 1), 4)
    decoder = wire.FrameDecoder(max_frame_size=8)
    assert decoder.max_frame_size == 8
    assert decoder.feed(simple(b"abcd")) == [(b"abcd", None, None, True)]
    decoder.max_frame_size = 100
    assert decoder.max_frame_size == 100
    assert decoder.feed(simple(b"y" * 96)) == [(b"y" * 96, None, None, True)]
    with pytest.raises(ProtocolError):
        decoder.feed(simple(b"y" * 97))
    assert wire.FrameDecoder(max_frame_size=2**40).feed(simple(b"z")) == [(b"z", None, None, True)]


@pytest.mark.parametrize("max_frame_size", [7, 0, -1, True, 8.0, "100", None])
def test_max_frame_size_refused(wire, max_frame_size):
    with pytest.raises(ProtocolError):
        wire.FrameDecoder(max_frame_size)


@pytest.mark.parametrize("inner", [
    b"",  # total 0
    b"\x00\x00\x00",  # total 3
    b"\x00\x00\x00\x05abcd",  # command past the frame
    b"\xff\xff\xff\xffabcd",  # command size 2**32 - 1
    b"\x00\x00\x00\x01c\x0e\x01",  # magic, no checksum
    b"\x00\x00\x00\x01c\x0e\x01\x00\x00\x00",  # magic, checksum cut short
    b"\x00\x00\x00\x01c\x0e\x01\x00\x00\x00\x00",  # magic and checksum, no metadata size
    b"\x00\x00\x00\x01c\x0e\x01\x00\x00\x00\x00\x00\x00",  # metadata size cut short
    b"\x00\x00\x00\x01c\x0e",  # one byte after the command
    b"\x00\x00\x00\x01c\x00\x00\x00",  # three bytes after the command
    b"\x00\x00\x00\x01c\x00\x00\x00\x05meta",  # metadata past the frame
    b"\x00\x00\x00\x01c\x0e\x01\x00\x00\x00\x00\x00\x00\x00\x09metadata",  # the same after a checksum
])
def test_truncated_structures(wire, inner):
    frame = raw_frame(inner)
    trigger = 4 if len(inner) < 4 else len(frame)
    assert_protocol_error(wire, frame, trigger)
    assert_protocol_error(wire, simple(b"first") + frame, len(simple(b"first")) + trigger)


def test_broken_decoder_stays_broken(wire):
    decoder = wire.FrameDecoder()
    assert decoder.feed(simple(b"one")) == [(b"one", None, None, True)]
    assert decoder.feed(simple(b"two")[:5]) == []
    with pytest.raises(ProtocolError):  # frames completed before the error in this feed are dropped
        decoder.feed(simple(b"two")[5:] + simple(b"three") + raw_frame(b"\x00\x00\x00\x09x"))
    assert decoder.pending_bytes() == 5 + len(simple(b"two")[5:] + simple(b"three")) + 9
    for later in (b"", simple(b"four"), bytearray(b"\x00"), memoryview(b"")):
        with pytest.raises(ProtocolError):
            decoder.feed(later)


def test_feed_refuses_non_buffers(wire):
    decoder = wire.FrameDecoder()
    decoder.feed(simple(b"abc")[:6])
    for bad in ("text", 5, None, [0, 0, 0, 0], memoryview(b"abcdef")[::2]):
        with pytest.raises(TypeError):
            decoder.feed(bad)
    assert decoder.pending_bytes() == 6  # not broken, nothing consumed
    assert decoder.feed(array.array("B", simple(b"abc")[6:])) == [(b"abc", None, None, True)]


# --- batches -------------------------------------------------------------------------------


def single_metadata(payload_size: int, key: bytes = b"") -> bytes:
    """A SingleMessageMetadata: properties (1), partition_key (2), payload_size (3)."""
    props = b"\x0a\x01k" + b"\x12\x01v"
    out = b"\x0a" + bytes([len(props)]) + props
    if key:
        out += b"\x12" + bytes([len(key)]) + key
    return out + b"\x18" + py.varint(payload_size)


def test_split_batch_round_trip(wire):
    bodies = [b"first", b"", b"x" * 300, b"\x00\xff"]
    metadatas = [single_metadata(len(body), key=b"k%d" % i) for i, body in enumerate(bodies)]
    payload = b"".join(wire.encode_batch_entry(m, b) for m, b in zip(metadatas, bodies))
    assert wire.split_batch(payload, 4) == list(zip(metadatas, bodies))
    assert wire.split_batch(bytearray(payload), 4) == list(zip(metadatas, bodies))
    assert wire.split_batch(memoryview(payload), 2) == list(zip(metadatas, bodies))[:2]  # the rest is ignored
    assert wire.split_batch(payload, 0) == []
    assert wire.split_batch(b"", 0) == []
    assert wire.split_batch(payload, True) == [(metadatas[0], bodies[0])]
    for entry in wire.split_batch(payload, 4):
        assert all(type(item) is bytes for item in entry)
        assert wire.read_fields(entry[0])[-2:] == [3, len(entry[1])]
    # the last payload_size wins; a fixed-width one is a number too
    metadata = b"\x18\x07" + b"\x18\x02"
    assert wire.split_batch(wire.encode_batch_entry(metadata, b"ab"), 1) == [(metadata, b"ab")]
    metadata = b"\x1d" + struct.pack("<I", 3)
    assert wire.split_batch(wire.encode_batch_entry(metadata, b"abc"), 1) == [(metadata, b"abc")]


@pytest.mark.parametrize("payload, count", [
    (b"", -1),  # a negative count
    (b"", 1),  # no entry
    (b"\x00\x00\x00", 1),  # size cut short
    (b"\x00\x00\x00\x05\x18\x00", 1),  # metadata past the payload
    (b"\x00\x00\x00\x02\x18\x05abc", 1),  # body past the payload
    (b"\x00\x00\x00\x02\x08\x05abcde", 1),  # no payload_size
    (b"\x00\x00\x00\x0b\x18" + b"\xff" * 9 + b"\x01", 1),  # payload_size -1
    (b"\x00\x00\x00\x05\x18\x80\x80\x80\x08" + bytes(10), 1),  # payload_size 2**31
    (b"\x00\x00\x00\x03\x1a\x01\x05abcde", 1),  # payload_size length-delimited
    (b"\x00\x00\x00\x04\x18\x01\x1a\x00a", 1),  # the last payload_size is length-delimited
    (b"\x00\x00\x00\x02\x18\x01a" + b"\x00\x00\x00\x02\x18\x01", 2),  # the second body is missing
    (b"\x00\x00\x00\x02\x18\x01a", 2),  # fewer entries than the count
    (b"\x00\x00\x00\x02\x18\x01a", 10**12),
    (b"\x00\x00\x00\x02\x18\x01a", 2**70),
    (b"\x00\x00\x00\x02\x0b\x01a", 1),  # bad metadata protobuf
    (b"\x00\x00\x00\x01\x18a", 1),  # metadata varint cut short
])
def test_split_batch_errors(wire, payload, count):
    with pytest.raises(ProtocolError):
        wire.split_batch(payload, count)


def assert_split_refuses_bad_arguments(split):
    """split(entry, count) raises TypeError for a count that is not an int and for a str entry."""
    entry = b"\x00\x00\x00\x02\x18\x01a"
    for count in (1.0, None, "1"):
        with pytest.raises(TypeError):
            split(entry, count)
    with pytest.raises(TypeError):
        split("text", 1)


def test_split_batch_bad_arguments(wire):
    assert_split_refuses_bad_arguments(wire.split_batch)


# --- the two implementations agree on any input --------------------------------------------


def outcome(call, *args):
    """('ok', result) or ('error', exception type): comparable across implementations."""
    try:
        return ("ok", call(*args))
    except Exception as exc:  # noqa: BLE001 - any difference is a failure
        return ("error", type(exc))


def run(impl, max_frame_size, chunks, kinds):
    """The outcome of the constructor, then of every feed() with pending_bytes() after it."""
    created = outcome(impl.FrameDecoder, max_frame_size)
    if created[0] == "error":
        return [created]
    decoder = created[1]
    return [(outcome(feed_as, decoder, chunk, kind), decoder.pending_bytes()) for chunk, kind in zip(chunks, kinds)]


def assert_same_decoding(max_frame_size, chunks, kinds):
    expected = run(py, max_frame_size, chunks, kinds)
    assert run(cy, max_frame_size, chunks, kinds) == expected
    return expected


@st.composite
def chunked(draw, streams):
    """A stream cut at random points (empty chunks allowed), each fed as bytes, bytearray or reused memoryview."""
    data = draw(streams)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=len(chunks), max_size=len(chunks)))
    return chunks, kinds


small_bytes = st.binary(max_size=40)
frames = st.one_of(
    small_bytes.map(simple),
    st.tuples(small_bytes, small_bytes, small_bytes).map(lambda t: payload_frame(*t)),
    st.tuples(small_bytes, small_bytes, small_bytes, st.integers(0, 2**32 - 1)).map(
        lambda t: payload_frame(t[0], t[1], t[2], crc=t[3])),
    st.tuples(small_bytes, small_bytes, small_bytes).map(lambda t: payload_frame(*t, crc=None)),
)
valid_streams = st.lists(frames, max_size=6).map(b"".join)
# and frames of whatever bytes inside a right total size
any_streams = st.lists(st.one_of(frames, small_bytes.map(raw_frame)), max_size=6).map(b"".join)
mutation = st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate"]), st.integers(0, 10**6), st.integers(0, 255))


def mutate(stream: bytes, mutations) -> bytes:
    data = bytearray(stream)
    for kind, position, value in mutations:
        if kind == "insert":
            data.insert(position % (len(data) + 1), value)
        elif data:
            index = position % len(data)
            if kind == "flip":
                data[index] ^= value or 1
            elif kind == "delete":
                del data[index]
            else:
                del data[index:]
    return bytes(data)


max_sizes = st.one_of(st.integers(8, 200), st.just(py.DEFAULT_MAX_FRAME_SIZE))


@SETTINGS
@given(max_sizes, chunked(st.binary(max_size=200)))
def test_same_frames_random_bytes(both, max_frame_size, chunks_and_kinds):
    assert_same_decoding(max_frame_size, *chunks_and_kinds)


@SETTINGS
@given(max_sizes, chunked(valid_streams))
def test_same_frames_valid_streams(both, max_frame_size, chunks_and_kinds):
    outcomes = assert_same_decoding(max_frame_size, *chunks_and_kinds)
    if max_frame_size == py.DEFAULT_MAX_FRAME_SIZE:
        assert all(result[0] == "ok" for result, _ in outcomes)


@SETTINGS
@given(st.data(), max_sizes, any_streams, st.lists(mutation, max_size=4))
def test_same_frames_mutated_streams(both, data, max_frame_size, stream, mutations):
    chunks, kinds = data.draw(chunked(st.just(mutate(stream, mutations))))
    assert_same_decoding(max_frame_size, chunks, kinds)


@settings(max_examples=100, deadline=None, suppress_health_check=HEALTH)
@given(st.one_of(st.integers(-5, 100), st.integers(2**31, 2**70), st.booleans(), st.floats(0, 100), st.none(),
                 st.text(max_size=3)))
def test_same_constructor(both, max_frame_size):
    assert run(cy, max_frame_size, [b"\x00\x00\x00\x0c"], [bytes]) == run(py, max_frame_size, [b"\x00\x00\x00\x0c"], [bytes])


@st.composite
def messages(draw):
    """A protobuf message of random fields, and the fields read_fields must return."""
    out = b""
    fields = []
    for _ in range(draw(st.integers(0, 6))):
        number = draw(st.one_of(st.integers(1, 20), st.integers(1, 2**29 - 1)))
        kind = draw(st.sampled_from([0, 1, 2, 5]))
        if kind == 0:
            value = draw(st.integers(-(2**63), 2**64 - 1))
            out += py.varint(number << 3) + py.varint(value)
            value &= 2**64 - 1
        elif kind == 1:
            value = draw(st.integers(0, 2**64 - 1))
            out += py.varint(number << 3 | 1) + struct.pack("<Q", value)
        elif kind == 5:
            value = draw(st.integers(0, 2**32 - 1))
            out += py.varint(number << 3 | 5) + struct.pack("<I", value)
        else:
            value = draw(st.binary(max_size=20))
            out += py.varint(number << 3 | 2) + py.varint(len(value)) + value
        fields += [number, value]
    return out, fields


@SETTINGS
@given(messages())
def test_read_fields_round_trip(both, message_and_fields):
    message, fields = message_and_fields
    assert py.read_fields(message) == fields
    assert cy.read_fields(message) == fields


@SETTINGS
@given(st.one_of(st.binary(max_size=60), messages().map(lambda m: m[0]), st.tuples(messages(), st.lists(mutation, min_size=1, max_size=3)).map(lambda t: mutate(t[0][0], t[1]))))
def test_same_read_fields(both, data):
    expected = outcome(py.read_fields, data)
    assert outcome(cy.read_fields, data) == expected
    assert expected[0] == "ok" or expected == ("error", ProtocolError)


entries = st.tuples(st.binary(max_size=20), st.integers(0, 30)).map(
    lambda t: py.encode_batch_entry(single_metadata(t[1], key=t[0][:5]), t[0] * 2)
)
batch_payloads = st.one_of(
    st.binary(max_size=80),
    st.lists(entries, max_size=4).map(b"".join),
    st.tuples(st.lists(entries, min_size=1, max_size=4).map(b"".join), st.lists(mutation, min_size=1, max_size=3)).map(
        lambda t: mutate(*t)),
)
counts = st.one_of(st.integers(-2, 6), st.sampled_from([10**12, 2**70]), st.booleans(), st.floats(0, 3), st.none())


@SETTINGS
@given(batch_payloads, counts)
def test_same_split_batch(both, payload, count):
    expected = outcome(py.split_batch, payload, count)
    assert outcome(cy.split_batch, payload, count) == expected
    assert outcome(cy.split_batch, memoryview(payload), count) == expected


@SETTINGS
@given(st.binary(max_size=3000), st.one_of(st.integers(0, 2**32 - 1), st.integers(-(2**70), 2**70)), st.integers(0, 7))
def test_same_crc32c(both, data, value, offset):
    view = memoryview(data)[offset:]
    expected = py.crc32c(view, value)
    assert cy.crc32c(view, value) == expected
    assert cy._crc32c_software(view, value) == expected


@SETTINGS
@given(st.one_of(st.integers(), st.integers(-(2**80), 2**80), st.booleans(), st.floats(), st.none(), st.text(max_size=2)))
def test_same_varint(both, value):
    assert outcome(cy.varint, value) == outcome(py.varint, value)


buffers = st.one_of(
    st.binary(max_size=30), st.binary(max_size=30).map(bytearray), st.binary(max_size=30).map(memoryview),
    st.lists(st.integers(0, 2**32 - 1), max_size=4).map(lambda v: array.array("I", v)),
    st.binary(max_size=30).map(lambda b: memoryview(b)[::2]),
    st.lists(st.integers(0, 300), max_size=4), st.integers(-2, 5), st.text(max_size=3), st.none(),
)


@SETTINGS
@given(st.sampled_from(["encode_simple", "encode_payload", "encode_batch_entry"]), st.lists(buffers, min_size=3, max_size=3))
def test_same_encoders(both, name, args):
    arity = {"encode_simple": 1, "encode_payload": 3, "encode_batch_entry": 2}[name]
    expected = outcome(getattr(py, name), *args[:arity])
    assert outcome(getattr(cy, name), *args[:arity]) == expected
    if expected[0] == "ok":
        assert type(expected[1]) is bytes
        if name != "encode_batch_entry":
            frames = py.FrameDecoder().feed(expected[1])
            assert len(frames) == 1 and frames[0][3] is True


# --- the hot paths: encode_send_frame, decode_message, decode_single_metadata ---------------
#
# Checked against the generic encoder and decoder of pulsarfast.wire.proto (the reference for the
# bytes and the values), then the two implementations against each other on any input.

from pulsarfast.wire import proto  # noqa: E402

U64 = 2**64 - 1
uint64s = st.one_of(st.integers(0, 300), st.integers(0, U64), st.sampled_from([0, 1, 127, 128, 2**63, U64]))
int64s = st.one_of(uint64s, st.integers(-(2**63), -1))
texts = st.text(max_size=12)
text_pairs = st.lists(st.tuples(texts, texts), max_size=4)


def signed64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def reference_send_frame(pid, seq, name, t, payload, properties=None, partition_key=None, event_time=0,
                         extra=b"", num_messages=1) -> bytes:
    """The SEND frame as the generic encoder writes it (str names and keys)."""
    command = proto.send(pid, seq, num_messages)
    metadata = proto.message_metadata(name, seq, t, properties=properties, partition_key=partition_key,
                                      event_time=event_time) + extra
    return py.encode_payload(command, metadata, payload)


def encoded(pairs):
    return None if pairs is None else [(k.encode(), v.encode()) for k, v in pairs]


extra_metadata = st.one_of(
    st.just(b""),
    st.builds(lambda n, v: proto.f_uint(11, n) + proto.f_bytes(16, v), st.integers(0, 2**31), st.binary(max_size=8)),
    st.builds(lambda k: proto.f_bytes(18, k) + proto.f_uint(19, 12345), st.binary(max_size=8)),
)


@SETTINGS
@given(uint64s, uint64s, texts, uint64s, st.binary(max_size=40), st.one_of(st.none(), text_pairs),
       st.one_of(st.none(), texts), int64s, extra_metadata, st.one_of(st.just(1), int64s))
def test_encode_send_frame_matches_proto(wire, pid, seq, name, t, payload, pairs, key, event_time, extra, count):
    expected = reference_send_frame(pid, seq, name, t, payload, pairs, key, event_time, extra, count)
    frame = wire.encode_send_frame(pid, seq, name.encode(), t, payload, encoded(pairs),
                                   None if key is None else key.encode(), event_time, extra, count)
    assert type(frame) is bytes and frame == expected
    if count == 1 and event_time == 0 and key is None and not extra:
        assert wire.encode_send_frame(pid, seq, name.encode(), t, payload, encoded(pairs)) == expected


def test_encode_send_frame_values(wire):
    pairs = [("trace", "abc123"), ("ключ", "значение ✓"), ("", ""), ("trace", "again")]
    cases = [
        (7, 123456, "standalone-0-1", 1700000000000, b"hello", pairs, "pk", 55, b"", 3),
        (U64, U64, "p", U64, b"", None, None, U64, b"", U64),
        (0, 0, "", 0, b"", [], "", 0, b"", 0),
        (1, 2, "x" * 300, 3, b"y" * 5000, [("k" * 200, "v" * 300)], "é" * 100, 1, proto.f_uint(11, 4), 1),
    ]
    for pid, seq, name, t, payload, props, key, event_time, extra, count in cases:
        expected = reference_send_frame(pid, seq, name, t, payload, props, key, event_time, extra, count)
        assert wire.encode_send_frame(pid, seq, name.encode(), t, payload, encoded(props),
                                      None if key is None else key.encode(), event_time, extra, count) == expected
        assert wire.encode_send_frame(pid, seq, name.encode(), t, payload, properties=encoded(props),
                                      partition_key=None if key is None else key.encode(), event_time=event_time,
                                      extra_metadata=extra, num_messages=count) == expected
    # negative numbers are written as int64, as protobuf does
    expected = reference_send_frame(5, 6, "n", 7, b"", event_time=-1, num_messages=-2)
    assert wire.encode_send_frame(5, 6, b"n", 7, b"", event_time=-1, num_messages=-2) == expected
    assert wire.encode_send_frame(5, 6, b"n", 7, b"", event_time=2**64 - 1, num_messages=2**64 - 2) == expected
    # the frame reads back: one payload frame with a good checksum, the metadata the generic decoder reads
    frame = wire.encode_send_frame(9, 10, b"name", 11, b"body", [(b"a", b"b")], b"key", 12, b"")
    [(command, metadata, payload, ok)] = wire.FrameDecoder().feed(frame)
    assert ok and payload == b"body"
    kind, send = proto.decode_command(command)
    assert (kind, send.producer_id, send.sequence_id, send.num_messages) == (proto.SEND, 9, 10, 1)
    meta = proto.decode(proto.MESSAGE_METADATA, metadata)
    assert (meta.producer_name, meta.sequence_id, meta.publish_time, meta.partition_key, meta.event_time) == (
        "name", 10, 11, "key", 12)
    assert [(kv.key, kv.value) for kv in meta.properties] == [("a", "b")]


def test_encode_send_frame_highest_sequence_id(wire):
    """A batch's SEND carries its last message's sequence id as CommandSend.highest_sequence_id (the
    field a deduplicating broker reads), after num_messages; None leaves the field out."""
    frame = wire.encode_send_frame(9, 100, b"p", 11, b"body", None, None, 0, b"", 5, 104)
    [(command, _metadata, payload, ok)] = wire.FrameDecoder().feed(frame)
    assert ok and payload == b"body"
    kind, send = proto.decode_command(command)
    assert (kind, send.sequence_id, send.num_messages, send.highest_sequence_id) == (proto.SEND, 100, 5, 104)
    assert command == proto.base_command(proto.SEND, proto.f_uint(1, 9) + proto.f_uint(2, 100) + proto.f_uint(3, 5)
                                         + proto.f_uint(6, 104))
    plain = wire.encode_send_frame(9, 100, b"p", 11, b"body", None, None, 0, b"", 5)
    assert plain == wire.encode_send_frame(9, 100, b"p", 11, b"body", None, None, 0, b"", 5, None)
    assert proto.decode_command(wire.FrameDecoder().feed(plain)[0][0])[1].highest_sequence_id in (None, 0)
    big = wire.encode_send_frame(1, 2, b"p", 3, b"", highest_sequence_id=2**64 - 1)
    assert proto.decode_command(wire.FrameDecoder().feed(big)[0][0])[1].highest_sequence_id == 2**64 - 1


def test_encode_send_frame_inputs(wire):
    expected = reference_send_frame(1, 2, "name", 3, b"body", [("a", "b"), ("c", "d")], "key")
    for convert in (bytes, bytearray, memoryview, lambda b: array.array("B", b)):
        assert wire.encode_send_frame(1, 2, convert(b"name"), 3, convert(b"body"),
                                      [(convert(b"a"), convert(b"b")), [convert(b"c"), b"d"]],
                                      convert(b"key"), extra_metadata=convert(b"")) == expected
    for properties in ({b"a": b"b", b"c": b"d"}, ((b"a", b"b"), (b"c", b"d")), iter([(b"a", b"b"), (b"c", b"d")])):
        assert wire.encode_send_frame(1, 2, b"name", 3, b"body", properties, b"key") == expected
    assert wire.encode_send_frame(True, 2, b"name", 3, b"body", [(b"a", b"b"), (b"c", b"d")], b"key") == \
        reference_send_frame(1, 2, "name", 3, b"body", [("a", "b"), ("c", "d")], "key")
    # extra_metadata and payload are taken as encode_payload() takes them
    assert wire.encode_send_frame(1, 2, b"n", 3, [104, 105], extra_metadata=bytearray(b"\x58\x01")) == \
        reference_send_frame(1, 2, "n", 3, b"hi", extra=b"\x58\x01")
    wide = array.array("I", [1, 2])
    assert wire.encode_send_frame(1, 2, b"n", 3, wide, extra_metadata=wide) == \
        reference_send_frame(1, 2, "n", 3, wide.tobytes(), extra=wide.tobytes())


@pytest.mark.parametrize("args, kwargs, error", [
    ((2**64, 1, b"n", 1, b""), {}, OverflowError),
    ((1, -(2**63) - 1, b"n", 1, b""), {}, OverflowError),
    ((1, 1, b"n", 2**70, b""), {}, OverflowError),
    ((1, 1, b"n", 1, b""), {"event_time": 2**64}, OverflowError),
    ((1, 1, b"n", 1, b""), {"num_messages": -(2**64)}, OverflowError),
    ((1.0, 1, b"n", 1, b""), {}, TypeError),
    ((1, "1", b"n", 1, b""), {}, TypeError),
    ((1, 1, b"n", None, b""), {}, TypeError),
    ((1, 1, "name", 1, b""), {}, TypeError),
    ((1, 1, 5, 1, b""), {}, TypeError),
    ((1, 1, None, 1, b""), {}, TypeError),
    ((1, 1, b"n", 1, "text"), {}, TypeError),
    ((1, 1, b"n", 1, None), {}, TypeError),
    ((1, 1, b"n", 1, b""), {"properties": [("k", b"v")]}, TypeError),
    ((1, 1, b"n", 1, b""), {"properties": [(b"k", 1)]}, TypeError),
    ((1, 1, b"n", 1, b""), {"properties": [(b"k", b"v", b"w")]}, ValueError),
    ((1, 1, b"n", 1, b""), {"properties": [b"kv"]}, TypeError),
    ((1, 1, b"n", 1, b""), {"properties": 5}, TypeError),
    ((1, 1, b"n", 1, b""), {"partition_key": "key"}, TypeError),
    ((1, 1, b"n", 1, b""), {"extra_metadata": None}, TypeError),
    ((1, 1, b"n", 1, b""), {"extra_metadata": 3}, TypeError),
    ((1, 1, b"n", 1, b""), {"extra_metadata": "x"}, TypeError),
])
def test_encode_send_frame_errors(wire, args, kwargs, error):
    with pytest.raises(error):
        wire.encode_send_frame(*args, **kwargs)


any_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**65), 2**65), int64s, st.floats(allow_nan=False), st.text(max_size=3),
    st.binary(max_size=6), st.binary(max_size=6).map(bytearray), st.lists(st.integers(0, 300), max_size=3),
)
any_properties = st.one_of(
    st.none(), st.lists(st.tuples(st.binary(max_size=4), st.binary(max_size=4)), max_size=3),
    st.lists(st.one_of(st.tuples(any_values, any_values), any_values, st.tuples(any_values)), max_size=3),
    st.dictionaries(st.binary(max_size=3), st.binary(max_size=3), max_size=2), any_values,
)


@SETTINGS
@given(st.lists(any_values, min_size=10, max_size=10), any_properties, st.integers(5, 10))
def test_same_encode_send_frame(both, args, properties, arity):
    args[5] = properties
    expected = outcome(py.encode_send_frame, *args[:arity])
    assert outcome(cy.encode_send_frame, *args[:arity]) == expected


# MessageMetadata / CommandMessage inputs: what the generic encoder writes, plus more fields

def key_value_field(number: int, key: bytes, value: bytes) -> bytes:
    return proto.f_bytes(number, proto.f_bytes(1, key) + proto.f_bytes(2, value))


@st.composite
def message_commands(draw):
    """A serialized CommandMessage (the body of the BaseCommand)."""
    ledger, entry = draw(uint64s), draw(uint64s)
    partition = draw(st.one_of(st.just(-1), st.integers(0, 2**31 - 1)))
    batch_index = draw(st.one_of(st.just(-1), st.integers(0, 2**31 - 1)))
    message_id = proto.message_id_data(ledger, entry, partition, batch_index, draw(st.integers(0, 100)))
    body = proto.f_uint(1, draw(uint64s)) + proto.f_bytes(2, message_id)
    if draw(st.booleans()):
        body += proto.f_uint(3, draw(uint64s))
    for _ in range(draw(st.integers(0, 2))):
        body += proto.f_uint(4, draw(int64s))  # ack_set
    if draw(st.booleans()):
        body += proto.f_uint(5, draw(uint64s)) + proto.f_uint(99, 1) + proto.f_bytes(98, b"unknown")
    return body


extra_fields = st.one_of(
    st.builds(lambda v: proto.f_str(5, v), texts),  # replicated_from
    st.builds(lambda v: proto.f_str(7, v), texts),  # replicate_to
    st.builds(lambda v: proto.f_bytes(13, v), st.binary(max_size=6)),  # encryption_keys
    st.builds(lambda v: proto.f_str(14, v), texts),  # encryption_algo
    st.builds(lambda v: proto.f_bytes(15, v), st.binary(max_size=6)),  # encryption_param
    st.builds(lambda v: proto.f_bytes(16, v), st.binary(max_size=6)),  # schema_version
    st.builds(lambda v: proto.f_bool(17, v), st.booleans()),  # partition_key_b64_encoded
    st.builds(lambda v: proto.f_uint(19, v), int64s),  # deliver_at_time
    st.builds(lambda v: proto.f_uint(20, v), int64s),  # marker_type
    st.builds(lambda a, b: proto.f_uint(22, a) + proto.f_uint(23, b), uint64s, uint64s),  # txnid
    st.builds(lambda v: proto.f_uint(24, v), uint64s),  # highest_sequence_id
    st.builds(lambda v: proto.f_str(26, v), texts),  # uuid
    st.builds(lambda n, v: proto.f_uint(n, v), st.sampled_from([27, 28, 29]), int64s),  # chunking
    st.builds(lambda v: proto.f_bool(30, v), st.booleans()),  # null_partition_key
    st.builds(lambda n, v: proto.f_uint(n, v), st.sampled_from([10, 21, 31, 64, 2**20]), uint64s),  # unknown
    st.builds(lambda n, v: proto.f_bytes(n, v), st.sampled_from([10, 21, 31, 64, 2**20]), st.binary(max_size=6)),
    st.builds(lambda v: proto.f_bytes(6, v.encode()), texts),  # a second partition_key: the last wins
    st.builds(lambda k, v: key_value_field(4, k.encode(), v.encode()), texts, texts),  # a KeyValue, duplicates too
)


@st.composite
def message_metadatas(draw):
    """A serialized MessageMetadata: the generic encoder's fields, then more in any order."""
    out = proto.message_metadata(
        draw(texts), draw(uint64s), draw(uint64s), properties=draw(st.one_of(st.none(), text_pairs)),
        partition_key=draw(st.one_of(st.none(), texts)), event_time=draw(int64s),
        num_messages_in_batch=draw(st.one_of(st.none(), st.integers(0, 1000), int64s)),
        compression=draw(st.integers(0, 4)), uncompressed_size=draw(uint64s),
        deliver_at_time=draw(st.one_of(st.none(), int64s)), ordering_key=draw(st.one_of(st.none(), st.binary(max_size=6))),
        replicate_to=draw(st.one_of(st.none(), st.lists(texts, max_size=2))),
        highest_sequence_id=draw(st.one_of(st.none(), uint64s)), null_value=draw(st.booleans()),
    )
    return out + b"".join(draw(st.lists(extra_fields, max_size=4)))


GENERIC_FIELDS = {13, 14, 15, 22, 23, 27, 28, 29}


def reference_message(command: bytes, metadata) -> tuple | None:
    """decode_message() by the generic decoder (ProtocolError when it raises)."""
    kind, record = proto.decode_command(command)
    if kind != proto.MESSAGE:
        return None
    if record.message_id is None:
        raise ProtocolError("no message_id")
    if metadata is None:
        raise ProtocolError("no metadata")
    meta = proto.decode(proto.MESSAGE_METADATA, metadata)
    numbers = set(py.read_fields(metadata)[::2])
    mid = record.message_id
    return (
        record.consumer_id, signed64(mid.ledgerId), signed64(mid.entryId), mid.partition, mid.batch_index,
        record.redelivery_count, meta.producer_name, meta.sequence_id, meta.publish_time,
        {kv.key: kv.value for kv in meta.properties}, meta.partition_key, meta.event_time,
        meta.num_messages_in_batch, meta.compression, meta.uncompressed_size, meta.ordering_key, meta.null_value,
        meta.schema_version,
        bool(numbers & GENERIC_FIELDS) or meta.partition_key_b64_encoded or meta.null_partition_key,
    )


def assert_same_as_reference(wire, command, metadata):
    expected = outcome(reference_message, command, metadata)
    got = outcome(wire.decode_message, command, metadata)
    assert got == expected
    if got[0] == "ok" and got[1] is not None:
        types = (int, int, int, int, int, int, str, int, int, dict, (str, type(None)), int, (int, type(None)),
                 int, int, (bytes, type(None)), bool, bytes, bool)
        assert len(got[1]) == 19 and all(isinstance(v, t) for v, t in zip(got[1], types))
    return got


@SETTINGS
@given(message_commands(), message_metadatas())
def test_decode_message_matches_proto(wire, body, metadata):
    command = proto.base_command(proto.MESSAGE, body)
    assert assert_same_as_reference(wire, command, metadata)[0] == "ok"
    for kind in (bytearray, memoryview):
        assert wire.decode_message(kind(command), kind(metadata)) == wire.decode_message(command, metadata)


@SETTINGS
@given(message_commands(), message_metadatas(), st.lists(mutation, max_size=3), st.lists(mutation, max_size=3))
def test_decode_message_mutated_matches_proto(wire, body, metadata, body_mutations, metadata_mutations):
    # the BaseCommand stays well-formed (type first), its CommandMessage and the metadata do not
    command = proto.base_command(proto.MESSAGE, mutate(body, body_mutations))
    assert_same_as_reference(wire, command, mutate(metadata, metadata_mutations))


def test_decode_message_values(wire):
    body = proto.f_uint(1, 3) + proto.f_bytes(2, proto.message_id_data(812, 4411)) + proto.f_uint(3, 2)
    command = proto.base_command(proto.MESSAGE, body)
    metadata = proto.message_metadata("standalone-0-1", 123456, 1700000000000, properties={"trace": "abc123"})
    assert wire.decode_message(command, metadata) == (
        3, 812, 4411, -1, -1, 2, "standalone-0-1", 123456, 1700000000000, {"trace": "abc123"}, None, 0,
        None, 0, 0, None, False, b"", False)
    # all the returned fields
    metadata = proto.message_metadata("ü", 2**64 - 1, 5, properties=[("k", "v"), ("k", "w"), ("é", "")],
                                      partition_key="", event_time=9, num_messages_in_batch=0,
                                      compression=proto.COMPRESSION_ZSTD, uncompressed_size=77, ordering_key=b"",
                                      null_value=True) + proto.f_bytes(16, b"\x00v1")
    mid = proto.message_id_data(2**64 - 1, 2**63, 2**31 - 1, 0)
    command = proto.base_command(proto.MESSAGE, proto.f_uint(1, 2**64 - 1) + proto.f_bytes(2, mid))
    assert wire.decode_message(command, metadata) == (
        2**64 - 1, -1, -(2**63), 2**31 - 1, 0, 0, "ü", 2**64 - 1, 5, {"k": "w", "é": ""}, "", 9,
        0, 3, 77, b"", True, b"\x00v1", False)
    # empty metadata: the defaults; a negative num_messages_in_batch is signed
    command = proto.base_command(proto.MESSAGE, proto.f_bytes(2, b""))
    assert wire.decode_message(command, b"") == (
        0, 0, 0, -1, -1, 0, "", 0, 0, {}, None, 0, None, 0, 0, None, False, b"", False)
    assert wire.decode_message(command, proto.f_uint(11, -2))[12] == -2
    # numbers in fixed-width fields are numbers too (as the generic decoder reads them)
    mid = b"\x09" + struct.pack("<Q", 2**64 - 2) + b"\x15" + struct.pack("<I", 7) + b"\x1d" + struct.pack("<I", 3)
    command = proto.base_command(proto.MESSAGE, proto.f_bytes(2, mid))
    assert wire.decode_message(command, b"\x11" + struct.pack("<Q", 42))[1:5] == (-2, 7, 3, -1)
    assert wire.decode_message(command, b"\x11" + struct.pack("<Q", 42))[7] == 42
    # a KeyValue without a key or a value: ""
    assert wire.decode_message(command, proto.f_bytes(4, b"") + proto.f_bytes(4, proto.f_str(2, "v")))[9] == {"": "v"}


def test_decode_message_not_a_message(wire):
    for command in (proto.ping(), proto.send(1, 2), proto.flow(1, 100), proto.base_command(2**64 - 1, b""),
                    proto.f_uint(1, 9 + 2**32) + proto.f_bytes(9, b"")):
        assert wire.decode_message(command, None) is None
        assert wire.decode_message(command, b"\xff") is None  # the metadata is not looked at
    # the type is the last one
    assert wire.decode_message(proto.f_uint(1, 9) + proto.f_uint(1, 6) + proto.f_bytes(9, b"\x12\x00"), b"") is None
    assert wire.decode_message(proto.f_uint(1, 6) + proto.f_uint(1, 9) + proto.f_bytes(9, b"\x12\x00"), b"")[0] == 0
    # fields before the type, and unknown ones, are fine; the last CommandMessage wins
    command = proto.f_bytes(9, b"\x08\x01\x12\x00") + proto.f_uint(1, 9) + proto.f_bytes(9, b"\x08\x02\x12\x00") + \
        proto.f_uint(50, 1) + proto.f_bytes(51, b"x")
    assert wire.decode_message(command, b"")[0] == 2


GENERIC_CASES = [
    (proto.f_bytes(13, b"\x0a\x01k"), True),
    (proto.f_str(14, "AES"), True),
    (proto.f_bytes(15, b"iv"), True),
    (proto.f_uint(15, 1), True),  # not read by the generic decoder: any wire type
    (proto.f_uint(22, 1), True),
    (proto.f_uint(23, 1), True),
    (proto.f_uint(27, 2), True),
    (proto.f_uint(28, 100), True),
    (proto.f_uint(29, 0), True),
    (proto.f_bool(17, True), True),
    (proto.f_bool(17, False), False),
    (proto.f_bool(17, True) + proto.f_bool(17, False), False),
    (proto.f_bool(30, True), True),
    (proto.f_bool(30, False), False),
    (proto.f_str(5, "cluster-a"), False),
    (proto.f_str(7, "cluster-b"), False),
    (proto.f_uint(19, 1700000000000), False),
    (proto.f_uint(20, 1), False),
    (proto.f_uint(24, 99), False),
    (proto.f_str(26, "uuid"), False),
    (proto.f_uint(10, 1) + proto.f_uint(21, 1) + proto.f_bytes(31, b"x") + proto.f_uint(1000, 5), False),
]


@pytest.mark.parametrize("extra, generic", GENERIC_CASES)
def test_decode_message_generic(wire, extra, generic):
    command = proto.base_command(proto.MESSAGE, proto.f_bytes(2, proto.message_id_data(1, 2)))
    metadata = proto.message_metadata("p", 1, 2, properties={"a": "b"}) + extra
    result = wire.decode_message(command, metadata)
    assert result[18] is generic
    assert result == reference_message(command, metadata)
    assert result[:18] == wire.decode_message(command, proto.message_metadata("p", 1, 2, properties={"a": "b"}))[:18]


MESSAGE_ID = proto.f_bytes(2, proto.message_id_data(1, 2))


@pytest.mark.parametrize("command, metadata", [
    (b"", b""),  # no type
    (proto.f_bytes(9, MESSAGE_ID), b""),  # no type
    (proto.f_bytes(1, b"\x09"), b""),  # a type that is not a number
    (proto.f_uint(1, 9), b""),  # MESSAGE without its command
    (proto.f_uint(1, 9) + proto.f_uint(9, 5), b""),  # the command is not a message
    (proto.base_command(9, b""), b""),  # no message_id
    (proto.base_command(9, proto.f_uint(1, 1) + proto.f_uint(3, 0)), b""),  # no message_id
    (proto.base_command(9, proto.f_uint(2, 5)), b""),  # message_id not a message
    (proto.base_command(9, proto.f_bytes(1, b"x") + MESSAGE_ID), b""),  # consumer_id not a number
    (proto.base_command(9, proto.f_bytes(3, b"") + MESSAGE_ID), b""),  # redelivery_count not a number
    (proto.base_command(9, proto.f_bytes(4, b"") + MESSAGE_ID), b""),  # ack_set packed: not read
    (proto.base_command(9, proto.f_bytes(5, b"") + MESSAGE_ID), b""),  # consumer_epoch
    (proto.base_command(9, proto.f_bytes(2, proto.f_bytes(1, b""))), b""),  # ledgerId not a number
    (proto.base_command(9, proto.f_bytes(2, proto.f_bytes(3, b""))), b""),  # partition not a number
    (proto.base_command(9, proto.f_bytes(2, proto.f_bytes(6, b""))), b""),  # batch_size not a number
    (proto.base_command(9, proto.f_bytes(2, b"\x08")), b""),  # message_id cut short
    (proto.base_command(9, MESSAGE_ID)[:-1], b""),  # command cut short
    (proto.base_command(9, MESSAGE_ID) + b"\x0b", b""),  # wire type 3
    (proto.base_command(9, MESSAGE_ID), None),  # no metadata
    (proto.base_command(9, MESSAGE_ID), b"\x0a\x05abc"),  # metadata cut short
    (proto.base_command(9, MESSAGE_ID), b"\x10"),  # varint cut short
    (proto.base_command(9, MESSAGE_ID), b"\x10" + b"\xff" * 10 + b"\x01"),  # varint too long
    (proto.base_command(9, MESSAGE_ID), b"\x00\x01"),  # field 0
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(1, b"\xff")),  # producer_name not UTF-8
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(1, b"\xed\xa0\x80")),  # a surrogate
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(1, 5)),  # producer_name not a string
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(2, b"")),  # sequence_id not a number
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(3, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(4, 1)),  # properties not a message
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(4, b"\x0a")),  # KeyValue cut short
    (proto.base_command(9, MESSAGE_ID), key_value_field(4, b"\xc3", b"v")),  # key not UTF-8
    (proto.base_command(9, MESSAGE_ID), key_value_field(4, b"k", b"\x80")),  # value not UTF-8
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(4, proto.f_uint(1, 1))),  # key not a string
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(6, b"\xff")),  # partition_key not UTF-8
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(6, 1)),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(8, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(9, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(11, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(12, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(16, 1)),  # schema_version not bytes
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(18, 1)),  # ordering_key not bytes
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(25, b"")),
    # the ignored fields are checked as the generic decoder checks them
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(5, b"\xff")),
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(7, 1)),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(19, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(20, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(24, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(26, b"\xfe")),
    # and so are those that make it generic, when the generic decoder reads them
    (proto.base_command(9, MESSAGE_ID), proto.f_uint(14, 1)),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(17, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(27, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(30, b"")),
    (proto.base_command(9, MESSAGE_ID), proto.f_bytes(13, b"x")[:-1]),  # cut short
])
def test_decode_message_errors(wire, command, metadata):
    with pytest.raises(ProtocolError):
        wire.decode_message(command, metadata)
    if command.startswith(b"\x08\x09"):  # what the generic decoder also refuses
        with pytest.raises(ProtocolError):
            reference_message(command, metadata)


def test_decode_message_bad_arguments(wire):
    command = proto.base_command(9, MESSAGE_ID)
    for bad in ("text", 1.5, object()):
        with pytest.raises(TypeError):
            wire.decode_message(bad, b"")
        with pytest.raises(TypeError):
            wire.decode_message(command, bad)
    with pytest.raises(TypeError):
        wire.decode_message(None, b"")


def test_decode_message_names_repeat(wire):
    """Names and keys of the same length and ends (the compiled cache's slots) stay apart."""
    command = proto.base_command(9, MESSAGE_ID)
    names = ["aXcYa", "aZcWa", "aXcYa", "a\u00e9a", "b\u00e9a", "x" * 48, "x" * 47 + "y", "x" * 49, "x" * 48]
    for _ in range(3):
        for name in names:
            metadata = proto.message_metadata(name, 1, 2, properties=[(name, name), (name[::-1], "v")])
            result = wire.decode_message(command, metadata)
            assert result[6] == name
            assert result[9] == {name: name, name[::-1]: "v"}
    # a name that is not UTF-8 is refused even after a valid one of the same length and ends
    wire.decode_message(command, proto.f_bytes(1, b"a\xc3\xa9a"))
    with pytest.raises(ProtocolError):
        wire.decode_message(command, proto.f_bytes(1, b"a\xc3\xc3a"))


@st.composite
def message_frames(draw):
    """(command, metadata) of a MESSAGE, of another command, or of any bytes."""
    command = draw(st.one_of(
        message_commands().map(lambda body: proto.base_command(proto.MESSAGE, body)),
        st.sampled_from([proto.ping(), proto.send(1, 2), proto.base_command(9, b"")]),
        st.binary(max_size=30),
    ))
    metadata = draw(st.one_of(message_metadatas(), st.binary(max_size=30), st.none()))
    return command, metadata


@SETTINGS
@given(message_frames(), st.lists(mutation, max_size=4), st.lists(mutation, max_size=4))
def test_same_decode_message(both, frame, command_mutations, metadata_mutations):
    command, metadata = frame
    command = mutate(command, command_mutations)
    if metadata is not None:
        metadata = mutate(metadata, metadata_mutations)
    expected = outcome(py.decode_message, command, metadata)
    assert outcome(cy.decode_message, command, metadata) == expected
    assert expected[0] == "ok" or expected == ("error", ProtocolError)
    assert outcome(cy.decode_message, memoryview(command), metadata) == expected


# SingleMessageMetadata and batches

@st.composite
def single_metadatas(draw):
    out = proto.single_message_metadata(
        draw(st.integers(0, 2**31 - 1)), properties=draw(st.one_of(st.none(), text_pairs)),
        partition_key=draw(st.one_of(st.none(), texts)), event_time=draw(int64s),
        sequence_id=draw(st.one_of(st.none(), uint64s)), ordering_key=draw(st.one_of(st.none(), st.binary(max_size=6))),
    )
    extras = st.one_of(
        st.builds(lambda v: proto.f_bool(4, v), st.booleans()), st.builds(lambda v: proto.f_bool(6, v), st.booleans()),
        st.builds(lambda v: proto.f_bool(9, v), st.booleans()), st.builds(lambda v: proto.f_bool(10, v), st.booleans()),
        st.builds(lambda v: proto.f_uint(3, v), int64s),
        st.builds(lambda n, v: proto.f_uint(n, v), st.sampled_from([11, 20, 2**20]), uint64s),
        st.builds(lambda k, v: key_value_field(1, k.encode(), v.encode()), texts, texts),
    )
    return out + b"".join(draw(st.lists(extras, max_size=3)))


def reference_single(data) -> tuple:
    meta = proto.decode(proto.SINGLE_MESSAGE_METADATA, data)
    has_sequence = 8 in py.read_fields(data)[::2]
    return ({kv.key: kv.value for kv in meta.properties}, meta.partition_key, meta.payload_size, meta.compacted_out,
            meta.event_time, meta.ordering_key, meta.sequence_id if has_sequence else None, meta.null_value)


@SETTINGS
@given(single_metadatas(), st.lists(mutation, max_size=3))
def test_decode_single_metadata_matches_proto(wire, data, mutations):
    assert outcome(wire.decode_single_metadata, data) == outcome(reference_single, data) and wire.decode_single_metadata(data)
    mutated = mutate(data, mutations)
    assert outcome(wire.decode_single_metadata, mutated) == outcome(reference_single, mutated)


def test_decode_single_metadata_values(wire):
    data = proto.single_message_metadata(5, {"a": "b", "ключ": "✓"}, "pk", 7, 0, b"ok") + proto.f_bool(4, True) + \
        proto.f_bool(9, True) + proto.f_bool(6, True) + proto.f_bool(10, True)
    assert wire.decode_single_metadata(data) == ({"a": "b", "ключ": "✓"}, "pk", 5, True, 7, b"ok", 0, True)
    assert wire.decode_single_metadata(b"") == ({}, None, 0, False, 0, None, None, False)
    assert wire.decode_single_metadata(proto.f_uint(3, -1) + proto.f_uint(8, 2**64 - 1)) == (
        {}, None, -1, False, 0, None, 2**64 - 1, False)
    for bad in (b"\x18", proto.f_bytes(3, b""), proto.f_bytes(2, b"\xff"), proto.f_uint(2, 1), proto.f_uint(7, 1),
                proto.f_bytes(4, b""), proto.f_bytes(6, b""), proto.f_bytes(10, b""), key_value_field(1, b"\xff", b""),
                proto.f_uint(1, 1), b"\x0b"):
        with pytest.raises(ProtocolError):
            wire.decode_single_metadata(bad)
    with pytest.raises(TypeError):
        wire.decode_single_metadata("text")


def test_split_batch_decoded(wire):
    singles = [proto.single_message_metadata(len(body), {"i": str(i)}, "k%d" % i, sequence_id=i or None)
               for i, body in enumerate([b"first", b"", b"x" * 300])]
    bodies = [b"first", b"", b"x" * 300]
    payload = b"".join(wire.encode_batch_entry(m, b) for m, b in zip(singles, bodies))
    expected = [(wire.decode_single_metadata(m), b) for m, b in zip(singles, bodies)]
    assert expected[0][0] == ({"i": "0"}, "k0", 5, False, 0, None, None, False)
    for kind in (bytes, bytearray, memoryview):
        assert wire.split_batch_decoded(kind(payload), 3) == expected
    assert wire.split_batch_decoded(payload, 2) == expected[:2]
    assert wire.split_batch_decoded(payload, 0) == []
    assert wire.split_batch_decoded(payload, True) == expected[:1]
    # an entry split_batch() reads but whose metadata does not decode
    entry = wire.encode_batch_entry(proto.f_bytes(2, b"\xff") + proto.f_uint(3, 1), b"a")
    assert len(wire.split_batch(entry, 1)) == 1
    with pytest.raises(ProtocolError):
        wire.split_batch_decoded(entry, 1)


def test_split_batch_decoded_metadata_is_out_of_the_cycle_collector_when_compiled(wire):
    # (each tuple holds a dict, which keeps CPython from untracking it on its own)
    payload = wire.encode_batch_entry(proto.single_message_metadata(2, {"k": "v"}), b"ab") * 2
    entries = wire.split_batch_decoded(payload, 2)
    assert [single for single, _ in entries] == [({"k": "v"}, None, 2, False, 0, None, None, False)] * 2
    assert [gc.is_tracked(single) for single, _ in entries] == [wire is py] * 2


def test_untrack_leaves_objects_usable_and_freed_by_reference_counting(wire):
    class Slotted:
        __slots__ = ("value", "__weakref__")

    objects = [Slotted() for _ in range(3)]
    for index, obj in enumerate(objects):
        obj.value = (index, "text", b"bytes")
    freed = []
    finalizers = [weakref.finalize(obj, freed.append, index) for index, obj in enumerate(objects)]
    assert wire.untrack(objects) is None
    assert [gc.is_tracked(obj) for obj in objects] == [wire is py] * 3
    assert [obj.value for obj in objects] == [(index, "text", b"bytes") for index in range(3)]
    del obj
    objects.clear()  # (the last references: freed at once, with no collection)
    assert sorted(freed) == [0, 1, 2]
    assert not any(finalizer.alive for finalizer in finalizers)
    for not_a_list in (None, (Slotted(),)):
        with pytest.raises(TypeError):
            wire.untrack(not_a_list)


def test_untrack_from_start_leaves_the_ones_before_alone(wire):
    class Slotted:
        __slots__ = ("value",)

    objects = [Slotted() for _ in range(5)]
    wire.untrack(objects, 3)
    assert [gc.is_tracked(obj) for obj in objects] == [True] * 3 + [wire is py] * 2
    wire.untrack(objects, 5)  # (nothing from there: no error)
    wire.untrack(objects, 9)
    assert [gc.is_tracked(obj) for obj in objects] == [True] * 3 + [wire is py] * 2
    with pytest.raises(ValueError):
        wire.untrack(objects, -1)
    with pytest.raises(TypeError):
        wire.untrack(objects, "1")


@pytest.mark.parametrize("payload, count", test_split_batch_errors.pytestmark[0].args[1])
def test_split_batch_decoded_errors(wire, payload, count):
    with pytest.raises(ProtocolError):
        wire.split_batch_decoded(payload, count)


def test_split_batch_decoded_bad_arguments(wire):
    assert_split_refuses_bad_arguments(wire.split_batch_decoded)


decoded_entries = st.tuples(single_metadatas(), st.binary(max_size=20)).map(
    lambda t: py.encode_batch_entry(t[0] + proto.f_uint(3, len(t[1])), t[1]))
decoded_batches = st.one_of(
    batch_payloads,
    st.lists(decoded_entries, max_size=3).map(b"".join),
    st.tuples(st.lists(decoded_entries, min_size=1, max_size=3).map(b"".join), st.lists(mutation, min_size=1, max_size=3)).map(
        lambda t: mutate(*t)),
)


@SETTINGS
@given(decoded_batches, counts)
def test_same_split_batch_decoded(both, payload, count):
    expected = outcome(py.split_batch_decoded, payload, count)
    assert outcome(cy.split_batch_decoded, payload, count) == expected
    assert outcome(cy.split_batch_decoded, memoryview(payload), count) == expected
    split = outcome(py.split_batch, payload, count)
    if split[0] == "ok" and expected[0] == "ok":
        assert expected[1] == [(py.decode_single_metadata(m), b) for m, b in split[1]]
    elif expected[0] == "error" and split[0] == "ok":
        assert expected[1] is ProtocolError  # only the decoding of an entry failed


@SETTINGS
@given(st.one_of(single_metadatas(), st.binary(max_size=40)), st.lists(mutation, max_size=3))
def test_same_decode_single_metadata(both, data, mutations):
    data = mutate(data, mutations)
    expected = outcome(py.decode_single_metadata, data)
    assert outcome(cy.decode_single_metadata, data) == expected
    assert expected[0] == "ok" or expected == ("error", ProtocolError)


def test_hot_path_constants(both):
    assert py.GENERIC_METADATA_FIELDS == cy.GENERIC_METADATA_FIELDS == frozenset(GENERIC_FIELDS)


def test_encode_send_frame_properties_changed_meanwhile(wire):
    """Converting extra_metadata or payload may run code that changes the list of properties:
    the properties are those of the list when it was read (the compiled codec does not crash)."""
    properties = []

    class Changing:
        def __len__(self):
            properties.clear()
            return 0

        def __bytes__(self):
            properties[:] = [(b"x", b"y")] * 50
            return b""

        def __iter__(self):
            return iter(())

    expected = reference_send_frame(1, 2, "n", 3, b"", [("a", "b")] * 3)
    for payload, extra in ((b"", Changing()), (Changing(), b"")):
        properties[:] = [(b"a", b"b")] * 3
        assert wire.encode_send_frame(1, 2, b"n", 3, payload, properties, None, 0, extra) == expected
