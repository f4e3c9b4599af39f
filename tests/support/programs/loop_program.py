"""A program with an event loop (tornado's, or plain asyncio with --asyncio):
run as a subprocess by tests/nsq/test_loop_programs.py.

Checks, from inside: handlers and pub callbacks run on the loop's thread;
``await writer.pub()`` on the loop gives b"OK" without blocking it (a ticker
keeps ticking meanwhile); reader.io_loop is the program's loop. Prints one
JSON line.
"""
import json
import sys
import threading

USE_TORNADO = "--asyncio" not in sys.argv
if USE_TORNADO:
    import tornado.ioloop
else:
    import asyncio

import nsq  # noqa: E402

nsqd, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
result = {"handler_threads": set(), "callback_threads": set(), "awaited": [], "ticks_during_publish": 0}
handled = set()
loop_thread = []

if USE_TORNADO:
    io_loop = tornado.ioloop.IOLoop.current()
else:
    aio = asyncio.new_event_loop()
    asyncio.set_event_loop(aio)


def handler(message):
    result["handler_threads"].add(threading.get_ident())
    handled.add(message.body)
    if len(handled) == count:
        stop()
    return True


def stop():
    if USE_TORNADO:
        tornado.ioloop.IOLoop.current().stop()
    else:
        aio.stop()


reader = nsq.Reader(topic, "c", handler, nsqd_tcp_addresses=[nsqd], max_in_flight=20)
writer = nsq.Writer([nsqd])
ticks = [0]


def tick():
    ticks[0] += 1
    schedule(0.001, tick)


def schedule(delay, fn):
    if USE_TORNADO:
        tornado.ioloop.IOLoop.current().call_later(delay, fn)
    else:
        aio.call_later(delay, fn)


async def publish_all():
    loop_thread.append(threading.get_ident())
    writer.pub(topic, b"cb-0", callback=lambda conn, data: result["callback_threads"].add(threading.get_ident()))
    before = ticks[0]
    for i in range(1, count):
        result["awaited"].append(await writer.pub(topic, b"aw-%d" % i))
    result["ticks_during_publish"] = ticks[0] - before


def begin():
    tick()
    if USE_TORNADO:
        tornado.ioloop.IOLoop.current().spawn_callback(publish_all)
    else:
        aio.create_task(publish_all())


schedule(0, begin)
result["io_loop_is_programs"] = (reader.io_loop is io_loop) if USE_TORNADO else (reader.io_loop.asyncio_loop is aio)
nsq.run()
result["loop_thread"] = loop_thread[0] if loop_thread else None
result["backends"] = sorted({reader.backend.name, writer.backend.name})
result["threads"] = sorted(t.name for t in threading.enumerate())
result["handled"] = len(handled)
result["awaited_ok"] = sum(1 for r in result["awaited"] if r == b"OK")
result["handler_threads"] = sorted(result["handler_threads"])
result["callback_threads"] = sorted(result["callback_threads"])
del result["awaited"]
print(json.dumps(result), flush=True)
