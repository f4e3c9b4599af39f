"""examples/pulsar_transactions.py, run as a user runs it, on the run's transaction broker: a
first run SIGKILLed right after its first commit, then a second run, move every input message to
the output exactly once (transformed) and leave the input's backlog empty."""
from __future__ import annotations

import os
import signal
import uuid

import pytest

import pulsarfast
from tests.support.servers import REPO_ROOT
from tests.support.subprocess_programs import Program
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

EXAMPLE = os.path.join(REPO_ROOT, "examples", "pulsar_transactions.py")
COUNT = 250


@pytest.fixture
def threads_client(txn_broker):
    client = pulsarfast.Client(txn_broker.service_url, operation_timeout_seconds=15, backend="threads")
    yield client
    client.close()


def test_the_transactions_example_moves_each_message_once_across_a_crash(threads_client, txn_broker):
    client = threads_client
    source, output = "ex-in-" + uuid.uuid4().hex[:8], "ex-out-" + uuid.uuid4().hex[:8]
    checker = client.subscribe(output, "check", initial_position=pulsarfast.InitialPosition.Earliest)
    feeder = client.create_producer(source, batching_enabled=True, batching_max_publish_delay_ms=5)
    for i in range(COUNT):
        feeder.send_async(b"order-%03d" % i, None)
    feeder.flush()
    args = [EXAMPLE, "--service-url", txn_broker.service_url, "--input", source, "--output", output,
            "--subscription", "upper", "--batch", "100", "--idle-ms", "500", "--txn-timeout-ms", "3000"]
    first = Program(args)
    try:
        assert first.wait_line("committed 100 messages (100 in all)", timeout=60)
        os.kill(first.proc.pid, signal.SIGKILL)  # (mid-run: its next round is open, or not yet begun)
        first.proc.wait(30)
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    second = Program(args)  # (the killed run's open round comes back once its coordinator aborts it)
    try:
        received = sorted(checker.receive(30000).data() for _ in range(COUNT))
        with pytest.raises(pulsarfast.Timeout):
            checker.receive(1000)  # (no copy: what the killed run left open was aborted, never delivered)
    finally:
        second.proc.send_signal(signal.SIGINT)
        second.proc.wait(30)
    assert received == sorted(b"ORDER-%03d" % i for i in range(COUNT))

    def backlog() -> int:
        stats = txn_broker.admin("GET", "/admin/v2/persistent/public/default/%s/stats" % source)
        return stats["subscriptions"]["upper"]["msgBacklog"]
    assert wait_for(lambda: backlog() == 0, "threads", timeout=15)
