# The gnsq (1.0.2, gevent) side of `make bench`. Runs in .bench-venvs/gnsq.
# See _common.py for the protocol.
#
# consume: gnsq.Consumer, a handler on on_message (gnsq sends FIN when it returns).
# pub: blocking Producer.publish, one at a time.
# concurrent: --concurrency greenlets calling publish on one Producer.
# mpub: blocking Producer.multipublish of --batch.
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import gevent  # noqa: E402
import gevent.event  # noqa: E402
import gnsq  # noqa: E402

now = _common.now


conn_options = _common.conn_options


def consume(args) -> dict:
    count = args.count
    size = args.size
    state = {"n": 0, "bad": 0, "start": 0.0, "end": 0.0}
    finished = gevent.event.Event()
    consumer = gnsq.Consumer(
        args.topic,
        args.channel,
        nsqd_tcp_addresses=args.addresses,
        max_in_flight=args.max_in_flight,
        **conn_options(args),
    )

    @consumer.on_message.connect
    def handler(consumer, message):
        n = state["n"] + 1
        state["n"] = n
        if n == 1:
            state["start"] = now()
        if len(message.body) != size:
            state["bad"] += 1
        if n == count:
            message.finish()  # gnsq would FIN after we return; do it now, we close next
            state["end"] = now()
            finished.set()

    consumer.start(block=False)
    finished.wait()
    gevent.sleep(0)  # let the FIN go out
    consumer.close()
    consumer.join(timeout=10)
    return {"count": state["n"], "seconds": state["end"] - state["start"], "errors": state["bad"]}


def publish(args) -> dict:
    producer = gnsq.Producer(nsqd_tcp_addresses=args.addresses, **conn_options(args))
    producer.start()
    topic = args.topic
    body = _common.body(args.size)
    done = [0]
    errors = [0]

    def pub_loop(n: int) -> None:
        ok = 0
        for _ in range(n):
            try:
                producer.publish(topic, body)
                ok += 1
            except Exception as exc:
                errors[0] += 1
                print("publish failed: %r" % (exc,), file=sys.stderr)
        done[0] += ok

    # wait for the connection (publish(block=True) would wait too, inside the timing)
    deadline = now() + 10
    while not producer._connections.qsize() and now() < deadline:
        gevent.sleep(0.005)
    start = now()
    if args.mode == "pub":
        pub_loop(args.count)
    elif args.mode == "concurrent":
        gevent.joinall([gevent.spawn(pub_loop, share) for share in _common.shares(args.count, args.concurrency)])
    else:
        batch = [body] * args.batch
        left = args.count
        while left > 0:
            n = min(args.batch, left)
            try:
                producer.multipublish(topic, batch if n == args.batch else batch[:n])
                done[0] += n
            except Exception as exc:
                errors[0] += 1
                print("multipublish failed: %r" % (exc,), file=sys.stderr)
            left -= n
    seconds = now() - start
    producer.close()
    producer.join(timeout=5)
    return {"count": done[0], "seconds": seconds, "errors": errors[0]}


def main() -> None:
    args = _common.parse("gnsq benchmark client")
    if args.mode == "feed":
        sys.exit("gnsq client: feed mode is nsqfast only")
    _common.wait_for_start()
    result = consume(args) if args.mode == "consume" else publish(args)
    result.update(client="gnsq", version=gnsq.__version__, gevent=gevent.__version__, module=gnsq.__file__, mode=args.mode)
    _common.report(result)


if __name__ == "__main__":
    main()
