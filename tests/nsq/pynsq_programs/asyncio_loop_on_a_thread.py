"""A plain asyncio program: a Writer and a Reader made on the main thread for the loop it set, and
loop.run_forever() run on another thread; the Writer publishes from loop callbacks, the Reader's
handler stops the loop once every message is in, and the program ends."""
import asyncio
import threading

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
sent = [0]
answers = {"ok": 0, "error": 0}
handled = set()


def publish_next():
    if not writer.conns:  # (not connected yet: a pub would fail)
        loop.call_later(0.005, publish_next)
    elif sent[0] < COUNT:
        writer.pub(TOPIC, b"asyncio-%d" % sent[0], finish_pub)
        sent[0] += 1
        loop.call_later(0.005, publish_next)


def finish_pub(conn, data):
    if isinstance(data, nsq.Error):
        answers["error"] += 1
    else:
        answers["ok"] += 1


def handler(message):
    handled.add(message.body)
    if len(handled) == COUNT:
        message.finish()  # answer first: stopping the loop ends the program
        loop.call_later(0.2, loop.stop)
    return True


writer = nsq.Writer([NSQD_TCP])
reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=10)
loop.call_soon(publish_next)
loop_thread = threading.Thread(target=loop.run_forever)
loop_thread.start()
loop_thread.join()
report(ok=answers["ok"], error=answers["error"], handled=len(handled))
