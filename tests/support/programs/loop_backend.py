"""Where a loop program's Reader and Writer run, and how they close: run as a subprocess by
tests/nsq/test_loop_backend.py.

usage: loop_backend.py MODE NSQD TOPIC COUNT

MODE:
- ``coroutine``: the Writer and Reader are made in ``async def main()`` (``asyncio.run``);
  ``await writer.pub()`` COUNT times, wait until all are handled, then ``reader.close()``
  from the coroutine (it must return at once: it is on the loop) and wait for the close;
- ``stopped``: pynsq's shape with tornado: clients made first, ``nsq.run()``; the handler
  stops the IOLoop after COUNT messages; the clients are closed after ``nsq.run()`` has
  returned, with the loop stopped;
- ``ended``: clients made in a coroutine and left open; ``asyncio.run`` ends (its loop
  closed); then closed;
- ``used-early``: tornado imported, a Writer made on the main thread and used by another
  thread (a blocking pub) before the loop runs; then ``nsq.run()`` and a pub with a callback
  from the loop;
- ``two-threads-tornado``, ``two-threads-asyncio``: a Writer and a Reader made on the main
  thread for its loop (tornado's IOLoop.current(), or an asyncio loop set for it); thread
  ``loop-A`` runs the loop until half of COUNT are published, answered and handled, and a
  callback stops it; then thread ``loop-B`` runs it for the rest; then the main thread closes
  both (the loop stopped, the threads that ran it ended);
- ``run-twice``: tornado; a Reader made on the main thread, ``reader.run()`` on thread ``loop-A``
  until the handler stops the loop at half of COUNT, then on thread ``loop-B`` until the handler
  closes the Reader at COUNT (``run()`` returns); messages published by the test first.

Prints one JSON line: the backends' names, the threads alive while the loop ran (and at
the end), what was handled and answered, and where callbacks ran.
"""
import json
import sys
import threading
import time

MODE, NSQD, TOPIC, COUNT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if MODE in ("stopped", "used-early", "two-threads-tornado", "run-twice"):
    import tornado.ioloop
import asyncio  # noqa: E402

import nsq  # noqa: E402

DEADLINE = time.monotonic() + 30
result = {}
handled = []


def threads():
    return sorted(t.name for t in threading.enumerate())


async def wait_until(predicate):
    while not predicate():
        if time.monotonic() > DEADLINE:
            raise TimeoutError("gave up waiting")
        await asyncio.sleep(0.01)


def handler(message):
    handled.append(message.body)
    return True


if MODE == "coroutine":
    async def main():
        writer = nsq.Writer([NSQD])
        reader = nsq.Reader(TOPIC, "c", handler, nsqd_tcp_addresses=[NSQD], max_in_flight=10)
        result["backends"] = sorted({writer.backend.name, reader.backend.name})
        for i in range(COUNT):
            result.setdefault("answers", []).append((await writer.pub(TOPIC, b"m-%d" % i)).decode())
        await wait_until(lambda: len(handled) >= COUNT)
        result["threads_while_running"] = threads()
        reader.close()  # on the loop, outside its tasks: starts the close and returns
        result["closed_when_close_returned"] = reader.is_closed()
        await wait_until(reader.is_closed)
        writer.close()
        await wait_until(writer.is_closed)
        result["closed"] = [reader.is_closed(), writer.is_closed()]

    asyncio.run(main())

elif MODE == "stopped":
    io_loop = tornado.ioloop.IOLoop.current()

    def stopping_handler(message):
        handler(message)
        if len(handled) == COUNT:
            io_loop.stop()
        return True

    writer = nsq.Writer([NSQD])
    reader = nsq.Reader(TOPIC, "c", stopping_handler, nsqd_tcp_addresses=[NSQD], max_in_flight=10)

    def publish():
        writer.mpub(TOPIC, [b"m-%d" % i for i in range(COUNT)], callback=lambda conn, data: None)

    io_loop.call_later(0.2, publish)
    io_loop.call_later(25, io_loop.stop)  # (only if the messages never come)
    nsq.run()
    result["backends"] = sorted({writer.backend.name, reader.backend.name})
    result["threads_while_running"] = threads()
    reader.close()  # the loop is stopped: the close runs it until done
    writer.close()
    result["closed"] = [reader.is_closed(), writer.is_closed()]

elif MODE == "ended":
    clients = {}

    async def main():
        clients["writer"] = writer = nsq.Writer([NSQD])
        clients["reader"] = nsq.Reader(TOPIC, "c", handler, nsqd_tcp_addresses=[NSQD], max_in_flight=10)
        for i in range(COUNT):
            await writer.pub(TOPIC, b"m-%d" % i)
        await wait_until(lambda: len(handled) >= COUNT)
        result["backends"] = sorted({client.backend.name for client in clients.values()})
        result["threads_while_running"] = threads()

    asyncio.run(main())  # ends with both clients open; asyncio.run cancels their tasks, closes its loop
    clients["reader"].close()
    clients["writer"].close()
    result["closed"] = [clients["reader"].is_closed(), clients["writer"].is_closed()]

elif MODE == "used-early":
    io_loop = tornado.ioloop.IOLoop.current()
    writer = nsq.Writer([NSQD])
    answers = []
    worker = threading.Thread(target=lambda: answers.append(writer.pub(TOPIC, b"from-a-thread").decode()))
    worker.start()
    worker.join(20)
    result["answers"] = answers
    callbacks = []

    def on_loop():
        def callback(conn, data):
            callbacks.append([data.decode(), threading.current_thread() is threading.main_thread()])
            io_loop.stop()
        writer.pub(TOPIC, b"from-the-loop", callback=callback)

    io_loop.add_callback(on_loop)
    io_loop.call_later(25, io_loop.stop)  # (only if the answer never comes)
    nsq.run()
    result["callbacks"] = callbacks
    result["backends"] = [writer.backend.name]
    writer.close()
    result["closed"] = [writer.is_closed()]

elif MODE.startswith("two-threads-"):
    if MODE == "two-threads-tornado":
        io_loop = tornado.ioloop.IOLoop.current()
        call_later, stop, run_loop = io_loop.call_later, io_loop.stop, io_loop.start
    else:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        call_later, stop, run_loop = loop.call_later, loop.stop, loop.run_forever
    half = COUNT // 2
    sent, answers, seen = [], [], {"callbacks": set(), "handlers": set(), "while_running": set()}

    def turn_done():
        return len(answers) == len(sent) == len(handled) and len(sent) in (half, COUNT)

    def on_answer(conn, data):
        answers.append(data.decode() if isinstance(data, bytes) else repr(data))
        seen["callbacks"].add(threading.current_thread().name)
        if turn_done():
            stop()

    def counting_handler(message):
        seen["handlers"].add(threading.current_thread().name)
        handler(message)
        message.finish()  # (answered before the loop stops)
        if turn_done():
            stop()
        return True

    def publish():
        limit = half if threading.current_thread().name == "loop-A" else COUNT
        if writer.conns and len(sent) < limit:
            sent.append(b"m-%d" % len(sent))
            writer.pub(TOPIC, sent[-1], on_answer)
            seen["while_running"].add(tuple(threads()))
        call_later(0.005, publish)

    writer = nsq.Writer([NSQD])
    reader = nsq.Reader(TOPIC, "c", counting_handler, nsqd_tcp_addresses=[NSQD], max_in_flight=10)
    call_later(0, publish)
    conns = []
    for name in ("loop-A", "loop-B"):
        call_later(25, stop)  # (only if the messages never come)
        thread = threading.Thread(target=run_loop, name=name)
        thread.start()
        thread.join(30)
        conns.append(sorted(id(conn) for conn in writer.conns.values()))
    result["backends"] = sorted({writer.backend.name, reader.backend.name})
    result["threads_while_running"] = sorted(seen["while_running"])
    result["callbacks"], result["handlers"] = sorted(seen["callbacks"]), sorted(seen["handlers"])
    result["answers"] = answers
    result["same_writer_connection"] = len(conns[0]) == 1 and conns[0] == conns[1]
    reader.close()  # on the main thread: the loop is stopped, and the threads that ran it have ended
    writer.close()
    result["closed"] = [reader.is_closed(), writer.is_closed()]

elif MODE == "run-twice":
    handler_threads = set()

    def stopping_handler(message):
        handler(message)
        handler_threads.add(threading.current_thread().name)
        if len(handled) == COUNT // 2:
            tornado.ioloop.IOLoop.current().stop()
        elif len(handled) == COUNT:
            message.finish()
            reader.close()
        return True

    reader = nsq.Reader(TOPIC, "c", stopping_handler, nsqd_tcp_addresses=[NSQD], max_in_flight=1)
    for name in ("loop-A", "loop-B"):
        thread = threading.Thread(target=reader.run, name=name)
        thread.start()
        thread.join(30)
        result.setdefault("ran", []).append(not thread.is_alive())
    result["backends"] = [reader.backend.name]
    result["handlers"] = sorted(handler_threads)
    result["closed"] = [reader.is_closed()]

result["handled"] = len(handled)
result["threads_at_end"] = threads()
print(json.dumps(result), flush=True)
