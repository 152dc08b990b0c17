"""The memory readers on files written by real writers (translate-toolkit, python-tmx),
on hostile and broken files, and the TMX writer read back."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from defusedxml import EntitiesForbidden
from tmx_files import (
    BILLION_LAUGHS,
    EXTERNAL_ENTITY,
    PYTHON_TMX_UNITS,
    TOOLKIT_PAIRS,
    one_sided_unit,
    python_tmx_file,
    toolkit_tmx,
)
from translate.storage.tmx import tmxfile

from model_store import MemoryRecord, PairRecord
from server.memories.read_units import (
    HostileXml,
    ImportRefused,
    Languages,
    ReadPair,
    ReadReport,
)
from server.memories.tmx_reader import read_tmx
from server.memories.tmx_writer import TMX_FOOTER, tmx_header, tmx_units
from server.memories.tsv_reader import read_tsv
from server.memories.xliff_reader import read_xliff

EN_FR = Languages("en", "fr", max_chars=1000)


def read(reader: object, data: bytes, languages: Languages = EN_FR
         ) -> tuple[list[ReadPair], ReadReport]:
    report = ReadReport()
    pairs = list(reader(io.BytesIO(data), languages, report))  # type: ignore[operator]
    return pairs, report


def test_a_translate_toolkit_tmx_reads_every_pair_with_its_markup_and_notes() -> None:
    pairs, report = read(read_tmx, toolkit_tmx())
    assert [(p.source, p.target) for p in pairs] == TOOLKIT_PAIRS
    assert report.units == len(TOOLKIT_PAIRS) and not report.skipped
    assert pairs[0].attributes is not None
    assert pairs[0].attributes["notes"] == ["checked by the reviewer"]


@pytest.mark.parametrize(("encoding", "starts"), [("UTF-16", b"\xff\xfe"),  # with a BOM
                                                  ("UTF-8", b"<?xml")])
def test_a_python_tmx_file_reads_inline_codes_props_notes_and_loose_language_codes(
        encoding: str, starts: bytes) -> None:
    data = python_tmx_file(extra_units=[one_sided_unit("Alone in its unit.")],
                           encoding=encoding)
    assert data.startswith(starts)
    pairs, report = read(read_tmx, data)
    assert [p.tuid for p in pairs] == [tuid for tuid, _, _ in PYTHON_TMX_UNITS]
    assert pairs[1].source == "Keep out of the reach of children."
    assert pairs[1].target == "Tenir hors de la portée des enfants."
    assert pairs[0].source == "Take <b>two</b> tablets."
    assert pairs[0].target == "Prenez <b>deux</b> comprimés."
    assert pairs[2].target == "Supprimer {count} fichiers ?"
    assert pairs[0].attributes is not None
    assert pairs[0].attributes["props"] == [["x-Project", "Leaflets 2025"]]
    assert pairs[0].attributes["notes"] == ["reviewed leaflet-1"]
    assert pairs[0].attributes["attributes"]["creationid"] == "ANA"
    assert pairs[0].attributes["attributes"]["creationdate"] == "20250102T101500Z"
    assert report.units == 4 and report.skipped == {"no_target_segment": 1}


@pytest.mark.parametrize("codes", [("en", "fr"), ("EN", "FR"), ("en-us", "fr-CA"),
                                   ("en_GB", "fr_BE")])
def test_language_codes_match_loosely(codes: tuple[str, str]) -> None:
    pairs, _ = read(read_tmx, python_tmx_file(codes=codes))
    assert len(pairs) == len(PYTHON_TMX_UNITS)


def test_a_tmx_of_other_languages_yields_no_pair_and_counts_why() -> None:
    pairs, report = read(read_tmx, python_tmx_file(codes=("de-DE", "fr-FR")))
    assert pairs == [] and report.skipped == {"no_source_segment": len(PYTHON_TMX_UNITS)}
    assert report.languages["de-DE"] == len(PYTHON_TMX_UNITS)


def test_the_billion_laughs_are_refused_at_the_declaration_before_any_expansion() -> None:
    with pytest.raises(HostileXml) as refused:
        read(read_tmx, BILLION_LAUGHS)
    # defusedxml raises EntitiesForbidden from expat's entity *declaration* handler: the
    # parser has not reached a single reference, so nothing was expanded
    assert isinstance(refused.value.__cause__, EntitiesForbidden)
    assert refused.value.__cause__.name == "lol"  # the first declaration, not the last


def test_an_external_entity_is_refused_and_never_read() -> None:
    with pytest.raises(HostileXml) as refused:
        read(read_tmx, EXTERNAL_ENTITY)
    assert isinstance(refused.value.__cause__, EntitiesForbidden)
    assert "root:" not in str(refused.value)


@pytest.mark.parametrize(("data", "message"), [
    (toolkit_tmx()[:-40], "not well-formed"),  # truncated
    (b"<xliff version='1.2'/>", "not a TMX file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not well-formed"),
    (b"<tmx><body><tu><seg>&nbsp;</seg></tu></body></tmx>", "not well-formed"),
])
def test_broken_files_are_refused_as_a_whole(data: bytes, message: str) -> None:
    with pytest.raises(ImportRefused, match=message) as refused:
        read(read_tmx, data)
    assert not isinstance(refused.value, HostileXml)


def test_too_long_and_empty_segments_are_skipped() -> None:
    pairs, report = read(read_tmx, toolkit_tmx([("Fine.", "Bien."), ("x" * 50, "y"),
                                                 ("Empty.", " ")]),
                         Languages("en", "fr", max_chars=20))
    assert [p.source for p in pairs] == ["Fine."]
    assert report.skipped == {"too_long": 1, "empty_segment": 1}


def test_tsv_lines_import_and_misaligned_lines_are_counted() -> None:
    data = ("\ufeffOpen the file.\tOuvrez le fichier.\n\nNo tab here\n"
            "Save.\tEnregistrez.\tui-7\na\tb\tc\td\n").encode()
    pairs, report = read(read_tsv, data)
    assert [(p.source, p.tuid) for p in pairs] == [("Open the file.", None), ("Save.", "ui-7")]
    assert report.skipped == {"misaligned": 2}
    with pytest.raises(ImportRefused, match="UTF-8"):
        read(read_tsv, b"ok\tok\n\xff\xfe\tbad\n")


XLIFF12 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
 <file source-language="en-US" target-language="fr-FR" datatype="plaintext" original="ui">
  <body>
   <trans-unit id="save"><source>Click <g id="1">Save</g>.</source>
    <target>Cliquez sur <g id="1">Enregistrer</g>.</target></trans-unit>
   <trans-unit id="open"><source>Open <ph id="2">%s</ph>.</source>
    <target>Ouvrir <ph id="2">%s</ph>.</target></trans-unit>
   <trans-unit id="todo"><source>Not translated yet.</source></trans-unit>
  </body>
 </file>
 <file source-language="de" target-language="fr" datatype="plaintext" original="other">
  <body><trans-unit id="de"><source>Hallo</source><target>Bonjour</target></trans-unit></body>
 </file>
</xliff>
"""

XLIFF20 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="fr">
 <file id="f1"><unit id="u1">
  <segment><source>First sentence.</source><target>Premi\xc3\xa8re phrase.</target></segment>
  <segment><source>Second <pc id="1">one</pc>.</source><target>Deuxi\xc3\xa8me.</target></segment>
 </unit></file>
</xliff>
"""


def test_xliff_12_and_20_units_read_and_other_languages_are_skipped() -> None:
    pairs, report = read(read_xliff, XLIFF12)
    assert [(p.tuid, p.source, p.target) for p in pairs] == [
        ("save", "Click Save.", "Cliquez sur Enregistrer."),
        ("open", "Open %s.", "Ouvrir %s.")]
    assert report.skipped == {"no_target_segment": 1, "wrong_languages": 1}
    pairs, _ = read(read_xliff, XLIFF20)
    assert [(p.tuid, p.target) for p in pairs] == [("u1", "Première phrase."),
                                                   ("u1", "Deuxième.")]
    assert pairs[1].source == "Second one."


def test_exported_tmx_reads_back_in_our_reader_and_in_translate_toolkit() -> None:
    now = datetime.now(UTC)
    memory = MemoryRecord(1, "acme", "b", None, "shared", "en", "fr", now, now)
    originals, _ = read(read_tmx, python_tmx_file())
    records = [PairRecord(i, 1, p.tuid, p.source, p.target, "k", "import", p.attributes,
                          now, now) for i, p in enumerate(originals, 1)]
    data = tmx_header(memory) + b"".join(tmx_units(memory, records)) + TMX_FOOTER
    again, report = read(read_tmx, data)
    assert again == originals and not report.skipped
    assert b'<bpt i="1">&lt;b&gt;</bpt>' in data  # markup written as inline codes
    toolkit = tmxfile(io.BytesIO(data))
    assert [u.source for u in toolkit.units] == ["Take <b>two</b> tablets.",
                                                 "Keep out of the reach of children.",
                                                 "Delete {count} files?"]
