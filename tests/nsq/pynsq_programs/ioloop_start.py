"""tornado's IOLoop.current().start() instead of nsq.run(); the handler stops the loop at the end."""
import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

handled = set()


def handler(message):
    handled.add(message.body)
    if len(handled) == COUNT:
        # answer first: stopping the loop ends the program
        message.finish()
        tornado.ioloop.IOLoop.current().call_later(0.2, tornado.ioloop.IOLoop.current().stop)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=10)
tornado.ioloop.IOLoop.current().start()
report(handled=len(handled))
