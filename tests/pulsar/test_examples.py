"""The Pulsar example programs (examples/pulsar_producer.py, examples/pulsar_consumer.py), run as
users run them, against the real broker: the producer's ten receipts reach the consumer, and
Ctrl-C ends the consumer through its own ``except pulsar.Interrupted`` path (its goodbye line, exit
code 0, no traceback), as the same program does on the official client.

The SIGINT goes once the consumer's main thread has slept for a while after its last line (a wait for
the GIL is a few ms): receive() is then the only place it can be, so the interrupt never lands between
two statements of the loop, where any Python program would see a KeyboardInterrupt."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.servers import REPO_ROOT
from tests.support.subprocess_programs import Program, program_env
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

EXAMPLES = os.path.join(REPO_ROOT, "examples")
START_WITHIN = 30.0  # interpreter start, imports, subscribe


PARKED_POLLS = 10  # consecutive polls (20 ms apart) that find the main thread asleep


def parked(pid: int):
    """A predicate: whether the process's main thread was asleep (state S in /proc) at each of the
    last PARKED_POLLS calls."""
    seen = []

    def main_thread_parked() -> bool:
        with open("/proc/%d/stat" % pid) as stat:
            seen.append(stat.read().rsplit(")", 1)[1].split()[0] == "S")
        return len(seen) >= PARKED_POLLS and all(seen[-PARKED_POLLS:])
    return main_thread_parked


def test_the_example_producer_and_consumer_work_and_ctrl_c_ends_the_consumer_cleanly(pulsar_broker, pulsar_topic):
    consumer = Program([os.path.join(EXAMPLES, "pulsar_consumer.py"), pulsar_broker.service_url, pulsar_topic])
    try:
        assert consumer.wait_line("Receiving from %s (Ctrl-C to stop)" % pulsar_topic, START_WITHIN), \
            consumer.report()
        produced = subprocess.run([sys.executable, os.path.join(EXAMPLES, "pulsar_producer.py"),
                                   pulsar_broker.service_url, pulsar_topic],
                                  capture_output=True, text=True, env=program_env(), timeout=START_WITHIN)
        assert produced.returncode == 0, produced.stderr
        assert [line.split(" as ")[0] for line in produced.stdout.splitlines()] == \
            ["Sent hello-pulsar-%d" % i for i in range(10)]
        received = []
        for _ in range(10):
            line = consumer.line(START_WITHIN)
            assert line is not None, consumer.report()
            received.append(line.split(" id=")[0])
        assert received == ["Received message 'hello-pulsar-%d'" % i for i in range(10)]
        wait_for(parked(consumer.proc.pid), "threads", timeout=START_WITHIN)
        code = consumer.signal_and_wait_exit(signal.SIGINT, START_WITHIN)
    finally:
        consumer.kill()
    assert code == 0, consumer.report()
    assert consumer.stdout[-1] == "Stop receiving messages\n", consumer.report()
    assert "Traceback" not in consumer.stderr, consumer.report()
