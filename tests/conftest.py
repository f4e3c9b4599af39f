# Shared pytest fixtures: real nsqd / nsqlookupd servers (tests/support/servers.py), fault proxies
# (tests/support/faultproxy.py), a unique `topic` per test and the `backend` parametrization; one
# real Apache Pulsar standalone broker per run (tests/support/pulsar_broker.py), shared by every
# pytest-xdist worker (tests/support/shared_broker.py) and started by the first test that asks for
# `pulsar_broker` / `pulsar_service_url`; the `integration` and `slow` markers.
#
# gevent must NOT be monkey-patched globally: the client is used both on gevent and on plain
# threads in the same test session, and the harness itself relies on real threads/sockets.
# Do not call gevent.monkey.patch_all() (or any patch_*) in tests or here; an autouse check fails
# any test that does.
from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import uuid

import pytest

# Every gevent primitive of the library checks that it runs on the hub's thread
# (msgengine/runtime.py): a path that lets another OS thread touch the hub fails at once.
os.environ.setdefault("NSQ_CHECK_HUB_THREAD", "1")

from tests.support.faultproxy import FaultProxy  # noqa: E402
from tests.support.ports import RUN_DIR_ENV, run_dir  # noqa: E402
from tests.support.pulsar_broker import (  # noqa: E402
    PULSAR_VERSION,
    PulsarBroker,
    PulsarNotInstalled,
    pulsar_lib_dir,
    require_pulsar_lib,
)
from tests.support.shared_broker import BrokerService, SharedPulsarBroker, attach  # noqa: E402
from tests.support.txn_broker import SHARED_NAME as TXN_SHARED_NAME  # noqa: E402
from tests.support.txn_broker import SharedTxnPulsarBroker, TxnPulsarBroker  # noqa: E402
from tests.support.servers import (  # noqa: E402
    NsqBinaryNotFound,
    Nsqd,
    Nsqlookupd,
    nsq_bin_dir,
    require_nsq_bin,
)

# Programs the tests run as subprocesses, not test modules.
collect_ignore_glob = ["support/programs/*", "nsq/pynsq_programs/*"]

_BACKENDS = ("gevent", "threads")
_SERVERS_KEY = pytest.StashKey[list]()


def _gevent_patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None:
        return False
    try:
        return bool(monkey.is_anything_patched())
    except Exception:
        return False


def pytest_report_header(config):
    lines = []
    try:
        folder = require_nsq_bin()
        lines.append(f"nsq binaries: {folder}")
    except NsqBinaryNotFound:
        lines.append(f"nsq binaries: MISSING in {nsq_bin_dir()} (run `bash ci/install-nsq.sh`)")
    try:
        lines.append(f"pulsar {PULSAR_VERSION} jars: {require_pulsar_lib()}")
    except PulsarNotInstalled:
        lines.append(f"pulsar {PULSAR_VERSION} jars: MISSING in {pulsar_lib_dir()} (run `bash ci/install-pulsar.sh`)")
    return lines


def _need_binaries() -> None:
    try:
        require_nsq_bin()
        return
    except NsqBinaryNotFound as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def _track(request, server) -> None:
    """Remember servers used by the test so their log tails are attached to a failure report."""
    servers = request.node.stash.setdefault(_SERVERS_KEY, [])
    servers.append(server)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        servers = list(item.stash.get(_SERVERS_KEY, []))
        if {"pulsar_broker", "private_pulsar_broker", "txn_broker"} & set(getattr(item, "fixturenames", ())):
            servers += [b for b in _pulsar_brokers if b.running]  # the session's brokers
        for server in servers:
            tail = server.log_tail(3000)
            if tail:
                report.sections.append((f"{server.binary_name} {server.tcp_address} log (tail)", tail))


@pytest.fixture(autouse=True)
def _gevent_hub_intact(request):
    """A broken gevent hub (libev's active-watcher count below zero) makes
    every later gevent test fail with LoopExit: stop the run at the first
    test after which it is broken, with one clear error."""
    yield
    if "gevent" not in sys.modules:
        return
    from msgengine.runtime import get_backend

    problem = get_backend("gevent").hub_problem()
    if problem is not None:
        pytest.exit("the gevent hub is broken after %s: %s" % (request.node.nodeid, problem), returncode=3)


@pytest.fixture(autouse=True)
def _no_global_gevent_monkey_patching():
    assert not _gevent_patched(), "gevent monkey-patching is active before this test: it must never be global"
    yield
    assert not _gevent_patched(), "this test monkey-patched gevent globally; use gevent APIs explicitly instead"


# ----------------------------------------------------------------------------- servers


def _server_factory(request, server_class):
    """Start servers of one class on demand; close them all at teardown."""
    _need_binaries()
    created = []

    def make(*extra_flags, **kwargs):
        server = server_class(*extra_flags, **kwargs)
        created.append(server)
        _track(request, server)
        return server

    yield make
    for server in reversed(created):
        server.close()


@pytest.fixture
def nsqd_factory(request):
    """``nsqd_factory(*extra_flags, lookupd=None, **kw) -> Nsqd`` (started); all closed at teardown."""
    yield from _server_factory(request, Nsqd)


@pytest.fixture
def nsqd(nsqd_factory):
    """A fresh, running nsqd with default flags."""
    return nsqd_factory()


@pytest.fixture
def nsqlookupd_factory(request):
    """``nsqlookupd_factory(*extra_flags, **kw) -> Nsqlookupd`` (started); all closed at teardown."""
    yield from _server_factory(request, Nsqlookupd)


@pytest.fixture
def nsqlookupd(nsqlookupd_factory):
    """A fresh, running nsqlookupd."""
    return nsqlookupd_factory()


# ----------------------------------------------------------------------------- fault proxy


@pytest.fixture
def fault_proxy_factory():
    """``fault_proxy_factory(host, port) -> FaultProxy`` (also accepts ``("host:port")``); closed at teardown."""
    created = []

    def make(host, port=None, **kwargs):
        if port is None:
            host, _, port = str(host).rpartition(":")
        proxy = FaultProxy(host, int(port), **kwargs)
        created.append(proxy)
        return proxy

    yield make
    errors = []
    for proxy in reversed(created):
        try:
            proxy.close()
        except Exception as exc:  # report, but close the others first
            errors.append(exc)
    if errors:
        raise errors[0]


# ----------------------------------------------------------------------------- pulsar broker

_pulsar_brokers: list = []  # this process's brokers: for failure reports and the SIGTERM handler


def _kill_pulsar_brokers() -> None:
    for broker in list(_pulsar_brokers):
        if isinstance(broker, SharedPulsarBroker):
            continue
        try:
            broker.kill()
        except Exception:
            pass


def _install_sigterm_cleanup():
    """On SIGTERM: kill this process's broker JVMs and remove their dirs, then let SIGTERM do what it
    did before.

    (The JVMs are also started with PR_SET_PDEATHSIG and the harness registers an atexit hook: no
    java process outlives the test run even on SIGKILL; this handler also removes the temp dirs.)
    Returns a function restoring the previous handler, or None when none was installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN:
        return None

    def on_sigterm(signum, frame):
        _kill_pulsar_brokers()
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)

    def restore():
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

    return restore


def _check_tested_install() -> None:
    """Under `make test-pythons` (ci/pythons.sh), the packages must come from the wheel installed in
    that Python's venv, not from a checkout: stop the run at once if they do not."""
    venv = os.environ.get("NSQFAST_TESTS_FROM_WHEEL")
    if not venv:
        return
    import msgengine
    import nsq
    import pulsarfast

    for package in (nsq, msgengine, pulsarfast):
        if not os.path.realpath(package.__file__).startswith(os.path.realpath(venv) + os.sep):
            pytest.exit("%s was imported from %s, not from the wheel installed in %s"
                        % (package.__name__, package.__file__, venv), returncode=4)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """In the run's controller: the run dir every process of the run shares (free ports, the
    shared broker's addresses) and the thread that starts the shared broker on first use."""
    if _is_worker(config):
        # the controller's choice (below): workers parse the command line again, without it
        if config.workerinput.get("nsqfast_dist") == "loadgroup":
            config.option.loadgroup = True
        return
    if getattr(config.option, "dist", "no") == "load":
        # (what -n alone gives): the xdist_group marks must hold whatever the command line, or each
        # worker would start the Spark session or a module's broker of its own
        config.option.dist = "loadgroup"
    _check_tested_install()
    if run_dir() is not None:
        return  # (a worker, or a pytest run inside a test run: the outer run serves)
    directory = tempfile.mkdtemp(prefix="nsqfast-tests-")
    os.environ[RUN_DIR_ENV] = directory  # inherited by the workers, started after this hook
    service = BrokerService(directory).start()
    # the run's transaction broker (tests/support/txn_broker.py), started when a test first asks for it
    txn_service = BrokerService(directory, name=TXN_SHARED_NAME,
                                make_broker=lambda: TxnPulsarBroker(started_by_lasting_thread=True)).start()
    restore_sigterm = _install_sigterm_cleanup()

    def finish():
        try:
            service.close()
            txn_service.close()
        finally:
            if restore_sigterm is not None:
                restore_sigterm()
            os.environ.pop(RUN_DIR_ENV, None)
            shutil.rmtree(directory, ignore_errors=True)

    config.add_cleanup(finish)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """(pytest-xdist, in the controller) tell each worker how the controller distributes the tests."""
    node.workerinput["nsqfast_dist"] = node.config.getoption("dist")


def _require_pulsar() -> None:
    try:
        require_pulsar_lib()
        missing = None
    except PulsarNotInstalled as exc:
        missing = str(exc)
    if missing:
        pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def pulsar_broker() -> PulsarBroker:
    """The run's real Pulsar standalone broker, shared by every worker of the run (started by the
    run's controller when the first test asks for it, ready in about 4-6 s; stopped at the end of
    the run, also after Ctrl-C). Tests keep to topics and subscriptions of their own on it, and never
    stop, kill or freeze it: that is what ``private_pulsar_broker`` is for."""
    _require_pulsar()
    directory = run_dir()
    assert directory is not None, "no test run dir: tests/conftest.py's pytest_configure makes it"
    broker = attach(directory)
    _pulsar_brokers.append(broker)
    return broker


@pytest.fixture(scope="session")
def private_pulsar_broker(request) -> PulsarBroker:
    """A broker of this worker's own, for the tests that freeze it or read its broker-wide metrics:
    they all run on one worker (xdist group ``pulsar_private``), so one more JVM for the run."""
    _require_pulsar()
    broker = PulsarBroker()
    _pulsar_brokers.append(broker)

    def finish():
        try:
            broker.kill()  # (its data goes with it: no need for a graceful stop's 5 s)
        finally:
            _pulsar_brokers.remove(broker)

    request.addfinalizer(finish)
    broker.start()
    return broker


@pytest.fixture(scope="session")
def txn_broker() -> SharedTxnPulsarBroker:
    """The run's Pulsar broker WITH transactions (the coordinator on; tests/support/txn_broker.py),
    shared by every worker like ``pulsar_broker`` and started by the run's controller when the first
    test asks for it, ready once its coordinator is (about 8-10 s). Tests keep to topics and
    subscriptions of their own; ``txn_broker.unload_coordinator()`` moves its coordinator (every
    transaction test sees that: use ``private_txn_broker`` when others must not); it is never stopped."""
    _require_pulsar()
    directory = run_dir()
    assert directory is not None, "no test run dir: tests/conftest.py's pytest_configure makes it"
    broker = attach(directory, name=TXN_SHARED_NAME, handle=SharedTxnPulsarBroker)
    _pulsar_brokers.append(broker)
    return broker


@pytest.fixture
def private_txn_broker(request) -> TxnPulsarBroker:
    """A transaction broker of this test's own, for a test that stops and starts it again
    (``stop(keep_data=True)`` / ``kill(keep_data=True)``, then ``start()``: same ports, same data) or
    moves its coordinator while others use theirs. One JVM start per test (about 8-10 s, and a
    restart about as much again): such tests run on one worker (xdist group ``pulsar_private``)."""
    _require_pulsar()
    broker = TxnPulsarBroker()
    _pulsar_brokers.append(broker)
    _track(request, broker)

    def finish():
        try:
            broker.kill()
        finally:
            _pulsar_brokers.remove(broker)

    request.addfinalizer(finish)
    broker.start()
    return broker


@pytest.fixture
def pulsar_service_url(pulsar_broker) -> str:
    """``pulsar://127.0.0.1:<port>`` of the session's broker."""
    return pulsar_broker.service_url


@pytest.fixture
def make_client(request, backend):
    """``make_client(broker=None, **kw) -> pulsar.Client`` on the run's shared broker (or on
    ``broker``) and the test's backend; all closed at teardown."""
    clients = []

    def make(broker=None, **kwargs):
        kwargs.setdefault("operation_timeout_seconds", 15)
        kwargs.setdefault("backend", backend)
        import pulsarfast  # (here: a run of the NSQ tests alone never imports it)

        if broker is None:
            broker = request.getfixturevalue("pulsar_broker")
        client = pulsarfast.Client(broker.service_url, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in reversed(clients):
        client.close()


_PULSAR_TOPIC_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_]+")


@pytest.fixture
def pulsar_topic(request) -> str:
    """A unique short topic name in public/default: ``t_<test name>_<random>``, at most 64 chars of [a-zA-Z0-9_]."""
    suffix = "_" + uuid.uuid4().hex[:8]
    base = "t_" + _PULSAR_TOPIC_BAD_CHARS.sub("_", request.node.name).strip("_")
    return base[: 64 - len(suffix)] + suffix


# ----------------------------------------------------------------------------- names / params

_TOPIC_BAD_CHARS = re.compile(r"[^.a-zA-Z0-9_-]+")


@pytest.fixture
def topic(request):
    """A unique valid nsq topic name: ``t_<test name>_<random>``, at most 64 chars of [.a-zA-Z0-9_-]."""
    suffix = "_" + uuid.uuid4().hex[:8]
    base = "t_" + _TOPIC_BAD_CHARS.sub("_", request.node.name).strip("_")
    return base[: 64 - len(suffix)] + suffix


@pytest.fixture(params=_BACKENDS, ids=list(_BACKENDS))
def backend(request):
    """The concurrency backend under test: "gevent" or "threads"."""
    return request.param


# ----------------------------------------------------------------------------- markers

# A test that asks for one of these (or for a fixture that does) needs a real server: `integration`.
_SERVER_FIXTURES = frozenset({
    "nsqd", "nsqd_factory", "nsqlookupd", "nsqlookupd_factory",
    "pulsar_broker", "private_pulsar_broker", "pulsar_service_url", "make_client",
    "txn_broker", "private_txn_broker",
})


@pytest.hookimpl(wrapper=True)  # (around pytest-xdist's, which reads the xdist_group marks)
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & _SERVER_FIXTURES:
            item.add_marker(pytest.mark.integration)
        if "private_pulsar_broker" in names or "private_txn_broker" in names:
            # one worker runs them all, on one more broker for the whole run (started in 5-10 s)
            item.add_marker(pytest.mark.xdist_group("pulsar_private"))
            item.add_marker(pytest.mark.slow)
    result = yield
    if getattr(config.option, "loadgroup", False):  # (set in workers by pytest-xdist for --dist loadgroup)
        # pytest-xdist has given grouped tests their "@group" suffix, unless --dist loadgroup silently
        # stopped grouping (as with pytest 9.2 and pytest-xdist 3.8): then every worker would start
        # the group's Spark session or broker of its own
        for item in items:
            if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid:
                pytest.exit(
                    "pytest-xdist's --dist loadgroup does not group %s: this pytest and pytest-xdist do not "
                    "work together (requirements-dev.txt pins pytest below 9.2 for that)" % item.nodeid, returncode=4)
    return result

