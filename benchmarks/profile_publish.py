"""Profile the Writer's publish path (cProfile), the figures behind issue 6's
notes on one-at-a-time and concurrent publishing.

    python benchmarks/profile_publish.py --backend gevent --mode sync
    python benchmarks/profile_publish.py --backend threads --mode concurrent --no-profile
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import nsq  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402
from tests.support.servers import Nsqd  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gevent", "threads"], default="gevent")
    parser.add_argument("--mode", choices=["sync", "concurrent"], default="sync")
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    backend = get_backend(args.backend)
    body = b"x" * 100
    with Nsqd("--mem-queue-size=10000000") as nsqd:
        writer = nsq.Writer([nsqd.tcp_address], backend=args.backend)
        writer.wait_connected(10)
        publishers = 1 if args.mode == "sync" else (64 if args.backend == "gevent" else 8)
        share = args.count // publishers

        def publish() -> None:
            for _ in range(share):
                writer.pub("profile", body)

        profiler = None if args.no_profile else cProfile.Profile()
        started, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        tasks = [backend.spawn(publish) for _ in range(publishers)]
        for task in tasks:
            task.join()
        if profiler:
            profiler.disable()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        total = share * publishers
        writer.close()
        print("%s %s: %.0f msgs/s, %.1f us client CPU per message%s" % (
            args.backend, args.mode, total / elapsed, cpu / total * 1e6, " (under cProfile)" if profiler else ""))
        if profiler:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
