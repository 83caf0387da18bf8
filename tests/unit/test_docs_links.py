"""The README and the user docs stay readable by a newcomer with only this repository: every
relative link resolves, nothing points outside the repository, the README stays short, and no
spec section numbers or work-log issue numbers leak into them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code blocks hold no links
    return [m.group(1) for m in LINK.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        missing = not path.is_relative_to(REPO) or not path.exists()
        bad_anchor = not missing and "#" in target and path.suffix == ".md" and (
            target.split("#", 1)[1] not in _anchors(path))
        if missing or bad_anchor:
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#+\s+(.+?)\s*$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_spec_section_or_issue_numbers(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = re.findall(r"V§[\d.]+|§\s?\d+|\bissue #?\d+|\.\./shared/", text, flags=re.I)
    assert not found, f"{page.name}: {found}"


def test_readme_is_short_and_keeps_the_two_commands() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "make run" in text and "make test" in text
