"""Evidence for the gevent hub's broken watcher count (issue 11): one OS
thread hands the hub no-op callbacks while the hub starts and stops timers.

    .venv/bin/python soak/hub_refcount.py threadsafe 5   # gevent's loop.run_callback_threadsafe
    .venv/bin/python soak/hub_refcount.py door 5         # a deque + one hub-owned async watcher (msgengine.runtime)

With threadsafe, libev's active-watcher count (loop.activecnt) drifts: below
zero (then gevent raises LoopExit although greenlets wait) or above it (the
loop can never exit), within seconds on a busy 2-core machine; run_callback
does ev_ref() on the calling thread while the hub thread, inside ev_run()
without the GIL, does ev_unref() as its timers stop. With door it stays 0.
Prints the lowest and final counts; exits 1 on LoopExit.
"""
import collections
import sys
import time

import gevent
from gevent.monkey import get_original

mode, seconds = sys.argv[1], float(sys.argv[2])
loop = gevent.get_hub().loop
start_new_thread = get_original("_thread", "start_new_thread")
done = get_original("_thread", "allocate_lock")()
done.acquire()
pending = collections.deque()
calls = [0]


def noop():
    calls[0] += 1


if mode == "door":
    door = loop.async_(ref=False)

    def drain():
        while pending:
            pending.popleft()()

    door.start(drain)


def foreign():
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        if mode == "threadsafe":
            loop.run_callback_threadsafe(noop)
        else:
            pending.append(noop)
            door.send()
        if n % 50 == 0:
            time.sleep(0.0002)
    done.release()


def timers():
    while True:
        gevent.sleep(0)
        gevent.sleep(0.0001)


start_new_thread(foreign, ())
ticker = gevent.spawn(timers)
lowest = 0
try:
    while not done.acquire(False):
        gevent.sleep(0.001)
        lowest = min(lowest, loop.activecnt)
except gevent.exceptions.LoopExit:
    print(mode, "LoopExit with activecnt", loop.activecnt)
    sys.exit(1)
ticker.kill()
gevent.sleep(0.05)
print(mode, "calls", calls[0], "lowest activecnt", lowest, "final activecnt", loop.activecnt, "(0 expected)")
