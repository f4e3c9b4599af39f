"""message.requeue(time_ms=..., backoff=False) on the first attempt, finished on the second."""
import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

attempts = {}


def handler(message):
    attempts[message.body] = message.attempts
    if message.attempts == 1:
        message.requeue(time_ms=20, backoff=False)
        return
    if len(attempts) == COUNT and all(a >= 2 for a in attempts.values()):
        print("ALL HANDLED", flush=True)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=20)
nsq.run()
report(handled=sum(1 for a in attempts.values() if a >= 2))
