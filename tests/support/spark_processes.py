"""Whether the Spark tests can run here (``require_spark``), and the processes
a local Spark starts for a streaming source: which
Python processes of this JVM run a source's driver-side reader
(``python_streaming_source_runner``). Used by the Spark tests and by
benchmarks/bench_spark.py to find and measure the driver-side consumer."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal

import pytest


def jvm_pid(spark) -> int:
    """The process id of a local SparkSession's JVM."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def source_runner_pids(spark_jvm_pid: int) -> list[int]:
    """Python processes of that JVM that run a streaming source's driver-side reader."""
    parent = str(spark_jvm_pid)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmdline = f.read()
            with open("/proc/%s/stat" % entry) as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if b"python_streaming_source_runner" in cmdline and ppid == parent:
            pids.append(int(entry))
    return pids


def missing_spark() -> str | None:
    """Why the Spark tests cannot run here (None: they can)."""
    for module in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return "%s is not installed (pip install 'nsqfast[spark]')" % module
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        return "java is not installed (Spark needs a JRE 17+)"
    return None


def require_spark() -> None:
    """At a Spark module's import: skip it with the reason, or fail under NSQ_REQUIRE_SPARK=1."""
    reason = missing_spark()
    if reason:
        if os.environ.get("NSQ_REQUIRE_SPARK", "").strip() not in ("", "0"):
            pytest.fail("Spark tests required (NSQ_REQUIRE_SPARK=1) but %s" % reason, pytrace=False)
        pytest.skip("Spark tests skipped: %s" % reason, allow_module_level=True)


def kill_source_runner(spark) -> None:
    """SIGKILL the one process of spark's JVM that runs a streaming source's driver-side reader
    (the query then fails, as after a crash of that process)."""
    pids = source_runner_pids(jvm_pid(spark))
    assert len(pids) == 1, "expected one source runner process, found %r" % pids
    os.kill(pids[0], signal.SIGKILL)
