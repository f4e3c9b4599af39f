"""A gevent program that mixes what real applications do with this library:
run as a subprocess by tests/engine/test_threads_and_greenlets.py.

Under ``monkey.patch_all()``: Readers found through nsqlookupd (the lookups
run on OS threads), async messages finished from real OS threads, Readers
closed while messages are in flight (half of the closes from OS threads),
publishers on one Writer from greenlets and from real OS threads (blocking
and with callbacks), while the test restarts nsqd under it. A greenlet
samples libev's active-watcher count all along.

A reader is replaced every ``--churn-every`` seconds (a round), after which
the program prints ``ROUND {"closes": n, "acked": {kind: count}}`` (kinds:
"g" greenlets, "t" OS threads, "cb" callbacks). The test restarts nsqd
when it has seen enough rounds, then writes ``RESTARTED`` on the program's
stdin: the program goes on until two more rounds have passed and every kind
of publisher has been acknowledged again since then (or ``--max-seconds``).

Prints one JSON line: what was acknowledged (in all, and since RESTARTED),
what arrived, the lowest count seen, the calls that did not return in time,
and the errors by type.
"""
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402

import nsq  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402

start_os_thread = monkey.get_original("_thread", "start_new_thread")
allocate_os_lock = monkey.get_original("_thread", "allocate_lock")
os_sleep = monkey.get_original("time", "sleep")
os_monotonic = monkey.get_original("time", "monotonic")

PUBLISH_TIMEOUT = 3.0
KINDS = ("g", "t", "cb")  # publishers: greenlets, OS threads (blocking), an OS thread with callbacks
HUNG_AFTER = PUBLISH_TIMEOUT + 10.0  # a call taking longer than this never returned in time


class Stats:
    def __init__(self):
        self.acked = set()
        # (for the ROUND lines, counting a set other threads grow would fail; every key is there
        # from the start, so that copying this while they count cannot fail either)
        self.acked_by_kind = collections.Counter({kind: 0 for kind in KINDS})
        self.received = set()
        self.errors = collections.Counter()
        self.slowest_call = 0.0
        self.min_activecnt = 0
        self.stop = False

    def error(self, exc):
        self.errors[type(exc).__name__] += 1

    def timed(self, started):
        self.slowest_call = max(self.slowest_call, os_monotonic() - started)


def os_thread(fn, *args):
    """Run fn on a real OS thread; returns a lock that is released when it ends."""
    done = allocate_os_lock()
    done.acquire()

    def run():
        try:
            fn(*args)
        finally:
            done.release()

    start_os_thread(run, ())
    return done


def joined(done, timeout):
    """Wait for an os_thread() to end without blocking the hub (its calls may need the hub)."""
    deadline = os_monotonic() + timeout
    while not done.acquire(False):
        if os_monotonic() >= deadline:
            return False
        gevent.sleep(0.005)
    return True


def publisher(stats, writer, topic, prefix, pause):
    n = 0
    while not stats.stop:
        body = ("%s-%d" % (prefix, n)).encode()
        n += 1
        started = os_monotonic()
        try:
            writer.pub(topic, body)
            stats.acked.add(body)
            stats.acked_by_kind[prefix[0]] += 1
        except nsq.Error as exc:
            stats.error(exc)
        stats.timed(started)
        pause()


def callback_publisher(stats, writer, topic):
    n = 0

    def answered(conn, result, body):
        if result == b"OK":
            stats.acked.add(body)
            stats.acked_by_kind["cb"] += 1
        else:
            stats.error(result)

    while not stats.stop:
        body = ("cb-%d" % n).encode()
        n += 1
        try:
            writer.pub(topic, body, callback=lambda conn, result, body=body: answered(conn, result, body))
        except nsq.Error as exc:
            stats.error(exc)
        os_sleep(0.002)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nsqd", required=True)
    parser.add_argument("--lookupd", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--churn-every", type=float, default=1.0, help="seconds between two reader replacements")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop then, RESTARTED or not")
    args = parser.parse_args()

    backend = get_backend("auto")
    assert backend.name == "gevent", backend.name
    stats = Stats()
    loop = gevent.get_hub().loop

    def monitor():
        while True:
            stats.min_activecnt = min(stats.min_activecnt, loop.activecnt)
            gevent.sleep(0.005)

    watcher = gevent.spawn(monitor)

    # -- consumers: found through nsqlookupd, answered from OS threads, churned
    answers = collections.deque()

    def answer_loop():
        while not stats.stop or answers:
            try:
                message = answers.popleft()
            except IndexError:
                os_sleep(0.001)
                continue
            try:
                message.finish()
            except nsq.Error as exc:
                stats.error(exc)

    def handler(message):
        message.enable_async()
        stats.received.add(message.body)
        answers.append(message)

    def new_reader(name):
        return nsq.Reader(
            args.topic, "mixed", handler, lookupd_http_addresses=["http://" + args.lookupd],
            # (what a closed reader had in flight comes back to the others, or to the collector, after
            # msg_timeout: 1 s, the least nsqd takes)
            lookupd_poll_interval=0.5, lookupd_poll_jitter=0.1, max_in_flight=50, msg_timeout=1.0,
            user_agent=name, close_timeout=3.0,
        )

    answerers = [os_thread(answer_loop) for _ in range(2)]
    writer = nsq.Writer([args.nsqd], publish_timeout=PUBLISH_TIMEOUT, reconnect_interval=0.5)
    writer.wait_connected(5)
    writer.pub(args.topic, b"warm-up")  # so that nsqlookupd knows the topic
    stats.acked.add(b"warm-up")
    readers = [new_reader("r0"), new_reader("r1")]
    for reader in readers:
        reader.start()

    # -- publishers: greenlets, OS threads blocking, an OS thread with callbacks
    greenlets = [
        gevent.spawn(publisher, stats, writer, args.topic, "g%d" % i, lambda: gevent.sleep(0.001)) for i in range(4)
    ]
    threads = [os_thread(publisher, stats, writer, args.topic, "t%d" % i, lambda: os_sleep(0.001)) for i in range(2)]
    threads.append(os_thread(callback_publisher, stats, writer, args.topic))

    # the test's word that it restarted nsqd, read on an OS thread: the acked counts and rounds then
    closes = 0
    restarted = {}

    def read_stdin():
        for line in sys.stdin:
            if line.strip() == "RESTARTED" and not restarted:
                restarted.update(acked=dict(stats.acked_by_kind), closes=closes)

    os_thread(read_stdin)

    def done_after_restart():
        return bool(restarted) and closes >= restarted["closes"] + 2 and all(
            stats.acked_by_kind[kind] > restarted["acked"].get(kind, 0) for kind in KINDS
        )

    print("STARTED", flush=True)
    deadline = os_monotonic() + args.max_seconds
    while os_monotonic() < deadline and not done_after_restart():
        gevent.sleep(args.churn_every)
        old = readers.pop(0)
        if closes % 2:
            joined(os_thread(old.close), HUNG_AFTER)
        else:
            old.close()
        closes += 1
        replacement = new_reader("r%d" % (closes + 1))
        replacement.start()
        readers.append(replacement)
        print("ROUND %s" % json.dumps({"closes": closes, "acked": dict(stats.acked_by_kind)}), flush=True)

    stats.stop = True
    hung = 0
    finished = gevent.joinall(greenlets, timeout=HUNG_AFTER)
    hung += len(greenlets) - len(finished)
    for done in threads + answerers:
        if not joined(done, HUNG_AFTER):
            hung += 1
    writer.close()
    for reader in readers:
        reader.close()

    # -- everything acknowledged must come out of nsqd (timed-out messages come back)
    collected = set()
    collector = nsq.Reader(
        args.topic, "mixed", lambda m: collected.add(m.body) or True, nsqd_tcp_addresses=[args.nsqd],
        max_in_flight=200, user_agent="collector",
    )
    collector.start()
    wait_until = os_monotonic() + 30
    while not stats.acked <= (stats.received | collected) and os_monotonic() < wait_until:
        gevent.sleep(0.05)
    collector.close()
    watcher.kill()
    problem = backend.hub_problem()
    missing = sorted(b.decode() for b in stats.acked - (stats.received | collected))
    print(json.dumps({
        "acked": len(stats.acked),
        "acked_by": dict(collections.Counter(b.split(b"-")[0].decode()[:2] for b in stats.acked)),
        "acked_since_restarted": {
            kind: stats.acked_by_kind[kind] - restarted["acked"].get(kind, 0) for kind in KINDS
        } if restarted else None,
        "missing": missing[:20],
        "missing_count": len(missing),
        "min_activecnt": min(stats.min_activecnt, loop.activecnt),
        "hub_problem": problem,
        "hung": hung,
        "slowest_call": round(stats.slowest_call, 3),
        "reader_closes": closes,
        "errors": dict(stats.errors),
    }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
