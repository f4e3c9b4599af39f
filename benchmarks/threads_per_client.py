"""OS threads per Reader and per Writer on the threads backend: N of each
on one real nsqd (issue 13's figure).

    .venv/bin/python benchmarks/threads_per_client.py 200
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import nsq  # noqa: E402
from tests.support.servers import Nsqd  # noqa: E402

def tasks():
    return len(os.listdir("/proc/self/task"))

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
with Nsqd() as nsqd:
    address = nsqd.tcp_address
    base = tasks()
    readers = [nsq.Reader("t", "c", message_handler=lambda m: True, nsqd_tcp_addresses=[address], backend="threads") for _ in range(N)]
    for r in readers:
        r.start()
    deadline = time.time() + 60
    while time.time() < deadline and sum(len(r.conns) for r in readers) < N:
        time.sleep(0.1)
    time.sleep(1.0)
    with_readers = tasks()
    for r in readers:
        r.close(1.0)
    time.sleep(1.0)
    base2 = tasks()
    writers = [nsq.Writer([address], backend="threads") for _ in range(N)]
    for w in writers:
        w.wait_connected(30)
    time.sleep(1.0)
    with_writers = tasks()
    for w in writers:
        w.close(1.0)
    print("%d Readers: %d threads (%.2f per Reader); %d Writers: %d threads (%.2f per Writer)" % (
        N, with_readers - base, (with_readers - base) / N, N, with_writers - base2, (with_writers - base2) / N))
