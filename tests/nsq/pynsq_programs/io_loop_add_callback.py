"""Work handed to a thread pool; the pool finishes each message with reader.io_loop.add_callback()."""
import concurrent.futures
import threading

import nsq

from common import COUNT, NSQD_TCP, TOPIC, report

pool = concurrent.futures.ThreadPoolExecutor(4)
lock = threading.Lock()
done = []


def work(message):
    with lock:  # four pool threads: exactly one of them sees the last message
        done.append(message.body)
        last = len(done) == COUNT
    reader.io_loop.add_callback(message.finish)
    if last:
        print("ALL HANDLED", flush=True)


def handler(message):
    message.enable_async()
    pool.submit(work, message)


reader = nsq.Reader(topic=TOPIC, channel="c", message_handler=handler, nsqd_tcp_addresses=[NSQD_TCP],
                    max_in_flight=25)
nsq.run()
pool.shutdown()
report(handled=len(set(done)))
