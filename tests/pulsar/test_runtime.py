"""pulsarfast and its runtime, against a real Pulsar standalone broker: a
blocking receive() lets other greenlets run under gevent; Ctrl-C and a
SIGTERM handler interrupt a receive() that waits for ever; after os.fork() a
client made in the parent sends from the child on connections of its own,
while the consumer started in the parent (and a producer with a name of its
own) raise ForkedError there; the child exits cleanly and the parent's client
goes on working.

The signal and fork cases run programs from tests/support/programs/ as
subprocesses (pulsar_receive_forever.py, pulsar_fork.py), so that this
process's signal handlers and threads stay untouched."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

import pulsarfast as pulsar
from tests.support.servers import PROGRAMS_DIR
from tests.support.subprocess_programs import Program, program_env

pytestmark = pytest.mark.timeout(150)

PROGRAMS = PROGRAMS_DIR
READY_WITHIN = 30.0  # interpreter start, imports, subscribe
EXIT_WITHIN = 15.0


def json_lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# --------------------------------------------------------------------------- gevent: receive() yields


def test_gevent_receive_with_timeout_lets_other_greenlets_run_and_raises_timeout(pulsar_broker, pulsar_topic):
    import gevent

    client = pulsar.Client(pulsar_broker.service_url, backend="gevent", operation_timeout_seconds=15)
    ticks = [0]
    running = [True]

    def ticker():
        while running[0]:
            gevent.sleep(0.1)
            ticks[0] += 1

    greenlet = None
    try:
        consumer = client.subscribe(pulsar_topic, "tick", consumer_type=pulsar.ConsumerType.Shared)
        greenlet = gevent.spawn(ticker)
        before = ticks[0]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=2000)  # an empty topic: nothing comes
        during = ticks[0] - before
        # the official client blocks the whole process here (0 ticks); ours waits on the hub
        assert during >= 10, "the ticker ran %d times during a 2 s receive()" % during
    finally:
        running[0] = False
        if greenlet is not None:
            greenlet.join(2)
            greenlet.kill()
        client.close()


# --------------------------------------------------------------------------- signals


PROGRAM_BACKENDS = ["gevent", "threads", "gevent-patched"]  # the last: gevent after monkey.patch_all()


def start_receive_forever(pulsar_broker, pulsar_topic, program_backend, *extra):
    program = Program([os.path.join(PROGRAMS, "pulsar_receive_forever.py"), "--backend", program_backend,
                       "--service-url", pulsar_broker.service_url, "--topic", pulsar_topic, *extra])
    ready = program.wait_line("READY", READY_WITHIN)
    if ready != "READY":
        program.kill()
        program.wait_exit(5)
        pytest.fail("the program did not block in receive():\n" + program.report())
    return program


@pytest.mark.parametrize("program_backend", PROGRAM_BACKENDS)
def test_ctrl_c_interrupts_a_receive_without_timeout(pulsar_broker, pulsar_topic, program_backend):
    program = start_receive_forever(pulsar_broker, pulsar_topic, program_backend)
    code = program.signal_and_wait_exit(signal.SIGINT, EXIT_WITHIN)
    assert code is not None, "still running %gs after SIGINT:\n%s" % (EXIT_WITHIN, program.report())
    assert "KeyboardInterrupt" in program.stderr, program.report()
    assert "consumer.receive()" in program.stderr, program.report()  # raised out of receive()
    # pulsar.Interrupted, as the official client (also a KeyboardInterrupt, but not exactly one: Python
    # then exits with 1, as after the official client's uncaught Interrupted, not by SIGINT)
    assert "ReceiveInterrupted: Pulsar error: Interrupted" in program.stderr, program.report()
    assert code == 1, program.report()
    assert "CLOSED" in "".join(program.stdout), program.report()  # client.close() in finally returned


@pytest.mark.parametrize("program_backend", PROGRAM_BACKENDS)
def test_sigterm_handler_raising_system_exit_ends_a_receive_without_timeout(
        pulsar_broker, pulsar_topic, program_backend):
    program = start_receive_forever(pulsar_broker, pulsar_topic, program_backend, "--sigterm-exits")
    code = program.signal_and_wait_exit(signal.SIGTERM, EXIT_WITHIN)
    assert code is not None, "still running %gs after SIGTERM:\n%s" % (EXIT_WITHIN, program.report())
    assert code == 3, program.report()  # the handler's SystemExit(3), not a default SIGTERM death
    assert "CLOSED" in "".join(program.stdout), program.report()
    assert "Traceback" not in program.stderr, program.report()


# --------------------------------------------------------------------------- fork

FORK_EXIT_WITHIN = 90.0

#: what the child does with the inherited objects that must raise ForkedError there
CHILD_FORKED_CALLS = ["consumer.receive", "consumer.acknowledge", "named_producer.send"]
#: and what must work there, on the child's own connections
CHILD_WORKING_CALLS = ["producer.send", "producer.send_async", "producer.flush", "more sends",
                       "client.get_topic_partitions", "client.create_producer", "client.subscribe", "client.close"]
PER_PROCESS = 20


@pytest.fixture(scope="module", params=["gevent", "threads"])
def fork_run(request, pulsar_broker):
    """Run tests/support/programs/pulsar_fork.py once per backend: {"child": {...}, "parent": {...}}."""
    topic = "t_fork_%s_%s" % (request.param, uuid.uuid4().hex[:8])
    proc = subprocess.run(
        [sys.executable, os.path.join(PROGRAMS, "pulsar_fork.py"), "--backend", request.param,
         "--service-url", pulsar_broker.service_url, "--topic", topic],
        capture_output=True, text=True, env=program_env(), timeout=FORK_EXIT_WITHIN,
    )
    results = {r["process"]: r for r in json_lines(proc.stdout)}
    results["text"] = "exit %s\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr[-4000:])
    results["returncode"] = proc.returncode
    return results


def test_forked_child_sends_on_the_inherited_producer_and_its_consumer_raises_forked_error(fork_run):
    assert "parent" in fork_run, fork_run["text"]
    parent = fork_run["parent"]
    assert not parent.get("child_hung"), "the child did not exit within its deadline:\n" + fork_run["text"]
    assert parent["child_exit_code"] == 0, fork_run["text"]
    assert "child" in fork_run, "the child printed nothing:\n" + fork_run["text"]
    calls = fork_run["child"]["calls"]
    wrong = {name: calls[name] for name in CHILD_FORKED_CALLS
             if calls[name]["outcome"] != "ForkedError" or "fork" not in calls[name]["message"].lower()}
    wrong.update({name: calls[name] for name in CHILD_WORKING_CALLS if calls[name]["outcome"] != "returned"})
    assert wrong == {}, "calls in the forked child that did not do what they should:\n%s" % json.dumps(wrong, indent=1)
    assert fork_run["child"]["send_async_callbacks"] == ["Ok"], fork_run["text"]


def test_parent_client_keeps_working_and_gets_each_message_of_both_processes_once(fork_run):
    assert "parent" in fork_run, fork_run["text"]
    parent = fork_run["parent"]
    assert fork_run["returncode"] == 0, fork_run["text"]
    assert parent["send_after"]["outcome"] == "returned", fork_run["text"]
    assert parent["named_send_after"]["outcome"] == "returned", fork_run["text"]
    expected = ["child-%d" % i for i in range(PER_PROCESS)] + ["parent-%d" % i for i in range(PER_PROCESS)]
    # each process's messages in its own order, each once; nothing the child might have sent on the parent's sockets
    received = parent["received_after"]
    assert [m for m in received if m.startswith("child-")] == expected[:PER_PROCESS], fork_run["text"]
    assert [m for m in received if m.startswith("parent-")] == expected[PER_PROCESS:], fork_run["text"]
    assert sorted(received) == sorted(expected + ["named-from-parent"]), fork_run["text"]
