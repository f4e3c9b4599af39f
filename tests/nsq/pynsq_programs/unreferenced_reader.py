"""A Reader nobody keeps a reference to, found through nsqlookupd; nsq.run(), stopped by SIGTERM."""
import nsq

from common import COUNT, LOOKUPD_HTTP, TOPIC, report

handled = set()


def handler(message):
    handled.add(message.body)
    if len(handled) == COUNT:
        print("ALL HANDLED", flush=True)
    return True


nsq.Reader(
    message_handler=handler, lookupd_http_addresses=["http://" + LOOKUPD_HTTP], topic=TOPIC, channel="c",
    lookupd_poll_interval=1, max_in_flight=10,
)
nsq.run()
report(handled=len(handled))
