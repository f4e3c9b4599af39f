"""A Writer and a Reader made and used in a parent, then os.fork(), as
gunicorn --preload, Celery prefork and multiprocessing do: run as a
subprocess by tests/engine/test_threads_and_greenlets.py, on either backend.

The child publishes on the inherited Writer and then tries to run the
inherited (started) Reader; the parent goes on publishing and consuming.
Every handler call is written to --log as "<pid> <body>", so the test can
tell which process handled what. Each process prints one JSON line.
"""
import sys

if "--backend=gevent" in sys.argv:
    from gevent import monkey

    monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import nsq  # noqa: E402
from nsq.errors import ForkedError  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402

PER_PROCESS = 50
CHILD_DEADLINE = 30.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("gevent", "threads"), required=True)
    parser.add_argument("--nsqd", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    backend = get_backend("auto")
    assert backend.name == args.backend, backend.name
    sleep = backend.sleep

    log = open(args.log, "a", buffering=1)
    seen = set()

    def handler(message):
        log.write("%d %s\n" % (os.getpid(), message.body.decode()))
        seen.add(message.body)
        return True

    writer = nsq.Writer([args.nsqd], publish_timeout=5.0)
    writer.pub(args.topic, b"before-fork")
    reader = nsq.Reader(args.topic, "forked", handler, nsqd_tcp_addresses=[args.nsqd], max_in_flight=20)
    reader.start()
    deadline = time.monotonic() + 10
    while b"before-fork" not in seen and time.monotonic() < deadline:
        sleep(0.01)

    def publish(process):
        result = {"process": process, "published": 0, "errors": []}
        for i in range(PER_PROCESS):
            try:
                if writer.pub(args.topic, b"%s-%d" % (process.encode(), i)) == b"OK":
                    result["published"] += 1
            except nsq.Error as exc:
                result["errors"].append(repr(exc))
        return result

    pid = os.fork()
    if pid == 0:
        started = time.monotonic()
        result = publish("child")
        sleep(1.0)  # under gevent, greenlets that survived the fork get to run now
        try:
            reader.run()
            result["reader_run"] = "returned"
        except ForkedError as exc:
            result["reader_run"] = "ForkedError"
            result["reader_run_message"] = str(exc)
        writer.close()
        result["seconds"] = round(time.monotonic() - started, 2)
        print(json.dumps(result), flush=True)
        log.close()
        os._exit(0)

    result = publish("parent")
    deadline = time.monotonic() + CHILD_DEADLINE
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        result["child_hung"] = True
    result["child_status"] = status
    expected = {b"before-fork"} | {b"child-%d" % i for i in range(PER_PROCESS)} | {
        b"parent-%d" % i for i in range(PER_PROCESS)
    }
    deadline = time.monotonic() + 15
    while not expected <= seen and time.monotonic() < deadline:
        sleep(0.05)
    result["parent_missing"] = sorted(b.decode() for b in expected - seen)
    reader.close()
    writer.close()
    result["pid"] = os.getpid()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
