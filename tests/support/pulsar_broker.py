"""Test harness that runs a REAL Apache Pulsar standalone broker (4.0.7, jars resolved from Maven
Central by ci/install-pulsar.sh into .pulsar-lib/) on loopback ports, with its metadata store
(embedded RocksDB, no ZooKeeper) and its bookie in a private temp dir, plus small admin-API
helpers built on the standard library only. No fakes.

The JVM takes several seconds to come up: a test run starts ONE shared broker (tests/conftest.py's
`pulsar_broker`, served to every worker by shared_broker.py), not one per test. The process handling (spawn, readiness
wait, SIGTERM / SIGKILL, temp dir, log) is ServerProcess's (processes.py).
"""
from __future__ import annotations

import glob
import http.client
import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping, Optional, Sequence

from .ports import LOOPBACK, free_port
from .processes import ServerProcess, ServerStartError, refuse_in_unit_run  # noqa: F401 (start() raises it)
from .servers import REPO_ROOT

__all__ = [
    "PULSAR_VERSION",
    "PulsarNotInstalled",
    "PulsarAdminError",
    "PulsarBroker",
    "pulsar_lib_dir",
    "require_pulsar_lib",
]

PULSAR_VERSION = "4.0.7"  # keep in step with ci/install-pulsar.sh
DEFAULT_START_TIMEOUT = 90.0
#: what a start on a killed broker's data may take on top: its bookie's registration from the killed
#: run stays in the metadata store until that session (30 s) expires, and a loaded machine's JVM
#: start is slow as it is (one such restart was seen not ready after 90 s in a loaded full run)
RESTART_EXTRA_SECONDS = 90.0
DEFAULT_STOP_TIMEOUT = 15.0
HTTP_TIMEOUT = 10.0
NAMESPACE = "public/default"

# Java 17 closes these packages; Pulsar, BookKeeper and Netty reach into them.
_ADD_OPENS = (
    "java.base/java.io",
    "java.base/java.util.zip",
    "java.base/sun.net",
    "java.base/java.nio",
    "java.base/jdk.internal.misc",
    "java.base/jdk.internal.platform",
    "java.management/sun.management",
    "jdk.management/com.sun.management.internal",
)

# Serial GC and the C1-only JIT: ready in about 4 s instead of 5 s with the default G1 + C2
# (measured on 2 cores), and a test broker never needs peak throughput. No perf-data file in /tmp
# (a SIGKILLed JVM would leave it behind). Pass jvm_args=(...) for a broker meant for benchmarks.
DEFAULT_JVM_ARGS = (
    "-Xmx768m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
)

# INFO to stdout (our log file), without the caller-location lookups of BookKeeper's bundled
# log4j2.xml (which also re-reads itself every 10 s).
_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="CONSOLE" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p [%t] %c{1} - %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="CONSOLE"/></Root>
  </Loggers>
</Configuration>
"""


class PulsarNotInstalled(RuntimeError):
    """The Pulsar broker jars are not in the jars folder."""


class PulsarAdminError(RuntimeError):
    """An admin REST call answered with an HTTP error (``status`` and ``body`` attached)."""

    def __init__(self, method: str, path: str, status: int, body: str):
        super().__init__(f"{method} {path} -> {status}: {body.strip()[:2000]}")
        self.method = method
        self.path = path
        self.status = status
        self.body = body


# --------------------------------------------------------------------------- jars


def pulsar_lib_dir() -> str:
    """Folder holding the broker's jars: $PULSAR_LIB_DIR or <repo>/.pulsar-lib (not checked)."""
    return os.path.abspath(os.environ.get("PULSAR_LIB_DIR") or os.path.join(REPO_ROOT, ".pulsar-lib"))


def require_pulsar_lib(folder: Optional[str] = None) -> str:
    """Return the jars folder, or raise PulsarNotInstalled telling how to install the jars."""
    folder = os.path.abspath(folder or pulsar_lib_dir())
    broker_jar = os.path.join(folder, f"pulsar-broker-{PULSAR_VERSION}.jar")
    if not os.path.isfile(broker_jar):
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "pulsar-broker-*.jar")))
        what = f"found {found} instead" if found else "no pulsar-broker jar there"
        raise PulsarNotInstalled(
            f"Apache Pulsar {PULSAR_VERSION} broker jars not found in {folder} ({what}). "
            f"Run `bash ci/install-pulsar.sh` (or `make pulsar`) from the repo root: it resolves them "
            f"from Maven Central with mvn into .pulsar-lib/. Or point PULSAR_LIB_DIR at a folder holding them."
        )
    if shutil.which("java") is None:
        raise PulsarNotInstalled("a Java runtime (17) is required to run the Pulsar broker: `java` is not on PATH")
    return folder


# --------------------------------------------------------------------------- broker

#: the entries the broker's dispatchers read from storage (a Prometheus counter over all topics)
STORAGE_ENTRIES_READ = "pulsar_ml_cache_pendingreads_entries_read_total"


def metric_total(web_url: str, name: str, headers: Optional[Mapping[str, str]] = None) -> float:
    """The sum of a Prometheus metric's samples (every label set) from a broker's ``/metrics/``."""
    req = urllib.request.Request(web_url + "/metrics/", headers=dict(headers or {}))
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
        text = resp.read().decode("utf-8", "replace")
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


class PulsarBroker(ServerProcess):
    """A real Pulsar standalone broker on free loopback ports with its own data dirs.

    ``PulsarBroker(config=None, jvm_args=DEFAULT_JVM_ARGS).start()`` — ``config`` entries are
    broker.conf keys that override (or add to) the defaults below, e.g.
    ``{"authenticationEnabled": "true", ...}``; ``admin_headers`` go with every admin call (such
    a broker's admin API wants ``{"Authorization": "Bearer <token>"}``). ``stop()`` (SIGTERM,
    SIGKILL after 15 s) removes the temp dir with data and log. Every listener (binary, web, the
    embedded bookie) is on 127.0.0.1.

    A crash and a restart: ``kill(keep_data=True)`` (SIGKILL, the data dir stays), then ``start()``
    comes back on the SAME data (the bookie's journal and ledgers, the RocksDB metadata store), the
    same ports (binary, web and bookie) and the same config. ``restarts`` counts those starts.
    """

    binary_name = "pulsar-standalone"
    ready_check = f"its admin API lists namespace {NAMESPACE}; after a restart, its health check passes"
    poll_interval = 0.2
    startup_log_tail = 6000

    def __init__(
        self,
        config: Optional[Mapping[str, Any]] = None,
        jvm_args: Sequence[str] = DEFAULT_JVM_ARGS,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        lib_dir: Optional[str] = None,
        admin_headers: Optional[Mapping[str, str]] = None,
        started_by_lasting_thread: bool = False,
    ):
        super().__init__(start_timeout)
        self.lib_dir = lib_dir or pulsar_lib_dir()
        # started (and restarted) only from a thread that outlives the JVM: it dies with that thread
        self.started_by_lasting_thread = started_by_lasting_thread
        # sent with every admin call (an "Authorization" header for a broker with authentication on)
        self.admin_headers = dict(admin_headers or {})
        self.extra_config = {str(k): str(v) for k, v in (config or {}).items()}
        self.jvm_args = [str(a) for a in jvm_args]
        self.port = 0
        self.web_port = 0
        self.start_seconds: Optional[float] = None  # how long the last start() took until ready
        self.bookie_port = 0
        self.restarts = 0  # starts on the data a kill(keep_data=True) / stop(keep_data=True) left
        self._kept = False  # the data dir and ports of the last run are kept for the next start()

    # -- addresses
    @property
    def service_url(self) -> str:
        return f"pulsar://{LOOPBACK}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{LOOPBACK}:{self.web_port}"

    @property
    def tcp_port(self) -> int:  # (the binary protocol's: tcp_address)
        return self.port

    def _addresses(self) -> str:
        return f"{self.service_url} web={self.web_url}"

    # -- files
    def _config_text(self) -> str:
        conf = {
            "clusterName": "standalone",
            "bindAddress": LOOPBACK,
            "advertisedAddress": LOOPBACK,
            "brokerServicePort": str(self.port),
            "webServicePort": str(self.web_port),
            # empty: metadata in an embedded RocksDB store under --metadata-dir, no ZooKeeper
            "metadataStoreUrl": "",
            "configurationMetadataStoreUrl": "",
            "managedLedgerDefaultEnsembleSize": "1",
            "managedLedgerDefaultWriteQuorum": "1",
            "managedLedgerDefaultAckQuorum": "1",
            # the embedded bookie binds loopback too
            "listeningInterface": "lo",
            "allowLoopback": "true",
            "allowAutoTopicCreation": "true",
            "allowAutoTopicCreationType": "non-partitioned",
            # an idle topic of a slow test must not vanish under it
            "brokerDeleteInactiveTopicsEnabled": "false",
            "functionsWorkerEnabled": "false",
            "transactionCoordinatorEnabled": "false",
            "loadBalancerEnabled": "false",
            "authenticationEnabled": "false",
            "managedLedgerCacheSizeMB": "64",
            "dbStorage_writeCacheMaxSizeMb": "32",
            "dbStorage_readAheadCacheMaxSizeMb": "32",
            "journalMaxSizeMB": "256",
            # false by default in 4.0.7: batch_index_ack_enabled consumers need it (the ack sets of ACK and MESSAGE)
            "acknowledgmentAtBatchIndexLevelEnabled": "true",
        }
        conf.update(self.extra_config)
        return "".join(f"{k}={v}\n" for k, v in conf.items())

    def _command(self) -> list:
        assert self.tmp_dir is not None
        cmd = ["java", *self.jvm_args]
        cmd += [f"--add-opens={pkg}=ALL-UNNAMED" for pkg in _ADD_OPENS]
        cmd += [
            "-Dio.netty.tryReflectionSetAccessible=true",
            f"-Dlog4j.configurationFile={os.path.join(self.tmp_dir, 'log4j2.xml')}",
            f"-Djava.io.tmpdir={self.tmp_dir}",
            "-cp",
            os.path.join(self.lib_dir, "*"),
            "org.apache.pulsar.PulsarStandaloneStarter",
            "--config", os.path.join(self.tmp_dir, "standalone.conf"),
            *([] if self._kept else ["--wipe-data"]),
            "--no-functions-worker",
            "--no-stream-storage",
            "--metadata-dir", os.path.join(self.tmp_dir, "metadata"),
            "--bookkeeper-dir", os.path.join(self.tmp_dir, "bookkeeper"),
            "--bookkeeper-port", str(self.bookie_port),
            "-a", LOOPBACK,
        ]
        return cmd

    # -- lifecycle
    def start(self) -> "PulsarBroker":
        """Start on fresh free ports and wait until the admin API answers; no-op if running.

        After ``kill(keep_data=True)`` or ``stop(keep_data=True)`` it starts again on the kept data
        dir, ports and config instead. Raises ServerStartError (with the log) if the JVM exits or is
        not ready within ``start_timeout``; nothing is left behind in that case.
        """
        with self._lock:
            if self.running:
                return self
            require_pulsar_lib(self.lib_dir)
            refuse_in_unit_run("a Pulsar broker")
            began = time.monotonic()
            restart = self._kept
            deadline = began + self.start_timeout + (RESTART_EXTRA_SECONDS if restart else 0.0)
            try:
                if not restart:
                    self._make_dir()
                    self.port, self.web_port, self.bookie_port = free_port(), free_port(), free_port()
                with open(os.path.join(self.tmp_dir, "standalone.conf"), "w") as f:
                    f.write(self._config_text())
                with open(os.path.join(self.tmp_dir, "log4j2.xml"), "w") as f:
                    f.write(_LOG4J2_XML)
                log_offset = self._spawn()
                self._wait_ready(deadline, log_offset)
                if restart:
                    # On its old data the admin API answers seconds before the bookie is back
                    # ("Not enough non-faulty bookies"): wait until a message can be stored.
                    self._wait_ready(deadline, log_offset, self.healthy)
            except BaseException:  # also a pytest-timeout or Ctrl-C in the middle of the wait
                self.kill()
                raise
            if restart:
                self.restarts += 1
            self._kept = False
            self.start_seconds = time.monotonic() - began
            return self

    def _ready(self) -> bool:
        # The binary port accepts connections well before the broker serves: the admin API is the
        # signal. The standalone creates the cluster, then tenant "public", then "public/default"
        # (about 60 ms after the cluster shows): wait for the namespace the tests use too.
        try:
            clusters = self._call("GET", "/admin/v2/clusters", timeout=2.0)
            if "standalone" not in (clusters or []):
                return False
            namespaces = self._call("GET", "/admin/v2/namespaces/public", timeout=2.0)
            return NAMESPACE in (namespaces or [])
        except (OSError, http.client.HTTPException, PulsarAdminError, ValueError):
            return False

    def healthy(self) -> bool:
        """The broker's own health check passes: it can write and read a message (its bookie is up)."""
        try:
            with urllib.request.urlopen(self.web_url + "/admin/v2/brokers/health", timeout=HTTP_TIMEOUT) as resp:
                return resp.status == 200 and resp.read().strip() == b"ok"
        except urllib.error.HTTPError as exc:  # 500: "Not enough non-faulty bookies available", ...
            exc.close()
            return False
        except (OSError, http.client.HTTPException):
            return False

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT, keep_data: bool = False) -> Optional[int]:
        """SIGTERM, wait up to ``timeout`` (then SIGKILL); remove the temp dir (keep it, and the
        ports, for the next start() with ``keep_data=True``). Returns the exit code."""
        with self._lock:
            code = super().stop(timeout)
            self._keep_data(keep_data)
            return code

    def kill(self, keep_data: bool = False) -> Optional[int]:
        """SIGKILL at once (a crash: nothing flushed, no clean shutdown); remove the temp dir, or
        with ``keep_data=True`` keep it and the ports for the next start(). Returns the exit code."""
        with self._lock:
            code = super().kill()
            self._keep_data(keep_data)
            return code

    def _keep_data(self, keep: bool) -> None:
        # kept: the atexit net still removes it if nobody starts or stops the broker again
        self._kept = keep and self.tmp_dir is not None
        if not self._kept:
            self._remove_dir()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- admin REST API (stdlib only)
    def _call(self, method: str, path: str, body: Any = None, timeout: float = HTTP_TIMEOUT) -> Any:
        data = None
        headers = {"Accept": "application/json", **self.admin_headers}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.web_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            exc.close()
            raise PulsarAdminError(method, path, exc.code, text) from None
        if not raw:
            return None
        return json.loads(raw)

    def admin(self, method: str, path: str, body: Any = None, timeout: float = HTTP_TIMEOUT) -> Any:
        """Any admin call: ``admin("GET", "/admin/v2/tenants")`` -> parsed JSON (None if empty)."""
        return self._call(method, path, body, timeout)

    def metric_total(self, name: str) -> float:
        """The sum of a Prometheus metric's samples (every label set) from the broker's ``/metrics/``."""
        return metric_total(self.web_url, name, self.admin_headers)

    @staticmethod
    def topic_path(name: str) -> str:
        """``/admin/v2/persistent/public/default/<name>`` for a short topic name."""
        return f"/admin/v2/persistent/{NAMESPACE}/{urllib.parse.quote(name, safe='')}"

    def topic_name(self, name: str) -> str:
        """The full name the client uses: ``persistent://public/default/<name>``."""
        return f"persistent://{NAMESPACE}/{name}"

    def clusters(self) -> list:
        return self._call("GET", "/admin/v2/clusters")

    def create_partitioned_topic(self, name: str, partitions: int) -> None:
        self._call("PUT", self.topic_path(name) + "/partitions", int(partitions))

    def update_partitioned_topic(self, name: str, partitions: int) -> None:
        """Give a partitioned topic more partitions (the admin API refuses fewer)."""
        self._call("POST", self.topic_path(name) + "/partitions", int(partitions))

    def partitions(self, name: str) -> int:
        """Partition count of the topic's metadata (0: not partitioned). PulsarAdminError 404: no such topic."""
        return int(self._call("GET", self.topic_path(name) + "/partitions")["partitions"])

    def unload_topic(self, name: str) -> None:
        """Unload the topic (or a partition, ``<name>-partition-<i>``): its clients must reconnect."""
        self._call("PUT", self.topic_path(name) + "/unload")

    def topic_stats(self, name: str) -> dict:
        return self._call("GET", self.topic_path(name) + "/stats")

    def partitioned_stats(self, name: str, per_partition: bool = True) -> dict:
        query = "?perPartition=" + ("true" if per_partition else "false")
        return self._call("GET", self.topic_path(name) + "/partitioned-stats" + query)

    def delete_topic(self, name: str, force: bool = True, missing_ok: bool = False) -> None:
        """Delete a topic, partitioned (all its partitions) or not; ``force`` also drops its clients."""
        query = "?force=" + ("true" if force else "false")
        try:
            if self.partitions(name) > 0:  # 404 when the topic does not exist
                self._call("DELETE", self.topic_path(name) + "/partitions" + query)
            else:
                self._call("DELETE", self.topic_path(name) + query)
        except PulsarAdminError as exc:
            if not (missing_ok and exc.status == 404):
                raise
