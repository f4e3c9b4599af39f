"""Where a lone blocking publish's time goes, on a real nsqd: the send
syscall (it wakes nsqd), the wait for the answer, and the Python between the
answer and the next send (the only part the client owns outright). Medians
over --count one-at-a-time PUBs; the figures behind issue 14's closing note.

    python benchmarks/publish_phases.py --backend threads
    python benchmarks/publish_phases.py --backend gevent
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gevent", "threads"], default="threads")
    parser.add_argument("--count", type=int, default=20_000)
    args = parser.parse_args()
    if args.backend == "gevent":
        from gevent import monkey

        monkey.patch_all()
    import nsq
    from tests.support.servers import Nsqd

    clock = time.perf_counter
    marks: list[tuple] = []
    body = b"x" * 100
    with Nsqd("--mem-queue-size=10000000") as nsqd:
        writer = nsq.Writer([nsqd.tcp_address], backend=args.backend)
        writer.wait_connected(10)
        for _ in range(200):  # warm up; the first answers may be read by the reader task
            writer.pub("phases", body)
        stream = writer.conns[nsqd.tcp_address].stream
        send, poll_recv, recv_within = stream.send, stream.poll_recv, stream.recv_within

        def timed_send(data):
            marks.append(("send", clock()))
            send(data)
            marks.append(("sent", clock()))

        def timed_poll_recv(until):
            data = poll_recv(until)
            if data is not None:
                marks.append(("read", clock(), True))
            return data

        def timed_recv_within(timeout):
            data = recv_within(timeout)
            marks.append(("read", clock(), False))
            return data

        stream.send, stream.poll_recv, stream.recv_within = timed_send, timed_poll_recv, timed_recv_within
        started = clock()
        for _ in range(args.count):
            writer.pub("phases", body)
        elapsed = clock() - started
        writer.close()
    sends, waits, python = [], [], []
    spun = slept = 0
    last_read = last_sent = send_at = None
    for mark in marks:
        if mark[0] == "send":
            send_at = mark[1]
            if last_read is not None:
                python.append(mark[1] - last_read)
        elif mark[0] == "sent":
            sends.append(mark[1] - send_at)
            last_sent = mark[1]
        else:
            waits.append(mark[1] - last_sent)
            last_read = mark[1]
            spun, slept = (spun + 1, slept) if mark[2] else (spun, slept + 1)

    def us(values):
        return statistics.median(values) * 1e6

    print("%s: %.0f msgs/s (with the timing hooks); medians: send %.1f us, wait for the answer %.1f us, "
          "answer -> next send %.1f us; answers caught spinning %d, after sleeping %d"
          % (args.backend, args.count / elapsed, us(sends), us(waits), us(python), spun, slept))


if __name__ == "__main__":
    main()
