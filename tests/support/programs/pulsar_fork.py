"""A pulsarfast Client made and used in a parent, then os.fork(): run as a
subprocess by tests/pulsar/test_runtime.py, on either backend (under gevent,
the fork happens on the main greenlet).

The child tries each public call on the inherited client, producers and
consumer, and records what each returned or raised (the producer sends
PER_PROCESS messages, the consumer's calls should raise ForkedError); then it
closes the client and exits 0 normally (interpreter shutdown included). The
parent waits for the child (bounded), then sends PER_PROCESS messages of its
own and receives everything on the topic. Each process prints one JSON line:
{"process": "child"|"parent", ...}.
"""
import argparse
import json
import os
import sys
import time

import pulsarfast as pulsar

CHILD_DEADLINE = 40.0
PER_PROCESS = 20


CALL_LIMIT = 3.0  # a call still blocked after this long is reported as "hung"


def outcome(backend, fn):
    """What fn() did, run as a task of the backend so that a call that never
    returns is reported ("hung") instead of hanging the child."""
    result = {}

    def run():
        started = time.monotonic()
        try:
            value = fn()
            result.update(outcome="returned", value=repr(value)[:200])
        except pulsar.ForkedError as exc:
            result.update(outcome="ForkedError", message=str(exc))
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            result.update(outcome=type(exc).__name__, message=str(exc)[:300],
                          is_pulsar_exception=isinstance(exc, pulsar.PulsarException))
        result["seconds"] = round(time.monotonic() - started, 2)

    task = backend.spawn(run)
    task.join(CALL_LIMIT)
    return dict(result) if result else {"outcome": "hung", "seconds": CALL_LIMIT}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("gevent", "threads"), required=True)
    parser.add_argument("--service-url", required=True)
    parser.add_argument("--topic", required=True)
    args = parser.parse_args()

    client = pulsar.Client(args.service_url, backend=args.backend, operation_timeout_seconds=10)
    sleep = client.backend.sleep
    consumer = client.subscribe(args.topic, "fork", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(args.topic, send_timeout_millis=10_000)
    named = client.create_producer(args.topic, producer_name="fork-named-%d" % os.getpid())
    producer.send(b"before-fork")
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.data() == b"before-fork", msg.data()
    consumer.acknowledge(msg)

    pid = os.fork()
    if pid == 0:
        backend = client.backend
        callbacks = []
        result = {"process": "child", "calls": {}}
        calls = result["calls"]
        calls["producer.send"] = outcome(backend, lambda: producer.send(b"child-0"))
        calls["producer.send_async"] = outcome(
            backend, lambda: producer.send_async(b"child-1", lambda res, mid: callbacks.append(res.name)))
        calls["producer.flush"] = outcome(backend, producer.flush)
        calls["more sends"] = outcome(backend, lambda: [producer.send(b"child-%d" % i) for i in range(2, PER_PROCESS)])
        calls["named_producer.send"] = outcome(backend, lambda: named.send(b"named-from-child"))
        calls["consumer.receive"] = outcome(backend, lambda: consumer.receive(timeout_millis=1000))
        calls["consumer.acknowledge"] = outcome(backend, lambda: consumer.acknowledge(msg))
        calls["client.get_topic_partitions"] = outcome(backend, lambda: client.get_topic_partitions(args.topic))
        calls["client.create_producer"] = outcome(backend, lambda: client.create_producer(args.topic).close())
        calls["client.subscribe"] = outcome(backend, lambda: client.subscribe(args.topic, "child-sub").close())
        result["send_async_callbacks"] = list(callbacks)  # (flush() waited for it)
        calls["client.close"] = outcome(backend, client.close)
        print(json.dumps(result), flush=True)
        sys.exit(0)  # a normal exit: atexit hooks and thread joins must not hang

    result = {"process": "parent"}
    deadline = time.monotonic() + CHILD_DEADLINE
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        sleep(0.05)  # the backend's sleep: under gevent the parent's client keeps running
    else:
        os.kill(pid, 9)
        _pid, status = os.waitpid(pid, 0)
        result["child_hung"] = True
    result["child_exit_code"] = os.waitstatus_to_exitcode(status) if status is not None else None

    result["send_after"] = outcome(
        client.backend, lambda: [producer.send(b"parent-%d" % i) for i in range(PER_PROCESS)])
    result["named_send_after"] = outcome(client.backend, lambda: named.send(b"named-from-parent"))
    received = []
    while True:
        try:
            got = consumer.receive(timeout_millis=10_000)
        except pulsar.Timeout:
            break
        received.append(got.data().decode())
        consumer.acknowledge(got)
        if got.data() == b"named-from-parent":
            # anything the child might have slipped through the parent's socket would be here too
            try:
                extra = consumer.receive(timeout_millis=1000)
                received.append(extra.data().decode())
            except pulsar.Timeout:
                pass
            break
    result["received_after"] = received
    client.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
