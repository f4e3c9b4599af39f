"""nsq.run() and the loop machinery as pynsq programs use them, against real
nsqd, on both backends (threads; gevent after ``monkey.patch_all()``, in a
subprocess program, tests/support/programs/):

- a Reader made while another thread is in the middle of importing asyncio;
- ``reader.io_loop.add_callback(reader.io_loop.stop)`` ends ``nsq.run()``, also
  in a program without tornado or asyncio (where io_loop is the library's loop);
- stopping the loop leaves the Readers and Writers open (a second ``nsq.run()``
  goes on with them); a signal still closes them;
- ``inspect.signature(nsq.Reader)`` / ``nsq.Writer`` show ``__init__``'s parameters.
"""
from __future__ import annotations

import inspect
import json
import os
import time

import pytest

import nsq
from tests.support.servers import PROGRAMS_DIR
from tests.support.subprocess_programs import Program
from tests.support.waiting import wait_for

EXIT_TIMEOUT = 40  # (under the suite's 60 s per test)

# (backend, flavour): gevent programs have no tornado/asyncio loop of their own to run
RUN_CASES = [("threads", "none"), ("threads", "tornado"), ("threads", "asyncio"), ("gevent", "none")]


def _run(args) -> list[str]:
    program = Program(args)
    try:
        stdout, stderr = program.finish(EXIT_TIMEOUT)
    except Exception:
        raise AssertionError("the program did not end in %ss:\n%s" % (EXIT_TIMEOUT, program.report()))
    assert program.proc.returncode == 0, program.report()
    return stdout.splitlines()


def _reports(lines, prefix) -> list[dict]:
    return [json.loads(line[len(prefix):]) for line in lines if line.startswith(prefix)]


def _first_round(args) -> dict:
    """The program's first ``ROUND {...}`` line (it must print one within EXIT_TIMEOUT); the program is then ended."""
    program = Program(args)
    try:
        deadline = time.monotonic() + EXIT_TIMEOUT
        while True:
            line = program.line(max(deadline - time.monotonic(), 0.01))
            assert line is not None, "the program ended without a round:\n" + program.report()
            if line.startswith("ROUND "):
                return json.loads(line[len("ROUND "):])
    finally:
        program.kill()


# -- 1. asyncio half imported by another thread ---------------------------------------------------


@pytest.mark.parametrize("backend", ["threads", "gevent"])
def test_a_reader_made_while_another_thread_imports_asyncio(nsqd, topic, backend):
    nsqd.create_topic(topic)
    for channel in ("plain", "async"):
        nsqd.create_channel(topic, channel)
    nsqd.http_pub(topic, b"one")
    lines = _run([os.path.join(PROGRAMS_DIR, "asyncio_import_race.py"), backend, nsqd.tcp_address, topic])
    outcome = json.loads(lines[-1])
    assert outcome["error"] is None
    assert outcome["stuck"] is False
    # threads: the Readers waited for the import instead of using the half-initialised module;
    # gevent: a client made there never looks at asyncio (nor waits for it)
    assert outcome["held_while_made"] is (backend == "gevent")
    assert outcome["got"] == {"plain": ["one"], "async": ["one"]}


# -- 2 and 3. stopping the loop, twice, then a signal ---------------------------------------------


@pytest.mark.parametrize("backend,flavour", RUN_CASES, ids=["-".join(case) for case in RUN_CASES])
def test_io_loop_stop_ends_nsq_run(nsqd, topic, backend, flavour):
    """pynsq's documented way: ``reader.io_loop.add_callback(reader.io_loop.stop)``."""
    first = _first_round([os.path.join(PROGRAMS_DIR, "run_stop_restart.py"), backend, flavour, nsqd.tcp_address, topic])
    assert first["got"] == ["first"] and first["answers"] == ["OK"]


@pytest.mark.parametrize("backend,flavour", RUN_CASES, ids=["-".join(case) for case in RUN_CASES])
def test_stopping_the_loop_keeps_clients_and_a_signal_closes_them(nsqd, topic, backend, flavour):
    lines = _run([os.path.join(PROGRAMS_DIR, "run_stop_restart.py"), backend, flavour, nsqd.tcp_address, topic])
    rounds = _reports(lines, "ROUND ")
    assert [(r["reader_closed"], r["writer_closed"]) for r in rounds] == [(False, False), (False, False)]
    assert rounds[1]["got"] == ["first", "second"] and rounds[1]["answers"] == ["OK", "OK"]
    (end,) = _reports(lines, "END ")
    assert (end["reader_closed"], end["writer_closed"]) == (True, True)
    assert nsqd.channel_stats(topic, "c")["message_count"] == 2


# -- 4. the classes' signatures -------------------------------------------------------------------


def test_the_classes_show_their_init_parameters():
    for cls in (nsq.Reader, nsq.Writer):
        init = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert list(inspect.signature(cls).parameters.values()) == init
    reader = inspect.signature(nsq.Reader).parameters
    assert list(reader)[:3] == ["topic", "channel", "message_handler"]  # pynsq's order
    assert reader["max_in_flight"].default == 1
    assert "nsqd_tcp_addresses" in inspect.signature(nsq.Writer).parameters

    class Mine(nsq.Reader):
        def __init__(self, topic, channel, extra=1, **kwargs):
            super().__init__(topic, channel, **kwargs)

    assert list(inspect.signature(Mine).parameters) == ["topic", "channel", "extra", "kwargs"]


def test_settings_filtered_by_the_readers_signature_make_a_working_reader(nsqd, topic, backend):
    """Code that keeps only the settings a Reader takes (by its signature) and makes one."""
    nsqd.http_pub(topic, b"x")
    got = []
    settings = {"topic": topic, "channel": "c", "message_handler": lambda m: got.append(m.body) or True,
                "nsqd_tcp_addresses": [nsqd.tcp_address], "max_in_flight": 5, "not_a_reader_setting": 1}
    taken = inspect.signature(nsq.Reader).parameters
    reader = nsq.Reader(**{k: v for k, v in settings.items() if k in taken}, backend=backend)
    try:
        reader.start()
        wait_for(lambda: got == [b"x"], backend)
    finally:
        reader.close()
