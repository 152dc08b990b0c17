"""Plain text, Markdown, HTML: what is translated, and that everything else comes back
byte for byte. A stand-in translation (upper case outside tags) shows which bytes each
segment covered; the formats never translate anything themselves."""

from __future__ import annotations

import re

import pytest

from server.documents import formats
from server.documents.formats.base import DocumentError, ReadOptions, Segment, UnsupportedFormat

OPTIONS = ReadOptions(source="en", target="fr")
_TEXT_OUTSIDE_TAGS = re.compile(r"(<code>.*?</code>|<[^>]*>|&\w+;)|([^<&]+)")


def shout(segment: Segment) -> str:
    """Upper case, leaving tags and entities of an HTML segment as they are."""
    if segment.fmt == "text":
        return segment.text.upper()
    return _TEXT_OUTSIDE_TAGS.sub(lambda m: m.group(1) or m.group(2).upper(), segment.text)


def round_trip(name: str, data: bytes, translate=shout) -> tuple[list[Segment], bytes]:  # type: ignore[no-untyped-def]
    parsed = formats.by_filename(name).read(data, OPTIONS)
    segments = list(parsed.segments)
    return segments, parsed.write([translate(s) for s in segments])


def test_every_format_is_registered_once() -> None:
    names = [fmt.name for fmt in formats.FORMATS]
    assert {"txt", "md", "html", "srt", "vtt", "po", "xliff"} <= set(names)
    extensions = formats.supported_extensions()
    assert len(extensions) == len(set(extensions))
    assert formats.by_filename("Leaflet.SRT").name == "srt"
    assert formats.by_filename("messages.pot").name == "po"
    with pytest.raises(UnsupportedFormat, match=r"'\.exe'.*supported: .*\.srt"):
        formats.by_filename("setup.exe")


@pytest.mark.parametrize("identity", [lambda s: s.text])
def test_identity_translation_gives_the_same_bytes(identity) -> None:  # type: ignore[no-untyped-def]
    """Written with each segment's own text, every text format is its source again."""
    samples = {
        "a.txt": "  Hello world.\r\n\r\nSecond line\n\tindented  \n",
        "a.md": "# Title\n\nSome `code` and *em* text [link](http://x.org).\n\n```\nx = 1\n```\n",
        "a.html": "<!doctype html><html><body><p>Hi <b>there</b>.</p><div>Two</div></body></html>",
    }
    for name, text in samples.items():
        _, out = round_trip(name, text.encode(), identity)
        assert out == text.encode(), name


def test_txt_keeps_every_line_and_its_layout() -> None:
    text = "First line.\r\n\r\n   Indented line.  \r\nLast line without ending"
    segments, out = round_trip("notes.txt", text.encode())
    assert [s.text for s in segments] == ["First line.", "Indented line.",
                                          "Last line without ending"]
    assert out.decode() == "FIRST LINE.\r\n\r\n   INDENTED LINE.  \r\nLAST LINE WITHOUT ENDING"
    assert out.decode().count("\n") == text.count("\n")


def test_txt_a_translation_never_adds_a_line() -> None:
    _, out = round_trip("a.txt", b"one\ntwo\n", lambda s: s.text + "\nextra")
    assert out == b"one extra\ntwo extra\n"


@pytest.mark.parametrize(("encoded", "codec"), [
    ("Caf\u00e9 ouvert.\n".encode("utf-8-sig"), "utf-8-sig"),
    ("Caf\u00e9 ouvert.\n".encode("utf-16"), "utf-16"),
    ("Caf\u00e9 ouvert.\n".encode("utf-16-le"), "utf-16-le"),
    ("Caf\u00e9 \u2019ouvert\u2019.\n".encode("cp1252"), "cp1252"),
])
def test_txt_comes_back_in_its_own_encoding(encoded: bytes, codec: str) -> None:
    _, out = round_trip("a.txt", encoded)
    assert out.decode(codec) == encoded.decode(codec).upper()
    bom = len(encoded) - len(encoded.decode(codec).encode(codec.replace("-sig", "")))
    assert out[:bom] == encoded[:bom]  # the byte order mark (or none) is kept
    assert len(out) == len(encoded)


@pytest.mark.parametrize(("data", "message"), [
    ("Caf\u00e9".encode()[:-1], "truncated"),
    ("Hi".encode("utf-16-le") + b"\x00", "NUL|truncated"),
    (b"\xff\xfeH\x00i", "truncated"),
    (b"GIF89a\x00\x00\x01", "binary"),
])
def test_undecodable_or_truncated_text_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        formats.by_name("txt").read(data, OPTIONS)


def test_markdown_keeps_code_links_and_block_syntax() -> None:
    text = (
        "---\ntitle: Leaflet\n---\n"
        "# Take *one* tablet\n\n"
        "Read the [leaflet](https://x.org/a \"Notice\") and run `nmt --help`\n"
        "every day.\n\n"
        "> Quoted advice\n\n"
        "1. First step\n2. Second ![logo](logo.png) step\n\n"
        "| Dose | When |\n|------|------|\n| one  | *now* |\n\n"
        "```python\nprint('untouched')\n```\n\n"
        "    indented code\n\n"
        "<div>raw html block</div>\n")
    segments, out = round_trip("guide.md", text.encode())
    written = out.decode()
    assert written.startswith("---\ntitle: Leaflet\n---\n# TAKE *ONE* TABLET\n\n")
    assert 'READ THE [LEAFLET](https://x.org/a "Notice") AND RUN `nmt --help`\nEVERY DAY.' \
        in written
    assert "> QUOTED ADVICE\n" in written
    assert "1. FIRST STEP\n2. SECOND ![logo](logo.png) STEP\n" in written
    assert "| DOSE | WHEN |\n|------|------|\n| ONE  | *NOW* |\n" in written
    assert ("```python\nprint('untouched')\n```\n\n    indented code\n\n"
            "<div>raw html block</div>\n") in written
    assert all("nmt --help" not in s.text or "<code>" in s.text for s in segments)


def test_markdown_escapes_what_the_translation_would_turn_into_markup() -> None:
    _, out = round_trip("a.md", b"Plain words\n", lambda s: "# 2 * 3 [x]")
    assert out == b"\\# 2 \\* 3 \\[x\\]\n"


MANUAL = ("Install the package with `pip install nmt` and start the server\n"
          "on port 8000; it answers within a second.\n\n"
          "> The server keeps its models in memory\n"
          "> and reloads them when they change.\n\n"
          "- Every request is checked before it\n"
          "  is translated, and refused with a reason.\n\n"
          "Line one of an address  \nline two of it\\\nthe last line\n"
          "   indented more than its paragraph\n")


def lines_of(text: str) -> list[str]:
    return text.split("\n")


def test_markdown_keeps_a_paragraphs_lines_and_their_prefixes() -> None:
    """A paragraph wrapped over n lines comes back on n lines, each with the source
    line's quote marker, indentation and hard break marker, translated as one text."""
    segments, out = round_trip("manual.md", MANUAL.encode())
    written, source = lines_of(out.decode()), lines_of(MANUAL)

    assert len(segments) == 4  # one per paragraph, list item and quote: not one per line
    assert len(written) == len(source)
    assert written == [line.upper().replace("`PIP INSTALL NMT`", "`pip install nmt`")
                       for line in source]


def test_markdown_lays_a_longer_translation_on_the_same_lines() -> None:
    def longer(segment: Segment) -> str:  # every word twice, tags and code as they were
        return _TEXT_OUTSIDE_TAGS.sub(
            lambda m: m.group(1) or re.sub(r"(\S+)", r"\1 \1", m.group(2)), segment.text)

    _, out = round_trip("manual.md", MANUAL.encode(), longer)
    written, source = lines_of(out.decode()), lines_of(MANUAL)

    assert len(written) == len(source)
    for mine, theirs in zip(written, source, strict=True):
        prefix = re.match(r"[> ]*", theirs)
        assert prefix is not None and mine.startswith(prefix.group(0)), (mine, theirs)
        assert bool(mine.strip()) == bool(theirs.strip())
    assert written[9].endswith("  ") and written[10].endswith("\\")  # the hard breaks
    assert "`pip install nmt`" in out.decode()  # never cut inside inline code
    assert written[0].startswith("Install Install")


def test_markdown_line_starts_that_would_open_a_block_are_escaped() -> None:
    _, out = round_trip("a.md", b"one two\nthree four\nfive\n",
                        lambda s: "- 1. #")  # a word per line
    assert out.decode().split("\n")[:3] == ["\\-", "1\\.", "\\#"]
    assert out.count(b"\n") == 3


def test_markdown_keeps_crlf_between_a_paragraphs_lines() -> None:
    _, out = round_trip("a.md", b"Open the\r\nfile now.\r\n")
    assert out == b"OPEN THE\r\nFILE NOW.\r\n"


def test_html_is_cut_between_blocks_and_written_back_whole() -> None:
    paragraphs = "".join(f"<p>Paragraph number {i} with <b>bold</b> words.</p>\n"
                         for i in range(400))
    page = f"<html><head><script>var x = '<p>';</script></head><body>{paragraphs}</body></html>"
    segments, out = round_trip("page.html", page.encode())
    assert len(segments) > 1
    assert all(len(s.text) <= 4000 for s in segments)
    assert all(s.text.startswith(("<html", "<p")) for s in segments)
    assert out.decode() == shout(Segment(page, "html"))


def test_html_encoding_from_its_meta_charset() -> None:
    page = '<html><head><meta charset="windows-1252"></head><body><p>Caf\u00e9</p></body></html>'
    segments, out = round_trip("a.htm", page.encode("cp1252"))
    assert "Caf\u00e9" in segments[0].text
    assert out.decode("cp1252") == shout(Segment(page, "html"))
