"""TBX termbases read into a glossary: entries, do-not-translate terms, forbidden targets,
in the shapes TBX writers emit (hand-written here: TBX 2008 `martif` in translate-toolkit's
skeleton, TBX-Basic 2019 `tbx` with suffixed statuses; files that real writers produce
are in test_tbx_writers.py), and refusals that name the fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.core.errors import InvalidInput
from server.serving.tbx import read_tbx
from server.textproc.glossary import build_glossary

DATA = Path(__file__).parent / "data"


def tbx(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_a_tbx_2008_file_as_weblate_writes_it() -> None:
    found = read_tbx(tbx("weblate-style.tbx"), source="en", target="fr")
    # region subtags (en_US, fr_FR) match the glossary's languages
    assert found.entries == [("server", "serveur"), ("Weblate", "Weblate"),
                             ("e-mail", "courriel")]
    assert found.do_not_translate == ["Weblate"]  # termNote translationNote "no"
    assert found.forbidden == ["mél"]  # administrativeStatus forbidden
    assert found.skipped == 1  # "dashboard" has no French term


def test_a_tbx_basic_2019_file_with_suffixed_statuses() -> None:
    found = read_tbx(tbx("tbx2019-basic.tbx"), source="en", target="fr")
    # every English term of a concept maps to its preferred French term
    assert found.entries == [("hard disk", "disque dur"), ("hard drive", "disque dur"),
                             ("download", "téléchargement"), ("Kubernetes", "Kubernetes")]
    assert found.forbidden == ["disque rigide", "download"]  # deprecated, superseded
    assert found.do_not_translate == ["Kubernetes"]  # its target is its source


def test_the_reverse_direction_reads_the_same_file() -> None:
    found = read_tbx(tbx("tbx2019-basic.tbx"), source="fr", target="en")
    # a deprecated French term still maps (it occurs in texts); English has no forbidden
    assert ("disque rigide", "hard disk") in found.entries
    assert found.forbidden == []


def test_other_do_not_translate_markers_and_ntig_groups() -> None:
    data = b"""<martif type="TBX" xml:lang="en"><text><body>
      <termEntry translate="no"><langSet xml:lang="en"><ntig><termGrp><term>Acme Cloud</term>
        </termGrp></ntig></langSet></termEntry>
      <termEntry><descrip type="doNotTranslate">yes</descrip>
        <langSet xml:lang="en"><tig><term>OpenSSL</term></tig></langSet>
        <langSet xml:lang="fr"><tig><term>x</term>
          <termNote type="normativeAuthorization">deprecatedTerm-admn-sts</termNote></tig>
        </langSet></termEntry>
      <termEntry><langSet xml:lang="en"><ntig><termGrp><term>invoice</term>
        <termNote type="administrativeStatus">preferredTerm-admn-sts</termNote></termGrp>
        </ntig></langSet><langSet xml:lang="fr"><ntig><termGrp><term>facture</term>
        </termGrp></ntig></langSet></termEntry>
    </body></text></martif>"""
    found = read_tbx(data, source="en", target="fr")
    assert found.entries == [("Acme Cloud", "Acme Cloud"), ("OpenSSL", "OpenSSL"),
                             ("invoice", "facture")]
    assert found.forbidden == ["x"]


def test_a_forbidden_term_another_entry_enforces_is_not_forbidden() -> None:
    data = b"""<tbx type="TBX-Basic" xml:lang="en"><text><body>
      <conceptEntry><langSec xml:lang="en"><termSec><term>key</term></termSec></langSec>
        <langSec xml:lang="fr"><termSec><term>touche</term></termSec><termSec><term>clef</term>
        <termNote type="administrativeStatus">forbidden</termNote></termSec></langSec>
      </conceptEntry>
      <conceptEntry><langSec xml:lang="en"><termSec><term>Key</term></termSec>
        <termSec><term>wrench</term></termSec></langSec>
        <langSec xml:lang="fr"><termSec><term>clef</term></termSec></langSec></conceptEntry>
    </body></text></tbx>"""
    found = read_tbx(data, source="en", target="fr")
    # "Key" repeats "key" (matching ignores case): the first concept keeps it
    assert found.entries == [("key", "touche"), ("wrench", "clef")]
    assert found.forbidden == [] and found.skipped == 1


@pytest.mark.parametrize(("data", "words"), [
    (b"<martif><text><body><termEntry>", "not well-formed"),
    (b"<tmx version='1.4'><body/></tmx>", "not a TBX file"),
    (b'<?xml version="1.0"?><!DOCTYPE martif [<!ENTITY a "aaaa">]><martif>&a;</martif>',
     "declares entities"),
    (b'<!DOCTYPE martif [<!ENTITY x SYSTEM "file:///etc/passwd">]><martif>&x;</martif>',
     "declares entities"),
    (b"<martif><text><body><termEntry><langSet xml:lang='de'><tig><term>Datei</term></tig>"
     b"</langSet></termEntry></body></text></martif>", "no terms in en or fr"),
    (b"<martif><text><body><termEntry><langSet xml:lang='en'><tig><term>file</term></tig>"
     b"</langSet></termEntry><termEntry><langSet xml:lang='fr'><tig><term>fichier</term>"
     b"</tig></langSet></termEntry></body></text></martif>", "no en->fr term pair"),
])
def test_refusals_name_the_fault(data: bytes, words: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        read_tbx(data, source="en", target="fr", field_name="entries")
    assert words in str(raised.value) and raised.value.field == "entries"


def test_forbidden_targets_are_found_as_whole_words_in_any_case() -> None:
    glossary = build_glossary([("file", "fichier")], field="g", max_entries=10,
                              max_term_chars=50, forbidden=["mél", "disque rigide"])
    assert glossary.forbidden == ("mél", "disque rigide")
    assert glossary.forbidden_in("Le Disque Rigide et le mél, pas mélange.") == [
        "disque rigide", "mél"]
    assert glossary.forbidden_in("Aucun terme ici.") == []
    with pytest.raises(InvalidInput) as raised:
        build_glossary([], field="g", max_entries=10, max_term_chars=50,
                       forbidden=[" padded"])
    assert raised.value.field == "forbidden[0]"


def test_a_do_not_translate_term_is_masked_and_comes_back_as_written() -> None:
    from server.textproc.document import build_document

    glossary = build_glossary([("Weblate", "Weblate"), ("file", "fichier")], field="g",
                              max_entries=10, max_term_chars=50)
    document = build_document("Open the file in WEBLATE.", glossary=glossary, terms="inline")
    [unit] = document.units
    # first the source as written; then, if a term is missing, this second pass
    assert unit.masked.text == "Open the file in WEBLATE." and unit.whole is not None
    assert unit.whole.text == "Open the fichier in {1}."  # the other term is inlined
    assert unit.whole.replacements == {"{1}": "WEBLATE"}
    restored = document.restore(["Ouvrez le fichier dans Weblate."])
    assert restored == [None]  # the name not as written
    assert document.finals(restored, ["Ouvrez le fichier dans {1}.", "a", "b"]) == [
        "Ouvrez le fichier dans WEBLATE."]
