"""What a user gets from `pip install`: the manylinux wheel `make wheel` leaves in
dist/, installed into a fresh venv with no Cython and no compiler on PATH, runs the
compiled codecs and a publish/consume round trip against a real nsqd; and an install
without the compiled modules says so once through logging.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
DIST = REPO / "dist"


def _built_wheel() -> Path:
    wheels = sorted(DIST.glob("nsqfast-*-manylinux*_x86_64.whl")) if DIST.is_dir() else []
    if not wheels:
        message = "no manylinux wheel in dist/: run `make wheel`"
        if os.environ.get("NSQ_REQUIRE_WHEEL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return wheels[-1]


def _bare_env(bin_dir: Path) -> dict[str, str]:
    """Only the venv's bin on PATH (no gcc, no cc), and no compiler named either."""
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "CC": "/nonexistent/cc", "CXX": "/nonexistent/c++", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CACHE_DIR", "XDG_CACHE_HOME"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


ROUND_TRIP = r"""
import sys
import nsq, nsq.codec, pulsarfast.wire
from msgengine.runtime import get_backend

print("nsq", nsq.__file__)
print("codecs", nsq.codec.IMPLEMENTATION, pulsarfast.wire.IMPLEMENTATION)
address, topic = sys.argv[1], sys.argv[2]
bodies = [b"wheel-%d" % i for i in range(500)]
with nsq.Writer([address]) as writer:
    assert writer.mpub(topic, bodies) == b"OK"
seen = []

def handler(message):
    seen.append(message.body)
    if len(seen) == len(bodies):
        reader.close()
    return True

reader = nsq.Reader(topic, "wheel", handler, nsqd_tcp_addresses=[address], max_in_flight=100)
get_backend("auto").spawn(reader.run).join(60)
print("received", len(seen), sorted(seen) == sorted(bodies))
"""


@pytest.mark.slow  # (a fresh venv, the wheel and its dependencies installed into it)
@pytest.mark.timeout(600)
def test_wheel_installs_without_compiler_and_runs_compiled(tmp_path, nsqd, topic):
    wheel = _built_wheel()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
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

    run = subprocess.run([str(bin_dir / "python"), "-c", ROUND_TRIP, nsqd.tcp_address, topic],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["nsq"].startswith(str(venv)), "nsq was imported from %s, not the wheel" % lines["nsq"]
    assert lines["codecs"] == "cython cython"
    assert lines["received"] == "500 True"
    assert "pure-Python codec" not in run.stderr
    assert nsqd.channel_stats(topic, "wheel")["depth"] == 0


def _without_compiled(destination: Path, **extra_env: str) -> tuple[list[str], dict[str, str]]:
    """A copy of the packages without their compiled modules, and how to run Python on it.

    ``-S`` keeps site's .pth files (the editable install's finder among them) from
    finding the checkout's compiled modules; the dependencies come from PYTHONPATH.
    """
    for package in ("nsq", "msgengine", "pulsarfast"):
        shutil.copytree(REPO / package, destination / package,
                        ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    env = {key: value for key, value in os.environ.items() if key not in ("NSQ_PURE_PYTHON", "PULSARFAST_PURE_PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(destination), sysconfig.get_paths()["purelib"]])
    env.update(extra_env)
    return [sys.executable, "-S"], env


IMPORT_ALL = "import nsq, nsq.codec, nsq.reader, pulsarfast, pulsarfast.wire, pulsarfast.consumer"


@pytest.mark.timeout(120)
def test_missing_compiled_codec_warns_once_through_logging(tmp_path):
    python, env = _without_compiled(tmp_path)
    program = IMPORT_ALL + "; print(nsq.codec.IMPLEMENTATION, pulsarfast.wire.IMPLEMENTATION)"
    run = subprocess.run([*python, "-c", program], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["python", "python"]
    # no handler configured: logging's last-resort handler prints WARNINGs to stderr
    assert run.stderr.count("nsq: the compiled frame codec (nsq._frame) is not installed") == 1, run.stderr
    assert run.stderr.count("pulsarfast: the compiled wire codec (pulsarfast._wire) is not installed") == 1, run.stderr


@pytest.mark.timeout(120)
def test_pure_codec_chosen_on_purpose_does_not_warn(tmp_path):
    python, env = _without_compiled(tmp_path, NSQ_PURE_PYTHON="1")
    program = IMPORT_ALL + "; print(nsq.codec.IMPLEMENTATION, pulsarfast.wire.IMPLEMENTATION)"
    run = subprocess.run([*python, "-c", program], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["python", "python"]
    assert "not installed" not in run.stderr


def test_every_package_of_the_source_tree_goes_into_the_wheel():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {str(init.parent.relative_to(REPO)).replace(os.sep, ".")
               for top in ("nsq", "msgengine", "pulsarfast") for init in (REPO / top).rglob("__init__.py")}
    assert on_disk - listed == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"
