# Caller reads (leader/follower) on Writer connections, against real nsqd on both backends:
# a lone blocking caller reads its own answers, many concurrent callers all get theirs, a
# callback publish made while the reader task is parked is still answered, heartbeats are
# read between publishes, a leader whose answer never comes times out, every caller returns
# when the connection dies, and compressed connections keep the reader task as only reader.
# Marked `pure`: `make test` runs them again with NSQ_PURE_PYTHON=1, where the blocking
# publish path is nsq._publish_py instead of the compiled nsq._publish.
from __future__ import annotations

import functools

import pytest

import nsq
from msgengine.runtime import get_backend
from nsq import hooks
from nsq.errors import ConnectionClosedError, SendError

from tests.support import waiting
from tests.support.waiting import join_all, run_blocking, tasks_done

WAIT = 10.0

wait_for = functools.partial(waiting.wait_for, timeout=WAIT, interval=0.01)

pytestmark = [pytest.mark.timeout(60), pytest.mark.pure]


def make_writer(backend, address, **kwargs):
    w = nsq.Writer([address], backend=backend, **kwargs)
    assert w.wait_connected(WAIT)
    wait_for(lambda: len(w.conns) == 1, backend)
    return w




def test_lone_blocking_caller_reads_its_own_answers(nsqd, topic, backend):
    b = get_backend(backend)
    with make_writer(backend, nsqd.tcp_address) as w:
        conn = w.conns[nsqd.tcp_address]
        assert conn.callers_read is True
        readers = []
        conn.on(hooks.RESPONSE, lambda conn, data: readers.append((b.current_task_id(), bytes(data))))
        assert w.pub(topic, b"first") == b"OK"  # (may be read by the reader task, which read when idle)
        del readers[:]
        me = b.current_task_id()
        for i in range(20):
            assert w.pub(topic, b"%d" % i) == b"OK"
        assert [data for _, data in readers] == [b"OK"] * 20
        # the answers are read on the publishing task itself, not handed over by the reader
        # task (which takes the read back only after a whole park interval without a caller:
        # a caller descheduled that long on a loaded machine may see one answer, or two, read
        # by it; before caller reads, all 20 were)
        elsewhere = [i for i, (task, _) in enumerate(readers) if task != me]
        assert len(elsewhere) <= 2, "answers read by another task (the reader task): %r" % elsewhere
    assert run_blocking(backend, nsqd.message_count, topic) == 21


def test_many_concurrent_blocking_callers_all_get_ok(nsqd, topic, backend):
    b = get_backend(backend)
    workers, per_worker = 16, 200
    results = []
    failures = []

    def publisher(i):
        try:
            for n in range(per_worker):
                results.append(w.pub(topic, b"%d-%d" % (i, n)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    with make_writer(backend, nsqd.tcp_address) as w:
        tasks = [b.spawn(publisher, i) for i in range(workers)]
        join_all(backend, tasks)
        assert tasks_done(tasks)
    assert failures == []
    assert results == [b"OK"] * (workers * per_worker)
    assert run_blocking(backend, nsqd.topic_depth, topic) == workers * per_worker


def test_callback_publish_after_blocking_ones_is_answered(nsqd, topic, backend):
    b = get_backend(backend)
    with make_writer(backend, nsqd.tcp_address) as w:
        for i in range(5):
            assert w.pub(topic, b"blocking-%d" % i) == b"OK"
        # the reader task parks while callers read: the callback's answer must still be read
        answered = b.event()
        results = []

        def callback(conn, data):
            results.append(data)
            answered.set()

        assert w.pub(topic, b"with callback", callback=callback) is None
        assert answered.wait(WAIT), "the callback publish was never answered"
        assert results == [b"OK"]
        # a callback publish followed at once by a blocking one: both answered
        w.pub(topic, b"callback-2", callback=lambda conn, data: results.append(data))
        assert w.pub(topic, b"blocking-after") == b"OK"
        wait_for(lambda: len(results) == 2, backend)
        assert results == [b"OK", b"OK"]
    assert run_blocking(backend, nsqd.message_count, topic) == 8


def test_idle_writer_reads_heartbeats_and_stays_connected(nsqd, topic, backend):
    with make_writer(backend, nsqd.tcp_address, heartbeat_interval=1) as w:
        conn = w.conns[nsqd.tcp_address]
        beats = []
        conn.on(hooks.HEARTBEAT, lambda conn: beats.append(1))
        assert w.pub(topic, b"before") == b"OK"
        # (unread heartbeats would let the 2 s read timeout close the connection)
        wait_for(lambda: len(beats) >= 3, backend, message=lambda: "3 heartbeats, got %d" % len(beats))
        assert w.conns[nsqd.tcp_address] is conn
        assert conn.is_connected()
        assert w.pub(topic, b"after") == b"OK"
        assert w.conns[nsqd.tcp_address] is conn
    assert run_blocking(backend, nsqd.message_count, topic) == 2


def test_leader_whose_answer_never_comes_times_out(nsqd, topic, fault_proxy_factory, backend):
    b = get_backend(backend)
    proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
    w = make_writer(backend, proxy.address, publish_timeout=0.5)
    try:
        conn = w.conns[proxy.address]
        stream = conn.stream
        waited_reads = []
        recv_within = stream.recv_within

        def recording_recv_within(timeout):
            waited_reads.append(b.current_task_id())
            return recv_within(timeout)

        stream.recv_within = recording_recv_within  # (instance-level shim: the leader's waiting read)
        assert w.pub(topic, b"before") == b"OK"
        assert w.pub(topic, b"before-2") == b"OK"
        proxy.hold()  # nothing is forwarded: no answer comes; the connection stays open
        del waited_reads[:]
        with pytest.raises(nsq.errors.TimeoutError):
            w.pub(topic, b"stuck")
        assert b.current_task_id() in waited_reads  # the caller itself was reading when it gave up
        proxy.release()
        # the late answer pairs with the abandoned command; the next one gets its own
        assert w.pub(topic, b"after") == b"OK"
        assert w.conns[proxy.address] is conn
    finally:
        proxy.release()
        w.close()
    assert run_blocking(backend, nsqd.message_count, topic) == 4


@pytest.mark.parametrize("how", ["kill-nsqd", "proxy-reset", "proxy-cut"])
def test_every_concurrent_caller_returns_when_the_connection_dies(nsqd, topic, fault_proxy_factory, backend, how):
    b = get_backend(backend)
    proxy = None
    address = nsqd.tcp_address
    if how != "kill-nsqd":
        proxy = fault_proxy_factory(nsqd.host, nsqd.tcp_port)
        address = proxy.address
    stop = b.event()
    calls = [0]
    oks = []
    errors = []
    unexpected = []

    def publisher(i):
        n = 0
        while not stop.is_set():
            calls[0] += 1
            try:
                result = w.pub(topic, b"%d-%d" % (i, n))
            except nsq.Error as exc:
                errors.append(exc)
            except BaseException as exc:  # noqa: BLE001 - reported below
                unexpected.append(exc)
                return
            else:
                (oks if result == b"OK" else unexpected).append(result)
            n += 1

    w = make_writer(backend, address, publish_timeout=1, reconnect_interval=0.2)
    tasks = []
    try:
        conn = w.conns[address]
        tasks = [b.spawn(publisher, i) for i in range(8)]
        wait_for(lambda: len(oks) >= 200, backend)
        if proxy is None:
            run_blocking(backend, nsqd.kill)
        elif how == "proxy-reset":
            run_blocking(backend, proxy.reset)
        else:
            run_blocking(backend, proxy.cut)
        wait_for(conn.closed, backend)
        stop.set()
        join_all(backend, tasks)
        assert tasks_done(tasks), "a caller never returned"
    finally:
        stop.set()
        join_all(backend, tasks)
        w.close()
    assert unexpected == []
    assert len(oks) + len(errors) == calls[0]
    # calls in flight got the close; later ones (no nsqd) found no connection: none waited for
    # its deadline on a connection that had closed under it
    assert all(isinstance(e, (ConnectionClosedError, SendError)) for e in errors), errors[:5]


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
def test_compressed_connection_keeps_the_reader_task_as_only_reader(nsqd, topic, backend, compression):
    with make_writer(backend, nsqd.tcp_address, **{compression: True}) as w:
        conn = w.conns[nsqd.tcp_address]
        assert conn.features[compression] is True
        assert conn.callers_read is False
        for i in range(5):
            assert w.pub(topic, b"%d" % i) == b"OK"
        results = []
        w.pub(topic, b"cb", callback=lambda conn, data: results.append(data))
        wait_for(lambda: results, backend)
        assert results == [b"OK"]
    assert run_blocking(backend, nsqd.message_count, topic) == 6
