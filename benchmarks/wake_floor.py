"""The floor under "many blocking callers": how many times per second this
machine can wake a blocked caller and let it block again, with no publishing
at all. Threads: N threads each block on a lock that one resolver thread
releases; gevent: N greenlets each wait on a gevent Waiter that one resolver
greenlet switches back through the hub. A Writer cannot answer blocking
callers faster than this (each answered call is one such wake-up).

    python benchmarks/wake_floor.py --backend threads --callers 8
    python benchmarks/wake_floor.py --backend gevent --callers 64
"""
from __future__ import annotations

import argparse
import collections
import time


def threads_floor(callers: int, count: int) -> float:
    import threading

    waiting: collections.deque = collections.deque()
    done = threading.Event()

    def caller(n: int) -> None:
        lock = threading.Lock()
        for _ in range(n):
            lock.acquire()
            waiting.append(lock)
            lock.acquire()  # until the resolver releases it
            lock.release()

    def resolver() -> None:
        while not done.is_set():
            time.sleep(0)
            while waiting:
                waiting.popleft().release()

    threading.Thread(target=resolver, daemon=True).start()
    tasks = [threading.Thread(target=caller, args=(count // callers,)) for _ in range(callers)]
    started = time.perf_counter()
    for t in tasks:
        t.start()
    for t in tasks:
        t.join()
    done.set()
    return (count // callers * callers) / (time.perf_counter() - started)


def gevent_floor(callers: int, count: int) -> float:
    import gevent
    from gevent._waiter import Waiter
    from gevent.hub import get_hub

    hub = get_hub()
    waiting: list = []

    def caller(n: int) -> None:
        for _ in range(n):
            waiter = Waiter(hub)
            waiting.append(waiter)
            waiter.get()

    def resolver() -> None:
        while True:
            gevent.sleep(0)
            ready, waiting[:] = waiting[:], []
            for waiter in ready:
                hub.loop.run_callback(waiter.switch, None)

    gevent.spawn(resolver)
    started = time.perf_counter()
    gevent.joinall([gevent.spawn(caller, count // callers) for _ in range(callers)])
    return (count // callers * callers) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gevent", "threads"], default="threads")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--count", type=int, default=200_000)
    args = parser.parse_args()
    cpu = time.process_time()
    floor = (threads_floor if args.backend == "threads" else gevent_floor)(args.callers, args.count)
    cpu = time.process_time() - cpu
    print("%s, %d callers: %.0f wake-ups/s, %.1f us of CPU each" % (args.backend, args.callers, floor, cpu / args.count * 1e6))


if __name__ == "__main__":
    main()
