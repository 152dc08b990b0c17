"""Matching without a server: what makes two sources the same, the fuzzy index (sorted,
threshold, candidates among many pairs, updates), a human's target in a request's
context, and a document's sentences answered from a memory."""

from __future__ import annotations

import random

import pytest

from server.memories.document_matches import Hit, sentences, whole_text
from server.memories.index import PairIndex, entry
from server.memories.normalisation import normalised, source_key
from server.memories.target_render import render_target
from server.textproc.document import build_document

LEAFLET = [
    (1, "Take two tablets a day with water.", "Prenez deux comprimés par jour avec de l'eau."),
    (2, "Take one tablet a day with water.", "Prenez un comprimé par jour avec de l'eau."),
    (3, "Take two tablets a day with food.", "Prenez deux comprimés par jour au repas."),
    (4, "Keep out of the reach of children.", "Tenir hors de la portée des enfants."),
]


def leaflet() -> PairIndex:
    return PairIndex(entry(i, s, t) for i, s, t in LEAFLET)


def test_sources_are_the_same_across_spaces_quotes_and_compatibility_forms() -> None:
    assert normalised("  Don\u2019t\u00a0stop \n now ") == "Don't stop now"
    assert source_key("Don\u2019t stop now") == source_key("Don't  stop now")
    assert source_key("Save") != source_key("save")  # case counts for exact matches


def test_exact_lookup_finds_the_newest_pair_of_a_source() -> None:
    index = leaflet()
    index.put(entry(9, "Keep out of the reach of children.", "Conserver hors de portée."))
    found = index.exact("Keep  out of the reach of children.")
    assert found is not None and found.id == 9
    index.remove(9)
    found = index.exact("Keep out of the reach of children.")
    assert found is not None and found.id == 4
    assert index.exact("Keep out of reach.") is None


def test_fuzzy_matches_come_back_best_first_above_the_threshold() -> None:
    found = leaflet().fuzzy("Take three tablets a day with water.", threshold=75, limit=5)
    scores = [m.score for m in found]
    assert scores == sorted(scores, reverse=True) and all(s >= 75 for s in scores)
    assert [m.entry.id for m in found][:2] == [1, 2]
    assert 4 not in [m.entry.id for m in found]
    assert leaflet().fuzzy("Take three tablets a day with water.", threshold=99,
                           limit=5) == []


def test_a_fuzzy_lookup_leaves_out_the_exact_pair_and_scores_case_below_100() -> None:
    index = leaflet()
    assert 4 not in [m.entry.id for m in index.fuzzy(
        "Keep out of the reach of children.", threshold=75, limit=5)]
    shouted = index.fuzzy("KEEP OUT OF THE REACH OF CHILDREN.", threshold=75, limit=5)
    assert shouted[0].entry.id == 4 and shouted[0].score == 99.0


def test_the_word_index_finds_the_pair_among_many_and_follows_updates() -> None:
    rng = random.Random(7)
    vocabulary = [f"word{i}" for i in range(3000)] + ["the", "of", "a"] * 200
    index = PairIndex(entry(i, " ".join(rng.choice(vocabulary) for _ in range(12)) + ".",
                            f"t{i}") for i in range(20_000))
    wanted = "The dose of the medicine is one tablet each morning with water."
    index.put(entry(50_000, wanted, "La dose est d'un comprimé chaque matin."))
    found = index.fuzzy("The dose of the medicine is two tablets each morning with water.",
                        threshold=75, limit=3)
    assert [m.entry.id for m in found] == [50_000]
    for pair_id in range(0, 15_000):  # stale postings past a fifth: rebuilt
        index.remove(pair_id)
    assert len(index) == 5001
    assert [m.entry.id for m in index.fuzzy(wanted + " Now.", threshold=75,
                                             limit=3)] == [50_000]


@pytest.mark.parametrize(("target", "context", "allowed", "expected"), [
    ("Cliquez sur <b>Enregistrer</b>.", "text", (), "Cliquez sur <b>Enregistrer</b>."),
    ("Cliquez sur <b>Enregistrer</b>.", "html", ("<b>", "</b>"),
     "Cliquez sur <b>Enregistrer</b>."),
    ("Cliquez <img src=x onerror=alert(1)>.", "html", ("<b>", "</b>"), None),
    ("<p>Deux</p>", "html", (), None),
    ("AT&T & co < 3", "html", (), "AT&T & co < 3"),
    ('Dites "oui" &amp; 1 500', "attribute", (), "Dites &quot;oui&quot; &amp; 1 500"),
])
def test_a_target_keeps_only_the_markup_the_request_holds(
        target: str, context: str, allowed: tuple[str, ...], expected: str | None) -> None:
    assert render_target(target, context=context,  # type: ignore[arg-type]
                         allowed=allowed) == expected


def lookup(text: str) -> Hit | None:
    found = leaflet().exact(text)
    return Hit("leaflet", found, 1) if found is not None else None


def test_sentences_a_memory_holds_leave_the_engines_work() -> None:
    text = "Keep out of the reach of children. Shake well before use."
    document = build_document(text)
    left, hits = sentences(document, lookup)
    assert [h.entry.id for h in hits] == [4]
    assert left.sources() == ["Shake well before use."]
    assert left.render(["Bien agiter."]) == "Tenir hors de la portée des enfants. Bien agiter."


def test_html_sentences_keep_the_requests_markup_and_refuse_foreign_tags() -> None:
    index = PairIndex([entry(1, "Click <b>Save</b>.", "Cliquez sur <b>Enregistrer</b>."),
                       entry(2, "Open it.", "Ouvrez-le <script>x()</script>.")])

    def find(text: str) -> Hit | None:
        found = index.exact(text)
        return Hit("ui", found, 1) if found is not None else None

    document = build_document("<p>Click <b>Save</b>. Open it.</p>", fmt="html")
    left, hits = sentences(document, find)
    assert [h.entry.id for h in hits] == [1]  # the script tag is not the page's
    assert left.render(["Ouvrez."]) == "<p>Cliquez sur <b>Enregistrer</b>. Ouvrez.</p>"
    whole = whole_text(build_document("Click <b>Save</b>.", fmt="html"),
                       "Click <b>Save</b>.", find)
    assert whole is not None and whole[0].render([]) == "Cliquez sur <b>Enregistrer</b>."
