# nsq.Message: its attributes, the one-shot response contract (finish, requeue,
# touch), requeue's argument validation (delay in seconds, -1 = computed), the
# errors for answering twice or answering a message not bound to a connection,
# and the same behaviour end to end against a real nsqd on both backends.
from __future__ import annotations

import threading
import time

import pytest

import nsq
from nsq.conn import Connection
from nsq.errors import InvalidArgumentError
from nsq.message import AlreadyRespondedError, Message
from msgengine.runtime import get_backend

from tests.support.scanned_channels import nsqd_with_channels
from tests.support.waiting import wait_for

MSG_ID = b"0123456789abcdef"


class Recorder:
    """Stands in for the connection a message came from."""

    def __init__(self) -> None:
        self.calls: list = []

    def finish_message(self, message):
        self.calls.append(("FIN", message))

    def requeue_message(self, message, delay, backoff):
        self.calls.append(("REQ", message, delay, backoff))

    def touch_message(self, message):
        self.calls.append(("TOUCH", message))


def make(attempts=1, responder=None) -> Message:
    return Message(MSG_ID, b"hello", 1_700_000_000_000_000_000, attempts, responder)


# -- attributes -------------------------------------------------------------------


def test_attributes():
    msg = make(attempts=3, responder=Recorder())
    assert msg.id == MSG_ID
    assert msg.body == b"hello"
    assert msg.timestamp == 1_700_000_000_000_000_000
    assert msg.attempts == 3
    assert not msg.is_async() and not msg.has_responded()
    msg.enable_async()
    assert msg.is_async() is True
    assert "attempts=3" in repr(msg)
    assert nsq.Message is Message


# -- responding --------------------------------------------------------------------


def test_finish_delegates_once():
    rec = Recorder()
    msg = make(responder=rec)
    msg.finish()
    assert rec.calls == [("FIN", msg)]
    assert msg.has_responded()


def test_requeue_defaults_are_backoff_and_computed_delay():
    rec = Recorder()
    msg = make(responder=rec)
    msg.requeue()
    assert rec.calls == [("REQ", msg, -1, True)]


@pytest.mark.parametrize(
    "kwargs, delay, backoff",
    [
        ({"backoff": False}, -1, False),
        ({"delay": 0}, 0, True),
        ({"delay": 5}, 5, True),
        ({"delay": 1.5, "backoff": False}, 1.5, False),
        ({"delay": -1}, -1, True),
    ],
)
def test_requeue_arguments(kwargs, delay, backoff):
    rec = Recorder()
    msg = make(responder=rec)
    msg.requeue(**kwargs)
    assert rec.calls == [("REQ", msg, delay, backoff)]


@pytest.mark.parametrize(
    "delay",
    [
        -2, -0.5, -1.5, "5", True, [1],
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="inf"),
    ],
)
def test_requeue_rejects_bad_delay(delay):
    rec = Recorder()
    msg = make(responder=rec)
    with pytest.raises(InvalidArgumentError):
        msg.requeue(delay=delay)
    assert issubclass(InvalidArgumentError, nsq.Error)
    # a refused requeue does not use up the message's one response
    assert not msg.has_responded() and rec.calls == []
    msg.finish()
    assert rec.calls == [("FIN", msg)]


def test_requeue_rejects_unknown_keyword():
    msg = make(responder=Recorder())
    with pytest.raises(TypeError, match="timeout"):
        msg.requeue(timeout=5)
    assert not msg.has_responded()


def test_requeue_time_ms_is_pynsqs_delay_in_milliseconds():
    rec = Recorder()
    make(responder=rec).requeue(time_ms=2500)
    make(responder=rec).requeue(time_ms=2500, delay=1)  # delay, when given, wins (as pynsq's conversion does)
    make(responder=rec).requeue(backoff=False, time_ms=0)
    assert [(c[0], c[2:]) for c in rec.calls] == [("REQ", (2.5, True)), ("REQ", (1, True)), ("REQ", (0.0, False))]


@pytest.mark.parametrize("first", ["finish", "requeue"])
@pytest.mark.parametrize("second", ["finish", "requeue", "touch"])
def test_answering_twice_raises_an_assertion_error(first, second):
    rec = Recorder()
    msg = make(responder=rec)
    getattr(msg, first)()
    with pytest.raises(AssertionError) as info:
        getattr(msg, second)()
    assert isinstance(info.value, nsq.Error)
    assert isinstance(info.value, AlreadyRespondedError)
    assert len(rec.calls) == 1  # nothing reached the connection the second time


def test_touch_does_not_answer_and_may_repeat():
    rec = Recorder()
    msg = make(responder=rec)
    msg.touch()
    msg.touch()
    assert not msg.has_responded()
    msg.finish()
    assert [c[0] for c in rec.calls] == ["TOUCH", "TOUCH", "FIN"]


@pytest.mark.parametrize("method", ["finish", "requeue", "touch"])
def test_a_message_made_by_hand_is_answered_and_its_listeners_hear_of_it(method):
    msg = make(responder=None)  # as applications build them in their own unit tests
    heard = []
    msg.on(method, lambda **kwargs: heard.append(kwargs))
    getattr(msg, method)()
    assert heard and heard[0]["message"] is msg
    assert msg.has_responded() == (method != "touch")


def test_requeue_delay_ms_on_a_connection():
    """requeue(delay=s) is sent in ms; -1 is requeue_delay x attempts, capped."""
    conn = Connection("127.0.0.1", 4150, requeue_delay=90, max_requeue_delay=900, backend="threads")
    assert conn.requeue_delay_ms(make(attempts=1), -1) == 90_000
    assert conn.requeue_delay_ms(make(attempts=3), -1) == 270_000
    assert conn.requeue_delay_ms(make(attempts=50), -1) == 900_000
    assert conn.requeue_delay_ms(make(attempts=2), 1.5) == 1500
    assert conn.requeue_delay_ms(make(attempts=2), 0) == 0


# -- against a real nsqd --------------------------------------------------------------


@pytest.fixture
def make_reader():
    made = []

    def make_one(*args, **kwargs):
        reader = nsq.Reader(*args, **kwargs)
        made.append(reader)
        return reader

    yield make_one
    for reader in made:
        reader.close(timeout=2)


def test_real_message_attributes(nsqd, topic, backend, make_reader):
    before = time.time_ns()
    nsqd.http_pub(topic, b"payload \x00\xff")
    seen = []

    def handler(msg):
        seen.append((msg.id, msg.body, msg.timestamp, msg.attempts, msg.has_responded(), msg.is_async()))
        return True

    reader = make_reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend)
    reader.start()
    wait_for(lambda: seen, backend)
    msg_id, body, timestamp, attempts, responded, is_async = seen[0]
    assert isinstance(msg_id, bytes) and len(msg_id) == 16
    assert body == b"payload \x00\xff"
    assert before - 5 * 10**9 <= timestamp <= time.time_ns() + 5 * 10**9
    assert attempts == 1
    assert not responded and not is_async
    wait_for(lambda: nsqd.channel_stats(topic, "ch")["in_flight_count"] == 0, backend)


def test_real_requeue_with_delay_is_deferred_by_nsqd(nsqd, topic, backend, make_reader):
    """requeue(delay=60) reaches nsqd as REQ <id> 60000: the message becomes deferred."""
    nsqd.http_pub(topic, b"later")
    seen = []

    def handler(msg):
        seen.append(msg.attempts)
        msg.requeue(delay=60, backoff=False)

    reader = make_reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend)
    reader.start()

    def deferred():
        stats = nsqd.channel_stats(topic, "ch")
        return stats and stats["deferred_count"] == 1 and stats["requeue_count"] == 1 and stats["in_flight_count"] == 0

    wait_for(deferred, backend)
    assert seen == [1]
    assert reader.stats()["requeued"] == 1
    assert not reader.stats()["in_backoff"]  # backoff=False is neutral


def test_real_touch_keeps_a_slow_message_alive(nsqd_factory, topic, backend, make_reader):
    """A handler that touches keeps its message past msg_timeout: nsqd records no timeout."""
    # (an nsqd that times messages out on the channel at once: on one made after it started,
    # nsqd would not time out an untouched message within these 2 s either,
    # tests/support/scanned_channels.py)
    nsqd = nsqd_with_channels(nsqd_factory, {topic: ["ch"]})
    nsqd.http_pub(topic, b"slow")
    sleep = get_backend(backend).sleep
    done = []

    def handler(msg):
        deadline = time.monotonic() + 2.0  # twice the 1 s msg_timeout
        while time.monotonic() < deadline:
            msg.touch()
            sleep(0.1)
        done.append(msg.attempts)
        return True

    reader = make_reader(
        topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend, msg_timeout=1.0
    )
    reader.start()
    wait_for(lambda: done, backend)
    wait_for(lambda: nsqd.channel_stats(topic, "ch")["in_flight_count"] == 0, backend)
    stats = nsqd.channel_stats(topic, "ch")
    assert stats["timeout_count"] == 0
    assert stats["depth"] == 0
    assert done == [1]


def test_real_touch_and_finish_from_another_thread(nsqd, topic, backend, make_reader, request):
    nsqd.http_pub(topic, b"x")
    got = []
    errors = []

    def handler(msg):
        msg.enable_async()
        got.append(msg)

    reader = make_reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend)
    reader.start()
    wait_for(lambda: got, backend)

    def answer():
        try:
            got[0].touch()
            got[0].finish()
            try:
                got[0].touch()
            except AssertionError:
                errors.append("touch-after-finish")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=answer)
    thread.start()
    wait_for(lambda: not thread.is_alive(), backend)
    assert errors == ["touch-after-finish"]

    def finished():
        stats = nsqd.channel_stats(topic, "ch")
        return stats["in_flight_count"] == 0 and stats["depth"] == 0

    wait_for(finished, backend, timeout=5)
    assert nsqd.channel_stats(topic, "ch")["requeue_count"] == 0


def test_requeue_listeners_get_what_pynsq_passes_them():
    seen = []

    def on_requeue(message):  # a pynsq-style listener: message= only, after a bare requeue()
        seen.append(("bare", message))

    msg = make(responder=None)
    msg.on("requeue", on_requeue)
    msg.requeue()
    assert seen == [("bare", msg)]

    heard = []
    other = make(responder=None)
    other.on("requeue", lambda **kwargs: heard.append(kwargs))
    other.requeue(backoff=False, delay=3)
    assert heard == [{"message": other, "backoff": False, "delay": 3, "time_ms": 3000}]


def test_a_message_takes_attributes_and_mocks_of_its_own():
    from unittest import mock

    msg = make(responder=None)
    msg.seen_by = "my handler"  # pynsq's Message has no __slots__: programs tag messages
    assert msg.seen_by == "my handler"
    with mock.patch.object(msg, "finish") as finish:
        msg.finish()
    finish.assert_called_once_with()
    assert not msg.has_responded()  # (the mock answered, not the message)
    msg.requeue = mock.Mock()
    msg.requeue(backoff=False)
    msg.requeue.assert_called_once_with(backoff=False)
