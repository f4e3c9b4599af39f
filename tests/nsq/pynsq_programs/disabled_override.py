"""A Reader subclass overriding disabled(): nothing is handled while it says True."""
import time

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

ENABLED_AT = time.time() + 1.0
early = []
handled = set()


class PausableReader(nsq.Reader):
    @classmethod
    def disabled(cls):
        return time.time() < ENABLED_AT


def handler(message):
    if time.time() < ENABLED_AT:
        early.append(message.body)
    handled.add(message.body)
    if len(handled) == COUNT:
        print("ALL HANDLED", flush=True)
    return True


reader = PausableReader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                        max_in_flight=10, low_rdy_idle_timeout=1)
nsq.run()
report(handled=len(handled), handled_while_disabled=len(early))
