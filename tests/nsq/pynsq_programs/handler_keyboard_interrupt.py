"""A handler raises KeyboardInterrupt: it surfaces from nsq.run() in the main thread."""
import nsq

from common import NSQD_TCP, TOPIC, report

handled = []


def handler(message):
    if message.body == b"stop":
        raise KeyboardInterrupt
    handled.append(message.body)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=1)
try:
    nsq.run()
    outcome = "returned"
except KeyboardInterrupt:
    outcome = "KeyboardInterrupt"
report(outcome=outcome, handled=len(handled))
