"""What a user gets from `pip install`: each manylinux wheel `make wheels` leaves in dist/ (one per
supported CPython), installed into a fresh venv of its Python with no Cython and no compiler on
PATH, runs the compiled codecs and publish/consume round trips on real nsqd and the real Pulsar
broker, on gevent and on threads; and an install without the compiled modules says so once
through logging.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

import msgengine
import nsq
import pulsarfast

REPO = Path(__file__).resolve().parent.parent.parent
DIST = REPO / "dist"


#: the CPython versions a wheel is built for (`make wheels`, ci/pythons.sh)
PYTHON_VERSIONS = ("3.10", "3.11", "3.12", "3.13")


@functools.lru_cache(maxsize=None)  # (one search per test process, not one per parametrized test)
def _interpreters() -> dict[str, str]:
    """{version: interpreter} as `make wheels` finds them (ci/pythons.sh find: PYTHONS, or pyenv's
    versions, or pythonX.Y on PATH)."""
    found = subprocess.run(["bash", str(REPO / "ci" / "pythons.sh"), "find"], capture_output=True,
                           text=True, timeout=60, check=True)
    return dict(line.split(" ", 1) for line in found.stdout.splitlines())


def _built_wheel(version: str) -> tuple[Path, str]:
    """The manylinux wheel of one Python in dist/, and that Python."""
    python = _interpreters().get(version)
    if python is None:
        pytest.skip("no Python %s on this machine (ci/pythons.sh find): no wheel is built for it" % version)
    tag = "cp" + version.replace(".", "")
    wheels = sorted(DIST.glob("nsqfast-*-%s-%s-manylinux*_x86_64.whl" % (tag, tag))) if DIST.is_dir() else []
    if not wheels:
        message = "no %s manylinux wheel in dist/: run `make wheels`" % tag
        if os.environ.get("NSQ_REQUIRE_WHEEL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return wheels[-1], python


def _bare_env(bin_dir: Path) -> dict[str, str]:
    """Only the venv's bin on PATH (no gcc, no cc), and no compiler named either."""
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "CC": "/nonexistent/cc", "CXX": "/nonexistent/c++", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CACHE_DIR", "XDG_CACHE_HOME"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


# Both protocols on both blocking-style backends, from the installed wheel: NSQ's MPUB and a Reader
# of every message, Pulsar's send and receive + acknowledge.
ROUND_TRIP = r"""
import sys
import msgengine.sockio, nsq, nsq.codec, nsq.publishing, pulsarfast, pulsarfast.wire.codec
from msgengine.runtime import get_backend

print("nsq", nsq.__file__)
print("codecs", nsq.codec.IMPLEMENTATION, pulsarfast.wire.codec.IMPLEMENTATION, nsq.publishing.IMPLEMENTATION,
      msgengine.sockio.IMPLEMENTATION)
address, topic, service_url, pulsar_topic = sys.argv[1:5]
for backend in ("gevent", "threads"):
    bodies = [b"wheel-%s-%d" % (backend.encode(), i) for i in range(500)]
    nsq_topic = topic + "_" + backend  # (a channel made later would not get the first one's messages)
    with nsq.Writer([address], backend=backend) as writer:
        assert writer.mpub(nsq_topic, bodies) == b"OK"
    seen = []

    def handler(message):
        seen.append(message.body)
        if len(seen) == len(bodies):
            reader.close()
        return True

    reader = nsq.Reader(nsq_topic, backend, handler, nsqd_tcp_addresses=[address], max_in_flight=100,
                        backend=backend)
    get_backend(backend).spawn(reader.run).join(60)
    print("nsq", backend, len(seen), sorted(seen) == sorted(bodies))

    client = pulsarfast.Client(service_url, backend=backend, operation_timeout_seconds=30)
    consumer = client.subscribe(pulsar_topic + "_" + backend, "wheel")
    producer = client.create_producer(pulsar_topic + "_" + backend)
    sent = [b"pulsar-%s-%d" % (backend.encode(), i) for i in range(200)]
    for body in sent:
        producer.send(body)
    got = []
    for _ in sent:
        message = consumer.receive(30000)
        got.append(message.data())
        consumer.acknowledge(message)
    client.close()
    print("pulsar", backend, len(got), got == sent)
"""


@pytest.mark.slow  # (a fresh venv of that Python, the wheel and its dependencies installed into it)
@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", PYTHON_VERSIONS)
def test_wheel_installs_without_compiler_and_runs_compiled(tmp_path, nsqd, pulsar_broker, pulsar_topic, version):
    wheel, python = _built_wheel(version)
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    env = _bare_env(bin_dir)
    assert shutil.which("gcc", path=env["PATH"]) is None and shutil.which("cc", path=env["PATH"]) is None
    # --only-binary: nothing may be built from source, ours or a dependency's
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--only-binary", ":all:", str(wheel)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=420)
    assert install.returncode == 0, install.stderr
    no_cython = subprocess.run([str(bin_dir / "python"), "-c", "import Cython"],
                               env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert no_cython.returncode != 0 and "No module named 'Cython'" in no_cython.stderr
    topic = "wheel_%s" % uuid.uuid4().hex[:8]

    run = subprocess.run([str(bin_dir / "python"), "-c", ROUND_TRIP, nsqd.tcp_address, topic,
                          pulsar_broker.service_url, pulsar_broker.topic_name(pulsar_topic)],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    lines = [line.split(" ") for line in run.stdout.splitlines()]
    assert lines[0][0] == "nsq" and lines[0][1].startswith(str(venv)), \
        "nsq was imported from %s, not the wheel" % lines[0][1]
    assert lines[1] == ["codecs", "cython", "cython", "cython", "cython"]  # (the publish path, the socket calls)
    assert lines[2:] == [["nsq", "gevent", "500", "True"], ["pulsar", "gevent", "200", "True"],
                         ["nsq", "threads", "500", "True"], ["pulsar", "threads", "200", "True"]]
    assert "pure-Python codec" not in run.stderr
    for backend in ("gevent", "threads"):
        assert nsqd.channel_stats(topic + "_" + backend, backend)["depth"] == 0
        stats = pulsar_broker.topic_stats(pulsar_topic + "_" + backend)
        assert stats["msgInCounter"] == 200
        assert stats["subscriptions"]["wheel"]["msgBacklog"] == 0


def _without_compiled(destination: Path, **extra_env: str) -> tuple[list[str], dict[str, str]]:
    """A copy of the packages without their compiled modules, and how to run Python on it.

    ``-S`` keeps site's .pth files (the editable install's finder among them) from
    finding the checkout's compiled modules; the dependencies come from PYTHONPATH.
    """
    for package in (nsq, msgengine, pulsarfast):
        shutil.copytree(Path(package.__file__).parent, destination / package.__name__,
                        ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    env = {key: value for key, value in os.environ.items() if key not in ("NSQ_PURE_PYTHON", "PULSARFAST_PURE_PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(destination), sysconfig.get_paths()["purelib"]])
    env.update(extra_env)
    return [sys.executable, "-S"], env


IMPORT_ALL = ("import nsq, nsq.codec, nsq.publishing, nsq.reader, nsq.writer, pulsarfast, pulsarfast.wire.codec, "
              "pulsarfast.consuming.consumer; from nsq.publishing import IMPLEMENTATION")


@pytest.mark.timeout(120)
def test_missing_compiled_codec_warns_once_through_logging(tmp_path):
    python, env = _without_compiled(tmp_path)
    program = IMPORT_ALL + "; print(nsq.codec.IMPLEMENTATION, pulsarfast.wire.codec.IMPLEMENTATION, IMPLEMENTATION)"
    run = subprocess.run([*python, "-c", program], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["python", "python", "python"]
    # (the codec's warning covers the compiled publish path missing beside it: said once)
    assert "nsq._publish" not in run.stderr, run.stderr
    # no handler configured: logging's last-resort handler prints WARNINGs to stderr
    assert run.stderr.count("nsq: the compiled frame codec (nsq._frame) is not installed") == 1, run.stderr
    assert run.stderr.count("pulsarfast: the compiled wire codec (pulsarfast.wire._codec) is not installed") == 1, run.stderr


@pytest.mark.timeout(120)
def test_pure_codec_chosen_on_purpose_does_not_warn(tmp_path):
    python, env = _without_compiled(tmp_path, NSQ_PURE_PYTHON="1")
    program = IMPORT_ALL + "; print(nsq.codec.IMPLEMENTATION, pulsarfast.wire.codec.IMPLEMENTATION, IMPLEMENTATION)"
    run = subprocess.run([*python, "-c", program], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["python", "python", "python"]
    assert "not installed" not in run.stderr


def test_every_package_of_the_source_tree_goes_into_the_wheel():
    if not (REPO / "nsq").is_dir():
        pytest.skip("no source tree here: the packages are installed from a wheel (make test-pythons)")
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {str(init.parent.relative_to(REPO)).replace(os.sep, ".")
               for top in ("nsq", "msgengine", "pulsarfast") for init in (REPO / top).rglob("__init__.py")}
    assert on_disk - listed == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"
