"""Every relative link in README.md, docs/ and benchmark/results/ points at a file or folder that exists, so pages cannot
silently point at moved or renamed results."""

import re

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "benchmark" / "results").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # markdown links and images: [text](target)


def relative_links(page):
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        yield target.split("#", 1)[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    missing = [t for t in relative_links(page) if t and not (page.parent / t).exists()]
    assert missing == [], f"{page.relative_to(REPO)} links to missing paths: {missing}"
