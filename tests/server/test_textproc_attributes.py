"""HTML attribute values translated like text (alt, title, placeholder, aria-label, the
value of an input button); every other attribute, and every other byte, as it was."""

from __future__ import annotations

import pytest

from server.textproc.document import build_document, source_text
from server.textproc.glossary import build_glossary

FORM = ('<form action="/s?a=1&amp;b=2"><p>See <img src="car.png" alt="A red car"> and '
        '<a href="/x" title=\'Read more\'>this</a>.</p>\n'
        '<input type="submit" value="Send now"><input type="text" value="keep me" '
        'placeholder="Your name" aria-label="Name field"><button value="raw">Go</button>'
        '</form>')


def test_values_become_units_after_the_sentences() -> None:
    document = build_document(FORM, fmt="html")
    assert document.sources() == ["See {1} and <2>this</2>.", "{1}{2}<3>Go</3>",
                                  "A red car", "Read more", "Send now", "Your name",
                                  "Name field"]
    assert source_text(document) == FORM


def test_identity_translation_restores_every_byte() -> None:
    document = build_document(FORM, fmt="html")
    finals = document.finals(document.restore(document.sources()), [])
    assert document.render(finals) == FORM


def test_translated_values_go_into_their_tags_escaped() -> None:
    document = build_document(FORM, fmt="html")
    restored = document.restore(["Voir {1} et <2>ceci</2>.", "{1}{2}<3>Aller</3>",
                                 "Une voiture rouge", 'Lire "plus" & <b>', "Envoyer",
                                 "Votre nom", "Champ l'nom"])
    assert document.render(document.finals(restored, [])) == (
        '<form action="/s?a=1&amp;b=2"><p>Voir <img src="car.png" alt="Une voiture rouge"> '
        "et <a href=\"/x\" title='Lire &quot;plus&quot; & &lt;b>'>ceci</a>.</p>\n"
        '<input type="submit" value="Envoyer"><input type="text" value="keep me" '
        'placeholder="Votre nom" aria-label="Champ l&#x27;nom"><button value="raw">Aller'
        '</button></form>')


@pytest.mark.parametrize(("translation", "written"), [
    ("Logo", "<img alt=Logo src=a.png>"),
    ("Le logo", '<img alt="Le logo" src=a.png>'),  # a space: quoted, or it would split
])
def test_unquoted_values_are_quoted_when_they_must_be(translation: str, written: str) -> None:
    document = build_document("<img alt=Logo src=a.png>", fmt="html")
    assert document.sources() == ["Logo"]
    assert document.render(document.finals(document.restore([translation]), [])) == written


def test_entities_and_placeholders_in_values_are_kept() -> None:
    document = build_document('<abbr title="Tom &amp; Jerry, %s">TJ</abbr>', fmt="html")
    assert document.sources() == ["<1>TJ</1>", "Tom {1} Jerry, {2}"]
    restored = document.restore(["<1>TJ</1>", "Tom {1} Jerry, {2}"])
    assert document.render(document.finals(restored, [])) == (
        '<abbr title="Tom &amp; Jerry, %s">TJ</abbr>')


@pytest.mark.parametrize("page", [
    '<img translate="no" alt="Brand name">',  # the translate attribute covers attributes
    '<span class="notranslate" title="Brand name">x</span>',
    '<pre title="Brand name">x</pre>',
    '<script title="Brand name">x</script>',
    '<p translate="no"><img alt="Brand name"></p>',  # inside an untranslated element
    '<a href="Brand name" data-title="Brand name" class="Brand name">x</a>',  # not text
    '<input type="text" value="Brand name">',  # a field's content, not a label
    '<img alt=="Brand name">',  # read differently by the parser: left as it is
])
def test_other_values_are_not_translated(page: str) -> None:
    document = build_document(page, fmt="html")
    assert "Brand name" not in " ".join(document.sources())
    assert source_text(document) == page


def test_glossary_terms_in_values() -> None:
    glossary = build_glossary([("car", "voiture")], field="glossary", max_entries=5,
                              max_term_chars=20)
    document = build_document('<img alt="A car">', fmt="html", glossary=glossary)
    assert document.sources() == ["A {1}"]
    finals = document.finals(document.restore(["Une {1}"]), [])
    assert document.render(finals) == '<img alt="Une voiture">'
    assert document.glossary_report(finals).applied == ["car"]


@pytest.mark.parametrize("text", ['<img alt="never closed', "<img alt=>", "<img alt>",
                                  '<img alt="" title=\'\'>', '<img alt="x" alt="y">'])
def test_odd_tags_round_trip(text: str) -> None:
    document = build_document(text, fmt="html")
    assert source_text(document) == text
    finals = document.finals(document.restore(document.sources()), [])
    assert document.render(finals) == text
