# The blocking publish path's twins, side by side: the compiled nsq._publish and its
# pure-Python twin nsq._publish_py (nsq.publishing chooses one) must write the same bytes,
# resolve the same answers and raise the same errors. No server and no socket: the
# connection here is the real sans-I/O protocol object (nsq.sansio.NsqProtocol) past its
# handshake, whose outgoing bytes are what a driver would write and whose incoming frames
# are built by hand, as nsqd would send them. Marked `pure`: `make test` runs it again
# with NSQ_PURE_PYTHON=1, where the compiled twin is still compared when it is built.
from __future__ import annotations

import itertools
import logging
import struct

import pytest

from msgengine.primitives import NullLock
from msgengine.runtime import get_backend
from nsq import codec, publishing
from nsq.errors import (
    ConnectionClosedError,
    InvalidArgumentError,
    InvalidBodyError,
    MessageTooLargeError,
    PublishInCallbackError,
    PubFailedError,
    SendError,
    TimeoutError,
)
from nsq.sansio import NsqProtocol, Ready, ResponseReceived, ErrorReceived

from tests.support.twins import twin

pytestmark = pytest.mark.pure

RESPONSE, ERROR = 0, 1
TOPIC = "twins"


@pytest.fixture(params=["python", "cython"])
def impl(request):
    return twin(publishing, "nsq._publish", request.param)


def both():
    """The twins present here (the pure one always, the compiled one when built)."""
    return [m for m in (publishing.python_impl, publishing.compiled_impl) if m is not None]


def frame(frame_type: int, payload: bytes) -> bytes:
    return struct.pack(">II", len(payload) + 4, frame_type) + payload


class Conn:
    """A connection as the lanes see it, over the real protocol object: send_request
    queues the command there (and, once closed, raises as a connection does);
    answer() feeds nsqd's frames and resolves what they answer, as the driver does."""

    def __init__(self, callers_read: bool = True) -> None:
        self.backend = get_backend("threads")
        self.protocol = NsqProtocol({"client_id": "twins"})
        self.protocol.start()
        self.protocol.data_to_send()
        assert isinstance(self.protocol.receive_data(frame(RESPONSE, b"OK"))[-1], Ready)
        self.callers_read = callers_read
        self.id = "127.0.0.1:4150"
        self.closed = False
        self.written: list[bytes] = []
        self.answers: list = []  # what await_answer() feeds: frames, or "close"

    def send_request(self, data: bytes, pending) -> None:
        if self.closed:
            raise ConnectionClosedError("connection to nsqd %s is closed" % self.id)
        self.protocol.send_request(data, pending)
        self.written.append(self.protocol.data_to_send())

    def answer(self, data: bytes) -> None:
        for event in self.protocol.receive_data(data):
            if isinstance(event, ResponseReceived):
                event.pending.resolve(self, event.data)
            elif isinstance(event, ErrorReceived):
                event.pending.resolve(self, event.error)

    def close(self) -> None:
        self.closed = True
        closed = ConnectionClosedError("connection to nsqd %s closed" % self.id)
        for pending in self.protocol.close():
            pending.resolve(self, closed)

    def is_connected(self) -> bool:
        return not self.closed

    def await_answer(self, waiter, deadline: float) -> None:
        while waiter.result is None and self.answers:
            step = self.answers.pop(0)
            if step == "close":
                self.close()
            else:
                self.answer(step)


class Recorder:
    """A caller's waiter stand-in that records what resolved it, and when."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.seen: list = []

    def resolve(self, source, result) -> None:
        self.seen.append((source is self.conn, result if isinstance(result, bytes) else repr(result),
                          len(self.conn.written)))


BODIES = [
    b"",
    b"a",
    b"x" * 100,
    bytearray(b"bytearray body"),
    memoryview(b"contiguous view"),
    memoryview(b"0123456789abcdef")[::2],  # not contiguous: copied
    memoryview(struct.pack(">4I", 1, 2, 3, 4)).cast("I"),  # items of 4 bytes: 16 bytes
]


def run_lane(impl, bodies, max_bytes=1024 * 1024, answers=None):
    """Publish bodies into one lane (all but the first join batches), then answer
    each command in turn; returns what was written and what each caller heard."""
    conn = Conn()
    lane = impl.TopicLane(conn, TOPIC, max_bytes, None)
    callers = [Recorder(conn) for _ in bodies]
    for body, caller in zip(bodies, callers):
        lane.publish(body, caller)
    assert lane.busy
    batches = lane.pending_batches()
    for data in answers or itertools.repeat(frame(RESPONSE, b"OK")):
        if not conn.protocol.waiting_answers():
            break
        conn.answer(data)
    return conn.written, [c.seen for c in callers], batches, lane.busy


def test_a_lone_pub_is_the_codecs_pub(impl):
    for body in BODIES:
        written, heard, batches, busy = run_lane(impl, [body])
        assert written == [codec.encode_pub(TOPIC, body)]
        assert heard == [[(True, b"OK", 1)]]
        assert (batches, busy) == (0, False)


def test_pubs_while_one_is_in_flight_leave_as_one_mpub(impl):
    written, heard, batches, busy = run_lane(impl, BODIES)
    assert written == [codec.encode_pub(TOPIC, BODIES[0]), codec.encode_mpub(TOPIC, BODIES[1:])]
    # the next batch is written before the callers of the answered command are resolved
    assert heard == [[(True, b"OK", 2)]] + [[(True, b"OK", 2)]] * (len(BODIES) - 1)
    assert (batches, busy) == (1, False)


def test_a_batch_of_one_is_a_pub(impl):
    written, _, _, _ = run_lane(impl, [b"first", b"second"])
    assert written == [codec.encode_pub(TOPIC, b"first"), codec.encode_pub(TOPIC, b"second")]


def test_batches_close_at_max_bytes_and_at_the_count_limit(impl):
    bodies = [b"%03d" % i for i in range(10)]  # 3 bytes + 4 of size each
    written, heard, batches, _ = run_lane(impl, bodies, max_bytes=7 * 3)
    assert batches == 3  # 9 joined: 3 per batch
    assert written[1:] == [codec.encode_mpub(TOPIC, bodies[i:i + 3]) for i in (1, 4, 7)]
    assert all(h and h[0][1] == b"OK" for h in heard)
    count = impl.BATCH_MAX_COUNT
    assert count == publishing.BATCH_MAX_COUNT == 2000
    written, _, batches, _ = run_lane(impl, [b"m"] * (count + 2))
    assert batches == 2
    assert written[1:] == [codec.encode_mpub(TOPIC, [b"m"] * count), codec.encode_pub(TOPIC, b"m")]


def test_an_error_answer_goes_to_every_caller_of_the_command(impl):
    answers = [frame(RESPONSE, b"OK"), frame(ERROR, b"E_BAD_MESSAGE MPUB bad"), frame(RESPONSE, b"OK")]
    written, heard, _, busy = run_lane(impl, [b"1", b"2", b"3"], answers=answers)
    assert len(written) == 2 and not busy
    assert heard[0] == [(True, b"OK", 2)]
    assert heard[1] == heard[2] and "E_BAD_MESSAGE" in heard[1][0][1]


def test_a_closed_connection_fails_the_callers_and_leaves_the_lane_idle(impl):
    conn = Conn()
    lane = impl.TopicLane(conn, TOPIC, 1024, None)
    first, second, third = Recorder(conn), Recorder(conn), Recorder(conn)
    lane.publish(b"1", first)
    lane.publish(b"2", second)
    lane.publish(b"3", third)
    conn.close()  # the PUB in flight fails; its answer sends the next batch, which cannot be sent
    assert [r.seen[0][1].startswith("ConnectionClosedError") for r in (first, second, third)] == [True] * 3
    assert not lane.busy and lane.pending_batches() == 0
    late = Recorder(conn)
    lane.publish(b"4", late)  # nothing in flight, the connection closed: at once
    assert late.seen[0][1].startswith("ConnectionClosedError") and not lane.busy


def test_the_topic_is_checked_when_the_lane_is_made(impl):
    for bad in ("with space", "new\nline", "ünïcode"):
        with pytest.raises(InvalidArgumentError) as caught:
            impl.TopicLane(Conn(), bad, 1024, None)
        with pytest.raises(InvalidArgumentError) as expected:
            codec.encode_pub(bad, b"")
        assert str(caught.value) == str(expected.value)


def test_a_body_the_codec_refuses_is_refused_alike(impl):
    conn = Conn()
    lane = impl.TopicLane(conn, TOPIC, 1024, None)
    with pytest.raises(InvalidBodyError) as caught:
        lane.publish(["not", "bytes"], Recorder(conn))
    assert str(caught.value) == "message body must be bytes, not list"


def test_waiter_and_lane_answer_behave_as_pending(impl, caplog):
    events = []

    class Event:
        def set(self):
            events.append("set")

    def callback(source, result):
        events.append(("callback", source, result))
        raise ValueError("boom")

    waiter = impl.Waiter(callback, Event(), 12.5)
    assert (waiter.result, waiter.deadline) == (None, 12.5)
    with caplog.at_level(logging.ERROR, logger="msgengine.correlator"):
        waiter.resolve("src", b"OK")
    assert events == [("callback", "src", b"OK"), "set"]
    assert waiter.result == b"OK"
    assert "answer callback raised" in caplog.text
    plain = impl.Waiter(None, None, 1.0)
    plain.event = Event()  # (the driver gives a follower its event)
    plain.resolve(None, b"OK")
    assert events[-1] == "set"
    answer = impl.LaneAnswer(impl.TopicLane(Conn(), TOPIC, 1024, None), plain)
    assert (answer.result, answer.callback, answer.event, answer.deadline) == (None, None, None, 0.0)


def test_lane_lock_is_none_only_for_a_lock_that_does_nothing(impl):
    class Backend:
        def __init__(self, lock):
            self._lock = lock

        def lock(self):
            return self._lock

    assert impl.lane_lock(Backend(NullLock())) is None
    real = get_backend("threads").lock()
    assert impl.lane_lock(Backend(real)) is real


# -- Publisher.pub: the blocking publish ---------------------------------------------------


class Counts:
    def __init__(self) -> None:
        self.published = 0
        self.errors = 0


def make_publisher(impl, conns, *, retry_publish=True, pick=None, callback_tasks=None, in_context=True,
                   max_msg_size=1024):
    backend = get_backend("threads")
    counts: dict[str, Counts] = {}
    calls: list = []

    class Backend:
        name = "threads"

        def in_backend_context(self):
            return in_context

        def current_task_id(self):
            return backend.current_task_id()

        def waiter(self):
            return backend.waiter()

        def lock(self):
            return backend.lock()

    def default_pick(exclude, deadline):
        calls.append(("pick", exclude is not None))
        open_ = [c for c in conns if c.is_connected() and c is not exclude]
        if not open_:
            raise SendError("no open connections")
        return open_[0]

    publisher = impl.Publisher(
        Backend(),
        pick=pick or default_pick,
        counts_for=lambda topic: counts.setdefault(topic, Counts()),
        in_this_process=lambda: calls.append("in_this_process"),
        elsewhere=lambda topic, body, c: calls.append(("elsewhere", topic, bytes(body))) or b"OK",
        callback_tasks=callback_tasks if callback_tasks is not None else set(),
        blocking=set(),
        round_robin=itertools.count(),
        publish_timeout=1.5,
        retry_publish=retry_publish,
        max_msg_size=max_msg_size,
        max_bytes=1024 * 1024,
    )
    publisher.conns = list(conns)
    return publisher, counts, calls


def outcome(fn):
    try:
        return ("returned", fn())
    except Exception as exc:  # noqa: BLE001 - compared between the twins
        return ("raised", type(exc).__name__, str(exc))


def scenario(impl, name):
    """One blocking-publish story; returns everything observable about it."""
    conns = [Conn(), Conn()]
    kwargs = {}
    if name == "ok":
        conns[0].answers = [frame(RESPONSE, b"OK")]
    elif name == "bytes topic":
        conns[0].answers = [frame(RESPONSE, b"OK")]
    elif name == "server error":
        conns[0].answers = [frame(ERROR, b"E_BAD_TOPIC PUB topic name is not valid")]
    elif name == "timeout":
        conns[0].answers = []
    elif name == "closed, retried elsewhere":
        conns[0].answers = ["close"]
        conns[1].answers = [frame(RESPONSE, b"OK")]
    elif name == "closed, no retry":
        conns[0].answers = ["close"]
        kwargs["retry_publish"] = False
    elif name == "closed twice":
        conns[0].answers = ["close"]
        conns[1].answers = ["close"]
    elif name == "closed before the send":
        conns[0].closed = True
        conns[1].answers = [frame(RESPONSE, b"OK")]
    elif name == "no connection":
        conns = []
    elif name == "in a callback":
        import threading

        kwargs["callback_tasks"] = {threading.get_ident()}
    elif name == "another thread":
        kwargs["in_context"] = False
    publisher, counts, calls = make_publisher(impl, conns, **kwargs)
    topic = b"twins" if name == "bytes topic" else TOPIC
    result = outcome(lambda: publisher.pub(topic, b"body"))
    return {
        "result": result,
        "written": [c.written for c in conns],
        "counts": {t: (c.published, c.errors) for t, c in counts.items()},
        "calls": calls,
        "blocking": len(publisher.blocking),
    }


SCENARIOS = ["ok", "bytes topic", "server error", "timeout", "closed, retried elsewhere", "closed, no retry",
             "closed twice", "closed before the send", "no connection", "in a callback", "another thread"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_publisher_stories_are_the_same_on_both_twins(name):
    seen = [scenario(impl, name) for impl in both()]
    assert all(s == seen[0] for s in seen), seen


def test_publisher_stories_tell_what_the_writer_promises(impl):
    ok = scenario(impl, "ok")
    assert ok["result"] == ("returned", b"OK")
    assert ok["written"] == [[codec.encode_pub(TOPIC, b"body")], []]
    assert ok["counts"] == {TOPIC: (1, 0)} and ok["blocking"] == 0
    assert ok["calls"] == ["in_this_process"]  # (once: the first publish in this process)
    assert scenario(impl, "bytes topic")["counts"] == {TOPIC: (1, 0)}
    error = scenario(impl, "server error")
    assert error["result"][:2] == ("raised", "BadTopicError") and error["counts"] == {TOPIC: (0, 1)}
    timeout = scenario(impl, "timeout")
    assert timeout["result"] == ("raised", TimeoutError.__name__,
                                 "nsqd 127.0.0.1:4150 did not answer within 1.5s; "
                                 "the message may or may not have been published")
    assert timeout["counts"] == {TOPIC: (0, 1)} and timeout["blocking"] == 0
    retried = scenario(impl, "closed, retried elsewhere")
    assert retried["result"] == ("returned", b"OK") and retried["counts"] == {TOPIC: (1, 0)}
    assert retried["calls"][1:] == [("pick", True)] and len(retried["written"][1]) == 1
    for name in ("closed, no retry", "closed twice"):
        failed = scenario(impl, name)
        assert failed["result"][:2] == ("raised", "ConnectionClosedError") and failed["counts"] == {TOPIC: (0, 1)}
    assert scenario(impl, "closed before the send")["result"] == ("returned", b"OK")
    none = scenario(impl, "no connection")
    assert none["result"] == ("raised", "SendError", str(SendError("no open connections"))) and none["counts"] == {TOPIC: (0, 1)}
    in_callback = scenario(impl, "in a callback")
    assert in_callback["result"][:2] == ("raised", PublishInCallbackError.__name__)
    assert in_callback["counts"] == {TOPIC: (0, 0)}  # (refused before it started: not counted)
    elsewhere = scenario(impl, "another thread")
    assert elsewhere["result"] == ("returned", b"OK") and elsewhere["calls"][-1] == ("elsewhere", TOPIC, b"body")


def test_publisher_refuses_bad_input_as_the_writer_does(impl):
    publisher, counts, _ = make_publisher(impl, [Conn()], max_msg_size=8)
    cases = [("bad topic!", b"x"), (TOPIC, "text"), (TOPIC, None), (TOPIC, b"123456789")]
    seen = [outcome(lambda t=t, b=b: publisher.pub(t, b)) for t, b in cases]
    assert [s[1] for s in seen] == ["InvalidArgumentError", "InvalidBodyError", "InvalidBodyError",
                                    "MessageTooLargeError"]
    assert seen[1][2] == "message body must be bytes, not str"
    assert seen[3][2] == "message of 9 bytes exceeds max_msg_size 8 (nsqd --max-msg-size)"
    assert {t: (c.published, c.errors) for t, c in counts.items()} == {}
    assert issubclass(MessageTooLargeError, Exception) and issubclass(PubFailedError, Exception)


def test_publisher_lanes_are_forgotten_with_their_connection(impl):
    a, b = Conn(), Conn()
    publisher, _, _ = make_publisher(impl, [a, b])
    lane = publisher.lane(a, TOPIC)
    assert publisher.lane(a, TOPIC) is lane and publisher.lane(b, TOPIC) is not lane
    waiter = Recorder(a)
    publisher.send_to_lane(a, waiter, (TOPIC, b"1"))
    assert publisher.lane_busy(a) and not publisher.lane_busy(b)
    publisher.forget(a)
    assert not publisher.lane_busy(a) and publisher.lane(a, TOPIC) is not lane
    publisher.reset()
    assert publisher.conns == [] and not publisher.lane_busy(b)


def test_the_chooser_reexports_the_chosen_twin():
    chosen = publishing.python_impl if publishing.IMPLEMENTATION == "python" else publishing.compiled_impl
    assert publishing.IMPLEMENTATION in ("python", "cython")
    for name in publishing.python_impl.__all__:
        assert getattr(publishing, name) is getattr(chosen, name)
    if publishing.compiled_impl is not None:
        assert sorted(publishing.compiled_impl.__all__) == sorted(publishing.python_impl.__all__)
