"""Import time (issue 49): ``import pulsarfast`` and ``import nsq`` load only their light parts (the
enums, exceptions, loggers and version; nsq's errors, ``run`` and version); every other public
name loads when first used (``msgengine.lazy``: PEP 562), and the libraries a feature needs
(requests, http.client, cryptography, pyspark, ...) load when that feature runs. The names stay
where they were: ``from X import *``, ``dir(X)`` and ``from X import name`` give every public name,
the same object whatever the path it is reached by. Each check runs in a fresh interpreter (what a
process has imported is what is asserted)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDED: dict[str, list[str]] = json.loads(pathlib.Path(__file__).with_name("public_names.json").read_text())
PYNSQ_PYTHON = ROOT / ".bench-venvs" / "pynsq" / "bin" / "python"

#: what neither package may import with itself: HTTP clients (lookups, OAuth2), TLS, the optional
#: extras' libraries, other event loops and each other
HEAVY = ("requests", "urllib3", "http.client", "urllib.request", "email.parser", "ssl", "cryptography", "pyspark",
         "prometheus_client", "fastavro", "google.protobuf", "lz4", "zstandard", "snappy", "gevent", "tornado",
         "asyncio", "opentelemetry")
LOADED = "import json, sys; print(json.dumps(sorted(m for m in %r if m in sys.modules)))" % (HEAVY,)


def run(code: str, python: str = sys.executable, cwd: str | None = None, env: dict[str, str] | None = None) -> str:
    """The last line a fresh interpreter prints running code."""
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("package", ["pulsarfast", "nsq"])
def test_importing_the_package_loads_no_heavy_library(package):
    assert json.loads(run("import %s; %s" % (package, LOADED))) == []


@pytest.mark.parametrize("package, light", [
    ("pulsarfast", ["pulsarfast", "pulsarfast.base", "pulsarfast.base.enums", "pulsarfast.base.logger",
                    "pulsarfast.base.results", "pulsarfast.version"]),
    ("nsq", ["nsq", "nsq.errors", "nsq.run", "nsq.version"]),
])
def test_importing_the_package_loads_only_its_light_modules(package, light):
    code = "import json, sys, %s; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == %r)))"
    assert json.loads(run(code % (package, package))) == light


def test_a_client_made_and_closed_loads_no_http_client_nor_an_extra():
    """The Client, its producers' and consumers' classes and the authentication classes load without
    http.client (HTTP lookups, OAuth2 load it at their first request) nor an extra's library."""
    code = ("import pulsarfast\n"
            "client = pulsarfast.Client('pulsar://127.0.0.1:1', backend='threads')\n"
            "pulsarfast.Producer, pulsarfast.Consumer, pulsarfast.Reader, pulsarfast.AuthenticationOauth2\n"
            "pulsarfast.CryptoKeyReader, pulsarfast.TableView, pulsarfast.schema.AvroSchema\n"
            "import pulsarfast.network.httplookup, pulsarfast.endpoints.oauth2\n"
            "client.close()\n" + LOADED)
    assert set(json.loads(run(code))) <= {"ssl"}  # (TLS settings are part of the client's)


def test_nsq_readers_and_writers_load_no_http_client_until_a_lookup():
    """Reader, Writer and the connections load without requests; a lookupd query loads it."""
    code = "import nsq\nnsq.Reader, nsq.Writer, nsq.LegacyReader, nsq.AsyncConn, nsq.SyncConn\n" + LOADED
    assert set(json.loads(run(code))) <= {"ssl"}  # (nsqd connections may be TLS ones)
    code = ("import json, sys\n"
            "import nsq.lookupd\n"
            "before = 'requests' in sys.modules\n"
            "try:\n    nsq.lookupd.query('127.0.0.1:1', 't', 1.0, 1.0)  # (refused: nothing listens there)\n"
            "except Exception:\n    pass\n"
            "print(json.dumps([before, 'requests' in sys.modules]))")
    assert json.loads(run(code)) == [False, True]


@pytest.mark.parametrize("package", ["pulsarfast", "nsq"])
def test_every_public_name_is_reached_by_every_path_as_the_same_object(package):
    """``from X import *``, ``X.name``, ``from X import name`` and the module that defines it give one object;
    ``dir(X)``, before anything is used, lists ``__all__`` and every name recorded for X."""
    code = (
        "import importlib, json, types\n"
        "import {p}\n"
        "listed = dir({p})\n"
        "star = {{}}\n"
        "exec('from {p} import *', star)\n"
        "wrong = []\n"
        "for name in {p}.__all__:\n"
        "    value = getattr({p}, name)\n"
        "    imported = {{}}\n"
        "    exec('from {p} import %s as it' % name, imported)\n"
        "    if star.get(name) is not value or imported['it'] is not value:\n"
        "        wrong.append(name)\n"
        "    home = getattr(value, '__module__', None)\n"
        "    if isinstance(value, (type, types.FunctionType)) and home and "
        "getattr(importlib.import_module(home), value.__name__) is not value:\n"
        "        wrong.append(name + ' (its module)')\n"
        "print(json.dumps({{'all': {p}.__all__, 'dir': listed, 'wrong': wrong}}))\n"
    ).format(p=package)
    found = json.loads(run(code))
    assert found["wrong"] == []
    assert sorted(set(found["all"]) - set(found["dir"])) == []
    assert sorted(set(RECORDED[package]) - set(found["dir"])) == []


@pytest.mark.parametrize("package", ["pulsarfast", "nsq"])
def test_no_lazily_loaded_name_is_also_a_submodule(package):
    """Importing a sub-module binds it to its name in the package: a public name that is also a
    sub-module's (nsq.run: the function, in the module nsq.run) must be loaded with the package."""
    code = (
        "import importlib.util, json, types\n"
        "import {p}\n"
        "eager = set(vars({p}))\n"
        "clash = [name for name in {p}.__all__ if name not in eager and "
        "not isinstance(getattr({p}, name), types.ModuleType) and "
        "importlib.util.find_spec('{p}.' + name) is not None]\n"
        "print(json.dumps(clash))\n"
    ).format(p=package)
    assert json.loads(run(code)) == []


def test_nsq_run_stays_the_function_when_its_module_is_imported_by_name():
    code = "import nsq.run, nsq, json, types; print(json.dumps(isinstance(nsq.run, types.FunctionType)))"
    assert json.loads(run(code)) is True


@pytest.mark.parametrize("package", ["pulsarfast", "nsq"])
def test_a_name_the_package_does_not_have_is_an_attribute_error(package):
    code = ("import json, {p}\n"
            "try:\n    {p}.NoSuchName\nexcept AttributeError as exc:\n    print(json.dumps(str(exc)))\n"
            ).format(p=package)
    assert json.loads(run(code)) == "module %r has no attribute 'NoSuchName'" % package


STAR_NSQ = (
    "import json, sys\n"
    "star = {}\n"
    "exec('from nsq import *', star)\n"
    "import nsq\n"
    "print(json.dumps({'bound': sorted(name for name in star if not name.startswith('__')),\n"
    "                  'same': all(star[name] is getattr(nsq, name) for name in nsq.__all__),\n"
    "                  'listed': sorted(set(nsq.__all__) - set(dir(nsq)))}))\n"
)


def test_star_import_of_nsq_binds_the_names_pynsq_binds(tmp_path):
    """``from nsq import *`` binds the same names on nsqfast as on pynsq 0.9.1 (the same program on
    both), each the object ``nsq.<name>`` is, and ``dir(nsq)`` lists them."""
    if not PYNSQ_PYTHON.exists():
        pytest.skip("pynsq 0.9.1 is not installed in .bench-venvs/pynsq (`make pynsq-corpus` installs it)")
    ours = json.loads(run(STAR_NSQ))
    alone = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    theirs = json.loads(run(STAR_NSQ, str(PYNSQ_PYTHON), str(tmp_path), alone))  # (`import nsq` is pynsq's there)
    assert ours == theirs
    assert ours["same"] is True and ours["listed"] == [] and {"Reader", "Writer", "run"} <= set(ours["bound"])
