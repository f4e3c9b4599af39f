"""Delayed delivery (deliver_after / deliver_at) on a Shared subscription,
against a real broker, on both backends: a delayed message is held by the
broker and arrives after messages sent later without a delay."""
from __future__ import annotations

import datetime
import time

import pytest

import pulsarfast as pulsar

pytestmark = pytest.mark.timeout(150)

RECEIVE_MS = 15_000


@pytest.mark.parametrize("how", ["deliver_after", "deliver_at"])
def test_a_delayed_message_arrives_after_a_later_undelayed_one(client, pulsar_topic, how):
    consumer = client.subscribe(pulsar_topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(pulsar_topic)
    if how == "deliver_after":
        delayed_id = producer.send(b"delayed", deliver_after=datetime.timedelta(seconds=3))
    else:
        delayed_id = producer.send(b"delayed", deliver_at=int(time.time() * 1000) + 3000)
    producer.send(b"now")
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    second = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (first.data(), second.data()) == (b"now", b"delayed")
    assert second.message_id() == delayed_id
    consumer.acknowledge(first)
    consumer.acknowledge(second)
