"""A folder of documents built from the shared corpora, one per text format, each in the
shape such files have in the wild (English sources, in order, never shuffled):

    film.srt       subtitles test set as SubRip cues (Windows-1252, CRLF, long lines on two
                   lines, italics on some)
    talk.vtt       TED test set as WebVTT (a NOTE, cue identifiers and settings, voices)
    app.po         software-ui strings as a gettext catalogue (contexts, references,
                   c-format flags, plurals, an obsolete entry)
    ui.xlf         it test set as XLIFF 1.2 (inline <g> and <x/> codes)
    regulation.xliff  law test set as XLIFF 2.0 (<pc>, <ph/>)
    leaflet.txt    medical test set as plain text paragraphs
    manual.md      software-docs paragraphs as Markdown (headings, lists, code, links)
    news.html      news test set as an HTML page (links, emphasis, a script, a table)

and the office documents of office_corpus.py (docx, pptx, xlsx, odt, odp, ods).
"""

from __future__ import annotations

import html
import random
from collections.abc import Callable
from pathlib import Path

from benchmarks.documents import office_corpus

SEED = 7


def _read(data: Path, relative: str, count: int) -> list[str]:
    path = data / "en-fr" / relative
    with path.open(encoding="utf-8") as lines:
        found = [line.strip() for _, line in zip(range(count * 3), lines, strict=False)]
    return [line for line in found if line][:count]


def _stamp(ms: int, comma: bool) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02}:{minutes:02}:{seconds:02}{',' if comma else '.'}{millis:03}"


def _two_lines(text: str) -> str:
    if len(text) < 42 or " " not in text:
        return text
    middle = len(text) // 2
    cut = min((i for i, c in enumerate(text) if c == " "), key=lambda i: abs(i - middle))
    return text[:cut] + "\n" + text[cut + 1:]


def srt(lines: list[str]) -> bytes:
    rng = random.Random(SEED)
    cues = []
    for number, line in enumerate(lines, 1):
        start = number * 3000
        text = _two_lines(line)
        if rng.random() < 0.15:
            text = f"<i>{text}</i>"
        cues.append(f"{number}\n{_stamp(start, True)} --> {_stamp(start + 2500, True)}\n"
                    f"{text}\n")
    body = "\n".join(cues).replace("\n", "\r\n")
    return body.encode("cp1252", errors="replace")


def vtt(lines: list[str]) -> bytes:
    cues = ["WEBVTT\n\nNOTE built from the TED test set\n"]
    for number, line in enumerate(lines, 1):
        start = number * 4000
        voice = "<v Speaker>" if number % 5 == 0 else ""
        cues.append(f"cue-{number}\n{_stamp(start, False)} --> {_stamp(start + 3500, False)}"
                    f" line:85%\n{voice}{html.escape(_two_lines(line), quote=False)}\n")
    return "\n".join(cues).encode()


def po(lines: list[str]) -> bytes:
    entries = ['msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
               '"Plural-Forms: nplurals=2; plural=(n > 1);\\n"\n']
    for number, line in enumerate(lines, 1):
        escaped = line.replace("\\", "\\\\").replace('"', '\\"')
        flags = "#, c-format\n" if "%" in line else ""
        context = 'msgctxt "menu"\n' if number % 7 == 0 else ""
        if number % 11 == 0:
            entries.append(f"#: src/view.c:{number}\n#, c-format\nmsgid \"%d {escaped}\"\n"
                           f"msgid_plural \"%d {escaped}s\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n")
        else:
            entries.append(f"#: src/main.c:{number}\n{flags}{context}msgid \"{escaped}\"\n"
                           'msgstr ""\n')
    entries.append('#~ msgid "Obsolete string"\n#~ msgstr "Chaîne obsolète"\n')
    return "\n".join(entries).encode()


def _inline_xml(line: str, paired: str, standalone: str, number: int) -> str:
    words = html.escape(line, quote=False).split(" ")
    if len(words) > 3:
        words[1] = f'<{paired} id="{number}">{words[1]}</{paired}>'
        words.insert(3, f'<{standalone} id="{number}b"/>')
    return " ".join(words)


def xliff12(lines: list[str]) -> bytes:
    units = "".join(
        f'      <trans-unit id="u{n}">\n        <source>{_inline_xml(line, "g", "x", n)}'
        f"</source>\n      </trans-unit>\n" for n, line in enumerate(lines, 1))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" '
            'xmlns="urn:oasis:names:tc:xliff:document:1.2">\n  <file source-language="en" '
            'datatype="plaintext" original="ui.txt">\n    <body>\n' + units +
            "    </body>\n  </file>\n</xliff>\n").encode()


def xliff20(lines: list[str]) -> bytes:
    units = "".join(
        f'    <unit id="u{n}">\n      <segment>\n        <source>'
        f'{_inline_xml(line, "pc", "ph", n)}</source>\n      </segment>\n    </unit>\n'
        for n, line in enumerate(lines, 1))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="2.0" '
            'xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en">\n  <file id="f1">\n'
            + units + "  </file>\n</xliff>\n").encode()


def txt(lines: list[str]) -> bytes:
    paragraphs = [" ".join(lines[i:i + 3]) for i in range(0, len(lines), 3)]
    return ("\n\n".join(paragraphs) + "\n").encode()


def markdown(lines: list[str]) -> bytes:
    out = ["# Manual\n"]
    for number, line in enumerate(lines):
        if number % 12 == 0:
            out.append(f"## {line[:60].rstrip('.:')}\n")
        elif number % 12 == 5:
            out.append(f"- {line}\n- See `--help` and [the guide](https://example.org/{number})."
                       "\n")
        elif number % 12 == 9:
            out.append(f"{line}\n\n```sh\nrun --option {number}\n```\n")
        else:
            out.append(f"{line}\n")
    return "\n".join(out).encode()


def page(lines: list[str]) -> bytes:
    body = []
    for number, line in enumerate(lines):
        text = html.escape(line, quote=False)
        if number % 10 == 0:
            body.append(f"<h2>{text}</h2>")
        elif number % 10 == 4:
            words = text.split(" ")
            words[0] = f'<a href="/story/{number}" title="Read more">{words[0]}</a>'
            body.append(f"<p>{' '.join(words)}</p>")
        elif number % 10 == 7:
            body.append(f"<p><em>{text}</em></p>")
        else:
            body.append(f"<p>{text}</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>News"
            "</title><script>var pages = 1;</script></head>\n<body>\n" + "\n".join(body) +
            "\n</body></html>\n").encode()


SOURCES: dict[str, tuple[str, Callable[[list[str]], bytes]]] = {
    "film.srt": ("domains/subtitles/test.en", srt),
    "talk.vtt": ("domains/ted/test.en", vtt),
    "app.po": ("extra/software-ui/train.en", po),
    "ui.xlf": ("domains/it/test.en", xliff12),
    "regulation.xliff": ("domains/law/test.en", xliff20),
    "leaflet.txt": ("domains/medical/test.en", txt),
    "manual.md": ("extra/software-docs/train.en", markdown),
    "news.html": ("extra/news/test.en", page),
    **office_corpus.SOURCES,
}


def build(data: Path, folder: Path, *, lines: int) -> list[Path]:
    """Write the documents into `folder`; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (relative, make) in SOURCES.items():
        path = folder / name
        path.write_bytes(make(_read(data, relative, lines)))
        written.append(path)
    return written
