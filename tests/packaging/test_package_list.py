"""pyproject.toml names its packages one by one ([tool.setuptools] packages): every folder of the
three packages that holds an __init__.py is in that list, so that the wheel carries it (a folder
left out imports from the source tree and fails from the wheel)."""
from __future__ import annotations

import pathlib
import pytest

tomllib = pytest.importorskip("tomllib")  # (3.11 and later; the list is checked there)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_package_folder_is_in_pyproject_packages():
    if not (ROOT / "pulsarfast").is_dir():
        pytest.skip("no source tree here: the packages are installed from a wheel (make test-pythons)")
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts)
               for top in ("nsq", "pulsarfast", "msgengine") for init in (ROOT / top).rglob("__init__.py")}
    assert sorted(on_disk - listed) == []
    assert sorted(listed - on_disk) == []
