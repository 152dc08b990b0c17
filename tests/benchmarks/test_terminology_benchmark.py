"""The TBX benchmark's termbase (benchmarks/quality/text/terminology.py) is a file the
server's TBX reader takes as written: preferred targets enforced, the others forbidden,
names kept; and its term choice follows the references (synthetic data, no model)."""

from __future__ import annotations

import random
from pathlib import Path

from benchmarks.quality.text import terminology
from benchmarks.quality.text.glossary import DOMAINS, GENRES, TERM_CORPORA
from server.serving.tbx import read_tbx


def test_the_termbase_reads_back_through_the_servers_reader() -> None:
    data = terminology.termbase({"schedule": ("calendrier", ["Planning", "Programme"]),
                                 "r&d": ("R&D", [])}, ["Viraferon"])
    found = read_tbx(data, source="en", target="fr")
    assert found.entries == [("schedule", "calendrier"), ("r&d", "R&D"),
                             ("Viraferon", "Viraferon")]
    assert found.forbidden == ["Planning", "Programme"]
    assert found.do_not_translate == ["Viraferon"]


def write(folder: Path, name: str, sources: list[str], targets: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.en").write_text("".join(s + "\n" for s in sources))
    (folder / f"{name}.fr").write_text("".join(t + "\n" for t in targets))


def test_terms_and_names_are_chosen_from_the_references(tmp_path: Path) -> None:
    for corpus in TERM_CORPORA:
        write(tmp_path / "en-fr" / "extra" / corpus, "train", ["schedule", "schedule"],
              ["Calendrier", "Planning"])
    sentence = ("The dose schedule for Viraferon is weekly.",
                "Le calendrier des doses de Viraferon est hebdomadaire.")
    for domain in DOMAINS:
        write(tmp_path / "en-fr" / "domains" / domain, "test", [sentence[0]], [sentence[1]])
    for genre in GENRES:
        write(tmp_path / "en-fr" / "extra" / genre, "test", ["Nothing here."], ["Rien."])
    cases, concepts = terminology.choose(tmp_path, limit=70, rng=random.Random(1))
    # written as the references write it; the other target is forbidden
    assert concepts == {"schedule": ("calendrier", ["Planning"])}
    assert len(cases) == len(DOMAINS)  # the genres' sentences hold neither term nor name
    assert all(c.terms == ("schedule",) and c.names == ("Viraferon",) for c in cases)
