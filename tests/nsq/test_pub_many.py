# Writer.pub_many against real nsqd, on both backends: many bodies pipelined as
# MPUBs with several awaiting their answer, one answer for all; a body refused
# before the wire or by nsqd stops it with PartialPublishError saying how many
# from the start are in nsqd; its arguments are checked.
from __future__ import annotations

import functools

import pytest

import nsq
from nsq.errors import InvalidArgumentError, InvalidBodyError, PartialPublishError, ServerError

from tests.support import waiting
from tests.support.waiting import run_blocking

WAIT = 10.0

wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)


def make_writer(backend, nsqd, **kwargs):
    writer = nsq.Writer([nsqd.tcp_address], backend=backend, **kwargs)
    assert writer.wait_connected(WAIT)
    return writer


def bodies(count: int) -> list[bytes]:
    return [b"m%06d" % i for i in range(count)]


def test_pub_many_publishes_every_body_and_returns_the_count(nsqd, topic, backend):
    with make_writer(backend, nsqd) as writer:
        assert writer.pub_many(topic, bodies(2_345), batch_size=100, window=4) == 2_345
    assert run_blocking(backend, nsqd.message_count, topic) == 2_345


def test_pub_many_takes_any_iterable_and_splits_batches_by_size(nsqd, topic, backend):
    # 40 bodies of 400 bytes in MPUB bodies of at most 2,000 bytes: batches of 4
    with make_writer(backend, nsqd, max_body_size=2_000) as writer:
        assert writer.pub_many(topic, (b"x" * 400 for _ in range(40)), batch_size=100, window=3) == 40
    assert run_blocking(backend, nsqd.message_count, topic) == 40


def test_pub_many_stops_at_a_refused_body_and_says_how_many_are_published(nsqd, topic, backend):
    sent = bodies(250) + ["not bytes"] + bodies(100)
    with make_writer(backend, nsqd) as writer:
        with pytest.raises(PartialPublishError) as caught:
            writer.pub_many(topic, sent, batch_size=50, window=2)
        assert caught.value.published == 250
        assert isinstance(caught.value.error, InvalidBodyError)
        assert caught.value.__cause__ is caught.value.error
        assert writer.pub(topic, b"after") == b"OK"  # the writer goes on working
    assert run_blocking(backend, nsqd.message_count, topic) == 251


def test_pub_many_reports_nsqd_refusing_a_batch_midway(nsqd_factory, topic, backend):
    nsqd = nsqd_factory("--max-msg-size=100")
    sent = bodies(300) + [b"y" * 200] + bodies(10)  # nsqd refuses the batch holding the large one
    with make_writer(backend, nsqd, max_msg_size=1000) as writer:
        with pytest.raises(PartialPublishError) as caught:
            writer.pub_many(topic, sent, batch_size=100, window=2)
        assert caught.value.published == 300
        assert isinstance(caught.value.error, ServerError)
    assert run_blocking(backend, nsqd.message_count, topic) >= 300


def test_pub_many_raises_a_refusal_before_anything_was_sent_as_it_is(nsqd, topic, backend):
    with make_writer(backend, nsqd) as writer:
        with pytest.raises(InvalidBodyError):
            writer.pub_many(topic, ["not bytes", b"ok"])
    assert run_blocking(backend, nsqd.message_count, topic) == 0


@pytest.mark.parametrize(
    "args, error",
    [
        ((b"bytes, not an iterable of bodies",), InvalidBodyError),
        (("a str",), InvalidBodyError),
        ((42,), InvalidBodyError),
        (([b"a"], 0), InvalidArgumentError),
        (([b"a"], True), InvalidArgumentError),
        (([b"a"], 10, -1), InvalidArgumentError),
    ],
)
def test_pub_many_checks_its_arguments(nsqd, topic, backend, args, error):
    with make_writer(backend, nsqd) as writer:
        with pytest.raises(error):
            writer.pub_many(topic, *args)
    assert run_blocking(backend, nsqd.message_count, topic) == 0
