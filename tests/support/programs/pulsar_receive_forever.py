"""Blocks in ``consumer.receive()`` (no timeout) until a signal ends it: run
as a subprocess by tests/pulsar/test_runtime.py.

``--backend gevent|threads|gevent-patched`` (the last: gevent after
``monkey.patch_all()``, as gevent applications run). Prints READY once the
main thread (or main greenlet) is blocked inside ``receive()``, then
CLOSING / CLOSED around ``client.close()`` in a finally block, as a program
would. With ``--sigterm-exits`` a SIGTERM handler raises ``SystemExit(3)``.
"""
import sys

if "gevent-patched" in sys.argv:
    from gevent import monkey

    monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pulsarfast as pulsar  # noqa: E402


def print_ready_when_blocked_in_receive(backend_name):
    """READY, printed only once the main flow waits inside Consumer.receive."""
    if backend_name.startswith("gevent"):
        import gevent

        # runs at the first switch to the hub: when receive() blocks (nothing between spawn and receive switches)
        gevent.spawn(lambda: print("READY", flush=True))
        return
    main = threading.main_thread().ident

    def in_receive():
        frame = sys._current_frames().get(main)
        while frame is not None:
            code = frame.f_code
            if code.co_name == "receive" and code.co_filename.endswith(os.path.join("pulsarfast", "consuming", "consumer.py")):
                return True
            frame = frame.f_back
        return False

    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if in_receive():
                print("READY", flush=True)
                return
            time.sleep(0.005)
        print("NEVER-BLOCKED-IN-RECEIVE", flush=True)

    threading.Thread(target=watch, daemon=True).start()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("gevent", "threads", "gevent-patched"), required=True)
    parser.add_argument("--service-url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--sigterm-exits", action="store_true")
    args = parser.parse_args()

    if args.sigterm_exits:
        def on_sigterm(signum, frame):
            raise SystemExit(3)

        signal.signal(signal.SIGTERM, on_sigterm)

    backend = "auto" if args.backend == "gevent-patched" else args.backend
    client = pulsar.Client(args.service_url, backend=backend, operation_timeout_seconds=10)
    if args.backend == "gevent-patched":
        assert client.backend.name == "gevent", client.backend.name
    try:
        consumer = client.subscribe(args.topic, "forever", consumer_type=pulsar.ConsumerType.Shared)
        print_ready_when_blocked_in_receive(args.backend)
        msg = consumer.receive()
        print("RECEIVED %r" % (msg.data(),), flush=True)
    finally:
        print("CLOSING", flush=True)
        client.close()
        print("CLOSED", flush=True)


if __name__ == "__main__":
    main()
