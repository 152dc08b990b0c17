"""SubRip and WebVTT: numbering, timecodes, settings and notes byte for byte; each cue's
text translated with its tags and its line count kept; UTF-16 and Windows-1252 files."""

from __future__ import annotations

import re

import pytest

from server.documents import formats
from server.documents.formats.base import DocumentError, ReadOptions
from server.documents.formats.cues import wrap
from tests.documents.test_formats_text import round_trip

SRT = (
    "1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Take one tablet</i>\r\nevery morning.\r\n\r\n"
    "2\r\n00:00:03,000 --> 00:00:04,200 X1:40 X2:600\r\n{\\an8}Close the window.\r\n\r\n"
    "3\r\n00:00:05,000 --> 00:00:06,000\r\n<font color=\"#ff0000\">Caf\u00e9 au lait</font> "
    "&amp; more\r\n")
VTT = (
    "WEBVTT - leaflet\n\nNOTE a note --- not translated\n\nSTYLE\n::cue { color: red }\n\n"
    "intro\n00:01.000 --> 00:02.500 align:start position:10%\n<v Doctor>Take one tablet.\n\n"
    "00:00:03.000 --> 00:00:04.000\n<c.loud>Click</c> the <b>button</b>\nnow.\n")
TIMING = re.compile(r"^.*-->.*$", re.MULTILINE)


def test_srt_keeps_numbers_and_timecodes_byte_for_byte() -> None:
    segments, out = round_trip("film.srt", SRT.encode())
    assert [s.text for s in segments] == [
        "<i>Take one tablet</i> every morning.", "Close the window.",
        "<font color=\"#ff0000\">Caf\u00e9 au lait</font> &amp; more"]
    assert [s.fmt for s in segments] == ["html", "text", "html"]
    written = out.decode()
    assert TIMING.findall(written) == TIMING.findall(SRT)
    blocks = written.split("\r\n\r\n")
    assert [b.split("\r\n")[0] for b in blocks] == ["1", "2", "3"]
    # two lines in, two lines out; the positioning tag stays in front
    assert blocks[0].split("\r\n")[2:] == ["<i>TAKE ONE TABLET</i>", "EVERY MORNING."]
    assert blocks[1].split("\r\n")[2] == "{\\an8}CLOSE THE WINDOW."
    assert '<font color="#ff0000">CAF\u00c9 AU LAIT</font> &amp; MORE' in blocks[2]
    assert written.endswith("\r\n")


@pytest.mark.parametrize("codec", ["cp1252", "utf-16", "utf-8-sig"])
def test_srt_in_legacy_and_utf16_encodings(codec: str) -> None:
    data = SRT.encode(codec)
    segments, out = round_trip("film.srt", data)
    assert "Caf\u00e9 au lait" in segments[2].text
    written = out.decode(codec)
    assert "CAF\u00c9 AU LAIT" in written
    assert TIMING.findall(written) == TIMING.findall(SRT)


@pytest.mark.parametrize(("text", "line"), [
    ("1\n00:00:01,000 --> 00:00:0\nHello\n", 2),
    ("1\n00:00:01,000 --> 00:00:02,000\nHello\n\n2\n00:00:0x,000 --> 00:00:04,000\nBye\n", 6),
])
def test_srt_malformed_or_truncated_timecodes_are_refused(text: str, line: int) -> None:
    with pytest.raises(DocumentError, match=f"line {line}: malformed SubRip timing"):
        formats.by_name("srt").read(text.encode(), ReadOptions("en", "fr"))


def test_a_file_without_cues_is_refused() -> None:
    with pytest.raises(DocumentError, match="no cue"):
        formats.by_name("srt").read(b"just some words\n", ReadOptions("en", "fr"))


def test_vtt_keeps_header_notes_styles_settings_and_voice_tags() -> None:
    segments, out = round_trip("talk.vtt", VTT.encode())
    assert [s.text for s in segments] == [
        "<v Doctor>Take one tablet.", "<c.loud>Click</c> the <b>button</b> now."]
    written = out.decode()
    assert written.startswith("WEBVTT - leaflet\n\nNOTE a note --- not translated\n\n"
                              "STYLE\n::cue { color: red }\n\nintro\n")
    assert TIMING.findall(written) == TIMING.findall(VTT)
    assert "<v Doctor>TAKE ONE TABLET.\n" in written
    assert written.endswith("<c.loud>CLICK</c> THE\n<b>BUTTON</b> NOW.\n")


@pytest.mark.parametrize(("data", "message"), [
    (b"00:01.000 --> 00:02.000\nHi\n", "starts with the line 'WEBVTT'"),
    (b"WEBVTT\n\n00:01.000 --> 00:02\nHi\n", "line 3: malformed WebVTT timing"),
    ("WEBVTT\n\n00:01.000 --> 00:02.000\nCaf\u00e9\n".encode("cp1252"), "not valid UTF-8"),
])
def test_vtt_refusals(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        formats.by_name("vtt").read(data, ReadOptions("en", "fr"))


@pytest.mark.parametrize(("text", "lines", "expected"), [
    ("one two three four", 2, ["one two", "three four"]),
    ("alone", 2, ["alone"]),
    ("a b c", 1, ["a b c"]),
    ('<font color="red">red words</font> and more', 2,
     ['<font color="red">red', "words</font> and more"]),
])
def test_wrap_balances_lines_at_spaces(text: str, lines: int, expected: list[str]) -> None:
    assert wrap(text, lines) == expected
