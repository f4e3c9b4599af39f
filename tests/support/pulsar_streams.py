# A stream of messages for Pulsar fault tests, on either backend: a Sender task that publishes with
# send_async and remembers every callback, and a Collector task that receives, acknowledges and
# remembers every payload. tests/pulsar/test_faults.py (a relay in front of the broker) and
# tests/pulsar/test_crash.py (the broker killed and restarted) drive them.
from __future__ import annotations

import pulsarfast as pulsar
from msgengine.runtime import get_backend


class Collector:
    """A consumer task (thread or greenlet of the backend) that receives, acknowledges and
    remembers every payload until stopped. An acknowledgement that fails is an error, unless
    ack_failures_are_duplicates (the connection died under it: the message comes again)."""

    def __init__(self, backend, consumer, receive_ms=200, ack_failures_are_duplicates=False):
        self.consumer = consumer
        self.receive_ms = receive_ms
        self.ack_failures_are_duplicates = ack_failures_are_duplicates
        self.bodies = set()
        self.deliveries = 0
        self.errors = []
        self.running = True
        self.task = get_backend(backend).spawn(self._run)

    def _run(self):
        while self.running:
            try:
                msg = self.consumer.receive(timeout_millis=self.receive_ms)
            except pulsar.Timeout:
                continue
            except pulsar.AlreadyClosed:
                return
            except Exception as exc:  # reported by the test
                self.errors.append(exc)
                return
            self.deliveries += 1
            self.bodies.add(msg.data())
            try:
                self.consumer.acknowledge(msg)
            except pulsar.PulsarException as exc:
                if not self.ack_failures_are_duplicates:
                    self.errors.append(exc)

    def stop(self):
        self.running = False
        self.task.join(5)


class Sender:
    """A task sending ``count`` messages (``body(i)``) with send_async, pausing at ``pause_at``
    until ``resume`` is set (so that the fault hits while sends are in flight); remembers every
    callback's outcome by index, and how many went through after the test set ``crashed``."""

    def __init__(self, backend, producer, count, pause_at, resume, wait, body=lambda i: b"m-%05d" % i):
        self.backend = get_backend(backend)
        self.producer = producer
        self.count = count
        self.pause_at = pause_at
        self.resume = resume
        self.wait = wait
        self.body = body
        self.results = {}
        self.callbacks = 0
        self.errors = []
        self.crashed = False  # set by the test when it kills the broker
        self.ok_after_crash = 0
        self.task = self.backend.spawn(self._run)

    def _callback(self, index):
        def callback(result, message_id):
            self.callbacks += 1
            self.results.setdefault(index, []).append((result, message_id))
            if self.crashed and result == pulsar.Result.Ok:
                self.ok_after_crash += 1
        return callback

    def _run(self):
        try:
            for i in range(self.count):
                if i == self.pause_at:
                    self.resume.wait(self.wait)
                self.producer.send_async(self.body(i), self._callback(i))
                if i % 50 == 49:
                    self.backend.sleep(0.002)  # keep the stream going for a while
        except Exception as exc:
            self.errors.append(exc)

    def done(self):
        return self.callbacks >= self.count

    def acknowledged(self):
        return {i for i, r in self.results.items() if [res for res, _mid in r] == [pulsar.Result.Ok]}

    def failed(self):
        return {i: r for i, r in self.results.items() if [res for res, _mid in r] != [pulsar.Result.Ok]}
