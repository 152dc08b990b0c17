"""Every results file says how it was made (command, host or GPU, date) in its header, and
the writers put that header there themselves; history/ is the dated notes and the runs
they cite."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks.provenance import MADE_BY, made_by, stamped

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
REPORTS = sorted(p for p in RESULTS.iterdir() if p.suffix in (".md", ".txt"))
DATA = sorted(p for p in RESULTS.iterdir() if p.suffix == ".json")


def test_there_are_results() -> None:
    assert len(REPORTS) >= 10 and len(DATA) >= 10
    assert (RESULTS / "history").is_dir()


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_each_report_says_how_it_was_made(path: Path) -> None:
    head = path.read_text().splitlines()[:5]
    found = [MADE_BY.match(line) for line in head]
    assert any(found), f"{path.name}: no 'Made by `command` on host, date.' line at the top"
    match = next(m for m in found if m)
    datetime.strptime(match["date"], "%Y-%m-%d")  # a real date
    assert "make " in match["command"] or "python" in match["command"] or ".sh" in match["command"]


@pytest.mark.parametrize("path", DATA, ids=lambda p: p.name)
def test_each_data_file_sits_beside_its_report(path: Path) -> None:
    json.loads(path.read_text())
    stem = path.name.removesuffix(".json").removesuffix(".meta")
    assert (RESULTS / f"{stem}.md").is_file(), f"{path.name}: no {stem}.md says how it was made"


def test_history_keeps_only_the_runs_its_notes_cite() -> None:
    """history/ is NOTES.md (dated entries) and the few runs an entry needs whole; a
    replaced run's numbers go into its entry, its files stay in git history."""
    history = RESULTS / "history"
    notes = (history / "NOTES.md").read_text()
    kept = sorted(p.name for p in history.iterdir() if p.name != "NOTES.md")
    assert [name for name in kept if f"]({name})" not in notes] == []
    assert all(re.search(r"-\d{4}-\d{2}-\d{2}", name) for name in kept)
    dates = re.findall(r"^## (\d{4}-\d{2}-\d{2}) ", notes, flags=re.MULTILINE)
    assert dates and dates == sorted(dates, reverse=True)  # newest first


def test_made_by_names_this_command_host_and_date() -> None:
    line = made_by(host="AMD EPYC (AVX-512, 2 CPUs)", when=datetime(2026, 11, 26, tzinfo=UTC))
    match = MADE_BY.match(line)
    assert match is not None
    assert match["host"] == "AMD EPYC (AVX-512, 2 CPUs)" and match["date"] == "2026-11-26"
    assert match["command"].startswith("python ") and sys.orig_argv[-1] in match["command"]


def test_stamped_puts_the_line_under_a_markdown_title_or_first() -> None:
    line = "Made by `make bench-engine` on a host, 2026-11-26."
    assert stamped("# Engine speed\n\n| a |\n", line) == f"# Engine speed\n\n{line}\n\n| a |\n"
    assert stamped("torch threads: 2\n", line) == f"{line}\n\ntorch threads: 2\n"
