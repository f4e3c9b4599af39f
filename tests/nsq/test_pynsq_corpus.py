"""The pynsq program corpus (tests/nsq/pynsq_programs/), each program run as a
subprocess against real nsqd/nsqlookupd: every message arrives and is
acknowledged, as the program's own report and nsqd's counters say.

By default the programs run on this package. With PYNSQ_CORPUS_PYTHON set to
an interpreter that has pynsq 0.9.1 and tornado (``make pynsq-corpus``), the
same programs run on pynsq, which shows each one is a correct pynsq program.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.scanned_channels import nsqd_with_channels
from tests.support.servers import REPO_ROOT

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pynsq_programs")
ON_PYNSQ = bool(os.environ.get("PYNSQ_CORPUS_PYTHON"))
PYTHON = os.environ.get("PYNSQ_CORPUS_PYTHON") or sys.executable
COUNT = 60
RUN_TIMEOUT = 60  # pynsq retries a disabled() RDY after 15 s


def program_env(nsqd, lookupd, topic) -> dict:
    env = dict(os.environ)
    if ON_PYNSQ:
        env.pop("PYTHONPATH", None)  # `import nsq` is pynsq there
    else:
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(
        NSQD_TCP=nsqd.tcp_address, NSQD_HTTP=nsqd.http_address, LOOKUPD_HTTP=lookupd.http_address if lookupd else "",
        TOPIC=topic, COUNT=str(COUNT), PYTHONUNBUFFERED="1",
    )
    return env


class Program:
    def __init__(self, name, nsqd, lookupd, topic):
        self.proc = subprocess.Popen(
            [PYTHON, os.path.join(CORPUS, name + ".py")], cwd=CORPUS, env=program_env(nsqd, lookupd, topic),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []

    def wait_for_line(self, text, timeout=RUN_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.strip() == text:
                return
        self.proc.kill()
        raise AssertionError("no %r from the program; it printed %r, stderr:\n%s" % (
            text, self.lines[-5:], self.proc.stderr.read()[-3000:]))

    def finish(self, signum=None, timeout=RUN_TIMEOUT) -> dict:
        if signum is not None:
            self.proc.send_signal(signum)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError("the program did not end within %ds:\n%s" % (timeout, err[-3000:]))
        self.lines += out.splitlines(True)
        assert self.proc.returncode == 0, "exit %s:\n%s" % (self.proc.returncode, err[-3000:])
        assert "Traceback" not in err, err[-3000:]
        reports = [line for line in self.lines if line.startswith("{")]
        assert reports, "no report:\n%s\n%s" % ("".join(self.lines[-5:]), err[-3000:])
        return json.loads(reports[-1])


@pytest.fixture
def corpus(request, nsqd_factory, nsqlookupd, topic):
    # (the programs read channel "c": nsqd starts with it, so that a message requeued with a delay
    # comes back after that delay, not at nsqd's next 5-second refresh of the channels it scans,
    # tests/support/scanned_channels.py)
    nsqd = nsqd_with_channels(nsqd_factory, {topic: ["c"]}, lookupd=nsqlookupd)
    started = []

    def run(name, bodies=None):
        if bodies:
            nsqd.http_mpub(topic, bodies)
        program = Program(name, nsqd, nsqlookupd, topic)
        started.append(program)
        return program

    run.nsqd = nsqd
    run.topic = topic
    yield run
    for program in started:
        if program.proc.poll() is None:
            program.proc.kill()
            program.proc.communicate()


def messages(prefix="m"):
    return [b"%s-%d" % (prefix.encode(), i) for i in range(COUNT)]


def wait_until(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for %s" % predicate
        time.sleep(0.05)


def settled(nsqd, topic, channel="c"):
    """Waits until nothing on the channel is queued, deferred or in flight; returns its stats."""
    def quiet():
        stats = nsqd.channel_stats(topic, channel)
        return stats and stats["depth"] == 0 and stats["in_flight_count"] == 0 and stats["deferred_count"] == 0

    wait_until(quiet)
    return nsqd.channel_stats(topic, channel)


@pytest.mark.parametrize(
    "name",
    ["unreferenced_reader", "gen_coroutine_handler", "io_loop_add_callback", "reader_made_while_running",
     "disabled_override"],
)
def test_consumers_stopped_by_sigterm(corpus, name):
    program = corpus(name, messages())
    program.wait_for_line("ALL HANDLED")
    stats = settled(corpus.nsqd, corpus.topic)
    report = program.finish(signal.SIGTERM)
    assert report["handled"] == COUNT
    assert stats["requeue_count"] == 0 and stats["timeout_count"] == 0
    if name == "disabled_override":
        assert report["handled_while_disabled"] == 0


def test_async_def_handler(corpus):
    program = corpus("async_def_handler", messages())
    program.wait_for_line("ALL HANDLED")
    stats = settled(corpus.nsqd, corpus.topic)
    report = program.finish(signal.SIGTERM)
    # every body ran (none finished unrun), and the coroutine's False requeued the one it was meant to
    assert report == {"handled": COUNT, "requeued": 1}
    assert stats["requeue_count"] == 1 and stats["timeout_count"] == 0


def test_requeue_with_time_ms(corpus):
    program = corpus("requeue_time_ms", messages())
    program.wait_for_line("ALL HANDLED")
    stats = settled(corpus.nsqd, corpus.topic)
    report = program.finish(signal.SIGTERM)
    assert report["handled"] == COUNT
    assert stats["requeue_count"] == COUNT and stats["timeout_count"] == 0


@pytest.mark.parametrize("name", ["ioloop_start", "asyncio_run_forever", "reader_loop_on_a_thread"])
def test_consumers_that_stop_their_own_loop(corpus, name):
    program = corpus(name, messages())
    report = program.finish()
    assert report["handled"] == COUNT
    stats = settled(corpus.nsqd, corpus.topic)
    assert stats["requeue_count"] == 0 and stats["timeout_count"] == 0


def test_writer_on_a_periodic_callback(corpus):
    report = corpus("writer_periodic_callback").finish()
    assert report == {"ok": COUNT, "error": 0}
    assert corpus.nsqd.message_count(corpus.topic) == COUNT


def test_a_writer_whose_loop_runs_on_another_thread_publishes_and_ends(corpus):
    # (made on the main thread, its IOLoop started by threading.Thread: the loop's thread is that one)
    report = corpus("writer_loop_on_a_thread").finish()
    assert report == {"ok": COUNT, "error": 0}
    assert corpus.nsqd.message_count(corpus.topic) == COUNT


def test_a_reader_whose_loop_runs_on_another_thread_calls_its_handler_there(corpus):
    report = corpus("reader_loop_on_a_thread", messages()).finish()
    assert report == {"handled": COUNT, "handler_threads": ["loop"]}


def test_an_asyncio_writer_and_reader_whose_loop_runs_forever_on_another_thread(corpus):
    report = corpus("asyncio_loop_on_a_thread").finish()
    assert report == {"ok": COUNT, "error": 0, "handled": COUNT}
    assert corpus.nsqd.message_count(corpus.topic) == COUNT
    stats = settled(corpus.nsqd, corpus.topic)
    assert stats["requeue_count"] == 0 and stats["timeout_count"] == 0


def test_a_loop_run_by_one_thread_then_another(corpus):
    report = corpus("loop_on_two_threads").finish()
    assert report == {"ok": COUNT, "error": 0, "handled": COUNT,
                      "callback_threads": ["A", "B"], "handler_threads": ["A", "B"]}
    assert corpus.nsqd.message_count(corpus.topic) == COUNT
    stats = settled(corpus.nsqd, corpus.topic)
    assert stats["requeue_count"] == 0 and stats["timeout_count"] == 0


def test_mpub_with_msg_keyword_and_dpub(corpus):
    report = corpus("mpub_and_dpub").finish()
    assert report == {"ok": 2, "error": 0}
    assert corpus.nsqd.message_count(corpus.topic) == COUNT


def test_messages_built_in_a_unit_test(corpus):
    report = corpus("message_made_by_hand").finish()
    assert report == {"events": ["touch", "finish", "requeue"], "responded": [True, True]}


def test_keyboard_interrupt_from_a_handler_reaches_the_main_thread(corpus):
    bodies = [b"a-%d" % i for i in range(9)] + [b"stop"]
    report = corpus("handler_keyboard_interrupt", bodies).finish()
    assert report == {"outcome": "KeyboardInterrupt", "handled": 9}
    # the interrupted message is not lost: it is back on the channel, waiting or still in flight
    stats = corpus.nsqd.channel_stats(corpus.topic, "c")
    assert stats["depth"] + stats["deferred_count"] + stats["in_flight_count"] == 1
