"""Readers made while another thread is in the middle of importing asyncio:
run as a subprocess by tests/nsq/test_pynsq_run.py.

``python asyncio_import_race.py BACKEND NSQD TOPIC`` (BACKEND: threads, or
gevent after ``monkey.patch_all()``). An import hook holds a real OS thread
inside ``import asyncio`` (``asyncio`` is then in ``sys.modules``, half
initialised) until the main thread has made its Readers or is seen waiting for
that import; only then does the import go on. The main thread makes two
Readers, one with an ``async def`` handler, and consumes one message with
each (the test has put it in both channels). Prints one JSON line: the error raised while making them (or None),
whether the import was still held when they were made (or the main thread
waited for it), and what each handler got.
"""
import sys

if sys.argv[1] == "gevent":
    from gevent import monkey

    monkey.patch_all()
    start_os_thread = monkey.get_original("_thread", "start_new_thread")
    os_lock = monkey.get_original("_thread", "allocate_lock")
    os_sleep = monkey.get_original("time", "sleep")
else:
    from _thread import allocate_lock as os_lock, start_new_thread as start_os_thread  # noqa: I001
    from time import sleep as os_sleep

import importlib.abc  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import nsq  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402

# What making the first Reader loads (nsq's modules, at their first use; under gevent, the hub and
# the settings it imports): loaded here, before the race, which is about asyncio's import only.
nsq.Reader
get_backend(sys.argv[1])

backend, nsqd, topic = sys.argv[1], sys.argv[2], sys.argv[3]
assert "asyncio" not in sys.modules, "asyncio was imported before the race was set up"

HOLD_LIMIT = 10.0  # the hold ends after this in any case (the program then reports "stuck")
main_ident = threading.main_thread().ident
made = [False]
held = os_lock()
held.acquire()  # released once the importing thread is inside `import asyncio`
outcome = {"stuck": False}


def main_waits_for_asyncio():
    """True while the main thread is inside the import machinery, waiting for asyncio."""
    frame = sys._current_frames().get(main_ident)
    while frame is not None:
        if "importlib._bootstrap" in frame.f_code.co_filename and frame.f_locals.get("name") == "asyncio":
            return True
        frame = frame.f_back
    return False


class HoldInsideAsyncio(importlib.abc.MetaPathFinder):
    """Holds the first import of an asyncio submodule (asyncio itself is then half imported)."""

    def __init__(self):
        self.done = False

    def find_spec(self, name, path=None, target=None):
        if self.done or not name.startswith("asyncio."):
            return None
        self.done = True
        held.release()
        deadline = time.monotonic() + HOLD_LIMIT
        while not made[0] and not main_waits_for_asyncio():
            if time.monotonic() > deadline:
                outcome["stuck"] = True
                break
            os_sleep(0.005)
        outcome["held_while_made"] = made[0]
        return None


sys.meta_path.insert(0, HoldInsideAsyncio())
imported = os_lock()
imported.acquire()
start_os_thread(lambda: (__import__("asyncio"), imported.release()), ())
assert held.acquire(timeout=HOLD_LIMIT), "the importing thread never reached asyncio"

got = {"plain": [], "async": []}


def plain(message):
    got["plain"].append(message.body.decode())
    return True


async def awaited(message):
    got["async"].append(message.body.decode())
    return True


readers = []
try:
    readers.append(nsq.Reader(topic, "async", awaited, nsqd_tcp_addresses=[nsqd], backend=backend))
    readers.append(nsq.Reader(topic, "plain", plain, nsqd_tcp_addresses=[nsqd], backend=backend))
    outcome["error"] = None
except BaseException as exc:  # noqa: BLE001 - what the test looks at
    outcome["error"] = "%s: %s" % (type(exc).__name__, exc)
made[0] = True
assert imported.acquire(timeout=HOLD_LIMIT + 5), "the asyncio import never ended"
outcome.setdefault("held_while_made", None)

if readers:
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 15
    while not (got["plain"] and got["async"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    for reader in readers:
        reader.close()
outcome["got"] = got
print(json.dumps(outcome), flush=True)
