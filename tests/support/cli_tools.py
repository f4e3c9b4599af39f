# Running the installed console scripts (nsqfast, pulsarfast) as subprocesses, the way a user
# does, for tests/cli/: run() with a timeout, popen() for the ones a test signals, and
# the check that a failure is one line on stderr with a non-zero status and no traceback.
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .subprocess_programs import default_sigint

BIN = Path(sys.executable).parent
TIMEOUT = 60  # seconds any one command may take before the test fails


def script(name: str) -> str:
    path = BIN / name
    assert path.exists(), "%s is not installed next to %s: run `make install`" % (name, sys.executable)
    return str(path)


def _env() -> dict:
    env = dict(os.environ)
    env.pop("PULSAR_SERVICE_URL", None)
    env.pop("PULSAR_TOKEN", None)
    return env


def run(name: str, *args: str, input: bytes | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run a console script to its end; stdout and stderr as bytes."""
    return subprocess.run([script(name), *args], input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, env=_env(), stdin=None if input is not None else subprocess.DEVNULL)


def popen(name: str, *args: str, stdin_pipe: bool = False) -> subprocess.Popen:
    """Start a console script with its stdout and stderr on pipes (and stdin, when asked)."""
    return subprocess.Popen([script(name), *args], stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                            preexec_fn=default_sigint)  # (Ctrl-C reaches it also when the suite runs as a background job)


def lines(data: bytes) -> list[str]:
    return data.decode("utf-8").splitlines()


def assert_one_line_error(result: subprocess.CompletedProcess, prog: str, *words: str) -> str:
    """The command failed with exactly one line on stderr, '<prog>: error: ...', containing words."""
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 1, (result.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, stderr
    assert stderr.startswith(prog + ": error: "), stderr
    for word in words:
        assert word in stderr, (word, stderr)
    return stderr
