# The engine split: msgengine imports without the NSQ client, the Spark
# consumer without pyspark; the supervisor keeps targets connected (connects,
# backs off, reconnects after a close, stops on close); and on the threads
# backend a Reader costs its reader thread plus its handler worker, a Writer
# its reader thread, with every timer on one scheduler thread.
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import nsq
from msgengine.runtime import get_backend
from msgengine.supervisor import Supervisor

from tests.support.waiting import wait_for

WAIT = 15.0


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.timeout(90)
def test_engine_imports_without_the_nsq_client_or_gevent():
    proc = _run(
        """
        import sys
        import msgengine.backoff, msgengine.correlator, msgengine.driver, msgengine.errors
        import msgengine.flow, msgengine.runtime, msgengine.scheduler, msgengine.supervisor, msgengine.transport
        print(sorted(m for m in sys.modules if m == "nsq" or m.startswith(("nsq.", "gevent"))))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.timeout(90)
def test_spark_consumer_imports_without_pyspark():
    proc = _run(
        """
        import sys

        class NoSpark:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pyspark", "pyarrow", "py4j"):
                    raise ImportError("no " + name + " here")

        sys.meta_path.insert(0, NoSpark())
        from nsq.spark.consumer import Consumer
        from nsq.spark._options import SourceConfig
        config = SourceConfig.from_options({"topic": "t", "channel": "c", "nsqd_tcp_addresses": "127.0.0.1:4150"})
        print(Consumer.__name__, config.max_in_flight, "pyspark" in sys.modules)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Consumer", "200000", "False"]


# ----------------------------------------------------------------------------- supervisor


class Link:
    """What the supervisor needs of a connection: close listeners and close()."""

    def __init__(self) -> None:
        self.listeners: list = []
        self.closed = False

    def add_close_listener(self, listener) -> None:
        self.listeners.append(listener)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for listener in self.listeners:
                listener(self)


class Attempts:
    """connect(target): fails the first `failures` times, then returns a new Link."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.links: list[Link] = []
        self.lock = threading.Lock()

    def __call__(self, target):
        with self.lock:
            self.calls += 1
            if self.calls <= self.failures:
                raise ConnectionRefusedError("attempt %d refused" % self.calls)
            link = Link()
            self.links.append(link)
            return link


@pytest.mark.timeout(30)
def test_supervisor_retries_a_kept_target_until_it_connects():
    backend = get_backend("threads")
    attempts = Attempts(failures=3)
    supervisor = Supervisor(backend, "test", attempts, max_reconnect_delay=0.05)
    try:
        supervisor.keep(("h", 1))
        wait_for(lambda: supervisor.connected(("h", 1)), backend, WAIT)
        assert attempts.calls == 4
        assert isinstance(supervisor.last_error, ConnectionRefusedError)
        assert supervisor.links() == attempts.links
    finally:
        supervisor.close()


@pytest.mark.timeout(30)
def test_supervisor_reconnects_after_a_close_and_tells_on_lost():
    backend = get_backend("threads")
    attempts = Attempts(failures=0)
    lost = []
    supervisor = Supervisor(
        backend, "test", attempts, max_reconnect_delay=0.05, on_lost=lambda target, link: lost.append((target, link))
    )
    try:
        supervisor.keep(("h", 1))
        wait_for(lambda: len(attempts.links) == 1, backend, WAIT)
        first = attempts.links[0]
        first.close()
        wait_for(lambda: len(attempts.links) == 2 and supervisor.connected(("h", 1)), backend, WAIT)
        assert lost == [(("h", 1), first)]
        assert supervisor.links() == [attempts.links[1]]
    finally:
        supervisor.close()


@pytest.mark.timeout(30)
def test_supervisor_try_once_does_not_retry():
    backend = get_backend("threads")
    attempts = Attempts(failures=100)
    supervisor = Supervisor(backend, "test", attempts, max_reconnect_delay=0.01)
    try:
        supervisor.try_once(("h", 1))
        wait_for(lambda: attempts.calls == 1, backend, WAIT)
        # a kept target on the same supervisor, retried, shows time passing for the other
        supervisor.keep(("k", 2))
        wait_for(lambda: attempts.calls >= 5, backend, WAIT)
        assert not supervisor.connected(("h", 1))
        assert ("h", 1) not in supervisor.targets()
    finally:
        supervisor.close()


@pytest.mark.timeout(30)
def test_supervisor_close_stops_retries_and_returns_open_links():
    backend = get_backend("threads")
    attempts = Attempts(failures=0)
    supervisor = Supervisor(backend, "test", attempts, max_reconnect_delay=0.05)
    supervisor.keep(("h", 1))
    wait_for(lambda: supervisor.connected(("h", 1)), backend, WAIT)
    links = supervisor.close()
    assert links == attempts.links
    links[0].close()  # a close after the supervisor closed: no reconnect
    calls = attempts.calls
    supervisor.keep(("h", 2))  # refused once closed
    # a second supervisor that does reconnect, as a clock: after its reconnect the first has had time too
    clock_attempts = Attempts(failures=0)
    clock = Supervisor(backend, "clock", clock_attempts, max_reconnect_delay=0.05)
    try:
        clock.keep(("c", 1))
        wait_for(lambda: len(clock_attempts.links) == 1, backend, WAIT)
        clock_attempts.links[0].close()
        wait_for(lambda: len(clock_attempts.links) == 2, backend, WAIT)
    finally:
        clock.close()
    assert attempts.calls == calls
    assert supervisor.targets() == [("h", 1)]


# ----------------------------------------------------------------------------- threads that scale


def _live_threads() -> int:
    """OS threads of this process, zombies (exited threads not yet reaped) left out."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/stat" % tid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            count += 1
    return count


@pytest.mark.timeout(120)
def test_threads_per_reader_and_writer_on_the_threads_backend(nsqd, topic):
    backend = get_backend("threads")
    backend.call_later(0, lambda: None)  # the process's scheduler thread exists from here on
    count = 10
    before = _live_threads()
    readers = [
        nsq.Reader(topic, "c%d" % i, message_handler=lambda m: True, nsqd_tcp_addresses=[nsqd.tcp_address],
                   backend="threads", lookupd_poll_interval=1)
        for i in range(count)
    ]
    writers = []
    # Short tasks come and go (a connection attempt, a timer's tick): the
    # count must settle at the bound, which a thread per timer never reaches.
    try:
        for reader in readers:
            reader.start()
        wait_for(lambda: all(len(r.conns) == 1 for r in readers), backend, WAIT)
        # a Reader: its connection's reader thread and its one handler worker
        with_readers = wait_for(lambda: _settled(before, 2 * count), backend, WAIT, "2 threads per Reader")
        writers = [nsq.Writer([nsqd.tcp_address], backend="threads") for _ in range(count)]
        for writer in writers:
            assert writer.wait_connected(WAIT)
        # a Writer: its connection's reader thread
        wait_for(lambda: _settled(with_readers, count), backend, WAIT, "1 thread per Writer")
    finally:
        for client in readers + writers:
            client.close(2.0)


def _settled(base: int, bound: int) -> int:
    """The live thread count when at most bound above base, else 0."""
    now = _live_threads()
    return now if now - base <= bound else 0
