# Unit tests of nsq.sansio.NsqProtocol, the sans-I/O NSQ protocol object:
# server frames are built by hand and fed to it; no sockets, servers or sleeps.
# Marked `pure`: `make test` runs them again with NSQ_PURE_PYTHON=1 (the
# pure-Python codec), so both frame decoders sit under the protocol object.
from __future__ import annotations

import json
import logging
import struct

import pytest

from msgengine.correlator import Pending
from nsq import codec
from nsq.errors import (
    AuthError,
    AuthFailedError,
    BadBodyError,
    BadTopicError,
    ConfigError,
    ConnectionClosedError,
    FeatureNegotiationError,
    FinFailedError,
    InvalidError,
    ProtocolError,
    ReqFailedError,
    ServerError,
    TouchFailedError,
)
from nsq.rdy import DEFAULT_MAX_RDY_COUNT
from nsq.sansio import (
    MAX_DELAY_MS,
    Authenticated,
    ErrorReceived,
    HeartbeatReceived,
    Identified,
    MessagesReceived,
    NsqProtocol,
    Ready,
    ResponseReceived,
    State,
    UpgradeCompression,
    UpgradeTLS,
    public_state,
)

pytestmark = pytest.mark.pure

RESPONSE, ERROR, MESSAGE = 0, 1, 2
IDENTIFY_BODY = {"client_id": "test", "hostname": "test-host", "feature_negotiation": True}
ID1 = b"0123456789abcdef"
ID2 = b"fedcba9876543210"


# -- helpers ------------------------------------------------------------------


def frame(frame_type: int, payload: bytes) -> bytes:
    """One NSQ frame: 4-byte big-endian size (type + data), 4-byte type, data."""
    return struct.pack(">II", len(payload) + 4, frame_type) + payload


def ok() -> bytes:
    return frame(RESPONSE, b"OK")


def features(**kw) -> bytes:
    return frame(RESPONSE, json.dumps(kw).encode())


def error(text: bytes) -> bytes:
    return frame(ERROR, text)


def message(message_id: bytes, body: bytes, attempts: int = 1, timestamp: int = 1_700_000_000_000_000_000) -> bytes:
    return frame(MESSAGE, struct.pack(">qH16s", timestamp, attempts, message_id) + body)


def heartbeat() -> bytes:
    return frame(RESPONSE, b"_heartbeat_")


def started(**kw) -> NsqProtocol:
    """A protocol whose magic and IDENTIFY were sent (and taken from its buffer)."""
    proto = NsqProtocol(dict(IDENTIFY_BODY), **kw)
    proto.start()
    proto.data_to_send()
    return proto


def ready(answer: bytes | None = None, **kw) -> NsqProtocol:
    """A protocol past a plain handshake (no upgrade, no AUTH), buffer empty."""
    proto = started(**kw)
    events = proto.receive_data(ok() if answer is None else answer)
    assert isinstance(events[-1], Ready)
    assert proto.data_to_send() == b""
    return proto


def feed_exact(proto: NsqProtocol, data: bytes) -> list:
    """Feed data the way a driver must before an upgrade point: exactly
    bytes_wanted() bytes at a time (whatever is left when it says None)."""
    events: list = []
    pos = 0
    while pos < len(data):
        wanted = proto.bytes_wanted()
        step = len(data) - pos if wanted is None else wanted
        events += proto.receive_data(data[pos : pos + step])
        pos += step
    return events


def kinds(events: list) -> list[type]:
    return [type(event) for event in events]


def auth_command(secret: bytes) -> bytes:
    return b"AUTH\n" + struct.pack(">I", len(secret)) + secret


# -- the handshake: paths that end Ready ---------------------------------------


def test_start_queues_magic_then_identify_as_an_urgent_write():
    proto = NsqProtocol(dict(IDENTIFY_BODY))
    assert proto.state is State.INIT
    proto.start()
    assert proto.state is State.IDENTIFYING
    assert proto.flush_due()
    data = proto.data_to_send()
    assert data[:4] == b"  V2"
    assert data[4:13] == b"IDENTIFY\n"
    (size,) = struct.unpack(">I", data[13:17])
    assert size == len(data) - 17
    assert json.loads(data[17:]) == IDENTIFY_BODY
    assert proto.data_to_send() == b""


def test_start_twice_is_refused():
    proto = started()
    with pytest.raises(ProtocolError):
        proto.start()


def test_plain_ok_answer_gives_identified_with_no_features_then_ready():
    proto = started()
    assert proto.bytes_wanted() is None  # no upgrade ahead: any read size will do
    events = proto.receive_data(ok())
    assert kinds(events) == [Identified, Ready]
    assert events[0].features == {}
    assert proto.state is State.READY
    assert proto.is_open()
    assert proto.max_rdy_count == DEFAULT_MAX_RDY_COUNT
    assert proto.data_to_send() == b""


def test_json_features_are_kept_and_max_rdy_count_becomes_the_credit_limit():
    proto = started()
    events = proto.receive_data(features(max_rdy_count=100, version="1.3.0", tls_v1=False))
    assert kinds(events) == [Identified, Ready]
    assert events[0].features == {"max_rdy_count": 100, "version": "1.3.0", "tls_v1": False}
    assert proto.features == events[0].features
    assert proto.credit.max_credit == 100
    assert proto.max_rdy_count == 100


def test_json_features_without_max_rdy_count_keep_the_default():
    proto = started()
    proto.receive_data(features(version="1.3.0"))
    assert proto.credit.max_credit == DEFAULT_MAX_RDY_COUNT


def test_tls_only_handshake_reads_exactly_then_upgrades_then_ready_on_ok():
    proto = started(tls_v1=True)
    answer = features(tls_v1=True, max_rdy_count=50)
    assert proto.bytes_wanted() == 4
    assert proto.receive_data(answer[:4]) == []
    assert proto.bytes_wanted() == len(answer) - 4
    events = proto.receive_data(answer[4:])
    assert kinds(events) == [Identified, UpgradeTLS]
    assert proto.state is State.TLS_UPGRADE
    proto.tls_established()
    assert proto.state is State.TLS_CONFIRM
    assert proto.bytes_wanted() is None  # nothing to upgrade after TLS
    assert kinds(proto.receive_data(ok())) == [Ready]
    assert proto.state is State.READY
    assert proto.max_rdy_count == 50


def test_snappy_only_handshake_upgrades_compression_then_ready_on_ok():
    proto = started(snappy=True)
    events = feed_exact(proto, features(snappy=True))
    assert kinds(events) == [Identified, UpgradeCompression]
    assert events[1].kind == "snappy"
    assert proto.state is State.COMPRESSION_UPGRADE
    proto.compression_established()
    assert proto.state is State.COMPRESSION_CONFIRM
    assert kinds(proto.receive_data(ok())) == [Ready]
    assert proto.state is State.READY


def test_deflate_handshake_carries_the_configured_level():
    proto = started(deflate=True, deflate_level=3)
    events = feed_exact(proto, features(deflate=True, max_deflate_level=6))
    assert kinds(events) == [Identified, UpgradeCompression]
    assert (events[1].kind, events[1].level) == ("deflate", 3)
    proto.compression_established()
    assert kinds(proto.receive_data(ok())) == [Ready]


def test_tls_then_snappy_handshake_reads_the_tls_ok_exactly_too():
    proto = started(tls_v1=True, snappy=True)
    assert kinds(feed_exact(proto, features(tls_v1=True, snappy=True))) == [Identified, UpgradeTLS]
    proto.tls_established()
    assert proto.bytes_wanted() == 4  # the OK inside TLS precedes the compression upgrade
    assert proto.receive_data(ok()[:4]) == []
    assert proto.bytes_wanted() == len(ok()) - 4
    events = proto.receive_data(ok()[4:])
    assert kinds(events) == [UpgradeCompression]
    assert events[0].kind == "snappy"
    proto.compression_established()
    assert proto.bytes_wanted() is None
    assert kinds(proto.receive_data(ok())) == [Ready]


def test_auth_required_sends_auth_with_the_secret_then_authenticated_and_ready():
    proto = started(auth_secret=b"s3cret")
    events = proto.receive_data(features(auth_required=True))
    assert kinds(events) == [Identified]
    assert proto.state is State.AUTHENTICATING
    assert proto.flush_due()
    assert proto.data_to_send() == auth_command(b"s3cret")
    identity = {"identity": "alice", "identity_url": "http://auth", "permission_count": 2}
    events = proto.receive_data(frame(RESPONSE, json.dumps(identity).encode()))
    assert kinds(events) == [Authenticated, Ready]
    assert events[0].identity == identity
    assert proto.auth_identity == identity
    assert proto.state is State.READY


def test_auth_secret_given_as_str_is_sent_utf8_encoded():
    proto = started(auth_secret="sécret")
    proto.receive_data(features(auth_required=True))
    assert proto.data_to_send() == auth_command("sécret".encode())


def test_auth_comes_after_tls_and_deflate():
    proto = started(tls_v1=True, deflate=True, deflate_level=1, auth_secret=b"k")
    assert kinds(feed_exact(proto, features(tls_v1=True, deflate=True, auth_required=True))) == [
        Identified,
        UpgradeTLS,
    ]
    assert proto.data_to_send() == b""  # no AUTH before the stream is upgraded
    proto.tls_established()
    assert kinds(feed_exact(proto, ok())) == [UpgradeCompression]
    assert proto.data_to_send() == b""
    proto.compression_established()
    assert proto.receive_data(ok()) == []
    assert proto.data_to_send() == auth_command(b"k")
    assert kinds(proto.receive_data(frame(RESPONSE, b'{"identity": "bob"}'))) == [Authenticated, Ready]


def test_auth_required_without_a_secret_raises_auth_error():
    proto = started()
    with pytest.raises(AuthError) as info:
        proto.receive_data(features(auth_required=True))
    assert info.value.code == "E_AUTH_REQUIRED"
    assert proto.data_to_send() == b""


def test_auth_secret_not_required_is_never_sent_and_handshake_ends_ready(caplog):
    proto = started(auth_secret=b"topsecret")
    with caplog.at_level(logging.WARNING, logger="nsq.sansio"):
        events = proto.receive_data(features(auth_required=False))
    assert kinds(events) == [Identified, Ready]
    assert proto.data_to_send() == b""
    assert "topsecret" not in caplog.text


def test_auth_secret_appears_in_no_event_repr():
    proto = started(auth_secret=b"topsecret")
    events = proto.receive_data(features(auth_required=True))
    events += proto.receive_data(frame(RESPONSE, b'{"identity": "x"}'))
    assert "topsecret" not in repr(events)


def test_auth_answer_that_is_not_json_is_a_protocol_error():
    proto = started(auth_secret=b"k")
    proto.receive_data(features(auth_required=True))
    with pytest.raises(ProtocolError):
        proto.receive_data(frame(RESPONSE, b"OK"))


def test_auth_refused_raises_the_mapped_auth_error():
    proto = started(auth_secret=b"wrong")
    proto.receive_data(features(auth_required=True))
    with pytest.raises(AuthFailedError):
        proto.receive_data(error(b"E_AUTH_FAILED AUTH failed"))


def test_frames_after_the_last_handshake_answer_in_the_same_read_are_dispatched():
    proto = started()
    # nsqd may push a heartbeat right after the handshake: one read carries both.
    events = proto.receive_data(ok() + heartbeat() + message(ID1, b"early"))
    assert kinds(events) == [Identified, Ready, HeartbeatReceived, MessagesReceived]
    assert proto.data_to_send() == b""  # receive_data queues nothing: the driver answers with send_nop()
    assert proto.in_flight == 1


def test_heartbeat_while_auth_is_pending_is_answered_and_auth_still_completes():
    proto = started(auth_secret=b"k")
    proto.receive_data(features(auth_required=True))
    proto.data_to_send()  # AUTH
    events = proto.receive_data(heartbeat())
    assert kinds(events) == [HeartbeatReceived]
    proto.send_nop()  # (the driver's answer; allowed before Ready)
    assert proto.data_to_send() == b"NOP\n"
    assert kinds(proto.receive_data(frame(RESPONSE, b'{"identity": "x"}'))) == [Authenticated, Ready]


# -- the handshake: paths that fail -------------------------------------------


@pytest.mark.parametrize(
    "options, answer",
    [
        ({"tls_v1": True}, features(tls_v1=False)),
        ({"tls_v1": True}, ok()),
        ({"snappy": True}, features(snappy=False, deflate=True)),
        ({"snappy": True}, ok()),
        ({"deflate": True}, features(snappy=True)),
        ({"deflate": True}, ok()),
    ],
    ids=["tls-false", "tls-bare-ok", "snappy-false", "snappy-bare-ok", "deflate-missing", "deflate-bare-ok"],
)
def test_requested_feature_that_nsqd_does_not_offer_raises_feature_negotiation_error(options, answer):
    proto = started(**options)
    with pytest.raises(FeatureNegotiationError):
        feed_exact(proto, answer)


def test_bare_ok_feature_error_says_nsqd_did_not_negotiate():
    proto = started(tls_v1=True)
    with pytest.raises(FeatureNegotiationError, match="without feature negotiation"):
        feed_exact(proto, ok())


def test_compression_missing_after_tls_raises_feature_negotiation_error():
    proto = started(tls_v1=True, snappy=True)
    feed_exact(proto, features(tls_v1=True, snappy=False))
    proto.tls_established()
    with pytest.raises(FeatureNegotiationError, match="snappy"):
        feed_exact(proto, ok())


@pytest.mark.parametrize(
    "payload, cls, code",
    [
        (b"E_INVALID invalid feature", InvalidError, "E_INVALID"),
        (b"E_BAD_BODY IDENTIFY invalid body size", BadBodyError, "E_BAD_BODY"),
        (b"E_SOMETHING_NEW text", ServerError, "E_SOMETHING_NEW"),
    ],
)
@pytest.mark.parametrize("exact", [False, True], ids=["plain", "exact-reads"])
def test_error_frame_answering_identify_raises_the_mapped_server_error(payload, cls, code, exact):
    proto = started(tls_v1=exact)
    with pytest.raises(cls) as info:
        feed_exact(proto, error(payload))
    assert type(info.value) is cls
    assert info.value.code == code
    assert info.value.message == payload.partition(b" ")[2].decode()


@pytest.mark.parametrize("answer", [b"not json at all", b"\xff\xfe", b"[1, 2]", b'"OK"'])
def test_identify_answer_neither_ok_nor_a_json_object_is_a_protocol_error(answer):
    proto = started()
    with pytest.raises(ProtocolError):
        proto.receive_data(frame(RESPONSE, answer))


@pytest.mark.parametrize("value", [None, "many", [1]])
def test_identify_answer_with_a_malformed_max_rdy_count_is_a_protocol_error(value):
    proto = started()
    with pytest.raises(ProtocolError):
        proto.receive_data(features(max_rdy_count=value))


def test_message_frame_during_the_handshake_is_a_protocol_error():
    proto = started()
    with pytest.raises(ProtocolError):
        proto.receive_data(message(ID1, b"too soon"))


def test_bytes_before_start_are_a_protocol_error():
    proto = NsqProtocol(dict(IDENTIFY_BODY))
    with pytest.raises(ProtocolError):
        proto.receive_data(ok())


def test_upgrade_calls_out_of_turn_are_refused():
    proto = started(tls_v1=True, snappy=True)
    with pytest.raises(ProtocolError):
        proto.tls_established()
    with pytest.raises(ProtocolError):
        proto.compression_established()
    feed_exact(proto, features(tls_v1=True, snappy=True))
    with pytest.raises(ProtocolError):
        proto.compression_established()  # TLS comes first


# -- the handshake: exact reads and upgrade points ------------------------------


def test_identify_answer_and_more_bytes_in_one_read_before_an_upgrade_is_refused():
    proto = started(tls_v1=True)
    with pytest.raises(ProtocolError):
        proto.receive_data(features(tls_v1=True) + b"\x16\x03\x01")  # a TLS record after the answer


def test_bytes_after_the_identify_answer_but_before_tls_established_are_refused():
    proto = started(tls_v1=True)
    feed_exact(proto, features(tls_v1=True))
    with pytest.raises(ProtocolError, match="upgrade"):
        proto.receive_data(b"\x16\x03\x01")


def test_bytes_before_compression_established_are_refused():
    proto = started(deflate=True)
    feed_exact(proto, features(deflate=True))
    with pytest.raises(ProtocolError, match="upgrade"):
        proto.receive_data(ok())


def test_tls_ok_plus_compressed_bytes_in_one_read_is_refused():
    proto = started(tls_v1=True, snappy=True)
    feed_exact(proto, features(tls_v1=True, snappy=True))
    proto.tls_established()
    with pytest.raises(ProtocolError):
        proto.receive_data(ok() + b"\xff\x06\x00\x00sNaPpY")


@pytest.mark.parametrize("size", [0, 1, 3, 5, 8])
def test_size_head_read_of_other_than_four_bytes_is_refused(size):
    proto = started(snappy=True)
    answer = features(snappy=True)
    with pytest.raises(ProtocolError, match="exact"):
        proto.receive_data(answer[:size])


@pytest.mark.parametrize("delta", [-1, +1])
def test_frame_read_of_other_than_the_announced_size_is_refused(delta):
    proto = started(snappy=True)
    answer = features(snappy=True) + b"x"
    proto.receive_data(answer[:4])
    wanted = proto.bytes_wanted()
    with pytest.raises(ProtocolError, match="exactly"):
        proto.receive_data(answer[4 : 4 + wanted + delta])


@pytest.mark.parametrize(
    "head",
    [b"HTTP", b"SSH-", struct.pack(">I", 0), struct.pack(">I", 3), struct.pack(">I", codec.DEFAULT_MAX_FRAME_SIZE + 1)],
    ids=["http", "ssh", "size-0", "size-3", "too-big"],
)
def test_absurd_frame_size_head_during_exact_reads_asks_if_this_is_an_nsqd_port(head):
    proto = started(tls_v1=True)
    with pytest.raises(ProtocolError, match="is this an nsqd TCP port"):
        proto.receive_data(head)


def test_exact_size_head_honours_a_smaller_max_frame_size():
    proto = started(tls_v1=True, max_frame_size=1024)
    with pytest.raises(ProtocolError, match="is this an nsqd TCP port"):
        proto.receive_data(struct.pack(">I", 1025))


def test_absurd_frame_size_without_exact_reads_is_a_protocol_error():
    proto = started()
    with pytest.raises(ProtocolError):
        proto.receive_data(b"HTTP/1.1 400 Bad Request\r\n\r\n")


# -- after Ready: splitting the byte stream -------------------------------------


def _ready_stream() -> bytes:
    return b"".join(
        [
            ok(),
            message(ID1, b"first", attempts=1, timestamp=1),
            error(b"E_BAD_TOPIC PUB topic name is not valid"),
            heartbeat(),
            message(ID2, b"", attempts=7, timestamp=2),
            error(b"E_FIN_FAILED FIN 0123456789abcdef failed"),
            frame(RESPONSE, b"OK"),
            message(b"A" * 16, b"x" * 300, attempts=65535, timestamp=-1),
            frame(RESPONSE, b"CLOSE_WAIT"),
        ]
    )


def _run_split(chunks: list[bytes]):
    """Feed chunks to a fresh Ready protocol with four requests waiting;
    return what the run observed, in a form comparable across runs."""
    proto = ready()
    proto.send_rdy(10)
    pendings = [Pending() for _ in range(4)]
    for pending in pendings:
        proto.send_request(b"PUB t\n\x00\x00\x00\x00", pending)
    proto.data_to_send()

    def which(pending):
        return None if pending is None else pendings.index(pending)

    others: list = []
    messages: list = []
    for chunk in chunks:
        for event in proto.receive_data(chunk):
            if isinstance(event, MessagesReceived):
                assert event.messages, "MessagesReceived carries at least one message"
                messages += [(ts, attempts, mid, bytes(body)) for ts, attempts, mid, body in event.messages]
            elif isinstance(event, ResponseReceived):
                others.append(("response", bytes(event.data), which(event.pending)))
            elif isinstance(event, ErrorReceived):
                others.append(("error", type(event.error), event.error.message, which(event.pending)))
            else:
                others.append((type(event).__name__,))
    return {
        "others": others,
        "messages": messages,
        "out": proto.data_to_send(),
        "state": proto.state,
        "in_flight": proto.in_flight,
        "remaining": proto.credit.remaining,
        "waiting": proto.waiting_answers(),
    }


EXPECTED_SPLIT_RESULT = {
    "others": [
        ("response", b"OK", 0),
        ("error", BadTopicError, "PUB topic name is not valid", 1),
        ("HeartbeatReceived",),
        ("error", FinFailedError, "FIN 0123456789abcdef failed", None),
        ("response", b"OK", 2),
        ("response", b"CLOSE_WAIT", 3),
    ],
    "messages": [
        (1, 1, ID1, b"first"),
        (2, 7, ID2, b""),
        (-1, 65535, b"A" * 16, b"x" * 300),
    ],
    "out": b"",
    "state": State.CLOSING,
    "in_flight": 3,
    "remaining": 7,
    "waiting": 0,
}


def test_stream_fed_whole_gives_the_expected_events():
    assert _run_split([_ready_stream()]) == EXPECTED_SPLIT_RESULT


def test_stream_fed_one_byte_at_a_time_gives_the_same_events():
    stream = _ready_stream()
    assert _run_split([stream[i : i + 1] for i in range(len(stream))]) == EXPECTED_SPLIT_RESULT


def test_stream_split_at_every_position_gives_the_same_events():
    stream = _ready_stream()
    for cut in range(len(stream) + 1):
        assert _run_split([stream[:cut], stream[cut:]]) == EXPECTED_SPLIT_RESULT, "split at %d" % cut


def test_stream_fed_as_memoryview_and_bytearray_gives_the_same_events():
    stream = _ready_stream()
    assert _run_split([memoryview(stream)]) == EXPECTED_SPLIT_RESULT
    assert _run_split([bytearray(stream)]) == EXPECTED_SPLIT_RESULT


def test_handshake_and_stream_split_at_every_position_gives_the_same_events():
    # Without an upgrade the handshake takes any read size: the Ready read may
    # carry the first frames after it, or stop anywhere inside them.
    identity = frame(RESPONSE, b'{"identity": "carol"}')
    stream = features(auth_required=True, max_rdy_count=9) + identity + heartbeat() + message(ID1, b"m")
    expected = None
    for cut in range(len(stream) + 1):
        proto = started(auth_secret=b"k")
        seen = []
        for chunk in (stream[:cut], stream[cut:]):
            for event in proto.receive_data(chunk):
                if isinstance(event, MessagesReceived):
                    seen += [("message", mid, bytes(body)) for _, _, mid, body in event.messages]
                else:
                    seen.append(type(event).__name__)
        result = (seen, proto.data_to_send(), proto.max_rdy_count, proto.auth_identity)
        if expected is None:
            expected = result
            assert seen == ["Identified", "Authenticated", "Ready", "HeartbeatReceived", ("message", ID1, b"m")]
            assert result[1:] == (auth_command(b"k"), 9, {"identity": "carol"})
        assert result == expected, "split at %d" % cut


def test_empty_read_after_ready_gives_no_events():
    assert ready().receive_data(b"") == []


# -- after Ready: pairing answers with requests ---------------------------------


def test_responses_pair_with_requests_in_the_order_they_were_sent():
    proto = ready()
    first, second, third = Pending(), Pending(), Pending()
    proto.send_request(b"PUB a\n\x00\x00\x00\x01x", first)
    proto.send_request(b"PUB b\n\x00\x00\x00\x01y", second)
    proto.send_request(b"PUB c\n\x00\x00\x00\x01z", third)
    assert proto.waiting_answers() == 3
    events = proto.receive_data(ok() + frame(RESPONSE, b"second") + frame(RESPONSE, b"third"))
    assert [(bytes(e.data), e.pending) for e in events] == [
        (b"OK", first),
        (b"second", second),
        (b"third", third),
    ]
    assert proto.waiting_answers() == 0


def test_resolving_each_pending_with_its_event_gives_each_request_its_own_answer():
    proto = ready()
    pendings = [Pending() for _ in range(3)]
    for index, pending in enumerate(pendings):
        proto.send_request(b"PUB t\n\x00\x00\x00\x01%d" % index, pending)
    events = proto.receive_data(ok() + error(b"E_BAD_MESSAGE bad") + frame(RESPONSE, b"OK3"))
    for event in events:  # what the driver does
        event.pending.resolve("conn", event.data if isinstance(event, ResponseReceived) else event.error)
    assert pendings[0].result == b"OK"
    assert isinstance(pendings[1].result, ServerError) and pendings[1].result.code == "E_BAD_MESSAGE"
    assert pendings[2].result == b"OK3"


def test_request_bytes_are_queued_as_given_and_due_at_once():
    proto = ready()
    proto.send_request(b"PUB t\n\x00\x00\x00\x02hi", Pending())
    assert proto.flush_due()
    assert proto.data_to_send() == b"PUB t\n\x00\x00\x00\x02hi"
    assert not proto.flush_due()


def test_request_sent_without_pending_still_takes_its_answer_in_turn():
    proto = ready()
    later = Pending()
    proto.send_request(b"PUB a\n\x00\x00\x00\x00", None)
    proto.send_request(b"PUB b\n\x00\x00\x00\x00", later)
    events = proto.receive_data(frame(RESPONSE, b"for-the-first") + frame(RESPONSE, b"for-later"))
    assert events[0].pending is not later
    assert (bytes(events[1].data), events[1].pending) == (b"for-later", later)


def test_response_with_no_waiting_request_has_no_pending():
    proto = ready()
    events = proto.receive_data(ok())
    assert kinds(events) == [ResponseReceived]
    assert events[0].pending is None


@pytest.mark.parametrize(
    "payload, cls",
    [
        (b"E_FIN_FAILED FIN abc failed", FinFailedError),
        (b"E_REQ_FAILED REQ abc failed", ReqFailedError),
        (b"E_TOUCH_FAILED TOUCH abc failed", TouchFailedError),
    ],
)
def test_failed_fin_req_touch_errors_answer_no_request(payload, cls):
    proto = ready()
    waiting = Pending()
    proto.send_request(b"PUB t\n\x00\x00\x00\x00", waiting)
    events = proto.receive_data(error(payload))
    assert kinds(events) == [ErrorReceived]
    assert type(events[0].error) is cls
    assert not events[0].error.fatal
    assert events[0].pending is None
    assert proto.waiting_answers() == 1  # the request still waits for its own answer
    assert proto.receive_data(ok())[0].pending is waiting


@pytest.mark.parametrize(
    "payload, cls",
    [
        (b"E_BAD_TOPIC PUB topic name is not valid", BadTopicError),
        (b"E_INVALID cannot PUB in current state", InvalidError),
        (b"E_UNHEARD_OF text", ServerError),
    ],
)
def test_other_error_frames_answer_the_next_waiting_request(payload, cls):
    proto = ready()
    first, second = Pending(), Pending()
    proto.send_request(b"PUB bad!\n\x00\x00\x00\x00", first)
    proto.send_request(b"PUB ok\n\x00\x00\x00\x00", second)
    events = proto.receive_data(error(payload) + ok())
    assert kinds(events) == [ErrorReceived, ResponseReceived]
    assert type(events[0].error) is cls
    assert events[0].pending is first
    assert events[1].pending is second


def test_subscribe_queues_sub_and_pairs_its_answer():
    proto = ready()
    pending = Pending()
    proto.subscribe("topic", "channel#ephemeral", pending)
    assert proto.subscribed
    assert proto.data_to_send() == b"SUB topic channel#ephemeral\n"
    assert proto.receive_data(ok())[0].pending is pending


def test_subscribing_twice_is_refused():
    proto = ready()
    proto.subscribe("t", "c", None)
    with pytest.raises(ProtocolError):
        proto.subscribe("t", "c2", None)


# -- after Ready: heartbeats and closing -----------------------------------------


def test_heartbeat_gives_heartbeat_event_and_send_nop_queues_a_due_nop():
    proto = ready()
    waiting = Pending()
    proto.send_request(b"PUB t\n\x00\x00\x00\x00", waiting)
    proto.data_to_send()
    proto.hold_answers()
    events = proto.receive_data(heartbeat())
    assert kinds(events) == [HeartbeatReceived]
    assert not proto.has_data()  # receive_data queues nothing (it runs without the driver's lock)
    proto.send_nop()
    assert proto.flush_due()  # not held back by a batch
    assert proto.data_to_send() == b"NOP\n"
    assert proto.waiting_answers() == 1  # a heartbeat answers no request


def test_heartbeat_nop_is_due_even_while_answers_are_held():
    proto = ready()
    proto.hold_answers()
    proto.fin(ID1)
    proto.receive_data(heartbeat())
    proto.send_nop()
    assert proto.flush_due()
    assert proto.data_to_send() == b"FIN " + ID1 + b"\nNOP\n"


def test_cls_answered_with_close_wait_moves_to_closing_and_commands_still_flow():
    proto = ready()
    pending = Pending()
    proto.cls(pending)
    assert proto.data_to_send() == b"CLS\n"
    events = proto.receive_data(frame(RESPONSE, b"CLOSE_WAIT"))
    assert kinds(events) == [ResponseReceived]
    assert (bytes(events[0].data), events[0].pending) == (b"CLOSE_WAIT", pending)
    assert proto.state is State.CLOSING
    assert proto.is_open()
    assert public_state(proto.state) == "CLOSING"
    proto.fin(ID1)  # messages in flight are still answered while closing
    assert proto.data_to_send() == b"FIN " + ID1 + b"\n"


def test_close_returns_the_still_waiting_requests_in_order():
    proto = ready()
    pendings = [Pending() for _ in range(3)]
    for pending in pendings:
        proto.send_request(b"NOP\n", pending)
    proto.receive_data(ok())  # answers the first
    proto.fin(ID1)
    assert proto.close() == pendings[1:]
    assert proto.state is State.CLOSED
    assert not proto.is_open()
    assert proto.data_to_send() == b""  # what was queued is dropped
    assert not proto.flush_due()
    assert proto.waiting_answers() == 0


def test_close_during_the_handshake_returns_no_pendings():
    proto = started()
    assert proto.close() == []
    assert proto.state is State.CLOSED


def test_receive_data_after_close_gives_no_events_whatever_the_bytes():
    proto = ready()
    proto.close()
    assert proto.receive_data(ok() + message(ID1, b"late")) == []
    assert proto.receive_data(b"garbage that is no frame") == []
    assert proto.in_flight == 0


_COMMANDS = {
    "send_request": lambda p: p.send_request(b"PUB t\n\x00\x00\x00\x00", Pending()),
    "send_unanswered": lambda p: p.send_unanswered(b"NOP\n"),
    "subscribe": lambda p: p.subscribe("t", "c", Pending()),
    "cls": lambda p: p.cls(Pending()),
    "send_rdy": lambda p: p.send_rdy(1),
    "fin": lambda p: p.fin(ID1),
    "fin_many": lambda p: p.fin_many([ID1, ID2]),
    "req": lambda p: p.req(ID1, 0),
    "touch": lambda p: p.touch(ID1),
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_commands_before_ready_raise_connection_closed_error(command):
    for proto in (NsqProtocol(dict(IDENTIFY_BODY)), started(), started(tls_v1=True)):
        with pytest.raises(ConnectionClosedError):
            _COMMANDS[command](proto)
        assert proto.waiting_answers() == 0
        assert proto.data_to_send() == b""


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_commands_after_close_raise_connection_closed_error(command):
    proto = ready()
    proto.close()
    with pytest.raises(ConnectionClosedError):
        _COMMANDS[command](proto)
    assert proto.data_to_send() == b""


def test_public_state_names_follow_pynsq():
    assert public_state(State.INIT) == "INIT"
    assert public_state(State.IDENTIFYING) == "CONNECTING"
    assert public_state(State.AUTHENTICATING) == "CONNECTING"
    assert public_state(State.READY) == "CONNECTED"
    assert public_state(State.CLOSED) == "CLOSED"


# -- after Ready: messages, RDY and in-flight counts ------------------------------


def test_messages_raise_in_flight_and_lower_remaining_under_the_rdy_sent():
    proto = ready()
    proto.send_rdy(3)
    assert (proto.rdy, proto.credit.remaining, proto.in_flight) == (3, 3, 0)
    events = proto.receive_data(message(ID1, b"a") + message(ID2, b"b"))
    assert kinds(events) == [MessagesReceived]
    assert len(events[0].messages) == 2
    assert (proto.rdy, proto.credit.remaining, proto.in_flight) == (3, 1, 2)


def test_remaining_never_goes_below_zero():
    proto = ready()
    proto.send_rdy(1)
    proto.receive_data(message(ID1, b"a") + message(ID2, b"b") + message(b"C" * 16, b"c"))
    assert proto.credit.remaining == 0
    assert proto.in_flight == 3


def test_messages_of_one_read_come_as_one_event_with_the_raw_tuples_by_default():
    proto = ready()
    events = proto.receive_data(message(ID1, b"body-1", attempts=2, timestamp=10) + message(ID2, b"body-2", 3, 20))
    assert kinds(events) == [MessagesReceived]
    assert [(ts, attempts, mid, bytes(body)) for ts, attempts, mid, body in events[0].messages] == [
        (10, 2, ID1, b"body-1"),
        (20, 3, ID2, b"body-2"),
    ]


def test_message_factory_builds_the_messages_received_items():
    calls = []

    def factory(timestamp, attempts, message_id, body):
        calls.append((timestamp, attempts, message_id, bytes(body)))
        return ("built", message_id)

    proto = ready(message_factory=factory)
    events = proto.receive_data(message(ID1, b"one", attempts=4, timestamp=99) + message(ID2, b"two"))
    assert events[0].messages == [("built", ID1), ("built", ID2)]
    assert calls[0] == (99, 4, ID1, b"one")
    assert [call[2] for call in calls] == [ID1, ID2]


def test_send_rdy_queues_rdy_as_an_answer_and_records_the_credit():
    proto = ready()
    proto.send_rdy(25)
    assert proto.data_to_send() == b"RDY 25\n"
    assert proto.rdy == 25
    proto.send_rdy(0)
    assert proto.data_to_send() == b"RDY 0\n"
    assert (proto.rdy, proto.credit.remaining) == (0, 0)


def test_send_rdy_up_to_max_rdy_count_is_allowed_and_above_is_refused():
    proto = ready(features(max_rdy_count=5))
    proto.send_rdy(5)
    assert proto.data_to_send() == b"RDY 5\n"
    with pytest.raises(ConfigError, match="max_rdy_count"):
        proto.send_rdy(6)
    assert proto.rdy == 5
    assert proto.data_to_send() == b""


@pytest.mark.parametrize("count", [-1, True, False, 1.0, "3", None])
def test_send_rdy_refuses_negative_and_non_int_counts(count):
    proto = ready()
    with pytest.raises(ConfigError):
        proto.send_rdy(count)
    assert proto.rdy == 0
    assert proto.data_to_send() == b""


def test_fin_queues_fin_and_lowers_in_flight():
    proto = ready()
    proto.receive_data(message(ID1, b"a") + message(ID2, b"b"))
    proto.fin(ID1)
    assert proto.data_to_send() == b"FIN 0123456789abcdef\n"
    assert proto.in_flight == 1


def test_req_queues_req_with_delay_and_lowers_in_flight():
    proto = ready()
    proto.receive_data(message(ID1, b"a"))
    proto.req(ID1, 1500)
    assert proto.data_to_send() == b"REQ 0123456789abcdef 1500\n"
    assert proto.in_flight == 0


def test_fin_many_queues_one_fin_per_id_and_lowers_in_flight_by_their_count():
    proto = ready()
    third = b"C" * 16
    proto.receive_data(message(ID1, b"a") + message(ID2, b"b") + message(third, b"c"))
    proto.fin_many([ID1, ID2])
    assert proto.data_to_send() == b"FIN " + ID1 + b"\nFIN " + ID2 + b"\n"
    assert proto.in_flight == 1


def test_in_flight_never_goes_below_zero():
    proto = ready()
    proto.receive_data(message(ID1, b"a"))
    proto.fin_many([ID1, ID2, b"C" * 16])
    assert proto.in_flight == 0
    proto.fin(ID1)
    assert proto.in_flight == 0


def test_fin_many_of_no_ids_queues_nothing():
    proto = ready()
    proto.fin_many([])
    assert not proto.has_data()
    assert not proto.flush_due()


def test_touch_queues_touch_and_keeps_in_flight():
    proto = ready()
    proto.receive_data(message(ID1, b"a"))
    proto.touch(ID1)
    assert proto.data_to_send() == b"TOUCH 0123456789abcdef\n"
    assert proto.in_flight == 1


def test_message_lost_lowers_in_flight_without_sending():
    proto = ready()
    proto.receive_data(message(ID1, b"a") + message(ID2, b"b"))
    proto.message_lost(2)
    assert proto.in_flight == 0
    assert not proto.has_data()


@pytest.mark.parametrize(
    "delay, sent",
    [
        (0, 0),
        (-1, 0),
        (-(10**12), 0),
        (MAX_DELAY_MS, MAX_DELAY_MS),
        (MAX_DELAY_MS + 1, MAX_DELAY_MS),
        (2**64, MAX_DELAY_MS),
        (2.9, 2),
    ],
)
def test_req_delay_is_clamped_to_zero_and_capped_at_max_delay_ms(delay, sent):
    proto = ready()
    proto.req(ID1, delay)
    assert proto.data_to_send() == b"REQ " + ID1 + b" %d\n" % sent


def test_max_delay_ms_times_a_million_fits_an_int64():
    assert MAX_DELAY_MS * 1_000_000 <= 2**63 - 1 < (MAX_DELAY_MS + 1) * 1_000_000


def test_invalid_message_id_is_refused_and_leaves_in_flight_alone():
    proto = ready()
    proto.receive_data(message(ID1, b"a"))
    with pytest.raises(ValueError):
        proto.fin(b"short")
    with pytest.raises(ValueError):
        proto.req(b"with space 12345", 0)
    assert proto.in_flight == 1
    assert proto.data_to_send() == b""


def test_credit_key_is_the_given_key_or_else_the_name():
    assert NsqProtocol({}, key=("host", 4150)).credit.key == ("host", 4150)
    assert NsqProtocol({}, name="nsqd-a:4150").credit.key == "nsqd-a:4150"


# -- after Ready: the flush policy (hold_answers) ---------------------------------


def test_answers_are_due_at_once_without_a_hold():
    proto = ready()
    proto.fin(ID1)
    assert proto.flush_due()


def test_answers_queued_under_a_hold_are_not_due():
    proto = ready()
    proto.hold_answers()
    assert proto.answers_held()
    proto.fin(ID1)
    proto.req(ID2, 10)
    proto.send_rdy(1)
    assert proto.has_data()
    assert not proto.flush_due()


def test_a_request_under_a_hold_makes_the_held_answers_due_in_order():
    proto = ready()
    proto.hold_answers()
    proto.fin(ID1)
    proto.send_request(b"PUB t\n\x00\x00\x00\x00", Pending())
    assert proto.flush_due()
    assert proto.data_to_send() == b"FIN " + ID1 + b"\nPUB t\n\x00\x00\x00\x00"
    proto.fin(ID2)
    assert not proto.flush_due()  # the request went out: the hold applies again


def test_an_unanswered_command_under_a_hold_is_due_too():
    proto = ready()
    proto.hold_answers()
    proto.fin(ID1)
    proto.send_unanswered(b"NOP\n")
    assert proto.flush_due()


def test_release_answers_makes_held_answers_due():
    proto = ready()
    proto.hold_answers()
    proto.fin(ID1)
    proto.release_answers()
    assert not proto.answers_held()
    assert proto.flush_due()


def test_nested_holds_release_on_the_last_release():
    proto = ready()
    proto.hold_answers()
    proto.hold_answers()
    proto.fin(ID1)
    proto.release_answers()
    assert not proto.flush_due()
    proto.release_answers()
    assert proto.flush_due()


def test_release_without_hold_is_harmless():
    proto = ready()
    proto.release_answers()
    proto.hold_answers()
    proto.fin(ID1)
    assert not proto.flush_due()


def test_nothing_queued_is_never_due():
    proto = ready()
    assert not proto.has_data()
    assert not proto.flush_due()
    assert proto.data_to_send() == b""


# -- after Ready: corrupt streams ------------------------------------------------


@pytest.mark.parametrize(
    "corrupt",
    [
        struct.pack(">II", 6, 7) + b"xx",  # unknown frame type
        struct.pack(">I", 2) + b"\x00\x00",  # size too small for a frame type
        struct.pack(">I", codec.DEFAULT_MAX_FRAME_SIZE + 1),  # larger than the maximum
        frame(MESSAGE, b"shorter than a message header"[:20]),  # message without its header
        b"HTTP/1.1 400 Bad Request\r\n",
    ],
    ids=["frame-type", "size-too-small", "size-too-large", "short-message", "http"],
)
def test_corrupt_frame_after_ready_raises_protocol_error_and_the_stream_stays_dead(corrupt):
    proto = ready()
    with pytest.raises(ProtocolError):
        proto.receive_data(ok() + corrupt)
    with pytest.raises(ProtocolError):
        proto.receive_data(ok())


def test_frame_larger_than_a_configured_max_frame_size_is_a_protocol_error():
    proto = ready(max_frame_size=1024)
    with pytest.raises(ProtocolError):
        proto.receive_data(message(ID1, b"x" * 1024))


def test_codec_implementation_in_use_is_the_one_the_environment_asks_for():
    from msgengine.twins import pure_python_forced

    if pure_python_forced():
        assert codec.IMPLEMENTATION == "python"
    else:
        assert codec.IMPLEMENTATION in ("python", "cython")


def test_touch_under_a_hold_is_due_at_once():
    # a handler that asks for more time must not wait for its batch to end
    proto = ready()
    proto.hold_answers()
    proto.fin(ID1)
    proto.touch(ID2)
    assert proto.flush_due()
    assert proto.data_to_send() == b"FIN " + ID1 + b"\nTOUCH " + ID2 + b"\n"
