# A Writer -> nsqd -> Reader round trip on both backends. It is marked `pure`, so
# `make test` also runs it with NSQ_PURE_PYTHON=1 against the pure-Python codec.
import os

import pytest

import nsq
from msgengine.twins import pure_python_forced
from msgengine.runtime import get_backend

pytestmark = pytest.mark.pure


def test_codec_implementation_matches_environment():
    expected = "python" if pure_python_forced() or nsq.codec.compiled_impl is None else "cython"
    assert nsq.codec.IMPLEMENTATION == expected
    if os.environ.get("NSQ_REQUIRE_COMPILED") == "1":
        assert nsq.codec.IMPLEMENTATION == "cython"


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
@pytest.mark.timeout(60)
def test_publish_then_consume_every_message_once(nsqd, topic, backend):
    count = 2000
    bodies = [b"%06d" % i + os.urandom(50) for i in range(count)]
    with nsq.Writer([nsqd.tcp_address], backend=backend) as writer:
        for start in range(0, count, 100):
            assert writer.mpub(topic, bodies[start : start + 100]) == b"OK"
    seen = []

    def handler(message):
        seen.append(message.body)
        if len(seen) == count:
            reader.close()
        return True

    reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[nsqd.tcp_address], max_in_flight=100, backend=backend)
    task = get_backend(backend).spawn(reader.run)
    task.join(50)
    assert reader.is_closed()
    assert sorted(seen) == sorted(bodies)
    channel = nsqd.channel_stats(topic, "ch")
    assert channel["depth"] == 0
    assert channel["in_flight_count"] == 0
    assert channel["message_count"] == count
    assert channel["requeue_count"] == 0


PATCHED_PROGRAM = r"""
from gevent import monkey
monkey.patch_all()
import sys
import gevent
import msgengine.runtime
import nsq

address, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
assert msgengine.runtime.get_backend("auto").name == "gevent"
writer = nsq.Writer([address])
jobs = [gevent.spawn(writer.pub, topic, b"%d" % i) for i in range(count)]
gevent.joinall(jobs, timeout=30, raise_error=True)
assert all(job.value == b"OK" for job in jobs)
seen = set()

def finish_later(message):
    gevent.sleep(0)
    message.finish()
    seen.add(message.body)
    if len(seen) == count:
        reader.close()

def handler(message):
    message.enable_async()
    gevent.spawn(finish_later, message)

reader = nsq.Reader(topic, "ch", handler, nsqd_tcp_addresses=[address], max_in_flight=50)
reader.run()
writer.close()
print(len(seen))
"""


@pytest.mark.pythons  # (make test-pythons: on every supported Python)
@pytest.mark.timeout(90)
def test_program_under_gevent_monkey_patching_publishes_and_consumes(nsqd, topic):
    """The usual gevent program: patch_all() first, backend "auto", answers from other greenlets."""
    import subprocess
    import sys

    count = 500
    done = subprocess.run(
        [sys.executable, "-c", PATCHED_PROGRAM, nsqd.tcp_address, topic, str(count)],
        capture_output=True, text=True, timeout=80,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == str(count)
    channel = nsqd.channel_stats(topic, "ch")
    assert channel["message_count"] == count
    assert channel["depth"] == 0 and channel["in_flight_count"] == 0
