"""A TBX glossary's forbidden target terms are banned during decoding, on the tiny
models: a word the unconstrained output holds (picked from that output, so the test
depends on what the model really says) is gone once a glossary forbids it, greedy and
beam; the spellings banned per term (server/serving/term_bans.py)."""

from __future__ import annotations

import asyncio
import re

import pytest
from conftest import admin_headers
from fastapi.testclient import TestClient

from server.decoding.banned import BannedSequences
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import EngineOptions, Member, SentenceJob
from server.serving.term_bans import (
    avoiding,
    banned_sequences,
    bans_of,
    redo_jobs,
    spellings,
    spelt_sequences,
    with_bans,
)
from tests.tiny import adapter_engine

TEXT = "the patient takes one tablet with water every day"
WORD = re.compile(r"[^\W\d_]{2,}")


def tbx_forbidding(word: str) -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<tbx xmlns="urn:iso:std:iso:30042:ed-2" type="TBX-Basic" style="dca" xml:lang="en">
  <text><body>
    <conceptEntry id="c1">
      <langSec xml:lang="en"><termSec><term>gizmo</term></termSec></langSec>
      <langSec xml:lang="fr">
        <termSec><term>bidule</term>
          <termNote type="administrativeStatus">preferredTerm-admn-sts</termNote></termSec>
        <termSec><term>{word}</term>
          <termNote type="administrativeStatus">forbidden</termNote></termSec>
      </langSec>
    </conceptEntry>
  </body></text>
</tbx>""".encode()


def holds(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, flags=re.IGNORECASE) is not None


@pytest.mark.parametrize("beam", [1, 4])
def test_a_forbidden_word_of_the_output_is_avoided(client: TestClient, beam: int) -> None:
    options = {"beam_size": beam}
    free = client.post("/translate", json={"text": TEXT, "options": options})
    assert free.status_code == 200, free.text
    before = free.json()["translation"]
    words = WORD.findall(before)
    assert words, before
    word = words[0].lower()
    created = client.put("/admin/glossaries/ban", headers=admin_headers() | {
        "content-type": "application/x-tbx"}, content=tbx_forbidding(word),
        params={"source_lang": "en", "target_lang": "fr"})
    assert created.status_code == 201, created.text
    assert holds(client.post("/translate", json={"text": TEXT, "options": options}).json()[
        "translation"], word)  # a glossary must be asked for: the output is as before
    banned = client.post("/translate", json={"text": TEXT, "options": options,
                                             "glossary_id": "ban"}).json()
    assert not holds(banned["translation"], word), (word, before, banned["translation"])
    assert "forbidden" not in banned["glossary"]  # the post-hoc check finds none


def test_each_term_is_banned_in_several_spellings() -> None:
    assert spellings(" Download ") == ["Download", " Download", "download", " download",
                                       "DOWNLOAD", " DOWNLOAD"]
    assert spellings("") == []
    engine = adapter_engine(EngineOptions(), count=1)
    tokenizer = engine.target_tokenizer
    bans = banned_sequences(tokenizer, ["patient"])
    assert bans is not None
    for form in ("patient", " patient", "Patient"):
        ids = tuple(tokenizer.encode([form], add_eos=False)[0])
        # a spelling holding the unknown token is left out ("P" is not in the tiny vocab)
        assert (ids in bans.sequences) == (tokenizer.unk_id not in ids), form
    assert len(bans.sequences) == len(set(bans.sequences)) >= 1
    assert banned_sequences(tokenizer, ["日本"]) is None  # only unknown pieces: no ban
    # a lone word-boundary piece first: the term glued to what precedes it is banned too
    glued = tokenizer.encode(["xaf"], add_eos=False)[0]
    assert tokenizer.pieces(glued[:1]) == ["\u2581"]
    xaf = banned_sequences(tokenizer, ["xaf"])
    assert xaf is not None and {tuple(glued), tuple(glued[1:])} <= set(xaf.sequences)
    assert banned_sequences(tokenizer, []) is None
    job = SentenceJob([5, engine.config.eos_id], (Member(None, 1.0),), 8)
    banned = with_bans(tokenizer, ["patient"], [job])
    assert bans_of(banned[0]) == (bans,) and bans_of(job) == ()
    assert with_bans(tokenizer, [], [job]) == [job]
    assert all(isinstance(g, BannedSequences) for g in banned[0].guides)



def test_a_term_after_an_elision_is_banned_and_found() -> None:
    tokenizer = adapter_engine(EngineOptions(), count=1).target_tokenizer
    ids = tokenizer.encode(["je vois l'patient"], add_eos=False)[0]
    after = tuple(ids[[p for p in tokenizer.pieces(ids)].index("'") + 1:])
    assert tokenizer.decode(after) == "patient"
    # glued to the apostrophe the word is spelt without its word-boundary piece: banned
    bans = banned_sequences(tokenizer, ["Patient"])
    assert bans is not None and after in bans.sequences
    # and found in an output, in any case, as the tokens that spell it
    assert spelt_sequences(tokenizer, ["PATIENT"], ids) == [after]
    assert spelt_sequences(tokenizer, ["patien"], ids) == []  # whole words only


def test_a_spelling_the_bans_missed_is_decoded_again() -> None:
    """Real decoding: a job without bans (as if the up-front spellings had missed the
    model's) spells a word; `avoiding` decodes it again until no spelling is left, in
    any case."""
    engine = adapter_engine(EngineOptions(), count=1)
    tokenizer = engine.target_tokenizer
    options = SearchOptions(beam_size=1)
    source = engine.source_tokenizer.encode([TEXT])[0]
    job = SentenceJob(source, (Member(None, 1.0),), engine.max_length(len(source)))
    first = engine.translate([job], options)
    before = tokenizer.decode(first[0][0].tokens)
    words = WORD.findall(before)
    assert words, before
    word = words[0].upper()  # the glossary's spelling differs from the output's
    assert holds(before, word)
    redo = redo_jobs(tokenizer, [[word]], [job], first)
    assert [index for index, _ in redo] == [0] and bans_of(redo[0][1])

    async def run(jobs: list[SentenceJob]) -> list[list[Hypothesis]]:
        return engine.translate(jobs, options)

    after = asyncio.run(avoiding(tokenizer, [[word]], [job], first, run))
    text = tokenizer.decode(after[0][0].tokens)
    assert not holds(text, word), (word, before, text)
    assert redo_jobs(tokenizer, [[]], [job], first) == []  # nothing forbidden: no redo
