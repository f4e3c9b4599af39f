"""A Reader made on the main thread, its IOLoop run on another thread; the handler stops the loop
once every message is in, and the program ends."""
import threading

import tornado.ioloop

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

handled = set()
handler_threads = set()


def handler(message):
    handled.add(message.body)
    handler_threads.add(threading.current_thread().name)
    if len(handled) == COUNT:
        # answer first: stopping the loop ends the program
        message.finish()
        tornado.ioloop.IOLoop.current().call_later(0.2, tornado.ioloop.IOLoop.current().stop)
    return True


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=10)
loop_thread = threading.Thread(target=tornado.ioloop.IOLoop.current().start, name="loop")
loop_thread.start()
loop_thread.join()
report(handled=len(handled), handler_threads=sorted(handler_threads))
