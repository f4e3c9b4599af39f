"""The metrics extra stays optional for both packages: importing ``nsq`` or
``pulsarfast`` never imports prometheus_client, and without it installed,
importing their ``metrics`` module raises an ImportError that names the extra."""
from __future__ import annotations

import subprocess
import sys

import pytest

PACKAGES = {
    "nsq": "import sys, nsq; nsq.Writer",
    "pulsarfast": "import sys, pulsarfast; pulsarfast.Client",
}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_importing_the_package_does_not_import_prometheus_client(package):
    code = PACKAGES[package] + "; assert 'prometheus_client' not in sys.modules, sorted(sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_without_prometheus_client_the_import_error_names_the_extra(package):
    code = (
        "import sys\n"
        "sys.modules['prometheus_client'] = None  # as if it were not installed\n"
        "try:\n"
        "    import %s.metrics\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('imported')\n"
    ) % package
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pip install nsqfast[metrics]" in done.stdout
