"""A Reader subclass made after nsq.run() started, that sets its own attributes after super().__init__()."""
import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report


class CountingReader(nsq.Reader):
    def __init__(self, **kwargs):
        super(CountingReader, self).__init__(message_handler=self.count, **kwargs)
        self.seen = set()  # set after the base class is ready: must exist before the first message

    def count(self, message):
        self.seen.add(message.body)
        if len(self.seen) == COUNT:
            print("ALL HANDLED", flush=True)
        return True


readers = []


def make_reader():
    readers.append(CountingReader(topic=TOPIC, channel="c", nsqd_tcp_addresses=[NSQD_TCP], max_in_flight=10))


tornado.ioloop.IOLoop.current().call_later(0.3, make_reader)
nsq.run()
report(handled=len(readers[0].seen) if readers else 0)
