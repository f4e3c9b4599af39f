"""pynsq's documented Writer example: a PeriodicCallback publishes, the callback counts the answers."""
import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

sent = [0]
answers = {"ok": 0, "error": 0}


def pub_message():
    if sent[0] < COUNT:
        writer.pub(TOPIC, b"periodic-%d" % sent[0], finish_pub)
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
nsq.run()
report(ok=answers["ok"], error=answers["error"])
