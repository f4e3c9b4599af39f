"""The processes a local Spark starts for nsq.spark's streaming source: which
Python processes of this JVM run a source's driver-side reader
(``python_streaming_source_runner``). Used by the Spark tests and by
benchmarks/bench_spark.py to find and measure the driver-side consumer."""
from __future__ import annotations

import os


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
