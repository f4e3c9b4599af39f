"""Profile the Writer's publish path (cProfile), the figures behind issue 6's
notes on one-at-a-time and concurrent publishing, and issue 35's on the
compiled publish path.

    python benchmarks/profile_publish.py --backend gevent --mode sync
    python benchmarks/profile_publish.py --backend threads --mode concurrent --no-profile

On threads every publishing thread runs a profiler of its own (cProfile sees
only the thread that enabled it) and their figures are merged; under gevent
one profiler sees every greenlet. ``--patch`` runs gevent after
``monkey.patch_all()``, as ``make bench`` does. The figures include the
Python calls per publish (every call the profiler saw, C functions too,
divided by the messages published).

On threads it also splits the context switches per message between the
publishing threads and the process's other threads (voluntary: the thread
blocked, on its waiter, the GIL or a socket; involuntary: preempted), and
counts the connection's commands (PUBs and MPUBs: the messages per command
show how many callers each answer wakes). ``--no-caller-reads`` turns the
callers' own reads off (``Backend.callers_may_read``): the connection's
reader thread then reads and resolves every answer and each caller only waits
on its waiter, for comparison with the default leader/follower reads.

    python benchmarks/profile_publish.py --backend threads --mode concurrent --no-profile --no-caller-reads
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gevent", "threads"], default="gevent")
    parser.add_argument("--mode", choices=["sync", "concurrent"], default="sync")
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument("--callers", type=int, default=None, help="concurrent mode: callers (default 64 greenlets, 8 threads)")
    parser.add_argument("--patch", action="store_true", help="gevent: monkey.patch_all() first, as make bench does")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--no-caller-reads", action="store_true",
                        help="the connection's reader thread reads every answer (callers only wait)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if args.patch and args.backend == "gevent":
        from gevent import monkey

        monkey.patch_all()
    import nsq
    from msgengine.runtime import get_backend
    from tests.support.servers import Nsqd

    backend = get_backend(args.backend)
    if args.no_caller_reads:
        backend.callers_may_read = False  # (this process's backend object: before the Writer connects)
    body = b"x" * 100
    with Nsqd("--mem-queue-size=10000000") as nsqd:
        writer = nsq.Writer([nsqd.tcp_address], backend=args.backend)
        writer.wait_connected(10)
        for _ in range(200):  # warm up
            writer.pub("profile", body)
        publishers = 1 if args.mode == "sync" else (args.callers or (64 if args.backend == "gevent" else 8))
        share = args.count // publishers
        profilers: list[cProfile.Profile] = []
        lock = threading.Lock()
        per_thread = args.backend == "threads" and not args.no_profile
        conn = next(iter(writer.conns.values()))
        commands = [0]
        command = conn.command

        def counted_command(queue, *queue_args):
            commands[0] += 1
            command(queue, *queue_args)

        conn.command = counted_command  # (an instance attribute: counts every command from now on)
        caller_switches = [0, 0]  # voluntary, involuntary, summed over the publishing threads
        per_os_thread = args.backend == "threads"  # (greenlets share one OS thread: no split there)

        def publish() -> None:
            profiler = None
            if per_thread:
                profiler = cProfile.Profile()
                with lock:
                    profilers.append(profiler)
                profiler.enable()
            before = thread_switches() if per_os_thread else (0, 0)
            for _ in range(share):
                writer.pub("profile", body)
            if profiler:
                profiler.disable()
            after = thread_switches() if per_os_thread else (0, 0)
            with lock:
                caller_switches[0] += after[0] - before[0]
                caller_switches[1] += after[1] - before[1]

        main_profiler = None if args.no_profile or per_thread else cProfile.Profile()
        usage = resource.getrusage(resource.RUSAGE_SELF)  # (every thread's, those that end too)
        commands[0] = 0
        started, cpu = time.perf_counter(), time.process_time()
        if main_profiler:
            main_profiler.enable()
        tasks = [backend.spawn(publish) for _ in range(publishers)]
        for task in tasks:
            task.join()
        if main_profiler:
            main_profiler.disable()
            profilers.append(main_profiler)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_SELF)
        switched = after.ru_nvcsw + after.ru_nivcsw - usage.ru_nvcsw - usage.ru_nivcsw
        total = share * publishers
        writer.close()
        print("%s %s (%d callers%s): %.0f msgs/s, %.1f us client CPU per message%s" % (
            args.backend, args.mode, publishers, ", patched" if args.patch else "", total / elapsed,
            cpu / total * 1e6, " (under cProfile)" if profilers else ""))
        print("per message: %.1f us user, %.1f us system, %.2f context switches of the client's threads" % (
            (after.ru_utime - usage.ru_utime) / total * 1e6, (after.ru_stime - usage.ru_stime) / total * 1e6,
            switched / total))
        if per_os_thread:
            callers_all = caller_switches[0] + caller_switches[1]
            print("context switches per message: publishing threads %.2f voluntary + %.2f involuntary, "
                  "other threads %.2f; %.2f messages per command (PUB/MPUB)%s" % (
                      caller_switches[0] / total, caller_switches[1] / total, (switched - callers_all) / total,
                      total / max(commands[0], 1), ", reader thread reads every answer" if args.no_caller_reads else ""))
        if profilers:
            stats = pstats.Stats(profilers[0])
            for profiler in profilers[1:]:
                stats.add(profiler)
            calls = sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]
            print("%.1f profiled calls per publish" % (calls / total))
            stats.sort_stats("tottime").print_stats(args.top)


def thread_switches() -> tuple[int, int]:
    """The calling OS thread's voluntary and involuntary context switches so far (Linux; else 0, 0)."""
    try:
        with open("/proc/thread-self/status") as f:
            status = f.read()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"])


if __name__ == "__main__":
    main()
