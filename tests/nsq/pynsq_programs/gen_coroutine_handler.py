"""A tornado @gen.coroutine handler that yields before it answers."""
import tornado.gen

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

handled = set()


@tornado.gen.coroutine
def handler(message):
    yield tornado.gen.sleep(0.001)
    handled.add(message.body)
    if len(handled) == COUNT:
        print("ALL HANDLED", flush=True)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=10)
nsq.run()
report(handled=len(handled))
