"""The independent "% translated" pass: units found without the format readers, their
language told by py3langid, and the structure compared."""

from __future__ import annotations

import io

import docx
import pytest

from benchmarks.documents.coverage import language_of, measure

SRT_EN = ("1\n00:00:01,000 --> 00:00:02,000\nThe weather is very nice today.\n\n"
          "2\n00:00:03,000 --> 00:00:04,000\nI would like a cup of coffee, please.\n")
SRT_FR = ("1\n00:00:01,000 --> 00:00:02,000\nIl fait très beau aujourd'hui.\n\n"
          "2\n00:00:03,000 --> 00:00:04,000\nI would like a cup of coffee, please.\n")


def test_language_of_a_unit() -> None:
    assert language_of("Je voudrais une tasse de café.", source="en", target="fr") == "fr"
    assert language_of("I would like a cup of coffee.", source="en", target="fr") == "en"
    assert language_of("%s: 42 {count}", source="en", target="fr") is None


def test_half_translated_subtitles() -> None:
    found = measure("a.srt", SRT_EN.encode(), SRT_FR.encode(), source="en", target="fr")
    assert (found.units_in, found.units_out) == (2, 2)
    assert found.translated == pytest.approx(0.5)
    assert found.structure_kept


def test_a_changed_timecode_is_a_broken_structure() -> None:
    broken = SRT_FR.replace("00:00:03,000", "00:00:03,500")
    found = measure("a.srt", SRT_EN.encode(), broken.encode(), source="en", target="fr")
    assert not found.structure_kept
    assert found.problems == ["the untranslated structure changed"]


@pytest.mark.parametrize(("name", "before", "after", "translated", "kept"), [
    ("a.txt", "Good morning to you all.\n\nSee you soon.\n",
     "Bonjour à vous tous.\n\nÀ bientôt, mes amis.\n", 1.0, True),
    ("a.txt", "One line.\nTwo lines.\n", "Une seule ligne.\n", 1.0, False),
    ("a.po", 'msgid "Open the file"\nmsgstr ""\n\nmsgid "Save the file"\nmsgstr ""\n',
     'msgid "Open the file"\nmsgstr "Ouvrir le fichier"\n\nmsgid "Save the file"\n'
     'msgstr ""\n', 0.5, True),
    ("a.md", "# Title here\n\nThe patient takes the tablet.\n\n```\ncode stays\n```\n",
     "# Le titre ici\n\nLe patient prend le comprimé.\n\n```\ncode stays\n```\n", 1.0, True),
    ("a.md", "Text here.\n\n```\ncode stays\n```\n",
     "Le texte ici.\n\n```\ncode changed\n```\n", 1.0, False),
    ("a.md", "The patient takes\nthe tablet daily.\n\nAsk the doctor.\n",
     "Le patient prend le comprimé chaque jour.\n\nDemandez au médecin.\n", 1.0, False),
    ("a.html", "<p>The patient takes <b>the tablet</b>.</p><script>var x;</script>",
     "<p>Le patient prend <b>le comprimé</b>.</p><script>var x;</script>", 1.0, True),
    ("a.xlf", '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>'
              '<trans-unit id="1"><source>Open the file</source></trans-unit></body></file>'
              "</xliff>",
     '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>'
     '<trans-unit id="1"><source>Open the file</source><target>Ouvrez le fichier maintenant'
     "</target></trans-unit></body></file></xliff>", 1.0, True),
])
def test_each_format(name: str, before: str, after: str, translated: float,
                     kept: bool) -> None:
    found = measure(name, before.encode(), after.encode(), source="en", target="fr")
    assert found.translated == pytest.approx(translated)
    assert found.structure_kept is kept, found.problems


def _word(paragraphs: list[str], *, table: bool = True) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        document.add_table(rows=1, cols=1).cell(0, 0).text = paragraphs[0]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_office_units_are_paragraphs_and_blocks_are_the_structure() -> None:
    before = _word(["The weather is very nice today.", "I would like a cup of coffee."])
    half = _word(["Il fait très beau aujourd'hui.", "I would like a cup of coffee."])
    found = measure("a.docx", before, half, source="en", target="fr")
    assert (found.units_in, found.units_out) == (3, 3)
    assert found.translated == pytest.approx(2 / 3)  # the cell holds the first sentence
    assert found.structure_kept
    no_table = _word(["Il fait très beau aujourd'hui.", "Je voudrais un café."], table=False)
    broken = measure("a.docx", before, no_table, source="en", target="fr")
    assert not broken.structure_kept


def test_the_translation_marks_of_xliff_are_not_structure() -> None:
    before = ('<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en"><file id="f">'
              '<unit id="1"><segment><source>Open the file</source></segment></unit></file>'
              "</xliff>")
    after = before.replace('srcLang="en"', 'srcLang="en" trgLang="fr"').replace(
        "<segment>", '<segment state="translated">').replace(
        "</source>", "</source><target>Ouvrez le fichier maintenant</target>")
    found = measure("a.xliff", before.encode(), after.encode(), source="en", target="fr")
    assert found.structure_kept, found.problems
    changed = after.replace('id="1"', 'id="2"')
    assert not measure("a.xliff", before.encode(), changed.encode(), source="en",
                       target="fr").structure_kept
