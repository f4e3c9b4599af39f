# Tests of the Pulsar wire codec (no server), run against both implementations:
# the pure-Python twin (pulsarfast._wire_py) and the compiled module
# (pulsarfast._wire); then property tests that the two give identical results,
# ProtocolError included, on any input.
from __future__ import annotations

import array
import os
import random
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsarfast import wire as wire_module
from pulsarfast.errors import ProtocolError

pytestmark = [pytest.mark.pure, pytest.mark.timeout(60)]

py = wire_module.python_impl
cy = wire_module.compiled_impl
MODES = ("whole", "bytes", "random")
KINDS = (bytes, bytearray, memoryview)
# (the `both` fixture is stateless: it may serve every example)
HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=HEALTH)


def _compiled_missing():
    reason = "compiled pulsarfast._wire is not importable: %s" % wire_module.compiled_import_error
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
    forced = any(os.environ.get(v, "").strip() not in ("", "0") for v in ("PULSARFAST_PURE_PYTHON", "NSQ_PURE_PYTHON"))
    expected = "python" if forced or cy is None else "cython"
    assert wire_module.IMPLEMENTATION == expected


def test_chooser_environment():
    code = (
        "import sys, pulsarfast; had = 'nsq' in sys.modules; import pulsarfast.wire as w; "
        "print(w.IMPLEMENTATION, had or 'nsq' not in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PULSARFAST_PURE_PYTHON", "NSQ_PURE_PYTHON")}
    compiled = "cython" if cy is not None else "python"
    for extra, expected in (
        ({}, compiled),
        ({"PULSARFAST_PURE_PYTHON": "1"}, "python"),
        ({"NSQ_PURE_PYTHON": "1"}, "python"),
        ({"PULSARFAST_PURE_PYTHON": "0"}, compiled),
    ):
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()
        assert out == [expected, "True"], extra  # and pulsarfast.wire does not import nsq


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


def test_split_batch_bad_arguments(wire):
    entry = b"\x00\x00\x00\x02\x18\x01a"
    for count in (1.0, None, "1"):
        with pytest.raises(TypeError):
            wire.split_batch(entry, count)
    with pytest.raises(TypeError):
        wire.split_batch("text", 1)


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
