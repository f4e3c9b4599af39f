"""The documentation site's sources, without building it (`make docs` builds it, strict, in CI):
mkdocs.yml's nav lists every page in docs/ and nothing else, and the README's links to files of
the checkout (its links into docs/ above all) point at files that are there."""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _nav_pages(config: str) -> list[str]:
    """The page paths of the `nav:` block (read as text: the test needs no YAML library)."""
    lines = config.splitlines()
    start = lines.index("nav:")
    pages = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):  # the next top-level key
            break
        found = re.match(r"""^\s*-\s*(?:[^:]*:\s*|"[^"]*":\s*)?([\w./-]+\.md)\s*$""", line)
        if found:
            pages.append(found.group(1))
    return pages


def test_the_nav_reader_reads_titled_and_untitled_entries():
    config = "nav:\n  - Home: index.md\n  - \"A: b\": a.md\n  - Part:\n      - api/index.md\n      - x: api/x.md\nplugins: []\n"
    assert _nav_pages(config) == ["index.md", "a.md", "api/index.md", "api/x.md"]


def test_mkdocs_nav_lists_every_page_in_docs_once():
    if not (ROOT / "mkdocs.yml").exists():
        pytest.skip("no mkdocs.yml here")
    nav = _nav_pages((ROOT / "mkdocs.yml").read_text())
    on_disk = sorted(path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md"))
    assert sorted(set(nav)) == on_disk
    assert sorted(nav) == sorted(set(nav)), "a page is in the nav twice"


def test_the_readme_links_to_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [target.split("#")[0] for target in targets if not re.match(r"^[a-z]+:|^#", target)]
    assert local, "the README links to no page of docs/"
    assert [target for target in local if not (ROOT / target).exists()] == []
