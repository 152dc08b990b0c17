"""The TBX benchmark's termbases (benchmarks/quality/text/terminology.py) are files the
server's TBX reader takes as written: preferred targets enforced, the others forbidden,
names kept; a sentence's termbase follows its reference and what the model wrote without
it; the pool takes sentences that can invite a forbidden term first (synthetic data, no
model)."""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from benchmarks.quality.text import terminology
from benchmarks.quality.text.glossary import DOMAINS, GENRES, TERM_CORPORA
from server.decoding.search import SearchOptions
from server.serving.tbx import read_tbx


def test_the_termbase_reads_back_through_the_servers_reader() -> None:
    data = terminology.termbase({"schedule": ("calendrier", ["Planning", "Programme"]),
                                 "r&d": ("R&D", []), "since": (None, ["Depuis"])},
                                ["Viraferon"])
    found = read_tbx(data, source="en", target="fr")
    assert found.entries == [("schedule", "calendrier"), ("r&d", "R&D"),
                             ("Viraferon", "Viraferon")]
    assert found.forbidden == ["Planning", "Programme", "Depuis"]
    assert found.do_not_translate == ["Viraferon"]


ROW = terminology.Row("The dose schedule for Viraferon is weekly.",
                      "Le calendrier des doses de Viraferon est hebdomadaire.", "medical",
                      "medical")
PAIRS = {"schedule": {"Calendrier", "Planning", "Programme"}, "dose": {"posologie"}}


def test_a_sentence_invites_what_the_model_wrote_and_the_reference_does_without() -> None:
    baseline = "Le programme de posologie pour Viraferon est hebdomadaire."
    case = terminology.invitations(ROW, baseline, PAIRS, terminology._finder(list(PAIRS)))
    # the preferred target as the reference writes it; Planning was never written
    assert case.preferred == (("schedule", "calendrier"),)
    assert case.forbidden == (("dose", "posologie"), ("schedule", "Programme"))
    assert case.names == ("Viraferon",)
    found = read_tbx(terminology.case_termbase(case), source="en", target="fr")
    assert ("schedule", "calendrier") in found.entries
    assert sorted(found.forbidden) == ["Programme", "posologie"]
    assert found.do_not_translate == ["Viraferon"]
    # a model that wrote the reference's words is invited to nothing
    plain = terminology.invitations(ROW, ROW.reference, PAIRS,
                                    terminology._finder(list(PAIRS)))
    assert plain.forbidden == ()


def write(folder: Path, name: str, sources: list[str], targets: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.en").write_text("".join(s + "\n" for s in sources))
    (folder / f"{name}.fr").write_text("".join(t + "\n" for t in targets))


def test_the_pool_takes_inviting_sentences_in_turn_then_names(tmp_path: Path) -> None:
    for corpus in TERM_CORPORA:
        write(tmp_path / "en-fr" / "extra" / corpus, "train", ["schedule", "schedule"],
              ["Calendrier", "Planning"])
    for domain in DOMAINS:  # the reference writes one target: Planning is open
        write(tmp_path / "en-fr" / "domains" / domain, "test",
              [ROW.source, "Nothing here.", "Nothing for Viraferon."],
              [ROW.reference, "Rien.", "Rien pour Viraferon."])
    for genre in GENRES:  # the reference writes both targets: nothing is open
        write(tmp_path / "en-fr" / "extra" / genre, "test",
              ["A schedule.", "Ask Mariam today."],
              ["Un calendrier, un planning.", "Demandez à Mariam aujourd'hui."])
    pairs = terminology.term_pairs(tmp_path)
    rows = terminology.pool(tmp_path, pairs, size=18, rng=random.Random(1))
    # 16 inviting ones asked for, 7 found; then 2 (18 / 9) holding only names
    inviting, naming = rows[: len(DOMAINS)], rows[len(DOMAINS):]
    assert [r.source for r in inviting] == [ROW.source] * len(DOMAINS)
    assert len(naming) == 18 // 9
    assert all(re.search("Viraferon|Mariam", r.source) for r in naming)
    assert {r.set_name for r in naming} <= {*DOMAINS, *GENRES}


def test_the_work_folder_keeps_each_sentence_and_serves_the_none_outputs_again(
        tmp_path: Path) -> None:
    baseline = "Le programme de posologie pour Viraferon est hebdomadaire."
    case = terminology.invitations(ROW, baseline, PAIRS, terminology._finder(list(PAIRS)))
    output = "Le Programme des doses de viraferon, d'une posologie hebdomadaire."
    terminology._keep(tmp_path, [case], [output])
    [kept] = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert kept["forbidden_left"] == ["Programme", "posologie"]  # as found, any case
    assert kept["preferred_missed"] == ["calendrier"] and kept["names_lost"] == ["Viraferon"]
    # a rerun takes the none outputs from the folder: no engine is needed for them
    (tmp_path / "none-beam1.jsonl").write_text(json.dumps(
        {"domain": ROW.domain, "source": ROW.source, "none": baseline}) + "\n")
    args = argparse.Namespace(work=tmp_path, beam_size=1)
    assert terminology._baseline(args, None, {}, [ROW], SearchOptions()) == [baseline]
