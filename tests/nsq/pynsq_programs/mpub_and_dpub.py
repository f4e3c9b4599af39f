"""Writer.mpub(topic, msg=[...]) and dpub(), answered through callbacks; stops the loop when all answered."""
import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

answers = []


def answered(conn, data):
    answers.append(not isinstance(data, nsq.Error))
    if len(answers) == 2:
        tornado.ioloop.IOLoop.current().stop()


def publish():
    writer.mpub(TOPIC, msg=[b"mpub-%d" % i for i in range(COUNT - 1)], callback=answered)
    writer.dpub(TOPIC, 100, b"dpub-0", callback=answered)


writer = nsq.Writer([NSQD_TCP])
tornado.ioloop.IOLoop.current().call_later(0.5, publish)
nsq.run()
report(ok=sum(answers), error=len(answers) - sum(answers))
