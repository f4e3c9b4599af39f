"""Blocks in ``consumer.receive()`` (no timeout) and sends itself SIGINT from
a thread once the receive has reached its wait: run as a subprocess by
tests/pulsar/test_official_consumer_behaviour.py.

Deterministic: the consumer's internal queue is wrapped so that its ``get``
(called only by the blocked receive path) sets an event first; the signalling
thread waits for that event (with a timeout), then ``os.kill(own pid,
SIGINT)``. Whether the signal lands before or inside the wait, receive() must
raise. Prints one JSON line: the exception's class and which ``except``
forms catch it.
"""
import argparse
import json
import os
import signal
import threading

import pulsarfast as pulsar
import pulsarfast.consuming.consumer as consumer_module  # noqa: E402


class _Hooked:
    """The consumer's queue, with ``get`` announcing that receive() waits."""

    def __init__(self, inner, waiting):
        self._inner = inner
        self._waiting = waiting

    def get(self, *args, **kwargs):
        self._waiting.set()
        return self._inner.get(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("gevent", "threads"), required=True)
    parser.add_argument("--service-url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--to-thread", action="store_true",
                        help="deliver SIGINT to the signalling thread (pthread_kill), not to the process")
    args = parser.parse_args()
    # no periodic wake-up in receive(): an interrupt noticed only at one would leave it blocked
    consumer_module.OWED_RELEASE_SECONDS = 3600.0
    signal.signal(signal.SIGINT, signal.default_int_handler)
    client = pulsar.Client(args.service_url, backend=args.backend, operation_timeout_seconds=10)
    report = {}
    try:
        consumer = client.subscribe(args.topic, "interrupted")
        waiting = threading.Event()  # (a real OS thread's event: the program is not monkey-patched)
        consumer._queue = _Hooked(consumer._queue, waiting)

        def signal_when_waiting():
            if waiting.wait(30):
                if args.to_thread:
                    signal.pthread_kill(threading.get_ident(), signal.SIGINT)
                else:
                    os.kill(os.getpid(), signal.SIGINT)
            else:
                print(json.dumps({"error": "receive() never waited"}), flush=True)
                os._exit(2)

        threading.Thread(target=signal_when_waiting, daemon=True).start()
        try:
            consumer.receive()
            report["raised"] = None
        except BaseException as exc:  # noqa: B902 - what receive() raised, whatever it is
            report.update(raised=type(exc).__name__, message=str(exc),
                          interrupted=isinstance(exc, pulsar.Interrupted),
                          pulsar_exception=isinstance(exc, pulsar.PulsarException),
                          keyboard_interrupt=isinstance(exc, KeyboardInterrupt))
        # the consumer still works after the interrupt
        try:
            consumer.receive(50)
        except pulsar.Timeout:
            report["usable_after"] = True
    finally:
        client.close()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
