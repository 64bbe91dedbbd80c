"""Every file the README and docs/ point at exists: a path to code, a test, a config or a script, and every
relative Markdown link. Ten such references had gone stale when tests and modules moved (issue 31)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "results").glob("*.md"))]
# A repository path written out: `act/model/act.py`, tests/unit/test_act.py, configs/experiment/, ...
REPO_PATH = re.compile(r"(?<![\w./-])((?:act|tests|scripts|configs|docs)/[\w./-]*[\w/])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
ANCHORED = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")  # [text](page.md#anchor) or [text](#anchor)


def named_paths(page: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        found += [(number, m.group(1)) for m in REPO_PATH.finditer(line)]
    return found


def linked_paths(page: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        found += [(number, m.group(1)) for m in LINK.finditer(line) if "://" not in m.group(1)]
    return found


def exists(path: str) -> bool:
    """A written-out path, a glob (``configs/experiment/*.yaml``) or a pattern with a placeholder
    (``tests/unit/test_<x>.py``) is fine when something on disk matches it."""
    path = path.rstrip("/.")
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_a_page_names_exists(page):
    missing = [f"{page.name}:{n}: {p}" for n, p in named_paths(page) if not exists(p)]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    missing = [f"{page.name}:{n}: {p}" for n, p in linked_paths(page) if not (page.parent / p).exists()]
    assert not missing, "links to nothing:\n" + "\n".join(missing)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_into_a_page_names_a_heading_it_has(page):
    """A link to ``page.md#anchor`` names a heading that page still has: the results pages move sections between
    current and archive, and a stale anchor sends a reader to the top of the wrong page."""
    missing = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        for target, anchor in ANCHORED.findall(line):
            linked = page if not target else page.parent / target
            if linked.suffix == ".md" and linked.exists() and anchor not in anchors(linked):
                missing.append(f"{page.name}:{number}: {target}#{anchor}")
    assert not missing, "anchors no heading has:\n" + "\n".join(missing)
