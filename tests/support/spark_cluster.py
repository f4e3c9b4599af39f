"""A Spark standalone cluster (``SparkMaster``, ``SparkWorker``) and a Spark Connect
server (``SparkConnectServer``) on loopback ports, started from pyspark's own
``bin/spark-class`` for the tests that run a Spark job somewhere else than in a
local[N] session. Each is a ``ServerProcess`` (its temp dir, log, readiness wait,
kill). Their JVMs run C1-only with the serial GC and small heaps (a test cluster
on 2 cores); their Python workers run this interpreter with this checkout first on
the path, so that they import the packages under test.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request

from .ports import LOOPBACK, free_port
from .processes import ServerProcess, refuse_in_unit_run
from .servers import REPO_ROOT

__all__ = ["SparkConnectServer", "SparkMaster", "SparkWorker", "spark_connect_missing"]

START_TIMEOUT = 120.0
_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def spark_connect_missing() -> str | None:
    """Why a Spark Connect client or server cannot run here (None: they can)."""
    jars = os.path.join(spark_home(), "jars")
    if not any(name.startswith("spark-connect_") for name in os.listdir(jars)):
        return "pyspark's jars have no spark-connect jar (%s)" % jars
    try:
        from pyspark.sql.connect import utils

        for check in ("require_minimum_pandas_version", "require_minimum_pyarrow_version",
                      "require_minimum_grpc_version", "require_minimum_grpcio_status_version",
                      "require_minimum_googleapis_common_protos_version", "require_minimum_zstandard_version"):
            getattr(utils, check)()
    except Exception as exc:  # (ImportError, or pyspark's own error naming the package)
        return "the Spark Connect client's packages are missing: %s (pip install 'pyspark[connect]')" % exc
    return None


def _environment(daemon_memory: str = "256m") -> list[str]:
    """``env`` assignments for a Spark JVM: loopback, small daemons (the Connect server is one for
    spark-submit: its heap is SPARK_DAEMON_MEMORY), our Python for its workers."""
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    return ["env", "SPARK_HOME=" + spark_home(), "SPARK_LOCAL_IP=" + LOOPBACK, "SPARK_LOCAL_HOSTNAME=" + LOOPBACK,
            "SPARK_DAEMON_MEMORY=" + daemon_memory, "SPARK_DAEMON_JAVA_OPTS=" + _JVM_OPTS, "PYSPARK_PYTHON=" + sys.executable,
            "PYTHONPATH=" + path, "SPARK_NO_DAEMONIZE=1"]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5):
            return True
    except OSError:
        return False


class _SparkProcess(ServerProcess):
    """A Spark JVM started by spark-class (or spark-submit) with its ports picked now."""

    def __init__(self) -> None:
        refuse_in_unit_run(self.binary_name)
        super().__init__(START_TIMEOUT)
        self.tcp_port = free_port()
        self._make_dir()

    def start(self) -> "_SparkProcess":
        with self._lock:
            offset = self._spawn()
            self._wait_ready(time.monotonic() + self.start_timeout, offset)
        return self

    def _addresses(self) -> str:
        return "%s:%d" % (LOOPBACK, self.tcp_port)

    def _bin(self, name: str) -> str:
        return os.path.join(spark_home(), "bin", name)


class SparkMaster(_SparkProcess):
    """A standalone cluster's master: ``url`` (spark://...), and its workers seen on its web UI's JSON."""

    binary_name = "spark-master"
    ready_check = "the master's port accepts connections and its web UI answers"

    def __init__(self) -> None:
        super().__init__()
        self.web_port = free_port()

    @property
    def url(self) -> str:
        return "spark://%s:%d" % (LOOPBACK, self.tcp_port)

    def _command(self) -> list:
        return _environment() + [self._bin("spark-class"), "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                 "--port", str(self.tcp_port), "--webui-port", str(self.web_port)]

    def state(self) -> dict:
        with urllib.request.urlopen("http://%s:%d/json/" % (LOOPBACK, self.web_port), timeout=5) as answer:
            return json.load(answer)

    def _ready(self) -> bool:
        if not _accepts(self.tcp_port):
            return False
        try:
            return self.state().get("status") == "ALIVE"
        except OSError:
            return False

    def alive_workers(self) -> int:
        return sum(1 for worker in self.state().get("workers", []) if worker.get("state") == "ALIVE")


class SparkWorker(_SparkProcess):
    """A standalone worker of master (1 core, 1 GiB for executors), ready once the master lists it."""

    binary_name = "spark-worker"
    ready_check = "the master lists the worker as ALIVE"

    def __init__(self, master: SparkMaster) -> None:
        super().__init__()
        self.master = master
        self.web_port = free_port()

    def _command(self) -> list:
        assert self.tmp_dir is not None
        return _environment() + [self._bin("spark-class"), "org.apache.spark.deploy.worker.Worker", self.master.url,
                                 "--host", LOOPBACK, "--port", str(self.tcp_port), "--webui-port", str(self.web_port),
                                 "--cores", "1", "--memory", "1g", "--work-dir", os.path.join(self.tmp_dir, "work")]

    def _ready(self) -> bool:
        try:
            workers = self.master.state().get("workers", [])
        except OSError:
            return False
        return any(w.get("port") == self.tcp_port and w.get("state") == "ALIVE" for w in workers)


class SparkConnectServer(_SparkProcess):
    """A Spark Connect server (local[2] behind it): clients use ``url`` (sc://...)."""

    binary_name = "spark-connect"
    ready_check = "the gRPC port accepts connections"

    @property
    def url(self) -> str:
        return "sc://%s:%d" % (LOOPBACK, self.tcp_port)

    def _command(self) -> list:
        return _environment(daemon_memory="1g") + [
            self._bin("spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master", "local[2]",
            "--conf", "spark.driver.extraJavaOptions=" + _JVM_OPTS,
            "--conf", "spark.connect.grpc.binding.address=" + LOOPBACK,
            "--conf", "spark.connect.grpc.binding.port=%d" % self.tcp_port,
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.executorEnv.PYTHONPATH=" + REPO_ROOT,
        ]

    def _ready(self) -> bool:
        return _accepts(self.tcp_port)
