"""One IOLoop run by two threads in turn: a Writer and a Reader made on the main thread; thread A
runs the loop until half the messages are published, answered and handled, and stops it from a
callback; then thread B runs it for the other half. Callbacks and handlers run on whichever thread
runs the loop."""
import threading

import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

HALF = COUNT // 2
sent = [0]
answers = {"ok": 0, "error": 0}
handled = set()
callback_threads = set()
handler_threads = set()


def stop_when_done():
    answered = answers["ok"] + answers["error"]
    if sent[0] in (HALF, COUNT) and answered == sent[0] and len(handled) == sent[0]:
        io_loop = tornado.ioloop.IOLoop.current()
        if sent[0] == HALF:
            io_loop.stop()  # thread B goes on
        else:
            io_loop.call_later(0.2, io_loop.stop)  # stopping the loop ends the program: the last FIN first


def pub_message():
    if writer.conns and sent[0] < (HALF if threading.current_thread().name == "A" else COUNT):
        writer.pub(TOPIC, b"turn-%d" % sent[0], finish_pub)
        sent[0] += 1


def finish_pub(conn, data):
    callback_threads.add(threading.current_thread().name)
    if isinstance(data, nsq.Error):
        answers["error"] += 1
    else:
        answers["ok"] += 1
    stop_when_done()


def handler(message):
    handler_threads.add(threading.current_thread().name)
    handled.add(message.body)
    message.finish()  # (answered before the loop may stop)
    stop_when_done()
    return True


writer = nsq.Writer([NSQD_TCP])
reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=10)
tornado.ioloop.PeriodicCallback(pub_message, 5).start()
for name in ("A", "B"):
    loop_thread = threading.Thread(target=tornado.ioloop.IOLoop.current().start, name=name)
    loop_thread.start()
    loop_thread.join()
report(ok=answers["ok"], error=answers["error"], handled=len(handled),
       callback_threads=sorted(callback_threads), handler_threads=sorted(handler_threads))
