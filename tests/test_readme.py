"""README.md is for users: short, no lab notebook (no issue numbers, no runs or sessions),
every result in its table says whether it meets its own target, and every relative link
in it and in docs/ leads to a file that exists. (Every curl
example in them runs against a live server: tests/server/test_doc_examples.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 250
LINKED = [README, *sorted((ROOT / "docs").glob("*.md")),
          ROOT / "benchmarks" / "results" / "history" / "NOTES.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_fits_the_limit() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_tells_no_history() -> None:
    text = README.read_text()
    assert not re.search(r"(?<![\w/&])#\d+\b", text), "an issue number"
    assert not re.search(r"\b(session|sitting|issue)s?\b", text, re.IGNORECASE)


def test_the_readme_shows_the_quick_start_and_one_screenshot() -> None:
    text = README.read_text()
    assert "make run" in text and "make test" in text and "HOST=0.0.0.0" in text
    images = re.findall(r"!\[[^\]]+\]\((docs/images/[^)]+)\)", text)
    assert len(images) == 1 and (ROOT / images[0]).is_file()


def numbers_rows() -> list[dict[str, str]]:
    """The rows of the README's results table, by column name."""
    section = README.read_text().split("## Numbers", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
            for line in lines[2:]]


def test_each_result_says_whether_it_meets_its_own_target() -> None:
    rows = numbers_rows()
    assert len(rows) >= 10
    for row in rows:
        verdicts = re.findall(r"\b(met|missed)\b", row["target"])
        assert verdicts and re.search(r"\d", row["target"]), row["what"]  # the target itself
    missed = [row["what"] for row in rows if "missed" in row["target"]]
    section = README.read_text().split("## Numbers", 1)[1]
    assert not missed or "**Missed:**" in section, "the rows that miss are not named"


@pytest.mark.parametrize("document", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(document: Path) -> None:
    broken = []
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        path = target.split("#")[0]
        if not (document.parent / path).exists():
            broken.append(target)
    assert not broken, f"{document.name}: {broken}"
