"""The Java client's runs in benchmarks/pulsar_quick.py: benchmarks/java/QuickBench.java, compiled
with javac into build/java_bench/ against the Pulsar jars of .pulsar-lib (the Java client 4.0.7 is
among them) and run in a JVM of its own per client run.

``run_java_child(cfg, timeout)`` takes the same config a Python child gets and returns a result of
the same shape (``{"lib_file", "workloads": {...}}`` or ``{"error", ...}``), so pulsar_quick.py
checks and summarizes it like the others. The JVM times each workload itself (its start-up and an
in-process warm-up are outside the timed parts: see QuickBench.java); with cfg["topic_warmup16"] (a
partitioned topic the caller made) the warm-up also consumes from a partitioned topic.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JAVA_SOURCE = os.path.join(HERE, "java", "QuickBench.java")
JAVA_BUILD = os.path.join(ROOT, "build", "java_bench")
#: messages of each kind the JVM produces and consumes, untimed, before its workloads (JIT warm-up)
WARMUP_MESSAGES = 20_000
#: the JVM's heap: as much as the clients' data needs (100k payloads, twice), no more
JVM_ARGS = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:-UsePerfData")

#: pulsar_quick's config keys -> QuickBench's argument names
_ARGS = {
    "service_url": "url", "broker_pid": "brokerPid", "web_url": "webUrl", "messages": "messages",
    "send_messages": "sendMessages", "receiver_queue_size": "receiverQueue", "topic_produce": "topicProduce",
    "topic_consume": "topicConsume", "topic_consume16": "topicConsume16", "topic_fire": "topicFire",
    "topic_send": "topicSend",
}


def classpath() -> str:
    """build/java_bench (QuickBench compiled when missing or older than its source) and the jars."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.support.pulsar_broker import require_pulsar_lib
    jars = os.path.join(require_pulsar_lib(), "*")
    target = os.path.join(JAVA_BUILD, "QuickBench.class")
    if not os.path.exists(target) or os.path.getmtime(target) < os.path.getmtime(JAVA_SOURCE):
        os.makedirs(JAVA_BUILD, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", JAVA_BUILD, JAVA_SOURCE], check=True)
    return JAVA_BUILD + os.pathsep + jars


def java_argv(cfg: dict, metric: str) -> list:
    """The java command line for one client run of pulsar_quick.py's config."""
    argv = ["java", *JVM_ARGS, "-cp", classpath(), "QuickBench"]
    for key, name in _ARGS.items():
        if key in cfg:
            argv.append(f"{name}={cfg[key]}")
    argv += [
        f"workloads={','.join(cfg['workloads'])}",
        f"batching={'true' if cfg['batching'] else 'false'}",
        f"subscription={cfg.get('consume_subscription', 'bench')}",
        f"clkTck={os.sysconf('SC_CLK_TCK')}",
        f"metric={metric}",
        f"warmupMessages={cfg.get('java_warmup_messages', WARMUP_MESSAGES)}",
        f"topicWarmup={cfg['topic_produce'][:-2]}-w",
    ]
    if cfg.get("topic_warmup16"):
        argv.append(f"topicWarmup16={cfg['topic_warmup16']}")
    return argv


def run_java_child(cfg: dict, timeout: float, metric: str) -> dict:
    """One Java client run: the dict its ``RESULT`` line holds, or one with ``error`` and the output's
    tails. ``metric``: the broker's entries-read counter (read before and after the consume)."""
    try:
        argv = java_argv(cfg, metric)
    except (OSError, subprocess.CalledProcessError) as exc:
        return {"error": f"cannot compile {os.path.relpath(JAVA_SOURCE, ROOT)}: {exc}"}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:  # subprocess.run killed the JVM (ours)
        tail = exc.stderr or b""
        if isinstance(tail, bytes):
            tail = tail.decode("utf-8", "replace")
        return {"error": f"timed out after {timeout:.0f}s", "stderr_tail": tail[-2000:]}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit code {proc.returncode}", "stderr_tail": proc.stderr[-3000:],
                "stdout_tail": proc.stdout[-1000:]}
    result: dict = json.loads(lines[-1][len("RESULT "):])
    return result
