# Whole pynsq-style programs, unchanged, each run as a subprocess against real
# nsqd: an async relay that finishes messages from a Writer callback and stops
# on SIGTERM through nsq.run(); a Reader subclass overriding the hooks; and the
# positional-handler Reader(...).run() form stopped with SIGINT.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.support.servers import REPO_ROOT, wait_until
from tests.support.subprocess_programs import default_sigint

EXIT_TIMEOUT = 15
PROGRESS_TIMEOUT = 10

def topics(topic):
    return topic[:56] + "_src", topic[:55] + "_dest"


def run_program(source: str, tmp_path) -> subprocess.Popen:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(source))
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    return subprocess.Popen(
        [sys.executable, str(path)], cwd=str(tmp_path), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )


@pytest.fixture
def programs():
    started = []

    def start(source, tmp_path):
        proc = run_program(source, tmp_path)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stop(proc, signum) -> tuple[int, str, str]:
    assert proc.poll() is None, "the program exited early:\n%s" % (proc.communicate()[1],)
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack goes to stderr
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError("the program did not exit within %ds after signal %d:\n%s" % (EXIT_TIMEOUT, signum, err))
    return proc.returncode, out, err


def wait_alive(proc, predicate, timeout=PROGRESS_TIMEOUT, message=None):
    def check():
        if proc.poll() is not None:
            raise AssertionError("the program exited (%s):\n%s" % (proc.returncode, proc.communicate()[1]))
        return predicate()

    return wait_until(check, timeout=timeout, message=message)


def create_channel(nsqd, topic, channel):
    nsqd.create_topic(topic)
    nsqd.create_channel(topic, channel)


def assert_finished(nsqd, topic, channel, n):
    stats = nsqd.channel_stats(topic, channel)
    assert stats["message_count"] == n
    assert stats["depth"] == 0 and stats["in_flight_count"] == 0 and stats["deferred_count"] == 0
    assert stats["requeue_count"] == 0 and stats["timeout_count"] == 0


RELAY = """
import functools
import nsq

writer = nsq.Writer(['{address}'])


def finish_pub(conn, data, msg):
    if isinstance(data, nsq.Error):
        msg.requeue()
    else:
        msg.finish()


def handler(msg):
    msg.enable_async()
    writer.pub('{dest}', msg.body, callback=functools.partial(finish_pub, msg=msg))


reader = nsq.Reader(
    topic='{src}',
    channel='relay',
    nsqd_tcp_addresses=['{address}'],
    message_handler=handler,
    max_in_flight=10,
)
nsq.run()
"""


def test_async_relay_with_writer_callback_runs_unchanged(nsqd, topic, tmp_path, programs):
    """A pynsq program that relays messages with an async handler and a Writer callback runs unchanged."""
    src, dest = topics(topic)
    n = 500
    create_channel(nsqd, src, "relay")
    create_channel(nsqd, dest, "check")  # keeps every relayed message for inspection
    proc = programs(RELAY.format(address=nsqd.tcp_address, src=src, dest=dest), tmp_path)
    nsqd.http_mpub(src, [b"msg-%04d" % i for i in range(n)])

    wait_alive(proc, lambda: nsqd.message_count(dest) >= n, message=lambda: "%d of %d relayed" % (nsqd.message_count(dest), n))
    wait_alive(proc, lambda: nsqd.channel_stats(src, "relay")["in_flight_count"] == 0)

    code, out, err = stop(proc, signal.SIGTERM)
    assert code == 0, err
    assert "Traceback" not in err, err
    assert nsqd.message_count(dest) == n
    assert_finished(nsqd, src, "relay", n)
    assert nsqd.channel_stats(dest, "check")["depth"] == n


SUBCLASS = """
import sys
import nsq


class Relay(nsq.Reader):
    def __init__(self, *args, **kwargs):
        super(Relay, self).__init__(*args, **kwargs)
        self.writer = nsq.Writer(['{address}'])
        self.processed = 0

    def preprocess_message(self, message):
        return message.body.decode('utf-8')

    def validate_message(self, message):
        return not message.startswith('junk')

    def process_message(self, message):
        self.processed += 1
        self.writer.pub('{dest}', message.body.upper())
        return super(Relay, self).process_message(message)

    def giving_up(self, message):
        sys.stderr.write('gave up %r\\n' % (message.body,))


def handle(message):
    return True


reader = Relay('{src}', 'relay', handle, nsqd_tcp_addresses=['{address}'], max_in_flight=5, max_tries=2)
nsq.run()
print('processed %d' % reader.processed)
"""


def test_reader_subclass_overriding_hooks_runs_unchanged(nsqd, topic, tmp_path, programs):
    src, dest = topics(topic)
    good = [b"item-%03d" % i for i in range(100)]
    junk = [b"junk-%03d" % i for i in range(20)]
    create_channel(nsqd, src, "relay")
    create_channel(nsqd, dest, "check")
    proc = programs(SUBCLASS.format(address=nsqd.tcp_address, src=src, dest=dest), tmp_path)
    nsqd.http_mpub(src, good + junk)

    wait_alive(proc, lambda: nsqd.message_count(dest) >= len(good))
    wait_alive(proc, lambda: nsqd.channel_stats(src, "relay")["depth"] == 0
               and nsqd.channel_stats(src, "relay")["in_flight_count"] == 0)

    code, out, err = stop(proc, signal.SIGTERM)
    assert code == 0, err
    assert "Traceback" not in err and "gave up" not in err, err
    assert out.strip().splitlines()[-1] == "processed %d" % len(good)
    assert nsqd.message_count(dest) == len(good)  # junk was finished by validate_message, not relayed
    assert_finished(nsqd, src, "relay", len(good) + len(junk))


POSITIONAL = """
import nsq


def handler(message):
    print(message.body.decode())
    return True


nsq.Reader(handler, '{src}', 'printer', nsqd_tcp_addresses=['{address}'], max_in_flight=20).run()
print('bye')
"""


def test_positional_reader_run_stops_on_sigint(nsqd, topic, tmp_path, programs):
    src, _ = topics(topic)
    n = 200
    create_channel(nsqd, src, "printer")
    proc = programs(POSITIONAL.format(address=nsqd.tcp_address, src=src), tmp_path)
    nsqd.http_mpub(src, [b"line-%04d" % i for i in range(n)])
    wait_alive(proc, lambda: (nsqd.channel_stats(src, "printer")["depth"] == 0
                              and nsqd.channel_stats(src, "printer")["in_flight_count"] == 0
                              and nsqd.channel_stats(src, "printer")["client_count"] == 1))

    code, out, err = stop(proc, signal.SIGINT)
    assert code == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = out.strip().splitlines()
    assert lines[-1] == "bye"
    assert sorted(lines[:-1]) == ["line-%04d" % i for i in range(n)]
    assert_finished(nsqd, src, "printer", n)
    assert nsqd.channel_stats(src, "printer")["client_count"] == 0


def test_nsq_run_returns_when_the_program_closes_its_reader(nsqd, topic, tmp_path, programs):
    """A program whose handler closes the reader after N messages: nsq.run() returns by itself."""
    src, _ = topics(topic)
    source = """
    import nsq

    count = [0]


    def handler(message):
        count[0] += 1
        if count[0] == 10:
            reader.close()
        return True


    reader = nsq.Reader(topic='{src}', channel='c', message_handler=handler, nsqd_tcp_addresses='{address}')
    nsq.run()
    print('done %d' % count[0])
    """
    create_channel(nsqd, src, "c")
    nsqd.http_mpub(src, [b"m%d" % i for i in range(30)])
    proc = programs(source.format(address=nsqd.tcp_address, src=src), tmp_path)
    try:
        out, err = proc.communicate(timeout=PROGRESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError("nsq.run() did not return after the reader closed:\n%s" % err)
    assert proc.returncode == 0, err
    assert out.strip() == "done 10"
    stats = nsqd.channel_stats(src, "c")
    assert stats["depth"] + stats["in_flight_count"] == 20
