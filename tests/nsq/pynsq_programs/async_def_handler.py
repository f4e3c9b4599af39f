"""An async def handler (pynsq 0.9 awaits it); its result finishes or requeues."""
import asyncio

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

handled = []
attempts = {}


async def handler(message):
    await asyncio.sleep(0.001)
    attempts[message.body] = message.attempts
    if message.body.endswith(b"-0") and message.attempts == 1:
        return False  # requeued once, then finished
    handled.append(message.body)
    if len(handled) == COUNT:
        print("ALL HANDLED", flush=True)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=20, max_backoff_duration=0.1, requeue_delay=0)
nsq.run()
report(handled=len(set(handled)), requeued=sum(1 for a in attempts.values() if a > 1))
