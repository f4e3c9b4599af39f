# The pynsq (0.9.1, tornado) side of `make bench`. Runs in .bench-venvs/pynsq,
# where `import nsq` is pynsq. See _common.py for the protocol.
#
# consume: nsq.Reader, the handler returns True (pynsq sends FIN); beside it on
#   the same loop (tornado 6 runs on asyncio) the 10 ms asyncio.sleep ticker of
#   _common.Ticker, from the first message to the last, to compare the loop's
#   responsiveness with nsqfast's asyncio backend (ticker_* in the result).
# pub: one async pub at a time, the next one sent from the previous callback.
# concurrent: pynsq has no blocking publish to call from many tasks; its
#   natural equivalent is --concurrency async pubs kept outstanding, each
#   callback sending the next one.
# mpub: one async mpub of --batch at a time.
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import nsq  # noqa: E402
import tornado  # noqa: E402
import tornado.ioloop  # noqa: E402

now = _common.now


conn_options = _common.conn_options


def consume(args, loop) -> dict:
    ticker = _common.Ticker()
    tally = _common.Tally(args.count, args.size, ticker)

    def stop_when_flushed() -> None:
        # The FIN of the last message is written by the IOStream; stop once
        # every connection has nothing left to write.
        if any(c.stream is not None and c.stream.writing() for c in reader.conns.values()):
            loop.call_later(0.001, stop_when_flushed)
            return
        reader.close()
        loop.stop()

    def handler(message) -> bool:
        if tally.seen(message):
            loop.add_callback(stop_when_flushed)
        return True

    reader = nsq.Reader(
        topic=args.topic,
        channel=args.channel,
        message_handler=handler,
        nsqd_tcp_addresses=args.addresses,
        max_in_flight=args.max_in_flight,
        **conn_options(args),
    )
    # spawn_callback: run as a task of the (asyncio) loop once it starts, as the Reader's own work is
    loop.spawn_callback(ticker.run)
    loop.start()
    return tally.result()


def publish(args, loop) -> dict:
    writer = nsq.Writer(args.addresses, **conn_options(args))
    topic = args.topic
    body = _common.body(args.size)
    if args.mode == "mpub":
        batch = [body] * args.batch
        ops = [args.batch] * (args.count // args.batch) + ([args.count % args.batch] if args.count % args.batch else [])
        window = 1
    else:
        ops = [1] * args.count
        window = args.concurrency if args.mode == "concurrent" else 1
    state = {"next": 0, "answered": 0, "done": 0, "errors": 0, "start": 0.0, "end": 0.0}

    def send() -> None:
        i = state["next"]
        if i >= len(ops):
            return
        state["next"] = i + 1
        n = ops[i]
        if args.mode == "mpub":
            writer.mpub(topic, batch if n == args.batch else batch[:n], callback=lambda conn, data: answered(n, data))
        else:
            writer.pub(topic, body, callback=lambda conn, data: answered(1, data))

    def answered(n: int, data) -> None:
        state["answered"] += 1
        if isinstance(data, nsq.Error) or isinstance(data, Exception):
            state["errors"] += 1
            print("publish failed: %r" % (data,), file=sys.stderr)
        else:
            state["done"] += n
        if state["answered"] == len(ops):
            state["end"] = now()
            loop.stop()
        else:
            send()

    def start() -> None:
        if not writer.conns:
            loop.call_later(0.005, start)
            return
        state["start"] = now()
        for _ in range(window):
            send()

    loop.add_callback(start)
    loop.start()
    writer.close() if hasattr(writer, "close") else None
    return {"count": state["done"], "seconds": state["end"] - state["start"], "errors": state["errors"]}


def main() -> None:
    args = _common.parse("pynsq benchmark client")
    if args.mode == "feed":
        sys.exit("pynsq client: feed mode is nsqfast only")
    loop = tornado.ioloop.IOLoop.current()
    _common.wait_for_start()
    result = consume(args, loop) if args.mode == "consume" else publish(args, loop)
    result.update(client="pynsq", version=nsq.__version__, tornado=tornado.version, module=nsq.__file__, mode=args.mode)
    _common.report(result)


if __name__ == "__main__":
    main()
