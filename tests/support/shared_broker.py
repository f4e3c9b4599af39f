"""The one Pulsar broker a test run shares between its processes, started on first use.

A JVM broker takes seconds to start and most of a GiB to run, so a run starts one, whatever
the number of pytest-xdist workers. The run's controller (the pytest process that starts the
workers, or the only pytest process) owns it: a ``BrokerService`` thread there starts it when
the first test anywhere asks for it (``attach()`` drops a request file in the run dir) and
publishes its addresses in ``<run dir>/pulsar.json``; ``BrokerService.close()`` stops it at
the end of the run. The JVM is started by that thread, which lives until the broker is stopped,
so it dies with the controller even on SIGKILL (PR_SET_PDEATHSIG).

Every other process gets a ``SharedPulsarBroker``: the admin helpers of ``PulsarBroker`` on
the shared one's addresses, and no way to stop, kill or freeze it (a test that needs that
starts a broker of its own).

The run's transaction broker (tests/support/txn_broker.py) is served the same way by a second
``BrokerService(run_dir, name="pulsar-txn", make_broker=...)``, with files of that name.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Optional

from .processes import refuse_in_unit_run
from .pulsar_broker import PulsarBroker

__all__ = ["BrokerService", "SharedPulsarBroker", "attach"]

#: the run dir's files of the broker named NAME: NAME.request, NAME.json, NAME.error
DEFAULT_NAME = "pulsar"
REQUEST_FILE = DEFAULT_NAME + ".request"
INFO_FILE = DEFAULT_NAME + ".json"
ERROR_FILE = DEFAULT_NAME + ".error"
#: how long a test waits for the shared broker (its start is bounded by PulsarBroker's own timeout)
ATTACH_TIMEOUT = 180.0


class BrokerService:
    """In the run's controller: starts the shared broker on the first request, stops it at the end."""

    def __init__(self, run_dir: str, name: str = DEFAULT_NAME,
                 make_broker: Callable[[], PulsarBroker] = lambda: PulsarBroker(started_by_lasting_thread=True)):
        self.run_dir = run_dir
        self.name = name
        self.make_broker = make_broker  # (a broker started by this service's thread: started_by_lasting_thread)
        self.broker: Optional[PulsarBroker] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="shared-%s-broker" % name, daemon=True)

    def start(self) -> "BrokerService":
        self._thread.start()
        return self

    def _serve(self) -> None:
        request = os.path.join(self.run_dir, self.name + ".request")
        while not self._stop.wait(0.05):
            if os.path.exists(request):
                break
        else:
            return
        broker = self.make_broker()
        self.broker = broker
        try:
            broker.start()
        except BaseException as exc:  # the tests waiting for it report why
            _write_atomically(os.path.join(self.run_dir, self.name + ".error"), "%s: %s" % (type(exc).__name__, exc))
            return
        info = {"port": broker.port, "web_port": broker.web_port, "bookie_port": broker.bookie_port,
                "log_path": broker.log_path, "pid": broker.pid, "start_seconds": broker.start_seconds}
        _write_atomically(os.path.join(self.run_dir, self.name + ".json"), json.dumps(info))
        self._stop.wait()
        broker.kill()  # (its data goes with it: no need for a graceful stop's 5 s)

    def close(self) -> None:
        """Stop the broker, also one still starting: the thread then holds the broker's lock in
        ``start()`` (up to its readiness timeout), so its process is killed here without that lock;
        the readiness wait sees the exit and the thread ends."""
        self._stop.set()
        deadline = time.monotonic() + 60
        while self._thread.is_alive() and time.monotonic() < deadline:
            broker = self.broker
            proc = broker.proc if broker is not None else None
            if proc is not None:  # (again each round: the thread may spawn it just after we looked)
                proc.kill()
            self._thread.join(timeout=0.1)


def _write_atomically(path: str, text: str) -> None:
    partial = path + ".partial"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


class SharedPulsarBroker(PulsarBroker):
    """A handle on the run's shared broker: its addresses and admin API, not its process."""

    def __init__(self, info: dict[str, Any]):
        super().__init__()
        self.port = int(info["port"])
        self.web_port = int(info["web_port"])
        self.bookie_port = int(info["bookie_port"])
        self.log_path = info["log_path"]
        self.start_seconds = info.get("start_seconds")
        self._shared_pid = int(info["pid"])

    @property
    def pid(self) -> Optional[int]:
        return None  # (no signals to a broker other tests use at the same time)

    @property
    def running(self) -> bool:
        try:
            os.kill(self._shared_pid, 0)
        except OSError:
            return False
        return True

    def __repr__(self) -> str:
        return f"<SharedPulsarBroker {self.service_url} web={self.web_url}>"

    def _not_ours(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the run's shared Pulsar broker is stopped by the run: a test that stops, kills or "
                           "freezes a broker uses one of its own (the private_pulsar_broker fixture)")

    start = stop = kill = _not_ours  # type: ignore[assignment]


def attach(run_dir: str, timeout: float = ATTACH_TIMEOUT, name: str = DEFAULT_NAME,
           handle: Callable[[dict[str, Any]], SharedPulsarBroker] = SharedPulsarBroker) -> SharedPulsarBroker:
    """Ask the run's controller for the shared broker (started now if nobody asked before) and wait for it;
    ``name`` picks another broker its controller serves, ``handle`` the class of the handle returned."""
    refuse_in_unit_run("the shared Pulsar broker")
    info_path = os.path.join(run_dir, name + ".json")
    error_path = os.path.join(run_dir, name + ".error")
    if not os.path.exists(info_path):
        with open(os.path.join(run_dir, name + ".request"), "a"):
            pass
    deadline = time.monotonic() + timeout
    while True:
        if os.path.exists(info_path):
            with open(info_path) as f:
                return handle(json.load(f))
        if os.path.exists(error_path):
            with open(error_path) as f:
                raise RuntimeError("the run's shared Pulsar broker (%s) did not start: %s" % (name, f.read()))
        if time.monotonic() >= deadline:
            raise RuntimeError("the run's shared Pulsar broker (%s) was not ready within %.0f s (is the controller "
                               "serving it? %s)" % (name, timeout, run_dir))
        time.sleep(0.05)
