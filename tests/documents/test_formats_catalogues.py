"""gettext and XLIFF: empty targets filled and marked as machine translations, existing
ones kept (unless asked), ids, contexts, plurals, placeholders and inline codes intact;
the files re-read by their own libraries (polib, lxml)."""

from __future__ import annotations

import polib
import pytest
from lxml import etree

from server.documents import formats
from server.documents.formats.base import DocumentError, ReadOptions, Segment
from tests.documents.test_formats_text import round_trip, shout

PO = '''# French translation.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=3; plural=(n > 1);\\n"

#: src/main.c:10
#, c-format
msgctxt "menu"
msgid "Open %s"
msgstr ""

#: src/main.c:12
msgid "Already done"
msgstr "D\u00e9j\u00e0 fait"

msgid "Line one\\n"
"line two {name}"
msgstr ""

msgid "%d file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

#~ msgid "Old"
#~ msgstr ""
'''
XLIFF12 = b'''<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="ui.txt">
    <body>
      <trans-unit id="save" resname="btn.save">
        <source>Click <g id="1">Save</g> to keep <x id="2"/> changes &amp; go.</source>
        <note>A button label.</note>
      </trans-unit>
      <trans-unit id="done">
        <source>Done</source>
        <target state="final">Termin\xc3\xa9</target>
      </trans-unit>
      <trans-unit id="logo" translate="no">
        <source>ACME</source>
      </trans-unit>
    </body>
  </file>
</xliff>
'''
XLIFF20 = b'''<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <segment id="s1">
        <source>Hello <pc id="1">world</pc><ph id="2"/>!</source>
      </segment>
      <segment id="s2">
        <source>Bye.</source>
        <target></target>
      </segment>
    </unit>
  </file>
</xliff>
'''


def test_po_fills_empty_entries_and_marks_them_fuzzy() -> None:
    segments, out = round_trip("fr.po", PO.encode())
    assert [s.text for s in segments] == ["Open %s", "Line one\nline two {name}", "%d file",
                                          "%d files"]
    written = out.decode()
    catalogue = polib.pofile(written)
    entries = {(e.msgctxt, e.msgid): e for e in catalogue}
    opened = entries[("menu", "Open %s")]
    assert opened.msgstr == "OPEN %S" and opened.flags == ["c-format", "fuzzy"]
    assert opened.occurrences == [("src/main.c", "10")]
    kept = entries[(None, "Already done")]
    assert kept.msgstr == "D\u00e9j\u00e0 fait" and not kept.fuzzy
    assert entries[(None, "Line one\nline two {name}")].msgstr == "LINE ONE\nLINE TWO {NAME}"
    plural = entries[(None, "%d file")]
    assert plural.msgstr_plural == {0: "%D FILE", 1: "%D FILES", 2: "%D FILES"}
    assert plural.fuzzy
    assert catalogue.obsolete_entries()[0].msgid == "Old"
    # only the filled msgstr lines and the flags changed; the rest is byte for byte
    assert written.startswith(PO[: PO.index("#, c-format")])
    assert '#: src/main.c:12\nmsgid "Already done"\nmsgstr "D\u00e9j\u00e0 fait"\n' in written
    assert written.endswith('#~ msgid "Old"\n#~ msgstr ""\n')
    assert 'msgstr ""\n"LINE ONE\\n"\n"LINE TWO {NAME}"\n' in written


def test_po_overwrite_retranslates_existing_entries() -> None:
    parsed = formats.by_name("po").read(PO.encode(), ReadOptions("en", "fr",
                                                                 overwrite_existing=True))
    assert "Already done" in [s.text for s in parsed.segments]


def test_pot_template_is_read_like_a_catalogue() -> None:
    segments, out = round_trip("messages.pot", b'msgid "Hello"\nmsgstr ""')
    assert [s.text for s in segments] == ["Hello"]
    assert out == b'#, fuzzy\nmsgid "Hello"\nmsgstr "HELLO"'


def test_po_syntax_errors_are_refused() -> None:
    with pytest.raises(DocumentError, match="not a valid gettext catalogue"):
        formats.by_name("po").read(b'msgid "Open\nmsgstr', ReadOptions("en", "fr"))


def test_xliff12_fills_targets_with_inline_codes_and_marks_them() -> None:
    segments, out = round_trip("ui.xlf", XLIFF12)
    assert segments == [Segment('Click <span data-x="0">Save</span> to keep <img data-x="1">'
                                ' changes &amp; go.', "html")]
    root = etree.fromstring(out)
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    assert root.find("x:file", ns).get("target-language") == "fr"
    save = root.find(".//x:trans-unit[@id='save']", ns)
    target = save.find("x:target", ns)
    assert etree.tostring(target, encoding="unicode", with_tail=False).endswith(
        '>CLICK <g id="1">SAVE</g> TO KEEP <x id="2"/> CHANGES &amp; GO.</target>')
    assert target.get("state") == "needs-review-translation"
    assert target.get("state-qualifier") == "mt-suggestion"
    assert [child.tag.split("}")[1] for child in save] == ["source", "target", "note"]
    assert root.find(".//x:trans-unit[@id='done']/x:target", ns).text == "Termin\u00e9"
    assert root.find(".//x:trans-unit[@id='logo']/x:target", ns) is None
    assert out.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<xliff ')
    assert out.endswith(b"</xliff>\n")
    # everything outside the new target is the source's text
    before, _, after = out.decode().partition("      <target state")
    assert XLIFF12.decode().startswith(before.replace(' target-language="fr"', "").replace(
        'xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2"',
        'version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"'))
    assert XLIFF12.decode().endswith(after[after.index("</target>") + len("</target>"):])


def test_xliff20_fills_segments_and_sets_their_state() -> None:
    segments, out = round_trip("ui.xliff", XLIFF20)
    assert [s.text for s in segments] == ['Hello <span data-x="0">world</span>'
                                          '<img data-x="1">!', "Bye."]
    root = etree.fromstring(out)
    ns = {"x": "urn:oasis:names:tc:xliff:document:2.0"}
    assert root.get("trgLang") == "fr"
    first, second = root.findall(".//x:segment", ns)
    assert first.get("state") == second.get("state") == "translated"
    assert etree.tostring(first.find("x:target", ns), encoding="unicode",
                          with_tail=False) == (
        '<target xmlns="urn:oasis:names:tc:xliff:document:2.0">HELLO <pc id="1">WORLD</pc>'
        '<ph id="2"/>!</target>')
    assert second.find("x:target", ns).text == "BYE."


def test_xliff_utf16_comes_back_in_utf16() -> None:
    data = XLIFF20.decode().replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    segments, out = round_trip("ui.xlf", data)
    assert len(segments) == 2
    assert out.startswith(b"\xff\xfe") and "HELLO" in out.decode("utf-16")


BOMB = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 '
        b'"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><xliff version="1.2" '
        b'xmlns="urn:oasis:names:tc:xliff:document:1.2">&lol2;</xliff>')
EXTERNAL = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">&e;</xliff>')


@pytest.mark.parametrize(("data", "message"), [
    (BOMB, "DOCTYPE or entities"),
    (EXTERNAL, "DOCTYPE or entities"),
    (BOMB.decode().encode("utf-16"), "DOCTYPE or entities"),
    (XLIFF12[:300], "not well-formed XML"),
    (b"<html><body>no</body></html>", "not an XLIFF 1.2 or 2.0 file"),
])
def test_xliff_refusals(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        formats.by_name("xliff").read(data, ReadOptions("en", "fr"))


def test_shout_is_the_stand_in_used_here() -> None:
    assert shout(Segment("a <b>b</b> &amp;", "html")) == "A <b>B</b> &amp;"
