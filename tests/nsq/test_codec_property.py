# Property tests: the compiled codec (nsq._frame) and its pure-Python twin
# (nsq._frame_py) must give identical results, errors included, on any input.
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsq import codec as codec_module

from tests.support.twins import compiled_or_skip

py = codec_module.python_impl
cy = compiled_or_skip(codec_module, "nsq._frame", module_level=True)

pytestmark = pytest.mark.timeout(60)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL_MAX = st.one_of(st.integers(30, 300), st.just(py.DEFAULT_MAX_FRAME_SIZE))


def outcome(call, *args):
    """('ok', result) or ('error', exception type, message): comparable across modules."""
    try:
        return ("ok", call(*args))
    except Exception as exc:  # noqa: BLE001 - any difference is a failure
        return ("error", type(exc), str(exc))


def run(impl, max_frame_size, chunks):
    """Outcome of the constructor and then of every feed() call, with buffered."""
    created = outcome(impl.FrameDecoder, max_frame_size)
    if created[0] == "error":
        return [created]
    decoder = created[1]
    return [(outcome(decoder.feed, chunk), decoder.buffered) for chunk in chunks]


def assert_same(max_frame_size, chunks):
    expected = run(py, max_frame_size, chunks)
    assert run(cy, max_frame_size, chunks) == expected
    return expected


@st.composite
def chunked(draw, streams):
    """A stream cut at random points (empty chunks allowed), as bytes, bytearray or memoryview."""
    data = draw(streams)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    kind = draw(st.sampled_from([bytes, bytearray, memoryview]))
    return [kind(data[a:b]) for a, b in zip(bounds, bounds[1:])]


def frame(frame_type, data):
    return struct.pack(">II", 4 + len(data), frame_type) + data


frames = st.one_of(
    st.tuples(st.sampled_from([0, 1]), st.binary(max_size=80)),
    st.tuples(
        st.just(2),
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.integers(0, 65535),
            st.binary(min_size=16, max_size=16),
            st.binary(max_size=80),
        ),
    ),
)


def encode_frame(item):
    frame_type, payload = item
    if frame_type == 2:
        payload = struct.pack(">qH16s", *payload[:3]) + payload[3]
    return frame(frame_type, payload)


valid_streams = st.lists(frames, max_size=12).map(
    lambda items: (items, b"".join(encode_frame(i) for i in items))
)

# Random bytes laid out like frames: valid frames, plausible headers (sizes
# around the limits, frame types 0..4 and beyond) and random data, mixed.
frame_like = st.lists(
    st.one_of(
        st.binary(max_size=40),
        frames.map(encode_frame),
        st.builds(
            struct.pack,
            st.just(">II"),
            st.one_of(st.integers(0, 40), st.integers(0, 320), st.sampled_from([2**31, 2**32 - 1])),
            st.one_of(st.integers(0, 4), st.just(2**32 - 1)),
        ),
        st.builds(struct.pack, st.just(">II"), st.integers(0, 40), st.just(2)),  # short messages
    ),
    max_size=10,
).map(b"".join)


@SETTINGS
@given(st.data(), SMALL_MAX, st.one_of(st.binary(max_size=400), frame_like))
def test_random_streams(data, max_frame_size, stream):
    chunks = data.draw(chunked(st.just(stream)))
    outcomes = assert_same(max_frame_size, chunks)
    assert len(outcomes) == len(chunks)


@SETTINGS
@given(st.data(), valid_streams)
def test_valid_streams(data, items_and_stream):
    items, stream = items_and_stream
    chunks = data.draw(chunked(st.just(stream)))
    outcomes = assert_same(py.DEFAULT_MAX_FRAME_SIZE, chunks)
    decoded = [f for result, _buffered in outcomes for f in result[1]]
    assert decoded == [tuple(i) for i in items]
    assert all(result[0] == "ok" for result, _ in outcomes)
    assert not outcomes or outcomes[-1][1] == 0


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
)


def mutate(stream, mutations):
    data = bytearray(stream)
    for op, at, *arg in mutations:
        at = at % (len(data) + 1)
        if op == "flip" and at < len(data):
            data[at] ^= arg[0]
        elif op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = arg[0]
        elif op == "delete":
            del data[at : at + arg[0]]
    return bytes(data)


@SETTINGS
@given(st.data(), SMALL_MAX, valid_streams, st.lists(mutation, min_size=1, max_size=4))
def test_mutated_streams(data, max_frame_size, items_and_stream, mutations):
    stream = mutate(items_and_stream[1], mutations)
    chunks = data.draw(chunked(st.just(stream)))
    outcomes = assert_same(max_frame_size, chunks)
    assert len(outcomes) == len(chunks)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.integers(-5, 100), st.booleans(), st.floats(0, 100), st.none(), st.text(max_size=3)))
def test_constructor(max_frame_size):
    assert run(cy, max_frame_size, [b"\x00" * 4]) == run(py, max_frame_size, [b"\x00" * 4])


@SETTINGS
@given(st.one_of(st.binary(max_size=60), st.integers(), st.text(max_size=30)))
def test_decode_message(payload):
    expected = outcome(py.decode_message, payload)
    assert outcome(cy.decode_message, payload) == expected
    if isinstance(payload, bytes) and len(payload) >= 26:
        assert expected[0] == "ok" and expected[1][3] == payload[26:]


# --- encoders: any arguments, same bytes or same error -----------------------------

names = st.one_of(
    st.text(max_size=8), st.binary(max_size=8), st.sampled_from(["topic", "ch#ephemeral"]),
    st.integers(), st.none(),
)
bodies = st.one_of(
    st.binary(max_size=40), st.binary(max_size=40).map(bytearray), st.binary(max_size=40).map(memoryview),
    st.text(max_size=5), st.integers(), st.none(),
)
counts = st.one_of(st.integers(-3, 10**12), st.booleans(), st.floats(0, 10), st.text(max_size=3))
ids = st.one_of(
    st.binary(min_size=14, max_size=18), st.text(min_size=15, max_size=17), st.integers(), st.none(),
    st.sampled_from([b"0123456789abcdef", "0123456789abcdef", b"0123456789 abcde", b"0123456789abcde\n"]),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)

commands = st.one_of(
    st.tuples(st.just("encode_identify"), st.one_of(st.dictionaries(st.text(max_size=8), json_values, max_size=4), st.lists(st.integers(), max_size=2))),
    st.tuples(st.just("encode_auth"), st.one_of(bodies, st.text(max_size=8))),
    st.tuples(st.just("encode_sub"), names, names),
    st.tuples(st.just("encode_pub"), names, bodies),
    st.tuples(st.just("encode_mpub"), names, st.one_of(st.lists(bodies, max_size=4), bodies)),
    st.tuples(st.just("encode_dpub"), names, counts, bodies),
    st.tuples(st.just("encode_rdy"), counts),
    st.tuples(st.just("encode_fin"), ids),
    st.tuples(st.just("encode_fin_many"), st.one_of(st.lists(ids, max_size=4), ids)),
    st.tuples(st.just("encode_req"), ids, counts),
    st.tuples(st.just("encode_touch"), ids),
    st.tuples(st.just("encode_cls")),
    st.tuples(st.just("encode_nop")),
)


@settings(max_examples=600, deadline=None)
@given(commands)
def test_encoders_identical(command):
    name, *args = command
    expected = outcome(getattr(py, name), *args)
    assert outcome(getattr(cy, name), *args) == expected
    if expected[0] == "ok":
        assert type(expected[1]) is bytes
