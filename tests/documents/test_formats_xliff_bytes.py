"""XLIFF written back byte for byte outside what a translation sets: the filled targets
(and a new target's line), `target-language` / `trgLang` and the state marks. Quotes,
attribute order, namespace declarations, character references, CDATA, comments and empty
elements elsewhere are as written, which a re-serialization by lxml would not keep."""

from __future__ import annotations

from lxml import etree

from tests.documents.test_formats_catalogues import XLIFF12, XLIFF20
from tests.documents.test_formats_text import round_trip

MARKS = 'state="needs-review-translation" state-qualifier="mt-suggestion"'
NEW_TARGET = (f'\n        <target {MARKS}>CLICK <g id="1">SAVE</g> TO KEEP <x id="2"/> '
              "CHANGES &amp; GO.</target>")


def test_xliff12_differs_from_the_source_only_where_the_translation_goes() -> None:
    _, out = round_trip("ui.xlf", XLIFF12)

    expected = XLIFF12.replace(b'original="ui.txt">', b'original="ui.txt" target-language="fr">'
                               ).replace(b"go.</source>", b"go.</source>" + NEW_TARGET.encode())
    assert out == expected


def test_xliff20_differs_from_the_source_only_where_the_translation_goes() -> None:
    _, out = round_trip("ui.xliff", XLIFF20)

    expected = (XLIFF20
                .replace(b'srcLang="en">', b'srcLang="en" trgLang="fr">')
                .replace(b'<segment id="s1">', b'<segment id="s1" state="translated">')
                .replace(b'<segment id="s2">', b'<segment id="s2" state="translated">')
                .replace(b"<ph id=\"2\"/>!</source>", b'<ph id="2"/>!</source>\n        '
                         b'<target>HELLO <pc id="1">WORLD</pc><ph id="2"/>!</target>')
                .replace(b"<target></target>", b"<target>BYE.</target>"))
    assert out == expected


QUIRKS = """<?xml version='1.0' encoding='UTF-8'?>
<!-- exported by a CAT tool -->
<xlf:xliff version='1.2' xmlns:xlf='urn:oasis:names:tc:xliff:document:1.2'
    xmlns:acme="urn:acme">
  <xlf:file original='a&#46;txt' source-language='en' target-language='fr' acme:id="7">
    <?acme keep this?>
    <xlf:body>
      <xlf:trans-unit id='1' acme:hint="caf&#233;">
        <xlf:source>Open <xlf:g id='b'>the</xlf:g> file</xlf:source><xlf:target
          state='new'/>
        <xlf:note><![CDATA[a <raw> note]]></xlf:note>
      </xlf:trans-unit>
      <xlf:trans-unit id='2'>
        <xlf:source>Close it</xlf:source>
      </xlf:trans-unit>
    </xlf:body>
  </xlf:file>
</xlf:xliff>
"""


def test_quotes_prefixes_references_cdata_and_empty_targets_are_kept() -> None:
    _, out = round_trip("quirks.xlf", QUIRKS.encode())

    expected = (QUIRKS
                .replace("""<xlf:target
          state='new'/>""", """<xlf:target
          state='needs-review-translation' state-qualifier="mt-suggestion">OPEN """
                         """<xlf:g id="b">THE</xlf:g> FILE</xlf:target>""")
                .replace("<xlf:source>Close it</xlf:source>",
                         f"<xlf:source>Close it</xlf:source>\n        <xlf:target {MARKS}>"
                         "CLOSE IT</xlf:target>"))
    assert out.decode() == expected
    assert etree.fromstring(out) is not None


def test_a_utf16_file_is_spliced_in_utf16_with_its_byte_order_mark() -> None:
    text = XLIFF20.decode().replace('encoding="UTF-8"', 'encoding="UTF-16"')
    _, out = round_trip("ui.xlf", text.encode("utf-16-be").join([b"\xfe\xff", b""]))

    assert out.startswith(b"\xfe\xff")
    written = out[2:].decode("utf-16-be")
    assert written.startswith('<?xml version="1.0" encoding="UTF-16"?>\n<xliff xmlns=')
    assert 'srcLang="en" trgLang="fr">' in written and "<target>BYE.</target>" in written


def test_inline_codes_of_a_prefix_declared_on_the_source_fall_back_to_lxml() -> None:
    """Copied into the target, `<a:x/>` would be outside its prefix's declaration: the
    file is then written by lxml (the same XML, other bytes) and stays well-formed."""
    data = (b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file '
            b'target-language="fr"><body><trans-unit id="1"><source xmlns:a="urn:a">Hi '
            b'<a:x id="1"/> there</source></trans-unit></body></file></xliff>')
    _, out = round_trip("a.xlf", data)

    target = etree.fromstring(out).find(".//{urn:oasis:names:tc:xliff:document:1.2}target")
    assert target is not None and target.text == "HI "
    assert [child.tag for child in target] == ["{urn:a}x"] and target[0].tail == " THERE"
