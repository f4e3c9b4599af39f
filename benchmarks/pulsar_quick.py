"""Quick Pulsar client benchmark: pulsarfast (gevent, threads) against the official and Java clients.

One real Pulsar 4.0.7 standalone broker (tests/support/pulsar_broker.py, normal JIT and G1, not the
tests' C1-only settings), then for each client, in its own subprocess, on fresh topics:

  produce   N 100-byte messages with send_async() + flush()            (timed: first send .. flush returns)
  fire      N more with send_async(body, None) + flush(): fire-and-forget, no Python callback per
            message (issue 35's row; the broker's msgInCounter is checked)
  consume   N messages from a Shared subscription (Earliest), receive() + acknowledge() one by one
            (timed: first receive .. last ack). Every client drains a backlog of the same shape,
            written just before its run by the same filler (pulsarfast threads, the client's batching
            setting with the batching defaults): the same entries, as many messages in each batch,
            as fresh in the broker's cache, for every consumer
  consume16 the same N messages spread over a 16-partition topic's backlog (filled just before the
            run the same way), one consumer on the partitioned topic, receive() + acknowledge()
  send      M messages with a blocking send() one at a time            (timed: first send .. last returns)
  ticker    (gevent only) a greenlet ticking every 100 ms while the main greenlet waits 2 s in
            receive() on an empty topic: how many times it ran (the hub was free to run it)

Clients:
  pulsarfast-gevent   pulsarfast, backend="gevent", in a process that does NOT monkey-patch
                      (like our tests run it)
  pulsarfast-threads  pulsarfast, backend="threads"
  pulsarfast-*-batching  the same with batching_enabled=True (the same defaults as the official client)
  official            pulsar-client (C++ core), batching_enabled=False (its Python default, and ours)
  official-batching   pulsar-client with batching_enabled=True (defaults: 1000 msgs / 128 KiB / 10 ms);
                      its consumer then unpacks batches. No blocking-send row: with batching each
                      send() waits for the 10 ms batch timer.
  java, java-batching the Java client 4.0.7 (the jars of .pulsar-lib), benchmarks/java/QuickBench.java
                      run by benchmarks/pulsar_java.py in a JVM of its own: the same workloads (no
                      ticker), topics, backlogs, settings and checks; batched: 1000 msgs / 128 KiB and a
                      10 ms delay, set to the Python clients' default (the Java client's own is 1 ms).
                      Timed inside the JVM, after an untimed warm-up in it (20,000 messages produced,
                      fired and consumed on a topic of its own, so the JIT has compiled the client's
                      paths); its start-up is not timed. Its CPU: the JVM's getProcessCpuTime()
                      (com.sun.management.OperatingSystemMXBean: every thread of the process), the
                      broker's and the machine's from /proc as below, read by the JVM itself.
  KEY-base            with --baseline TREE: each pulsarfast client, imported from TREE (another
                      checkout with its extensions built in place), labelled "(baseline)", run in the
                      same rounds, interleaved with this checkout's (as benchmarks/run.py --baseline).

Every producer: max_pending_messages=1000 (the default of both Python clients; the Java client's
maxPendingMessages is set to it too) and block_if_queue_full=True (without it send_async of 100k
messages fails with ProducerQueueIsFull in both Python clients).

The consume backlog is written right before each client's run (see consume above), its
subscription made first, so it holds all of it; a client's produce
phase writes to a topic of its own without subscriptions, so neither phase pays for the other.
Each client draining its own producer's backlog would not compare consumers: the official
producer, slower, closes its batches on the 10 ms timer with a third as many messages in each,
and a consumer's pace with the default receiver queue (1000) depends on the batch size.

Checks (a row prints FAIL when one does not hold): the broker's msgInCounter of the topic equals
the number produced; every send callback / send() reported Ok; the consumer got N messages with N
distinct payloads; the subscription's backlog is 0 after the consumer closed (acks reached the
broker).

CPU: the client's own utime+stime (resource.getrusage(RUSAGE_SELF) in the child: every thread,
the official client's C++ threads too) and the broker JVM's utime+stime (/proc/<pid>/stat)
across the timed part, per message. The broker's figure includes its background work (which is
most of it in the slow blocking-send phase). "other procs CPU %" is what the rest of the machine
used meanwhile (/proc/stat minus client and broker; 100 = one core): a run next to someone
else's busy processes shows up there and its figures are not to be trusted.

Blocking send(): with the harness's broker config, the bookie's journal group commit
(journalMaxGroupWaitMSec, journalFlushWhenQueueEmpty=false) makes every receipt wait about 2-3 ms,
so every client does ~340 send()/s and the row measures the broker. Run with
``--broker-config journalFlushWhenQueueEmpty=true`` (the journal flushes as soon as its queue is
empty: ~0.8 ms per send) to compare the clients' own round-trip cost.

Each figure is the median of --runs runs (runs are interleaved across clients). A warm-up pass
(not recorded: produce and consume by both libraries, batched and not) first lets the broker's JIT
compile its hot paths; its dispatch of large batched entries kept speeding up over the first few
hundred thousand messages, for every consumer. Batched passes then follow, up to six, until the
broker's JIT compiler threads used less than 5% of a core during one: after a single pass they still
used 0.1-1.3 s of CPU in a run, on a machine of two cores shared with the client. Each run records
what the JIT used during it (broker_jit_seconds).

Usage:
    .venv/bin/python benchmarks/pulsar_quick.py --quick        # 10,000 messages, 1 run
    .venv/bin/python benchmarks/pulsar_quick.py                # 100,000 messages, 5 runs
    .venv/bin/python benchmarks/pulsar_quick.py --broker-config journalFlushWhenQueueEmpty=true
    .venv/bin/python benchmarks/pulsar_quick.py --workloads consume,consume16 --clients java,official
    mkdir /tmp/base && git archive HEAD~3 | tar -x -C /tmp/base      # the code before a change, then
    (cd /tmp/base && $OLDPWD/.venv/bin/python setup.py build_ext --inplace)   # its extensions in place
    .venv/bin/python benchmarks/pulsar_quick.py --baseline /tmp/base --workloads consume16 \
        --clients pulsarfast-threads-batching,pulsarfast-threads-batching-base,official-batching
Writes benchmarks/results/pulsar_quick.json (every run; update_docs.py puts its table in
docs/benchmarks.md) and prints a Markdown table; a --baseline run or one of some --workloads writes
benchmarks/results/pulsar_quick_partial.json instead, unless --json says where.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import uuid

import pulsar_java  # (benchmarks/, this script's folder: on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_JSON = os.path.join(HERE, "results", "pulsar_quick.json")
#: where a before/after (--baseline) or part (--workloads) run goes unless told: not the docs' source
PARTIAL_JSON = os.path.join(HERE, "results", "pulsar_quick_partial.json")

CLIENTS = {
    "pulsarfast-gevent": {"lib": "pulsarfast", "backend": "gevent", "batching": False,
                          "label": "pulsarfast gevent (no monkey-patching)"},
    "pulsarfast-threads": {"lib": "pulsarfast", "backend": "threads", "batching": False,
                           "label": "pulsarfast threads"},
    "pulsarfast-gevent-batching": {"lib": "pulsarfast", "backend": "gevent", "batching": True,
                                   "label": "pulsarfast gevent, batching on"},
    "pulsarfast-threads-batching": {"lib": "pulsarfast", "backend": "threads", "batching": True,
                                    "label": "pulsarfast threads, batching on"},
    "official": {"lib": "official", "backend": None, "batching": False,
                 "label": "official 3.13 (batching off)"},
    "official-batching": {"lib": "official", "backend": None, "batching": True,
                          "label": "official 3.13 (batching on)"},
    "java": {"lib": "java", "backend": None, "batching": False,
             "label": "Java client 4.0.7 (batching off)"},
    "java-batching": {"lib": "java", "backend": None, "batching": True,
                      "label": "Java client 4.0.7 (batching on, 10 ms delay)"},
}
#: --baseline TREE adds each pulsarfast client of CLIENTS run from TREE, keyed with this suffix
BASELINE_SUFFIX = "-base"
WORKLOADS = ("produce", "fire", "consume", "consume16", "send", "ticker")
#: the partitions of the consume16 workload's topic
PARTITIONS = 16
#: the clients whose process runs the gevent ticker workload (a gevent program's view of the client)
TICKER_CLIENTS = ("pulsarfast-gevent", "official")
TICK_SECONDS = 0.1
TICKER_RECEIVE_MS = 2000
#: (what, workload, our clients, the official client's row, the ratio to reach)
TARGETS = (
    ("produce, batching, send_async + flush", "produce",
     ("pulsarfast-gevent-batching", "pulsarfast-threads-batching"), "official-batching", 1.0),
    ("consume, receive + acknowledge (batched backlog)", "consume",
     ("pulsarfast-gevent-batching", "pulsarfast-threads-batching"), "official-batching", 1.5),
    # issue 49: the one-partition consume's lead over the official client shrank on 16 partitions
    # (batched backlog, as the issue's figures were)
    ("consume, 16-partition topic, receive + acknowledge (batched backlog)", "consume16",
     ("pulsarfast-gevent-batching", "pulsarfast-threads-batching"), "official-batching", 1.5),
    ("unbatched consume, receive + acknowledge", "consume", ("pulsarfast-gevent",), "official", 1.2),
    # issue 35: fire-and-forget produce, batching on and off
    ("fire-and-forget produce (send_async without a callback), batching on", "fire",
     ("pulsarfast-gevent-batching", "pulsarfast-threads-batching"), "official-batching", 1.5),
    ("fire-and-forget produce (send_async without a callback), batching off", "fire",
     ("pulsarfast-gevent", "pulsarfast-threads"), "official", 1.5),
)
PAYLOAD_SIZE = 100
SUBSCRIPTION = "bench"

#: the JVM's JIT compiler threads, by the name Linux shows for them (cut to 15 characters)
JIT_THREAD_NAMES = (b"C1 CompilerThre", b"C2 CompilerThre")
#: the warm-up goes on, a pass at a time, until the JIT used less than this share of a pass's time
JIT_QUIET_SHARE = 0.05
JIT_QUIET_MAX_PASSES = 6

# Pulsar's own default heap is 2g; G1 and the tiered C2 JIT are the JVM's defaults.
BROKER_JVM_ARGS = ("-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC", "-XX:-UsePerfData")


# --------------------------------------------------------------------------- shared helpers

def _stat_cpu_ticks(stat: bytes) -> int:
    """utime+stime in clock ticks, from a /proc/.../stat line (after the command name: field 3 is
    the state, utime field 14, stime field 15)."""
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def proc_cpu_seconds(pid: int) -> float:
    """utime+stime of a process (all its threads) from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return _stat_cpu_ticks(f.read()) / os.sysconf("SC_CLK_TCK")


def jit_cpu_seconds(pid: int) -> float:
    """CPU seconds the JVM's JIT compiler threads (C1 and C2) have used, from /proc/<pid>/task."""
    ticks = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as f:
                data = f.read()
        except OSError:  # (a thread that ended meanwhile)
            continue
        if data[data.index(b"(") + 1:data.rindex(b")")].startswith(JIT_THREAD_NAMES):
            ticks += _stat_cpu_ticks(data)
    return ticks / os.sysconf("SC_CLK_TCK")


def system_busy_seconds() -> float:
    """CPU seconds every process on the machine has used (the cpu line of /proc/stat, without idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def tests_on_path() -> None:
    """tests.support importable (the broker harness), once."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)


def storage_entries_read(web_url: str) -> float:
    """The broker's count of entries read from storage for dispatch, from its /metrics/."""
    tests_on_path()
    from tests.support.pulsar_broker import STORAGE_ENTRIES_READ, metric_total
    return metric_total(web_url, STORAGE_ENTRIES_READ)


def self_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def payloads(count: int, tag: bytes) -> list:
    """count distinct 100-byte bodies."""
    out = []
    for i in range(count):
        head = b"%s-%010d-" % (tag, i)
        out.append(head + b"x" * (PAYLOAD_SIZE - len(head)))
    return out


# --------------------------------------------------------------------------- child: one client

class Meter:
    """Times one workload; with profile_workload set, also runs cProfile over that workload's
    timed part (the figures of such a run are not recorded, only where the time went)."""

    def __init__(self, broker_pid: int, profile_workload: str | None = None):
        self.broker_pid = broker_pid
        self.profile_workload = profile_workload
        self.profiler = None
        self.profile_text = None

    def start(self, workload: str | None = None) -> None:
        if workload is not None and workload == self.profile_workload:
            import cProfile
            self.profiler = cProfile.Profile()
            self.profiler.enable()
        self.s0 = system_busy_seconds()
        self.b0 = proc_cpu_seconds(self.broker_pid)
        self.c0 = self_cpu_seconds()
        self.t0 = time.perf_counter()

    def stop(self, count: int) -> dict:
        if self.profiler is not None:
            import io
            import pstats
            self.profiler.disable()
            text = io.StringIO()
            pstats.Stats(self.profiler, stream=text).sort_stats("tottime").print_stats(18)
            self.profile_text = text.getvalue()
            self.profiler = None
        t1 = time.perf_counter()
        c1 = self_cpu_seconds()
        b1 = proc_cpu_seconds(self.broker_pid)
        s1 = system_busy_seconds()
        seconds = t1 - self.t0
        # what the rest of the machine used meanwhile (other people's processes): a noisy run shows here
        other = max(0.0, (s1 - self.s0) - (c1 - self.c0) - (b1 - self.b0))
        return {
            "count": count,
            "seconds": seconds,
            "rate": count / seconds if seconds > 0 else None,
            "client_cpu_s": c1 - self.c0,
            "broker_cpu_s": b1 - self.b0,
            "client_cpu_us_per_msg": (c1 - self.c0) * 1e6 / count,
            "broker_cpu_us_per_msg": (b1 - self.b0) * 1e6 / count,
            "other_cpu_s": other,
            "other_cpu_pct": 100.0 * other / seconds if seconds > 0 else None,  # 100 = one whole core
        }


def child_main(cfg: dict) -> dict:
    lib = cfg["lib"]
    if lib == "pulsarfast":
        tree = cfg.get("tree") or REPO  # (--baseline: another checkout's pulsarfast, ahead of ours)
        sys.path.insert(0, tree)
        import pulsarfast as pulsar
        if not os.path.abspath(pulsar.__file__).startswith(os.path.join(os.path.abspath(tree), "")):
            raise RuntimeError(f"pulsarfast came from {pulsar.__file__}, not from {tree}")
        client = pulsar.Client(cfg["service_url"], backend=cfg["backend"])
        if cfg["backend"] == "gevent":
            monkey = sys.modules.get("gevent.monkey")
            if monkey is not None and monkey.is_anything_patched():
                raise RuntimeError("this process must not be monkey-patched")
    else:
        import pulsar
        client = pulsar.Client(cfg["service_url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    out: dict = {"lib_file": pulsar.__file__, "workloads": {}}
    if lib == "pulsarfast":
        from pulsarfast.wire import codec
        out["wire_codec"] = codec.IMPLEMENTATION
    meter = Meter(cfg["broker_pid"], cfg.get("profile"))
    n = cfg["messages"]
    ok = pulsar.Result.Ok
    producer_args = dict(block_if_queue_full=True, max_pending_messages=1000,
                         batching_enabled=cfg["batching"])
    workloads = cfg["workloads"]
    try:
        if "fill" in workloads:
            out["workloads"]["fill"] = fill_workload(pulsar, client, cfg, producer_args)

        bodies = payloads(n, b"p")  # (what produce sends; the filler writes the same into the consume backlogs)
        if "produce" in workloads:
            topic = cfg["topic_produce"]
            if "consume" in workloads and "topic_consume" not in cfg:
                # (a warm-up or profile run consuming its own produce) the subscription exists before
                # producing, so it holds every message as backlog
                consumer = client.subscribe(topic, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared,
                                            initial_position=pulsar.InitialPosition.Earliest)
                consumer.close()

            done = {"ok": 0, "err": 0, "first_error": None}

            def callback(res, _msg_id):
                if res == ok:
                    done["ok"] += 1
                else:
                    done["err"] += 1
                    if done["first_error"] is None:
                        done["first_error"] = str(res)

            producer = client.create_producer(topic, **producer_args)
            send_async = producer.send_async
            meter.start("produce")
            for body in bodies:
                send_async(body, callback)
            producer.flush()
            result = meter.stop(n)
            deadline = time.monotonic() + 10
            while done["ok"] + done["err"] < n and time.monotonic() < deadline:
                time.sleep(0.01)  # the last callbacks may still be on their way (not timed)
            result.update(callbacks_ok=done["ok"], callbacks_err=done["err"], first_error=done["first_error"])
            producer.close()
            out["workloads"]["produce"] = result

        if "consume" in workloads:
            out["workloads"]["consume"] = consume_workload(
                pulsar, client, cfg, cfg.get("topic_consume", cfg["topic_produce"]), bodies, meter, "consume")
        if "consume16" in workloads:
            out["workloads"]["consume16"] = consume_workload(
                pulsar, client, cfg, cfg["topic_consume16"], bodies, meter, "consume16")

        if "fire" in workloads:  # fire-and-forget: no callback, nothing per message in Python
            fire_bodies = payloads(n, b"f")
            producer = client.create_producer(cfg["topic_fire"], **producer_args)
            send_async = producer.send_async
            meter.start("fire")
            for body in fire_bodies:
                send_async(body, None)
            producer.flush()
            out["workloads"]["fire"] = meter.stop(n)
            producer.close()

        if "ticker" in workloads:
            out["workloads"]["ticker"] = ticker_workload(pulsar, client, cfg["topic_ticker"])

        if "send" in workloads:
            m = cfg["send_messages"]
            send_bodies = payloads(m, b"s")
            producer = client.create_producer(cfg["topic_send"], **producer_args)
            send = producer.send
            error = None
            sent = 0
            meter.start()
            try:
                for body in send_bodies:
                    send(body)
                    sent += 1
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            result = meter.stop(max(sent, 1))
            result.update(sent_ok=sent, error=error)
            producer.close()
            out["workloads"]["send"] = result
    finally:
        client.close()
    if meter.profile_text is not None:
        out["profile"] = meter.profile_text
    return out


def consume_workload(pulsar, client, cfg: dict, topic: str, bodies: list, meter: Meter, workload: str) -> dict:
    """receive() + acknowledge() one by one, N messages from the topic's backlog (timed: first receive ..
    last ack); every payload kept and checked after."""
    n = cfg["messages"]
    consumer = client.subscribe(topic, cfg.get("consume_subscription", SUBSCRIPTION),
                                consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=cfg.get("receiver_queue_size", 1000))
    receive = consumer.receive
    acknowledge = consumer.acknowledge
    seen: set = set()
    add = seen.add
    got = 0
    error = None
    reads_before = storage_entries_read(cfg["web_url"])
    meter.start(workload)
    try:
        for _ in range(n):
            msg = receive(30000)
            add(msg.data())
            acknowledge(msg)
            got += 1
    except Exception as exc:  # a Timeout: fewer messages than produced
        error = f"{type(exc).__name__}: {exc}"
    result = meter.stop(max(got, 1))
    result.update(received=got, distinct=len(seen), unexpected=len(seen - set(bodies)), error=error,
                  broker_entries_read=storage_entries_read(cfg["web_url"]) - reads_before)
    consumer.close()  # (the official client sends its grouped acks here)
    return result


def fill_workload(pulsar, client, cfg: dict, producer_args: dict) -> dict:
    """The backlogs every client of a run drains: on each topic of cfg["fill_topics"] (default: the
    one of topic_consume; a partitioned topic too), one subscription per client, then N messages."""
    done = {"ok": 0, "err": 0}

    def callback(res, _msg_id):
        done["ok" if res == pulsar.Result.Ok else "err"] += 1

    topics = cfg.get("fill_topics") or [cfg["topic_consume"]]
    for topic in topics:
        for name in cfg["fill_subscriptions"]:
            client.subscribe(topic, name, consumer_type=pulsar.ConsumerType.Shared,
                             initial_position=pulsar.InitialPosition.Earliest).close()
        producer = client.create_producer(topic, **producer_args)
        for body in payloads(cfg["messages"], b"p"):
            producer.send_async(body, callback)
        producer.flush()
        producer.close()
    return {"ok": done["ok"], "err": done["err"], "count": cfg["messages"] * len(topics), "seconds": None,
            "rate": None, "client_cpu_us_per_msg": None, "broker_cpu_us_per_msg": None, "other_cpu_pct": None,
            "checks": []}


def ticker_workload(pulsar, client, topic: str) -> dict:
    """A 100 ms ticker greenlet beside a 2 s receive() on an empty topic: its ticks."""
    import gevent

    ticks = [0]

    def ticker():
        while True:
            gevent.sleep(TICK_SECONDS)
            ticks[0] += 1

    consumer = client.subscribe(topic, SUBSCRIPTION)
    greenlet = gevent.spawn(ticker)
    gevent.sleep(0)  # (the ticker starts)
    began = time.perf_counter()
    error = None
    try:
        consumer.receive(TICKER_RECEIVE_MS)
        error = "a message arrived on an empty topic"
    except pulsar.Timeout:
        pass
    waited = time.perf_counter() - began
    counted = ticks[0]
    greenlet.kill()
    consumer.close()
    return {"ticks": counted, "waited_s": waited, "count": 1, "seconds": waited, "rate": None,
            "client_cpu_us_per_msg": None, "broker_cpu_us_per_msg": None, "other_cpu_pct": None,
            "error": error}


# --------------------------------------------------------------------------- parent

def run_child(cfg: dict, timeout: float, script: str = __file__) -> dict:
    """``script --child <cfg>`` in a subprocess: the dict its last ``RESULT`` line holds, or one
    with ``error`` (and the output's tails). The other Pulsar benchmarks run their children here too."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, os.path.abspath(script), "--child", json.dumps(cfg)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:  # subprocess.run killed the child (ours)
        tail = (exc.stderr or b"")[-2000:]
        if isinstance(tail, bytes):
            tail = tail.decode("utf-8", "replace")
        return {"error": f"timed out after {timeout:.0f}s", "stderr_tail": tail}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit code {proc.returncode}", "stderr_tail": proc.stderr[-3000:],
                "stdout_tail": proc.stdout[-1000:]}
    result = json.loads(lines[-1][len("RESULT "):])
    if proc.stderr.strip():
        result["stderr_tail"] = proc.stderr[-1500:]
    return result


def subscription_backlog(broker, topic: str, subscription: str, partitioned: bool) -> int:
    if partitioned:  # (the partitions' stats summed by the broker)
        return broker.partitioned_stats(topic, per_partition=False)["subscriptions"][subscription]["msgBacklog"]
    return broker.topic_stats(topic)["subscriptions"][subscription]["msgBacklog"]


def wait_backlog_zero(broker, topic: str, subscription: str = SUBSCRIPTION, seconds: float = 10.0,
                      partitioned: bool = False):
    deadline = time.monotonic() + seconds
    while True:
        backlog = subscription_backlog(broker, topic, subscription, partitioned)
        if backlog == 0 or time.monotonic() >= deadline:
            return backlog
        time.sleep(0.2)


def topic_entries(broker, topic: str, partitions: int) -> int:
    """Entries written to the topic's ledgers (of every partition)."""
    names = [f"{topic}-partition-{i}" for i in range(partitions)] if partitions else [topic]
    return sum(broker.admin("GET", broker.topic_path(name) + "/internalStats")["numberOfEntries"] for name in names)


def check_run(broker, cfg: dict, result: dict) -> None:
    """Adds a "checks" list of failure reasons (empty: all good) to each workload of the run."""
    w = result.get("workloads", {})
    n = cfg["messages"]
    if "produce" in w:
        fails = []
        r = w["produce"]
        count = broker.topic_stats(cfg["topic_produce"])["msgInCounter"]
        r["broker_msgInCounter"] = count
        if count != n:
            fails.append(f"broker msgInCounter {count} != {n}")
        if r["callbacks_ok"] != n:
            fails.append(f"{r['callbacks_ok']} Ok callbacks of {n} ({r['callbacks_err']} errors, "
                         f"first {r['first_error']})")
        r["checks"] = fails
    if "fire" in w:
        count = broker.topic_stats(cfg["topic_fire"])["msgInCounter"]
        w["fire"]["broker_msgInCounter"] = count
        w["fire"]["checks"] = [] if count == n else [f"fire-and-forget: broker msgInCounter {count} != {n}"]
    for workload, partitions in (("consume", 0), ("consume16", PARTITIONS)):
        if workload not in w:
            continue
        fails = []
        r = w[workload]
        if r["error"]:
            fails.append(r["error"])
        if r["received"] != n or r["distinct"] != n or r["unexpected"]:
            fails.append(f"received {r['received']}, {r['distinct']} distinct payloads "
                         f"({r['unexpected']} not produced), expected {n}")
        topic = cfg["topic_consume16"] if partitions else cfg.get("topic_consume", cfg["topic_produce"])
        entries = topic_entries(broker, topic, partitions)
        r["topic_entries"] = entries
        if r.get("broker_entries_read") is not None and entries:
            r["storage_reads_per_entry"] = r["broker_entries_read"] / entries
        backlog = wait_backlog_zero(broker, topic, cfg.get("consume_subscription", SUBSCRIPTION),
                                    partitioned=bool(partitions))
        r["backlog_after"] = backlog
        if backlog != 0:
            fails.append(f"subscription backlog {backlog} after the consumer closed")
        r["checks"] = fails
    if "ticker" in w:
        r = w["ticker"]
        r["checks"] = [r["error"]] if r["error"] else []
    if "send" in w:
        fails = []
        r = w["send"]
        m = cfg["send_messages"]
        count = broker.topic_stats(cfg["topic_send"])["msgInCounter"]
        r["broker_msgInCounter"] = count
        if r["error"]:
            fails.append(r["error"])
        if count != m or r["sent_ok"] != m:
            fails.append(f"broker msgInCounter {count}, send() ok {r['sent_ok']}, expected {m}")
        r["checks"] = fails
    if cfg["lib"] == "pulsarfast" and result.get("wire_codec") != "cython":  # (a baseline tree not built)
        for r in w.values():
            r.setdefault("checks", []).append(f"pulsarfast's wire codec is {result.get('wire_codec')}, not cython")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def summarize(runs: list, clients: list) -> list:
    rows = []
    for name in clients:
        for workload in WORKLOADS:
            results = [r["result"]["workloads"][workload] for r in runs
                       if r["client"] == name and workload in r["result"].get("workloads", {})]
            errors = [r["result"]["error"] for r in runs
                      if r["client"] == name and "error" in r["result"] and workload in r["workloads"]]
            if not results and not errors:
                continue
            fails = sorted({c for res in results for c in res.get("checks", [])} | set(errors))
            rows.append({
                "client": name,
                "label": CLIENTS[name]["label"],
                "workload": workload,
                "count": results[0]["count"] if results else None,
                "runs": len(results),
                "rates": [res["rate"] for res in results],
                "rate": median([res["rate"] for res in results]),
                "client_cpu_us_per_msg": median([res["client_cpu_us_per_msg"] for res in results]),
                "broker_cpu_us_per_msg": median([res["broker_cpu_us_per_msg"] for res in results]),
                "other_cpu_pct": median([res.get("other_cpu_pct") for res in results]),
                "ticks": median([res.get("ticks") for res in results]),
                "storage_reads_per_entry": median([res.get("storage_reads_per_entry") for res in results]),
                "ok": not fails,
                "failures": fails,
            })
    return rows


def _row(rows: list, client: str, workload: str) -> dict | None:
    for row in rows:
        if row["client"] == client and row["workload"] == workload:
            return row
    return None


def targets(rows: list) -> list:
    """The issue's targets: each of our clients' median rate over the official client's, same run."""
    out = []
    for what, workload, ours, official, goal in TARGETS:
        reference = _row(rows, official, workload)
        for client in ours + tuple(name + BASELINE_SUFFIX for name in ours):  # (--baseline's rows too)
            row = _row(rows, client, workload)
            if row is None or reference is None:
                continue
            ratio = row["rate"] / reference["rate"] if row["rate"] and reference["rate"] else None
            out.append({"what": what, "client": client, "label": row["label"], "official": reference["label"],
                        "ratio": ratio, "goal": goal, "checks_ok": row["ok"] and reference["ok"],
                        "pass": ratio is not None and ratio >= goal and row["ok"] and reference["ok"]})
    return out


#: the main table's columns (those the run has), their headings and short names in its runs column
TABLE_WORKLOADS = ("produce", "fire", "consume", "consume16", "send")
HEADINGS = {"produce": "produce msgs/s (client / broker CPU µs per msg)",
            "fire": "fire-and-forget produce msgs/s (client / broker)",
            "consume": "consume msgs/s (client / broker)",
            "consume16": f"consume, {PARTITIONS}-partition topic msgs/s (client / broker)",
            "send": "blocking send msgs/s"}
RATIO_HEADINGS = {"produce": "produce", "fire": "fire-and-forget", "consume": "consume",
                  "consume16": f"consume, {PARTITIONS} partitions", "send": "blocking send"}
SHORT = {"produce": "prod", "fire": "fire", "consume": "cons", "consume16": "c16", "send": "send"}


def table_workloads(rows: list) -> list:
    """The main table's workloads this run measured (a --workloads run shows only its own)."""
    return [w for w in TABLE_WORKLOADS if any(row["workload"] == w for row in rows)]


def java_ratios(rows: list, clients: list) -> list:
    """Lines of a table: each pulsarfast client's median rate over the Java client's with the same
    batching setting, per workload (nothing when the Java rows are not in the run)."""
    lines = []
    columns = table_workloads(rows)
    for name in clients:
        spec = CLIENTS[name]
        if spec["lib"] != "pulsarfast":
            continue
        java = "java-batching" if spec["batching"] else "java"
        cells = []
        for workload in columns:
            ours, theirs = _row(rows, name, workload), _row(rows, java, workload)
            ratio = ours["rate"] / theirs["rate"] if ours and theirs and ours["rate"] and theirs["rate"] else None
            cells.append(fmt(ratio, ".2f") + "×" if ratio is not None else "")
        if any(cells):
            lines.append(f"| {spec['label']} | {CLIENTS[java]['label']} | " + " | ".join(cells) + " |")
    if not lines:
        return []
    return ["", "pulsarfast over the Java client (its median rate over the Java client's, the same batching "
            "setting, same run)", "",
            "| client | Java row | " + " | ".join(RATIO_HEADINGS[w] for w in columns) + " |",
            "|---|---|" + "---:|" * len(columns)] + lines


def markdown(rows: list, meta: dict) -> str:
    config = ", ".join(f"{k}={v}" for k, v in meta["broker_config"].items()) or "tests/support/pulsar_broker.py defaults"
    columns = table_workloads(rows)
    lines = [
        f"Pulsar {meta['pulsar_version']} standalone (JVM: {' '.join(meta['broker_jvm_args'])}), "
        f"{meta['messages']:,} × {PAYLOAD_SIZE} B messages (blocking send: {meta['send_messages']:,}), "
        f"median of {meta['runs']} run(s), each client in its own process, receiver_queue_size "
        f"{meta.get('receiver_queue_size', 1000)}; {meta['cpus']} CPUs, load average "
        f"{meta['loadavg_before']} before and {meta.get('loadavg_after', '?')} after; broker config: {config}; "
        f"the broker's JIT in the last warm-up pass: "
        f"{100 * meta['warmup_jit_share'][-1] if meta.get('warmup_jit_share') else float('nan'):.0f}% of a core; "
        f"{meta['started']}.",
        "",
        "| client | " + " | ".join(HEADINGS[w] for w in columns) + " | runs | check |",
        "|---|" + "---:|" * len(columns) + "---|---|",
    ]
    for name in meta["clients"]:
        cells = []
        label = CLIENTS[name]["label"]
        runs = []
        fails = []
        for workload in columns:
            row = _row(rows, name, workload)
            if row is None:
                cells.append("")
                continue
            runs.append(f"{SHORT[workload]} " + "/".join(f"{r / 1000:,.0f}k" for r in row["rates"] if r))
            fails += row["failures"]
            if workload == "send":
                cells.append(fmt(row["rate"], ",.0f"))
            else:
                cells.append(f"{fmt(row['rate'], ',.0f')} ({fmt(row['client_cpu_us_per_msg'], '.1f')} / "
                             f"{fmt(row['broker_cpu_us_per_msg'], '.1f')})")
        check = "ok" if not fails else "FAIL: " + "; ".join(sorted(set(fails)))
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {'; '.join(runs)} | {check} |")
    lines += java_ratios(rows, meta["clients"])
    ticker = [(_row(rows, name, "ticker"), name) for name in TICKER_CLIENTS if name in meta["clients"]]
    ticker = [(row, name) for row, name in ticker if row is not None]
    if ticker:
        lines += ["", f"Under gevent: ticks of a {int(TICK_SECONDS * 1000)} ms ticker greenlet during a "
                  f"{TICKER_RECEIVE_MS / 1000:g} s `receive()` on an empty topic (the hub free meanwhile: about "
                  f"{TICKER_RECEIVE_MS / 1000 / TICK_SECONDS:.0f})", "",
                  "| client | ticks |", "|---|---:|"]
        for row, name in ticker:
            lines.append(f"| {CLIENTS[name]['label']} | {fmt(row['ticks'], '.0f')} |")
    reads = [(row, name) for name in meta["clients"] if CLIENTS[name]["batching"]
             for row in [_row(rows, name, "consume")] if row is not None and row["storage_reads_per_entry"] is not None]
    if reads:
        tests_on_path()
        from tests.support.pulsar_broker import STORAGE_ENTRIES_READ
        lines += ["", "Batched consume: entries the broker read from storage per entry of the backlog "
                  f"(its `{STORAGE_ENTRIES_READ}`; 1: each read once)", "",
                  "| client | entries read per entry sent |", "|---|---:|"]
        for row, name in reads:
            lines.append(f"| {CLIENTS[name]['label']} | {row['storage_reads_per_entry']:.2f} |")
    found = targets(rows)
    if found:
        lines += ["", "| target | client | measured | result |", "|---|---|---:|---|"]
        for t in found:
            result = "PASS" if t["pass"] else ("**FAIL** (counts)" if not t["checks_ok"] else "**FAIL**")
            lines.append(f"| {t['what']} ≥ {t['goal']:g}× official | {t['label']} | "
                         f"{fmt(t['ratio'], '.2f')}× | {result} |")
    lines += ["", "Produce: `send_async(body, callback)` with a callback counting the outcomes, then `flush()`; "
              "fire-and-forget produce: `send_async(body, None)`, then `flush()` (a program that only needs "
              "`flush()` to tell it everything landed). The Java client: `sendAsync(body)` with a "
              "`whenComplete` callback, or its future ignored, then `flush()`; its batching delay set to 10 ms "
              "(the Python clients' default; Java's own is 1 ms).",
              "", f"Consume, {PARTITIONS}-partition topic: the same N messages spread over a {PARTITIONS}-partition "
              "topic's backlog (written just before, like the one-partition backlog), one consumer on the "
              "partitioned topic, `receive()` + `acknowledge()`.",
              "", "CPU: utime+stime of the client process (all its threads) and of the broker JVM over the timed "
              "part, per message (the Java client: its JVM's process CPU time, getProcessCpuTime, after an "
              "untimed warm-up in the same JVM). Counts checked in every run: the broker's msgInCounter, every "
              "callback Ok, every payload received once, the subscription's backlog 0 after the consumer closed."]
    return "\n".join(lines)


def baseline_clients(tree: str) -> dict:
    """Each pulsarfast client of CLIENTS, run from another checkout (--baseline TREE: a tree with its
    extensions built in place), keyed KEY-base: the code before a change, in the same runs."""
    return {name + BASELINE_SUFFIX: dict(spec, label=spec["label"] + " (baseline)", tree=tree)
            for name, spec in CLIENTS.items() if spec["lib"] == "pulsarfast"}


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages produced and consumed")
    parser.add_argument("--send-messages", type=int, default=10_000, help="messages of the blocking send() run")
    parser.add_argument("--runs", type=int, default=5, help="runs per client (the figures are medians)")
    parser.add_argument("--quick", action="store_true", help="10,000 messages, 1 run")
    parser.add_argument("--clients", default=None,
                        help="comma-separated (default: all, and with --baseline the baseline's too): "
                             + ", ".join(CLIENTS) + "; with --baseline also each pulsarfast one + " + BASELINE_SUFFIX)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, the ones to run: " + ", ".join(WORKLOADS))
    parser.add_argument("--baseline", default="", metavar="TREE",
                        help="another checkout (its extensions built in place) whose pulsarfast clients run beside "
                             "this one's, keyed KEY" + BASELINE_SUFFIX + ", interleaved in the same runs")
    parser.add_argument("--no-warmup", action="store_true", help="skip the broker warm-up pass")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="extra broker.conf entry (repeatable), e.g. journalFlushWhenQueueEmpty=true")
    parser.add_argument("--json", default=None,
                        help=f"where to write the results (default {os.path.relpath(DEFAULT_JSON, REPO)}, the "
                             "documentation's source; a run with --baseline or a --workloads subset: "
                             f"{os.path.relpath(PARTIAL_JSON, REPO)})")
    parser.add_argument("--receiver-queue-size", type=int, default=1000,
                        help="the consumers' receiver_queue_size (1000: both clients' default)")
    parser.add_argument("--no-profile-misses", dest="profile_misses", action="store_false",
                        help="do not profile the clients that miss a target")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        result = child_main(json.loads(args.child))
        sys.stdout.write("RESULT " + json.dumps(result) + "\n")
        sys.stdout.flush()
        return 0

    if args.quick:
        args.messages, args.runs = 10_000, 1
    args.send_messages = min(args.send_messages, args.messages)
    if args.baseline:
        tree = os.path.abspath(args.baseline)
        if not os.path.isdir(os.path.join(tree, "pulsarfast")):
            parser.error(f"--baseline {args.baseline}: no pulsarfast package there")
        CLIENTS.update(baseline_clients(tree))
    if args.clients is None:
        clients = list(CLIENTS)
    else:
        clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for c in clients:
        if c not in CLIENTS:
            parser.error(f"unknown client {c!r}" + (" (the -base clients need --baseline)"
                                                     if c.endswith(BASELINE_SUFFIX) else ""))
    selected = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in selected:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}")
    if args.json is None:
        args.json = PARTIAL_JSON if args.baseline or set(selected) != set(WORKLOADS) else DEFAULT_JSON

    broker_config = {}
    for item in args.broker_config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--broker-config wants KEY=VALUE, not {item!r}")
        broker_config[key.strip()] = value.strip()

    sys.dont_write_bytecode = True  # importing the test helpers must not write into tests/
    tests_on_path()
    from tests.support.pulsar_broker import PULSAR_VERSION, PulsarBroker

    began = time.monotonic()
    meta = {
        "pulsar_version": PULSAR_VERSION,
        "messages": args.messages,
        "send_messages": args.send_messages,
        "payload_bytes": PAYLOAD_SIZE,
        "runs": args.runs,
        "clients": clients,
        "workloads": selected,
        "baseline": os.path.abspath(args.baseline) if args.baseline else None,
        "partitions": PARTITIONS,
        "java": {"jvm_args": list(pulsar_java.JVM_ARGS), "warmup_messages": pulsar_java.WARMUP_MESSAGES},
        "broker_jvm_args": list(BROKER_JVM_ARGS),
        "broker_config": broker_config,
        "receiver_queue_size": args.receiver_queue_size,
        "python": sys.version.split()[0],
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_before": loadavg(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "notes": [
            "pulsarfast gevent runs use backend='gevent' in a process that does not monkey-patch",
            "producers: max_pending_messages=1000, block_if_queue_full=True",
            "official-batching: batching_enabled=True (1000 msgs / 128 KiB / 10 ms); no blocking send row",
            "consume: every client drains a backlog written just before by the same filler (pulsarfast "
            "threads, the client's batching setting)",
            f"consume16: the same on a {PARTITIONS}-partition topic, one consumer on the partitioned topic",
            "java: the Java client 4.0.7 (.pulsar-lib), benchmarks/java/QuickBench.java, the same settings, "
            "batching delay 10 ms (the Python clients' default; Java's is 1 ms); timed in its JVM after an "
            "untimed warm-up; CPU: getProcessCpuTime",
        ],
    }
    broker = PulsarBroker(config=broker_config, jvm_args=BROKER_JVM_ARGS)
    print(f"starting Pulsar {PULSAR_VERSION} standalone ...", flush=True)
    broker.start()
    print(f"broker {broker.service_url} pid {broker.pid} ready in {broker.start_seconds:.1f}s", flush=True)
    meta["broker_start_seconds"] = broker.start_seconds
    timeout = 120 + args.messages * 0.004 + args.send_messages * 0.01
    runs = []
    try:
        def config(name: str, tag: str, workloads) -> dict:
            spec = CLIENTS[name]
            uid = uuid.uuid4().hex[:8]
            return {
                "lib": spec["lib"], "backend": spec["backend"], "batching": spec["batching"],
                "service_url": broker.service_url, "web_url": broker.web_url, "broker_pid": broker.pid,
                "messages": args.messages, "send_messages": args.send_messages,
                "topic_produce": f"pq-{name}-{tag}-{uid}-p", "topic_send": f"pq-{name}-{tag}-{uid}-s",
                "topic_ticker": f"pq-{name}-{tag}-{uid}-t", "topic_fire": f"pq-{name}-{tag}-{uid}-f",
                "workloads": list(workloads), "receiver_queue_size": args.receiver_queue_size,
                "tree": spec.get("tree"),
            }

        def fill_backlogs(cfg: dict, tag: str) -> None:
            """The backlogs the client of cfg drains (consume, consume16), written just before its run
            by the same filler for every client: the same entries, batched the same way, as fresh in the
            broker's cache."""
            topics = []
            if "consume" in cfg["workloads"]:
                cfg["topic_consume"] = f"{cfg['topic_produce'][:-2]}-c"
                topics.append(cfg["topic_consume"])
            if "consume16" in cfg["workloads"]:
                cfg["topic_consume16"] = f"{cfg['topic_produce'][:-2]}-c{PARTITIONS}"
                broker.create_partitioned_topic(cfg["topic_consume16"], PARTITIONS)
                topics.append(cfg["topic_consume16"])
            if not topics:
                return
            filler = "pulsarfast-threads-batching" if cfg["batching"] else "pulsarfast-threads"
            fill = config(filler, tag, ("fill",))
            fill["fill_topics"] = topics
            fill["fill_subscriptions"] = [SUBSCRIPTION]
            filled = run_child(fill, timeout).get("workloads", {}).get("fill", {})
            if filled.get("ok") != args.messages * len(topics):
                raise SystemExit(f"filling {', '.join(topics)} failed: {filled}")

        def run_client(cfg: dict) -> dict:
            if cfg["lib"] == "java":
                from tests.support.pulsar_broker import STORAGE_ENTRIES_READ
                if "consume16" in cfg["workloads"]:  # (its JVM warms up a partitioned consumer too)
                    cfg["topic_warmup16"] = f"{cfg['topic_produce'][:-2]}-w{PARTITIONS}"
                    broker.create_partitioned_topic(cfg["topic_warmup16"], PARTITIONS)
                return pulsar_java.run_java_child(cfg, timeout + 60, STORAGE_ENTRIES_READ)
            return run_child(cfg, timeout)

        if not args.no_warmup:
            # both clients, batched and not: the broker's JIT warms up its dispatch of large entries
            # over the first few hundred thousand batched messages, whoever consumes them
            for name in ("pulsarfast-threads", "official", "pulsarfast-threads-batching", "official-batching"):
                if name not in CLIENTS:
                    continue
                t = time.monotonic()
                cfg = config(name, "warmup", ("produce", "consume"))  # send() hardly loads the broker
                result = run_child(cfg, timeout)
                print(f"warm-up {name}: {time.monotonic() - t:.1f}s"
                      + (f" ERROR {result['error']}: {result.get('stderr_tail', '')[-500:]}"
                         if "error" in result else ""), flush=True)
            # then batched passes until the JIT is quiet: its compiler threads share the two cores
            # with both clients, and a run it lands in measures the compiler
            for extra in range(1, JIT_QUIET_MAX_PASSES + 1):
                t = time.monotonic()
                jit = jit_cpu_seconds(broker.pid)
                for name in ("pulsarfast-threads-batching", "official-batching"):
                    result = run_child(config(name, f"warmup{extra}", ("produce", "consume")), timeout)
                    if "error" in result:
                        print(f"warm-up pass {extra} {name}: ERROR {result['error']}: "
                              f"{result.get('stderr_tail', '')[-500:]}", flush=True)
                share = (jit_cpu_seconds(broker.pid) - jit) / (time.monotonic() - t)
                print(f"warm-up pass {extra}: the JIT used {100 * share:.0f}% of a core", flush=True)
                meta.setdefault("warmup_jit_share", []).append(round(share, 3))
                if share < JIT_QUIET_SHARE:
                    break

        for run in range(1, args.runs + 1):
            for name in clients:
                workloads = [w for w in WORKLOADS if w in selected
                             and not (w == "send" and CLIENTS[name]["batching"])
                             and (w != "ticker" or name in TICKER_CLIENTS)]
                if not workloads:
                    continue
                cfg = config(name, f"r{run}", workloads)
                fill_backlogs(cfg, f"r{run}fill")
                t = time.monotonic()
                jit = jit_cpu_seconds(broker.pid)
                result = run_client(cfg)
                result["broker_jit_seconds"] = round(jit_cpu_seconds(broker.pid) - jit, 3)
                if "error" not in result:
                    check_run(broker, cfg, result)
                runs.append({"client": name, "run": run, "config": cfg, "workloads": workloads, "result": result})
                if "error" in result:
                    print(f"run {run} {name}: ERROR {result['error']}\n{result.get('stderr_tail', '')}", flush=True)
                else:
                    parts = []
                    for w, r in result["workloads"].items():
                        bad = " FAIL" if r.get("checks") else ""
                        if w == "ticker":
                            parts.append(f"ticker {r['ticks']} ticks in {r['waited_s']:.1f}s{bad}")
                            continue
                        parts.append(f"{w} {r['rate']:,.0f}/s (others {r['other_cpu_pct']:.0f}%){bad}")
                    print(f"run {run} {name} ({time.monotonic() - t:.1f}s, broker JIT "
                          f"{result['broker_jit_seconds']:.2f}s): " + ", ".join(parts), flush=True)
                    if result.get("stderr_tail"):
                        print(f"  stderr: {result['stderr_tail'][-300:]!r}", flush=True)
        meta["loadavg_after"] = loadavg()
        rows = summarize(runs, clients)
        profiles = {}
        if args.profile_misses:
            # where a target is missed, one more run of that client under cProfile shows where the time
            # goes (cProfile sees the calling thread only: the gevent rows show every task's work)
            for target in targets(rows):
                if target["pass"] or (target["client"], target["what"]) in profiles \
                        or target["client"].endswith(BASELINE_SUFFIX):
                    continue
                print(f"profiling {target['client']}: {target['what']}", flush=True)
                workload = next(w for what, w, *_ in TARGETS if what == target["what"])
                cfg = config(target["client"], "profile", (workload,))
                fill_backlogs(cfg, "profilefill")
                cfg["profile"] = workload
                result = run_child(cfg, timeout)
                profiles[(target["client"], target["what"])] = result.get("profile") or result.get("error")
    finally:
        broker.stop()
    meta["total_seconds"] = time.monotonic() - began

    table = markdown(rows, meta)
    for (client, what), text in profiles.items():
        table += f"\n\nProfile of {CLIENTS[client]['label']}, {what} (cProfile, top functions by own time):\n\n```\n"
        table += (text or "").strip() + "\n```"
    print()
    print(table)
    for row in rows:
        if not row["ok"]:
            print(f"FAIL {row['client']} {row['workload']}: {'; '.join(row['failures'])}")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "summary": rows, "targets": targets(rows), "markdown": table, "runs": runs}, f,
                  indent=1)
    print(f"\nwrote {args.json} ({meta['total_seconds']:.0f}s in all)")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
