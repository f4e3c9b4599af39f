# Shared pytest fixtures: real nsqd / nsqlookupd servers (tests/servers.py), fault proxies
# (tests/faultproxy.py), a unique `topic` per test and the `backend` parametrization.
#
# gevent must NOT be monkey-patched globally: the client is used both on gevent and on plain
# threads in the same test session, and the harness itself relies on real threads/sockets.
# Do not call gevent.monkey.patch_all() (or any patch_*) in tests or here; an autouse check fails
# any test that does.
from __future__ import annotations

import os
import re
import sys
import uuid

import pytest

# Every gevent primitive of the library checks that it runs on the hub's thread
# (nsq/runtime.py): a path that lets another OS thread touch the hub fails at once.
os.environ.setdefault("NSQ_CHECK_HUB_THREAD", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from faultproxy import FaultProxy  # noqa: E402
from servers import (  # noqa: E402
    NsqBinaryNotFound,
    Nsqd,
    Nsqlookupd,
    nsq_bin_dir,
    require_nsq_bin,
)

# Programs the tests run as subprocesses, not test modules.
collect_ignore_glob = ["programs/*", "pynsq_programs/*"]

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
    try:
        folder = require_nsq_bin()
        return f"nsq binaries: {folder}"
    except NsqBinaryNotFound:
        return f"nsq binaries: MISSING in {nsq_bin_dir()} (run `bash ci/install-nsq.sh`)"


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
        for server in item.stash.get(_SERVERS_KEY, []):
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
    from nsq.runtime import get_backend

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
