# The nsqfast side of `make bench`: one workload with nsq.Reader / nsq.Writer
# on the gevent or threads backend, compiled or pure-Python codec (the driver
# sets NSQ_PURE_PYTHON=1 for the latter). See _common.py for the protocol.
#
# --backend asyncio: the clients are made in a coroutine (asyncio.run), so they
# run on the loop's asyncio backend as a pynsq program's would (nsq.loops), and
# the workload is written as an asyncio program writes it: consume with a
# 10 ms asyncio.sleep ticker beside it (its lag is reported), pub as
# ``await writer.pub()`` one at a time, concurrent as --concurrency coroutines
# each awaiting its pubs, mpub as ``await writer.mpub()``.
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

ARGS = _common.parse("nsqfast benchmark client")
if ARGS.backend == "gevent" and not ARGS.no_patch:
    from gevent import monkey

    monkey.patch_all()

import functools  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import nsq  # noqa: E402
from nsq import codec  # noqa: E402
from nsq.errors import PartialPublishError  # noqa: E402

now = _common.now
PUB_MANY_WINDOW = 8  # MPUBs awaiting nsqd's answer at once (pubmany mode)


def conn_options(args) -> dict:
    return dict(_common.conn_options(args), backend=args.backend)


def consume(args) -> dict:
    tally = _common.Tally(args.count, args.size)
    reader: nsq.Reader

    def handler(message) -> bool:
        if tally.seen(message):
            reader.close()  # from inside the handler: completes after we return
        return True

    reader = nsq.Reader(
        args.topic,
        args.channel,
        handler,
        nsqd_tcp_addresses=args.addresses,
        max_in_flight=args.max_in_flight,
        **conn_options(args),
    )
    reader.run()
    return tally.result()


def spawn_all(args, fn, shares: list[int]) -> None:
    if args.backend == "gevent":
        import gevent

        gevent.joinall([gevent.spawn(fn, share) for share in shares], raise_error=True)
    else:
        threads = [threading.Thread(target=fn, args=(share,)) for share in shares]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def publish(args) -> dict:
    writer = nsq.Writer(args.addresses, **conn_options(args))
    if not writer.wait_connected(10):
        sys.exit("nsqfast client: no connection to %s" % args.nsqd)
    topic = args.topic
    body = _common.body(args.size)
    done = [0]
    errors = [0]
    pub = writer.pub
    mpub = writer.mpub
    latencies: list[list[float]] = []  # concurrent mode: one list per caller, seconds per pub
    lock = threading.Lock()  # done/errors from many threads (threads backend)

    def pub_loop(n: int, timed: bool = False) -> None:
        """n blocking publishes; timed: each one's latency goes into latencies."""
        ok = 0
        mine: list[float] = []
        if timed:
            latencies.append(mine)
        for _ in range(n):
            t0 = now()
            try:
                pub(topic, body)
                ok += 1
            except nsq.Error as exc:
                with lock:
                    errors[0] += 1
                print("pub failed: %s" % exc, file=sys.stderr)
            if timed:
                mine.append(now() - t0)
        with lock:
            done[0] += ok

    extra: dict = {}
    if args.mode == "pubmany":
        bodies = [body] * args.count  # made before the clock starts
    start = now()
    if args.mode == "pub":
        pub_loop(args.count)
    elif args.mode == "concurrent":
        spawn_all(args, functools.partial(pub_loop, timed=True), _common.shares(args.count, args.concurrency))
    elif args.mode == "pubmany":
        try:
            done[0] = writer.pub_many(topic, bodies, batch_size=args.batch, window=PUB_MANY_WINDOW)
        except PartialPublishError as exc:
            done[0] = exc.published
            errors[0] += 1
            print("pub_many failed after %d published: %r" % (exc.published, exc.error), file=sys.stderr)
        except nsq.Error as exc:
            errors[0] += 1
            print("pub_many failed: %r" % exc, file=sys.stderr)
        extra["window"] = PUB_MANY_WINDOW
    else:  # mpub
        batch = [body] * args.batch
        left = args.count
        while left > 0:
            n = min(args.batch, left)
            try:
                mpub(topic, batch if n == args.batch else batch[:n])
                done[0] += n
            except nsq.Error as exc:
                errors[0] += 1
                print("mpub failed: %s" % exc, file=sys.stderr)
            left -= n
    seconds = now() - start
    writer.close()
    if args.mode == "concurrent":
        extra.update(_common.latency_summary(latencies), callers=len(latencies), peak_rss_mb=_common.peak_rss_mb())
    return dict(extra, count=done[0], seconds=seconds, errors=errors[0])


def feed(args) -> dict:
    """For the RSS run: publish --count messages in MPUBs of --batch, pausing
    while the channel holds more than --max-depth (so nsqd's backlog stays
    bounded and the feeding goes on for as long as the consumer runs)."""
    writer = nsq.Writer(args.addresses, **conn_options(args))
    if not writer.wait_connected(10):
        sys.exit("nsqfast client: no connection to %s" % args.nsqd)
    batch = [_common.body(args.size)] * args.batch
    left = args.count
    done = errors = 0
    start = now()
    next_check = 0
    while left > 0:
        if args.nsqd_http and done >= next_check:
            while True:
                depth = _common.depth_of(args.nsqd_http, args.topic, args.channel)
                if depth is None or depth < args.max_depth:
                    break
                time.sleep(0.05)
            next_check = done + max(args.max_depth // 4, args.batch)
        n = min(args.batch, left)
        try:
            writer.mpub(args.topic, batch if n == args.batch else batch[:n])
            done += n
        except nsq.Error as exc:
            errors += 1
            print("feed mpub failed: %s" % exc, file=sys.stderr)
        left -= n
    seconds = now() - start
    writer.close()
    return {"count": done, "seconds": seconds, "errors": errors}


async def aio_consume(args) -> dict:
    import asyncio

    done = asyncio.Event()
    ticker = _common.Ticker()
    tally = _common.Tally(args.count, args.size, ticker)

    def handler(message) -> bool:
        if tally.seen(message):
            reader.close()  # from inside the handler: completes after we return
            done.set()
        return True

    ticking = asyncio.ensure_future(ticker.run())
    reader = nsq.Reader(args.topic, args.channel, handler, nsqd_tcp_addresses=args.addresses,
                        max_in_flight=args.max_in_flight, **_common.conn_options(args))
    await done.wait()
    await ticking
    while not reader.is_closed():
        await asyncio.sleep(0.005)
    return dict(tally.result(), clients_backend=reader.backend.name)


async def aio_publish(args) -> dict:
    import asyncio

    writer = nsq.Writer(args.addresses, **_common.conn_options(args))
    while not writer.conns:
        await asyncio.sleep(0.002)
    topic = args.topic
    body = _common.body(args.size)
    done = [0]
    errors = [0]
    latencies: list[list[float]] = []

    async def pub_loop(n: int, timed: bool = False) -> None:
        mine: list[float] = []
        if timed:
            latencies.append(mine)
        for _ in range(n):
            t0 = now()
            try:
                await writer.pub(topic, body)
                done[0] += 1
            except nsq.Error as exc:
                errors[0] += 1
                print("pub failed: %s" % exc, file=sys.stderr)
            if timed:
                mine.append(now() - t0)

    start = now()
    if args.mode == "pub":
        await pub_loop(args.count)
    elif args.mode == "concurrent":
        await asyncio.gather(*(pub_loop(share, True) for share in _common.shares(args.count, args.concurrency)))
    elif args.mode == "mpub":
        batch = [body] * args.batch
        left = args.count
        while left > 0:
            n = min(args.batch, left)
            try:
                await writer.mpub(topic, batch if n == args.batch else batch[:n])
                done[0] += n
            except nsq.Error as exc:
                errors[0] += 1
                print("mpub failed: %s" % exc, file=sys.stderr)
            left -= n
    else:
        sys.exit("nsqfast client: %s is not an asyncio workload" % args.mode)
    seconds = now() - start
    writer.close()
    while not writer.is_closed():
        await asyncio.sleep(0.005)
    extra: dict = {}
    if args.mode == "concurrent":
        extra.update(_common.latency_summary(latencies), callers=len(latencies), peak_rss_mb=_common.peak_rss_mb())
    return dict(extra, count=done[0], seconds=seconds, errors=errors[0], clients_backend=writer.backend.name)


def main() -> None:
    args = ARGS
    _common.wait_for_start()
    if args.backend == "asyncio":
        import asyncio

        result = asyncio.run(aio_consume(args) if args.mode == "consume" else aio_publish(args))
    elif args.mode == "consume":
        result = consume(args)
    elif args.mode == "feed":
        result = feed(args)
    else:
        result = publish(args)
    result.update(
        client="nsqfast",
        version=nsq.__version__,
        impl=codec.IMPLEMENTATION,
        backend=args.backend,
        patched=args.backend == "gevent" and not args.no_patch,
        module=nsq.__file__,
        mode=args.mode,
    )
    _common.report(result)


if __name__ == "__main__":
    main()
