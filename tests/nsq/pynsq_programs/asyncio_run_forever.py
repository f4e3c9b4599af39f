"""A plain asyncio program: its own loop's run_forever() instead of nsq.run()."""
import asyncio

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
handled = set()


def handler(message):
    handled.add(message.body)
    if len(handled) == COUNT:
        loop.call_later(0.2, loop.stop)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=10)
loop.run_forever()
report(handled=len(handled))
