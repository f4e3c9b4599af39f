"""A Writer made on the main thread, a PeriodicCallback on IOLoop.current(), and that loop run on
another thread (threading.Thread(target=IOLoop.current().start)); the last answer stops the loop,
from its callback, and the program ends."""
import threading

import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

sent = [0]
answers = {"ok": 0, "error": 0}


def pub_message():
    if writer.conns and sent[0] < COUNT:  # (once connected: a pub before that fails)
        writer.pub(TOPIC, b"threaded-%d" % sent[0], finish_pub)
        sent[0] += 1


def finish_pub(conn, data):
    if isinstance(data, nsq.Error):
        answers["error"] += 1
    else:
        answers["ok"] += 1
    if answers["ok"] + answers["error"] == COUNT:
        tornado.ioloop.IOLoop.current().stop()


writer = nsq.Writer([NSQD_TCP])
tornado.ioloop.PeriodicCallback(pub_message, 5).start()
loop_thread = threading.Thread(target=tornado.ioloop.IOLoop.current().start)
loop_thread.start()
loop_thread.join()
report(ok=answers["ok"], error=answers["error"])
