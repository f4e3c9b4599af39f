# pynsq compatibility of the module-level API: every public name, the exact bytes of
# the command builders, pynsq's assertions, name rules, unpack_response/decode_message,
# the error classes, BackoffTimer's numbers and the server error table. No server needed.
from __future__ import annotations

import struct

import pytest

import nsq
import nsq.errors
import nsq.protocol

MSG_ID = b"0123456789abcdef"

PYNSQ_ALL = [
    "Reader", "Writer", "run", "BackoffTimer", "Message", "Error", "LegacyReader", "SyncConn",
    "AsyncConn", "unpack_response", "decode_message", "identify", "subscribe", "ready", "finish",
    "touch", "requeue", "nop", "pub", "mpub", "valid_topic_name", "valid_channel_name",
    "FRAME_TYPE_RESPONSE", "FRAME_TYPE_ERROR", "FRAME_TYPE_MESSAGE",
]


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", PYNSQ_ALL)
def test_every_pynsq_public_name_is_importable_from_nsq(name):
    namespace: dict = {}
    exec("from nsq import %s as imported" % name, namespace)
    assert namespace["imported"] is getattr(nsq, name)
    assert name in nsq.__all__


def test_star_import_gives_pynsq_names():
    namespace: dict = {}
    exec("from nsq import *", namespace)
    missing = [n for n in PYNSQ_ALL if n not in namespace]
    assert missing == []


def test_protocol_module_extras_exist():
    p = nsq.protocol
    assert p.MAGIC_V2 == b"  V2"
    assert callable(p.dpub) and callable(p.auth)
    assert (p.FRAME_TYPE_RESPONSE, p.FRAME_TYPE_ERROR, p.FRAME_TYPE_MESSAGE) == (0, 1, 2)
    assert (nsq.FRAME_TYPE_RESPONSE, nsq.FRAME_TYPE_ERROR, nsq.FRAME_TYPE_MESSAGE) == (0, 1, 2)
    assert p.SendError is nsq.SendError
    assert p.ConnectionClosedError is nsq.ConnectionClosedError
    assert p.IntegrityError is nsq.IntegrityError
    assert p.Error is nsq.Error


def test_async_conn_is_a_connection():
    assert issubclass(nsq.AsyncConn, nsq.conn.Connection)


@pytest.mark.parametrize(
    "cls",
    [
        nsq.protocol.SendError,
        nsq.protocol.ConnectionClosedError,
        nsq.protocol.IntegrityError,
        nsq.errors.ProtocolError,
        nsq.errors.TimeoutError,
        nsq.errors.InvalidArgumentError,
        nsq.errors.InvalidBodyError,
        nsq.errors.MessageTooLargeError,
        nsq.errors.ConfigError,
        nsq.errors.FeatureNegotiationError,
        nsq.errors.ServerError,
        *nsq.errors.SERVER_ERRORS.values(),
    ],
)
def test_error_is_root_of_every_library_exception(cls):
    assert issubclass(cls, nsq.Error)
    assert issubclass(nsq.Error, Exception)


def test_error_class_families():
    e = nsq.errors
    assert issubclass(e.InvalidArgumentError, ValueError)
    assert issubclass(e.InvalidBodyError, TypeError)
    assert issubclass(e.InvalidBodyError, ValueError)
    assert issubclass(e.MessageTooLargeError, e.InvalidArgumentError)
    assert issubclass(e.ConnectionClosedError, ConnectionError)
    assert issubclass(e.TimeoutError, TimeoutError)


# ----------------------------------------------------------------------------- exact bytes


def test_pub_bytes():
    assert nsq.pub("t", b"ab") == b"PUB t\n\x00\x00\x00\x02ab"


def test_dpub_bytes():
    assert nsq.protocol.dpub("t", 5, b"x") == b"DPUB t 5\n\x00\x00\x00\x01x"


def test_mpub_bytes():
    expected = b"MPUB t\n\x00\x00\x00\x0f\x00\x00\x00\x02\x00\x00\x00\x01a\x00\x00\x00\x02bc"
    assert nsq.mpub("t", [b"a", b"bc"]) == expected
    assert nsq.mpub("t", (b"a", b"bc")) == expected


def test_identify_bytes():
    assert nsq.identify({"a": 1}) == b'IDENTIFY\n\x00\x00\x00\x08{"a": 1}'


def test_ready_bytes():
    assert nsq.ready(3) == b"RDY 3\n"
    assert nsq.ready(0) == b"RDY 0\n"


def test_requeue_bytes():
    assert nsq.requeue(MSG_ID, 0) == b"REQ 0123456789abcdef 0\n"
    assert nsq.requeue(MSG_ID) == b"REQ 0123456789abcdef 0\n"
    assert nsq.requeue(MSG_ID, 1500) == b"REQ 0123456789abcdef 1500\n"
    assert nsq.requeue(MSG_ID.decode(), 7) == b"REQ 0123456789abcdef 7\n"


def test_finish_and_touch_bytes():
    assert nsq.finish(MSG_ID) == b"FIN 0123456789abcdef\n"
    assert nsq.finish(MSG_ID.decode()) == b"FIN 0123456789abcdef\n"
    assert nsq.touch(MSG_ID) == b"TOUCH 0123456789abcdef\n"


def test_nop_subscribe_auth_bytes():
    assert nsq.nop() == b"NOP\n"
    assert nsq.subscribe("t", "c") == b"SUB t c\n"
    assert nsq.subscribe("t#ephemeral", "c#ephemeral") == b"SUB t#ephemeral c#ephemeral\n"
    assert nsq.protocol.auth(b"secret") == b"AUTH\n\x00\x00\x00\x06secret"
    assert nsq.protocol.auth("secret") == b"AUTH\n\x00\x00\x00\x06secret"


def test_builders_agree_with_codec_encoders():
    codec = nsq.codec
    assert nsq.pub("t", b"ab") == codec.encode_pub("t", b"ab")
    assert nsq.mpub("t", [b"a", b"bc"]) == codec.encode_mpub("t", [b"a", b"bc"])
    assert nsq.protocol.dpub("t", 5, b"x") == codec.encode_dpub("t", 5, b"x")
    assert nsq.ready(3) == codec.encode_rdy(3)
    assert nsq.finish(MSG_ID) == codec.encode_fin(MSG_ID)
    assert nsq.requeue(MSG_ID, 9) == codec.encode_req(MSG_ID, 9)
    assert nsq.touch(MSG_ID) == codec.encode_touch(MSG_ID)
    assert nsq.nop() == codec.encode_nop()
    assert nsq.subscribe("t", "c") == codec.encode_sub("t", "c")
    assert nsq.protocol.auth(b"secret") == codec.encode_auth(b"secret")
    assert nsq.identify({"a": 1}) == codec.encode_identify({"a": 1})


# ----------------------------------------------------------------------------- pynsq's assertions


@pytest.mark.parametrize(
    "call",
    [
        lambda: nsq.ready(-1),
        lambda: nsq.ready("1"),
        lambda: nsq.ready(1.0),
        lambda: nsq.requeue(MSG_ID, 1.5),
        lambda: nsq.requeue(MSG_ID, "1"),
        lambda: nsq.protocol.dpub("t", "5", b"x"),
        lambda: nsq.protocol.dpub("t", 5.0, b"x"),
        lambda: nsq.subscribe("bad topic", "c"),
        lambda: nsq.subscribe("t", "bad channel"),
        lambda: nsq.subscribe("", "c"),
        lambda: nsq.subscribe("t", "c" * 65),
        lambda: nsq.pub("t", "not bytes"),
        lambda: nsq.mpub("t", b"not a list"),
        lambda: nsq.mpub("t", ["not bytes"]),
    ],
    ids=[
        "ready-negative", "ready-str", "ready-float", "requeue-float", "requeue-str", "dpub-str",
        "dpub-float", "sub-bad-topic", "sub-bad-channel", "sub-empty-topic", "sub-long-channel",
        "pub-str-body", "mpub-bytes", "mpub-str-item",
    ],
)
def test_builders_assert_like_pynsq(call):
    with pytest.raises(AssertionError):
        call()


# ----------------------------------------------------------------------------- name rules


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "a" * 64,
        "abc.DEF-123_x",
        "...",
        "t#ephemeral",
        "a" * 54 + "#ephemeral",
        b"bytes_topic",
    ],
)
def test_valid_names(name):
    assert nsq.valid_topic_name(name) is True
    assert nsq.valid_channel_name(name) is True


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a" * 65,
        "a" * 55 + "#ephemeral",
        "a\n",
        "\na",
        "a b",
        "a/b",
        "a:b",
        "t#other",
        "#ephemeral",
        "t#ephemeral#ephemeral",
        "tøpic",
        None,
        5,
    ],
)
def test_invalid_names(name):
    assert nsq.valid_topic_name(name) is False
    assert nsq.valid_channel_name(name) is False


# ----------------------------------------------------------------------------- decoding


def test_unpack_response():
    assert nsq.unpack_response(b"\x00\x00\x00\x00OK") == (nsq.FRAME_TYPE_RESPONSE, b"OK")
    assert nsq.unpack_response(b"\x00\x00\x00\x01E_INVALID x") == (nsq.FRAME_TYPE_ERROR, b"E_INVALID x")
    frame_type, data = nsq.unpack_response(b"\x00\x00\x00\x02" + b"rest")
    assert frame_type == nsq.FRAME_TYPE_MESSAGE and data == b"rest"


def test_decode_message_returns_message_with_attributes():
    ts = 1_700_000_000_123_456_789
    raw = struct.pack(">qH", ts, 3) + MSG_ID + b"hello body"
    msg = nsq.decode_message(raw)
    assert isinstance(msg, nsq.Message)
    assert msg.id == MSG_ID
    assert msg.body == b"hello body"
    assert msg.timestamp == ts
    assert msg.attempts == 3
    assert msg.has_responded() is False
    assert msg.is_async() is False
    msg.enable_async()
    assert msg.is_async() is True
    # not attached to a connection, it is answered as pynsq answers one: its
    # listeners hear of it, and a second answer is refused
    finished = []
    msg.on("finish", lambda message: finished.append(message))
    msg.finish()
    assert finished == [msg] and msg.has_responded()
    with pytest.raises(AssertionError):
        msg.requeue()


def test_decode_message_of_unpacked_frame():
    ts = 42
    payload = struct.pack(">l", nsq.FRAME_TYPE_MESSAGE) + struct.pack(">qH", ts, 1) + MSG_ID + b""
    frame_type, data = nsq.unpack_response(payload)
    assert frame_type == nsq.FRAME_TYPE_MESSAGE
    msg = nsq.decode_message(data)
    assert (msg.id, msg.body, msg.timestamp, msg.attempts) == (MSG_ID, b"", 42, 1)


# ----------------------------------------------------------------------------- errors


def test_send_error_str_form_and_attributes():
    inner = ValueError("err")
    exc = nsq.SendError("x", inner)
    assert str(exc) == "SendError: x (err)"
    assert repr(exc) == "SendError: x (err)"
    assert exc.msg == "x"
    assert exc.error is inner
    assert str(nsq.SendError("y")) == "SendError: y (None)"


@pytest.mark.parametrize("payload", [b"E_FIN_FAILED x", b"E_REQ_FAILED x", b"E_TOUCH_FAILED x"])
def test_server_error_response_failures_are_not_fatal(payload):
    err = nsq.errors.server_error(payload)
    assert err.fatal is False
    assert isinstance(err, nsq.errors.ServerError)
    assert err.code == payload.split()[0].decode()
    assert err.message == "x"


@pytest.mark.parametrize(
    "code, cls",
    [
        ("E_INVALID", nsq.errors.InvalidError),
        ("E_BAD_BODY", nsq.errors.BadBodyError),
        ("E_BAD_TOPIC", nsq.errors.BadTopicError),
        ("E_BAD_CHANNEL", nsq.errors.BadChannelError),
        ("E_BAD_MESSAGE", nsq.errors.BadMessageError),
        ("E_PUB_FAILED", nsq.errors.PubFailedError),
        ("E_MPUB_FAILED", nsq.errors.MPubFailedError),
        ("E_DPUB_FAILED", nsq.errors.DPubFailedError),
        ("E_AUTH_FAILED", nsq.errors.AuthFailedError),
        ("E_UNAUTHORIZED", nsq.errors.UnauthorizedError),
    ],
)
def test_server_error_fatal_codes(code, cls):
    err = nsq.errors.server_error(("%s some text here" % code).encode())
    assert type(err) is cls
    assert err.fatal is True
    assert err.code == code
    assert err.message == "some text here"
    assert str(err) == "%s some text here" % code


def test_server_error_unknown_code():
    err = nsq.errors.server_error(b"E_SOMETHING_NEW what happened")
    assert type(err) is nsq.errors.ServerError
    assert err.code == "E_SOMETHING_NEW"
    assert err.message == "what happened"
    assert err.fatal is True
    bare = nsq.errors.server_error(b"E_ALONE")
    assert bare.code == "E_ALONE" and bare.message == "" and str(bare) == "E_ALONE"


# ----------------------------------------------------------------------------- BackoffTimer


def test_backoff_timer_pynsq_intervals():
    timer = nsq.BackoffTimer(0, 128)
    assert timer.get_interval() == 0
    assert timer.is_reset()
    intervals = []
    for _ in range(13):
        timer.failure()
        intervals.append(timer.get_interval())
    # short unit 3.2 (reaches 25% of the range in 10 steps) + long unit 0.384 per failure
    expected = [round(3.584 * i, 3) for i in range(1, 11)]
    expected += [round(35.84 + 0.384 * i, 3) for i in range(1, 4)]
    assert [round(i, 3) for i in intervals] == expected
    assert intervals[0] == pytest.approx(3.584)
    assert intervals[1] == pytest.approx(7.168)
    assert not timer.is_reset()

    # success shrinks by the same units
    timer.success()
    # after 13 failures: short part capped at 32, long part 13 x 0.384; a success takes
    # one unit off each
    assert intervals[-1] == pytest.approx(32 + 13 * 0.384)
    assert timer.get_interval() == pytest.approx(32 - 3.2 + 12 * 0.384)


def test_backoff_timer_success_back_to_zero_and_bounds():
    timer = nsq.BackoffTimer(0, 128)
    timer.success()  # no-op while not backing off
    assert timer.get_interval() == 0
    timer.failure()
    timer.failure()
    assert timer.get_interval() == pytest.approx(7.168)
    timer.success()
    assert timer.get_interval() == pytest.approx(3.584)
    timer.success()
    assert timer.get_interval() == pytest.approx(0)
    for _ in range(1000):
        timer.failure()
    assert timer.get_interval() == pytest.approx(128)
    timer.reset()
    assert timer.get_interval() == 0 and timer.is_reset()

    bounded = nsq.BackoffTimer(2, 10)
    bounded.failure()
    assert bounded.get_interval() >= 2
    for _ in range(1000):
        bounded.failure()
    assert bounded.get_interval() == pytest.approx(10)


def test_backoff_timer_starts_at_min_interval_as_pynsq():
    timer = nsq.BackoffTimer(0.1, 120)
    assert timer.get_interval() == 0.1  # pynsq's own unit test asserts this
    timer.success()  # nothing to work off: stays at min_interval
    assert timer.get_interval() == 0.1 and timer.is_reset()
    timer.failure()
    assert timer.get_interval() == pytest.approx(0.1 + 119.9 * 0.25 / 10 + 119.9 * 0.75 / 250)
    assert not timer.is_reset()
    timer.success()
    assert timer.get_interval() == 0.1 and timer.is_reset()
    timer.failure()
    timer.reset()
    assert timer.get_interval() == 0.1


def test_backoff_timer_refuses_a_non_number_as_pynsq_asserts():
    with pytest.raises(AssertionError):
        nsq.BackoffTimer("1", 10)
    with pytest.raises(TypeError):
        nsq.BackoffTimer(0, None)


@pytest.mark.parametrize("name, valid", [
    ("good_topic", True), ("t.1-x#ephemeral", True), ("bad topic!", False), ("abc\n", False),
    ("x#ephemeral#ephemeral", False), ("", False),
])
def test_valid_name_re_matches_whole_names_as_pynsqs(name, valid):
    assert bool(nsq.protocol.VALID_NAME_RE.match(name)) is valid


def test_evented_mixin_refuses_what_pynsqs_refuses():
    from nsq import event

    msg = nsq.Message(b"0" * 16, b"body", 0, 1)
    heard = []

    def listener(**kwargs):
        heard.append(kwargs)

    msg.on(event.FINISH, listener)
    with pytest.raises(event.DuplicateListenerError):
        msg.on(event.FINISH, listener)
    with pytest.raises(AssertionError):
        msg.on(event.FINISH, "not callable")
    msg.off(event.FINISH, listener)
    with pytest.raises(event.InvalidListenerError):
        msg.off(event.FINISH, listener)
    msg.finish()
    assert heard == []  # (off() detached it)
