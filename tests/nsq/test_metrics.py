# nsq.metrics against a real nsqd, on both backends: publish N, consume N, then scrape the
# registry twice (generate_latest, and over HTTP from start_http_server) and check every
# counter and gauge with its labels; failed publishes, requeues, closed and forgotten objects.
# The import rules are in test_metrics_imports.py.
from __future__ import annotations

import gc

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry  # noqa: E402

import nsq  # noqa: E402
import nsq.metrics  # noqa: E402
from msgengine.metrics import Families, MetricSpec  # noqa: E402
from tests.support.scraping import http_scrape, names, scrape, value  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(90)


# -- the round trip ----------------------------------------------------------------------------------


def test_counters_and_gauges_after_publishing_and_consuming_n(nsqd, topic, backend):
    registry = CollectorRegistry()
    writer = nsq.Writer([nsqd.tcp_address], backend=backend)
    collector = nsq.metrics.register(writer, registry)
    assert isinstance(collector, nsq.metrics.NsqCollector)
    # every way of publishing: blocking PUB, MPUB, DPUB (0 ms), a callback's PUB, pub_many
    answers = []
    for i in range(10):
        assert writer.pub(topic, b"pub %d" % i) == b"OK"
    assert writer.mpub(topic, [b"mpub %d" % i for i in range(20)]) == b"OK"
    assert writer.dpub(topic, 0, b"dpub") == b"OK"
    for i in range(5):
        writer.pub(topic, b"callback %d" % i, callback=lambda conn, data: answers.append(data))
    wait_for(lambda: len(answers) == 5, backend, message="the 5 callbacks")
    assert answers == [b"OK"] * 5
    assert writer.pub_many(topic, [b"many %d" % i for i in range(64)], batch_size=10) == 64
    n = 10 + 20 + 1 + 5 + 64

    handled = []
    reader = nsq.Reader(topic, "archive", lambda message: handled.append(message.body) or True,
                        nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=7, backend=backend)
    nsq.metrics.register(reader, registry)
    try:
        reader.start()
        wait_for(lambda: reader.stats()["finished"] == n, backend, message=lambda: "%d finished: %r" % (n, reader.stats()))
        assert len(handled) == n

        for samples in (scrape(registry), http_scrape(registry, backend)):
            rc = {"topic": topic, "channel": "archive"}
            assert value(samples, "nsq_reader_messages_received_total", **rc) == n
            assert value(samples, "nsq_reader_messages_finished_total", **rc) == n
            assert value(samples, "nsq_reader_messages_requeued_total", **rc) == 0
            assert value(samples, "nsq_reader_messages_given_up_total", **rc) == 0
            assert value(samples, "nsq_reader_handler_errors_total", **rc) == 0
            assert value(samples, "nsq_reader_connections", **rc) == 1
            assert value(samples, "nsq_reader_max_in_flight", **rc) == 7
            assert value(samples, "nsq_reader_rdy", **rc) == 7
            assert value(samples, "nsq_reader_in_flight", **rc) == 0
            assert value(samples, "nsq_reader_in_backoff", **rc) == 0
            conn = dict(rc, nsqd=nsqd.tcp_address)
            assert value(samples, "nsq_reader_connection_rdy", **conn) == 7
            assert value(samples, "nsq_reader_connection_in_flight", **conn) == 0
            assert value(samples, "nsq_writer_messages_published_total", topic=topic) == n
            assert value(samples, "nsq_writer_publish_errors_total", topic=topic) == 0
            assert value(samples, "nsq_writer_connections") == 1
        # what the library counted is what nsqd saw
        channel = nsqd.channel_stats(topic, "archive")
        assert channel["message_count"] == n and channel["depth"] == 0
    finally:
        reader.close()
        writer.close()


def test_a_publish_nsqd_refuses_is_an_error_of_its_topic(nsqd_factory, topic, backend):
    nsqd = nsqd_factory("--max-msg-size=64")
    registry = CollectorRegistry()
    # (the Writer's own size check lets it through: nsqd's answer is the error)
    with nsq.Writer([nsqd.tcp_address], backend=backend, max_msg_size=1024, reconnect_interval=0.1) as writer:
        nsq.metrics.register(writer, registry)
        assert writer.pub(topic, b"small") == b"OK"
        with pytest.raises(nsq.Error):
            writer.pub(topic, b"x" * 100)
        assert writer.pub(topic, b"small again") == b"OK"  # (nsqd closes on that error: after the reconnect)
        samples = scrape(registry)
        assert value(samples, "nsq_writer_messages_published_total", topic=topic) == 2
        assert value(samples, "nsq_writer_publish_errors_total", topic=topic) == 1
        assert writer.stats()["topics"] == {topic: {"published": 2, "errors": 1}}


def test_requeues_are_counted(nsqd, topic, backend):
    registry = CollectorRegistry()
    with nsq.Writer([nsqd.tcp_address], backend=backend) as writer:
        assert writer.mpub(topic, [b"%d" % i for i in range(5)]) == b"OK"

    def handler(message):
        if message.body == b"0" and message.attempts == 1:
            message.requeue(backoff=False, delay=0)  # comes back at once, without a backoff
            return None
        return True

    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=5, backend=backend)
    nsq.metrics.register(reader, registry)
    try:
        reader.start()
        wait_for(lambda: reader.stats()["finished"] == 5, backend, message=lambda: repr(reader.stats()))
        samples = scrape(registry)
        rc = {"topic": topic, "channel": "ch"}
        assert value(samples, "nsq_reader_messages_received_total", **rc) == 6
        assert value(samples, "nsq_reader_messages_finished_total", **rc) == 5
        assert value(samples, "nsq_reader_messages_requeued_total", **rc) == 1
    finally:
        reader.close()


# -- which objects are reported ---------------------------------------------------------------------


def test_closed_objects_leave_at_the_next_scrape_and_forgotten_ones_too(nsqd, topic, backend):
    registry = CollectorRegistry()
    writer = nsq.Writer([nsqd.tcp_address], backend=backend)
    collector = nsq.metrics.register(writer, registry)
    assert writer.pub(topic, b"x") == b"OK"
    reader = nsq.Reader(topic, "ch", lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address], backend=backend)
    nsq.metrics.register(reader, registry)
    assert set(collector.objects()) == {writer, reader}
    assert "nsq_reader_messages_received_total" in names(scrape(registry))

    reader.close()
    samples = scrape(registry)
    assert "nsq_reader_messages_received_total" not in names(samples)
    assert value(samples, "nsq_writer_messages_published_total", topic=topic) == 1
    assert collector.objects() == [writer]

    writer.close()
    assert "nsq_writer_messages_published_total" not in names(scrape(registry))
    assert collector.objects() == []

    # held weakly: once the library lets go of a closed Writer (its connection tasks end), the
    # collector does not keep it alive, even without a scrape
    other = nsq.Writer([nsqd.tcp_address], backend=backend)
    nsq.metrics.register(other, registry)
    assert other.pub(topic, b"y") == b"OK"
    other.close()
    del other
    wait_for(lambda: gc.collect() >= 0 and not collector.objects(), backend, message="the closed Writer collected")


def test_unregister_and_one_collector_per_registry(nsqd, topic, backend):
    registry = CollectorRegistry()
    with nsq.Writer([nsqd.tcp_address], backend=backend) as writer:
        first = nsq.metrics.register(writer, registry)
        with nsq.Writer([nsqd.tcp_address], backend=backend) as second_writer:
            assert nsq.metrics.register(second_writer, registry) is first
            assert writer.pub(topic, b"a") == b"OK" and second_writer.pub(topic, b"b") == b"OK"
            # two objects with the same labels: summed
            assert value(scrape(registry), "nsq_writer_messages_published_total", topic=topic) == 2
            nsq.metrics.unregister(second_writer, registry)
            assert value(scrape(registry), "nsq_writer_messages_published_total", topic=topic) == 1
        # a second collector of the same names in one registry is refused by prometheus_client
        with pytest.raises(ValueError):
            registry.register(nsq.metrics.NsqCollector())
    with pytest.raises(TypeError):
        nsq.metrics.register(object(), registry)  # type: ignore[arg-type]


def test_a_collector_made_by_hand_reports_what_it_is_given(nsqd, topic, backend):
    registry = CollectorRegistry()
    with nsq.Writer([nsqd.tcp_address], backend=backend) as writer:
        registry.register(nsq.metrics.NsqCollector([writer]))
        assert writer.mpub(topic, [b"a", b"b", b"c"]) == b"OK"
        assert value(scrape(registry), "nsq_writer_messages_published_total", topic=topic) == 3


def test_families_sum_samples_with_equal_labels():
    spec = MetricSpec("x_total", "counter", "X.", ("topic",))
    families = Families([spec])
    families.add("x_total", ("a",), 2)
    families.add("x_total", ("a",), 3)
    families.add("x_total", ("b",), 1)
    (family,) = families.metrics()
    assert {(s.name, s.labels["topic"]): s.value for s in family.samples} == {("x_total", "a"): 5, ("x_total", "b"): 1}

