"""Where a batched consume's time goes: the broker's round trip per entry, and the client alone.

``make bench-pulsar`` measures consume end to end: a backlog of 1000-message batches drained with
``receive()`` + ``acknowledge()`` and the default receiver queue (1000). This script splits that
figure into its two parts, on one real Pulsar 4.0.7 standalone broker (the same JVM settings):

  dispatch   the broker's round trip for one entry: a bare protocol consumer (pulsarfast's sans-io
             ``PulsarProtocol`` over a plain socket, no client library around it) lifts the
             broker's permit count to 1 and times FLOW written .. the entry's MESSAGE decoded, one
             entry at a time, each acknowledged. With the broker's default dispatch (permits are
             counted in messages, and up to ``min(permits, 100)`` entries are read per dispatch),
             a queue of 1000 and entries of 1000 messages leave one entry in flight at a time, so
             no client drains such a backlog faster than 1000 messages per round trip: the
             "ceiling" row. Probed twice per run: right after the backlog is written (its entries
             in the broker's cache), and --backlog-age seconds after (when the broker's cache
             may have evicted them, as it does by age, and they come from the bookie).
  client     each client alone: a consumer with a queue large enough for the whole backlog
             (40,000 messages, under the broker's 50,000 unacknowledged per consumer) waits until
             it has all of it, then the timed loop is receive() + acknowledge() with nothing left
             to wait for: what the client costs per message, without the broker in the loop.

A warm-up pass (batched produce and consume) first lets the broker's JIT compile its paths.

Usage:
    .venv/bin/python benchmarks/pulsar_dispatch.py [--samples 200] [--runs 3] [--backlog-age 5] [--json PATH]
Prints a Markdown table; --json writes every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

from tests.support.pulsar_broker import PulsarBroker  # noqa: E402
from pulsar_quick import BROKER_JVM_ARGS, SUBSCRIPTION, fill_workload  # noqa: E402

import pulsarfast  # noqa: E402
from msgengine.correlator import Pending  # noqa: E402
from pulsarfast.wire import proto, sansio  # noqa: E402

BATCH = 1000  # messages per entry: the batching default of both clients
CLIENT_MESSAGES = 40_000
CLIENTS = ("pulsarfast-threads", "pulsarfast-gevent", "official")

CHILD = r'''
import json, os, sys, time
cfg = json.loads(sys.argv[1])
if cfg["client"] == "official":
    import pulsar
    client = pulsar.Client(cfg["url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
else:
    sys.path.insert(0, cfg["repo"])
    import pulsarfast as pulsar
    client = pulsar.Client(cfg["url"], backend=cfg["client"].split("-")[1])
consumer = client.subscribe(cfg["topic"], cfg["subscription"], consumer_type=pulsar.ConsumerType.Shared,
                            initial_position=pulsar.InitialPosition.Earliest,
                            receiver_queue_size=cfg["queue"])
first = consumer.receive(30000)  # the backlog is coming: give the client time to take all of it in
if cfg["client"] == "pulsarfast-gevent":
    import gevent
    gevent.sleep(cfg["settle"])
else:
    time.sleep(cfg["settle"])
consumer.acknowledge(first)
n = cfg["messages"] - 1
receive, acknowledge = consumer.receive, consumer.acknowledge
seen = set()
c0 = time.process_time(); t0 = time.perf_counter()
for _ in range(n):
    message = receive(30000)
    acknowledge(message)
    seen.add(message.data())
t1 = time.perf_counter(); c1 = time.process_time()
consumer.close(); client.close()
print("RESULT " + json.dumps({"rate": n / (t1 - t0), "cpu_us": 1e6 * (c1 - c0) / n, "distinct": len(seen) + 1}))
'''


def fill(service_url: str, topic: str, messages: int) -> None:
    """A backlog of messages in batches of BATCH, for the bench's subscription (made first): the
    bench's own filler (pulsar_quick.fill_workload), each batch closed at BATCH messages."""
    client = pulsarfast.Client(service_url, backend="threads")
    try:
        filled = fill_workload(pulsarfast, client,
                               {"topic_consume": topic, "fill_subscriptions": [SUBSCRIPTION], "messages": messages},
                               {"batching_enabled": True, "batching_max_messages": BATCH,
                                "batching_max_publish_delay_ms": 1000, "block_if_queue_full": True})
    finally:
        client.close()
    if filled["ok"] != messages:
        raise SystemExit("filling %s: %d of %d sends acknowledged" % (topic, filled["ok"], messages))


def warm_up(service_url: str) -> None:
    """Batched produce and consume, not measured: the broker's JIT compiles its paths."""
    for _ in range(2):
        topic = "persistent://public/default/dispatch-warm-" + uuid.uuid4().hex[:8]
        fill(service_url, topic, 200_000)
        client = pulsarfast.Client(service_url, backend="threads")
        consumer = client.subscribe(topic, SUBSCRIPTION, consumer_type=pulsarfast.ConsumerType.Shared)
        for _ in range(200_000):
            consumer.acknowledge(consumer.receive(30000))
        consumer.close()
        client.close()


class BareConsumer:
    """One consumer over sansio.PulsarProtocol on a blocking socket: nothing but the protocol."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.protocol = sansio.PulsarProtocol(proto.connect())
        self.protocol.start()
        self.events: list = []
        self._flush()
        self.wait_for(lambda event: isinstance(event, sansio.Connected))

    def _flush(self) -> None:
        data = self.protocol.data_to_send()
        if data:
            self.sock.sendall(data)

    def command(self, command: bytes) -> None:
        self.protocol.send_command(command)
        self._flush()

    def request(self, make) -> object:
        """make(request_id) -> command; returns the broker's answer (raises it if an error)."""
        request_id = self.protocol.new_request_id()
        self.protocol.send_request(request_id, make(request_id), Pending())
        self._flush()
        answer = self.wait_for(lambda event: isinstance(event, sansio.Answered)).result
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def wait_for(self, wanted) -> object:
        while True:
            for index, event in enumerate(self.events):
                if wanted(event):
                    del self.events[index]
                    return event
            data = self.sock.recv(1 << 20)
            if not data:
                raise SystemExit("the broker closed the probe's connection")
            self.events.extend(self.protocol.receive_data(data))

    def close(self) -> None:
        self.sock.close()


def _is_message(event: object) -> bool:
    return isinstance(event, sansio.MessageReceived)


def probe_dispatch(broker: PulsarBroker, samples: int, age: float = 0.0) -> dict:
    """FLOW -> MESSAGE round trips for single entries of BATCH messages, the count lifted to 1,
    starting age seconds after the backlog was written."""
    topic = "persistent://public/default/dispatch-probe-" + uuid.uuid4().hex[:8]
    fill(broker.service_url, topic, (samples + 1) * BATCH)
    time.sleep(age)
    host, port = broker.tcp_address.rsplit(":", 1)
    bare = BareConsumer(host, int(port))
    consumer_id = 1
    try:
        bare.request(lambda request_id: proto.subscribe(topic, SUBSCRIPTION, proto.SUB_SHARED, consumer_id, request_id,
                                                        initial_position=proto.POSITION_EARLIEST))
        bare.command(proto.flow(consumer_id, BATCH))  # the first entry takes the count to 0
        entry = bare.wait_for(_is_message)
        seconds = []
        lift = 1
        for _ in range(samples):
            bare.command(proto.ack(consumer_id, proto.ACK_INDIVIDUAL,
                                   [proto.message_id_data(entry.ledger_id, entry.entry_id)]))
            started = time.perf_counter()
            bare.command(proto.flow(consumer_id, lift))  # the count goes from 0 (or 1 - BATCH) to 1
            entry = bare.wait_for(_is_message)
            seconds.append(time.perf_counter() - started)
            lift = BATCH
    finally:
        bare.close()
    seconds.sort()
    p50 = statistics.median(seconds)
    return {"samples": len(seconds), "p10_ms": 1e3 * seconds[len(seconds) // 10], "p50_ms": 1e3 * p50,
            "p90_ms": 1e3 * seconds[len(seconds) * 9 // 10], "ceiling_msgs_per_s": BATCH / p50}


def client_alone(broker: PulsarBroker, client: str) -> dict:
    topic = "persistent://public/default/dispatch-client-" + uuid.uuid4().hex[:8]
    fill(broker.service_url, topic, CLIENT_MESSAGES)
    cfg = {"client": client, "url": broker.service_url, "topic": topic, "subscription": SUBSCRIPTION, "repo": REPO,
           "queue": CLIENT_MESSAGES + BATCH, "messages": CLIENT_MESSAGES, "settle": 3.0}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True,
                          timeout=180, cwd=REPO)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit("%s failed:\n%s" % (client, proc.stderr[-3000:]))
    result = json.loads(lines[-1][len("RESULT "):])
    if result["distinct"] != CLIENT_MESSAGES:
        raise SystemExit("%s received %d distinct messages of %d" % (client, result["distinct"], CLIENT_MESSAGES))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=200, help="entries timed in the dispatch probe")
    parser.add_argument("--runs", type=int, default=3, help="runs of each part (the figures are medians)")
    parser.add_argument("--backlog-age", type=float, default=5.0,
                        help="seconds between writing a backlog and the second dispatch probe")
    parser.add_argument("--json", help="where to write every figure")
    args = parser.parse_args()
    broker = PulsarBroker(jvm_args=BROKER_JVM_ARGS)
    broker.start()
    results: dict = {"dispatch": [], "dispatch_aged": [], "backlog_age_s": args.backlog_age,
                     "client": {name: [] for name in CLIENTS}}
    try:
        warm_up(broker.service_url)
        for run in range(args.runs):
            results["dispatch"].append(probe_dispatch(broker, args.samples))
            results["dispatch_aged"].append(probe_dispatch(broker, args.samples, args.backlog_age))
            for name in CLIENTS:
                results["client"][name].append(client_alone(broker, name))
            print("run %d: dispatch p50 %.2f ms, %.0f s later %.2f ms; %s" % (
                run + 1, results["dispatch"][-1]["p50_ms"], args.backlog_age, results["dispatch_aged"][-1]["p50_ms"],
                ", ".join("%s %.0f/s" % (name, runs[-1]["rate"]) for name, runs in results["client"].items())),
                file=sys.stderr, flush=True)
    finally:
        broker.stop()
    med = statistics.median
    dispatch = results["dispatch"]
    print("| part | median of %d runs |" % args.runs)
    print("|---|---:|")
    for label, probes in (("a backlog just written", dispatch),
                          ("a backlog written %.0f s before" % args.backlog_age, results["dispatch_aged"])):
        print("| broker round trip per %d-message entry, FLOW to MESSAGE, %s: p10 / p50 / p90 "
              "| %.2f / %.2f / %.2f ms |" % (BATCH, label, med([d["p10_ms"] for d in probes]),
                                             med([d["p50_ms"] for d in probes]), med([d["p90_ms"] for d in probes])))
    print("| ceiling with one entry in flight (%d / p50, backlog just written) | %s msgs/s |" % (
        BATCH, format(round(med([d["ceiling_msgs_per_s"] for d in dispatch])), ",")))
    for name, runs in results["client"].items():
        print("| %s alone, receive + acknowledge from a full queue | %s msgs/s (%.1f µs CPU/msg) |" % (
            name, format(round(med([r["rate"] for r in runs])), ","), med([r["cpu_us"] for r in runs])))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
