"""Markdown (.md): paragraphs, headings, list items, quotes and table cells translated;
code blocks, fences, HTML blocks, front matter, inline code, link targets and images
copied as written.

markdown-it-py (CommonMark, with tables) finds the inline runs and the source lines they
come from; each run's source text is replaced in place, so block syntax (`#`, `>`, list
markers, indentation, table pipes) and everything between runs stays byte for byte. A
run becomes an HTML fragment for the markup pipeline: emphasis as `<em>`/`<strong>`,
links as `<a>` around their words, inline code as `<code>` (kept untranslated), images,
autolinks and hard breaks as kept void elements. The translated fragment is written back
as Markdown with the source's own delimiters (`*` or `_`, the link's target and title).
A run of several source lines is translated as one text and laid out on as many lines,
its hard breaks kept (md_lines.py).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from markdown_it.token import Token

from server.documents.formats.base import ReadOptions, Segment, check_count
from server.documents.formats.encoding import TextEncoding, decode
from server.documents.formats.md_lines import LineLayout, Piece, lay_out, one_line
from server.documents.formats.txt import split_lines

_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\r?\n.*?^\1[ \t]*(\r?\n|\Z)",
                           re.DOTALL | re.MULTILINE)
_SPECIAL = re.compile(r"([\\`*\[\]])")
_PARSER = MarkdownIt("commonmark").enable("table")


@dataclass
class Run:
    """One inline run: its kept pieces (links, images, code) by index."""

    kept: list[str] = field(default_factory=list)  # raw Markdown of a void stand-in
    links: list[str] = field(default_factory=list)  # "](target "title")" of a link
    delimiters: list[str] = field(default_factory=list)  # emphasis markup by index
    hard_breaks: set[int] = field(default_factory=set)  # `kept` indexes: hard breaks
    layout: LineLayout | None = None  # its source lines (None: written on one line)


@dataclass
class MarkdownDocument:
    pieces: list[str]
    segments: list[Segment]
    runs: list[Run]
    encoding: TextEncoding

    def write(self, translations: Sequence[str]) -> bytes:
        check_count(translations, self.segments)
        out = [self.pieces[0]]
        for translation, run, after in zip(translations, self.runs, self.pieces[1:],
                                           strict=True):
            out += [to_markdown(translation, run), after]
        return self.encoding.encode("".join(out))


def to_fragment(children: list[Token], run: Run) -> str:
    out: list[str] = []
    autolink = False  # inside an autolink: its text is its target, kept whole
    for token in children:
        kind = token.type
        if token.markup == "autolink" or autolink:
            if kind == "link_open":
                out.append(f'<img data-md="{len(run.kept)}">')
                run.kept.append(f"<{token.attrGet('href')}>")
            autolink = kind != "link_close"
            continue
        if kind == "text":
            out.append(html.escape(token.content, quote=False))
        elif kind == "softbreak":
            out.append(" ")
        elif kind == "code_inline":
            out.append("<code>" + html.escape(token.markup + token.content + token.markup,
                                              quote=False) + "</code>")
        elif kind in ("em_open", "strong_open"):
            tag = "em" if kind == "em_open" else "strong"
            out.append(f'<{tag} data-md="{len(run.delimiters)}">')
            run.delimiters.append(token.markup)
        elif kind in ("em_close", "strong_close"):
            out.append("</em>" if kind == "em_close" else "</strong>")
        elif kind == "link_open":
            title = token.attrGet("title")
            target = str(token.attrGet("href") or "")
            shown = f' "{title}"' if title else ""
            out.append(f'<a data-md="{len(run.links)}">')
            run.links.append(f"]({target}{shown})")
        elif kind == "link_close":
            out.append("</a>")
        elif kind == "html_inline":
            out.append(token.content)
        else:  # image, hard break: kept as written
            if kind == "hardbreak":
                run.hard_breaks.add(len(run.kept))
            out.append(f'<img data-md="{len(run.kept)}">')
            run.kept.append(_raw(token))
    return "".join(out)


def _raw(token: Token) -> str:
    if token.type == "image":
        title = token.attrGet("title")
        shown = f' "{title}"' if title else ""
        return f"![{token.content}]({token.attrGet('src')}{shown})"
    return "<br>"  # a hard break (written as a line break where lines are kept)


class _Markdown(HTMLParser):
    def __init__(self, run: Run) -> None:
        super().__init__(convert_charrefs=True)
        self.run = run
        self.out: list[Piece] = []
        self.open_links: list[str] = []
        self.open_emphasis: list[str] = []
        self.code = 0

    def handle_data(self, data: str) -> None:
        self.out.append((data, "kept") if self.code else
                        (_SPECIAL.sub(r"\\\1", data), "text"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        index = _index(attrs)
        if tag == "code":
            self.code += 1
        elif tag in ("em", "strong") and index is not None and \
                index < len(self.run.delimiters):
            self.out.append((self.run.delimiters[index], "kept"))
            self.open_emphasis.append(self.run.delimiters[index])
        elif tag == "a" and index is not None and index < len(self.run.links):
            self.out.append(("[", "kept"))
            self.open_links.append(self.run.links[index])
        elif tag == "img" and index in self.run.hard_breaks:
            self.out.append(("", "hard"))
        elif tag == "img" and index is not None and index < len(self.run.kept):
            self.out.append((self.run.kept[index], "kept"))
        else:
            self.out.append((self.get_starttag_text() or "", "kept"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "code":
            self.code = max(0, self.code - 1)
        elif tag in ("em", "strong") and self.open_emphasis:
            self.out.append((self.open_emphasis.pop(), "kept"))
        elif tag == "a" and self.open_links:
            self.out.append((self.open_links.pop(), "kept"))
        else:
            self.out.append((f"</{tag}>", "kept"))


def to_markdown(fragment: str, run: Run) -> str:
    writer = _Markdown(run)
    writer.feed(fragment)
    writer.close()
    if run.layout is None:
        return one_line(writer.out)
    return lay_out(writer.out, run.layout)


def _index(attrs: list[tuple[str, str | None]]) -> int | None:
    value = dict(attrs).get("data-md")
    return int(value) if value is not None and value.isdigit() else None


def _front_matter(text: str) -> int:
    found = _FRONT_MATTER.match(text)
    return found.end() if found else 0


class Markdown:
    name = "md"
    extensions: tuple[str, ...] = (".md", ".markdown")
    media_type = "text/markdown"

    def read(self, data: bytes, options: ReadOptions) -> MarkdownDocument:
        text, encoding = decode(data, legacy=False, what="Markdown file")
        skip = _front_matter(text)
        body = text[skip:]
        lines = split_lines(body)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))
        pieces = [text[:skip]]
        segments: list[Segment] = []
        runs: list[Run] = []
        cursor = 0  # offset in `body` up to which the text is taken
        for token in _PARSER.parse(body):
            if token.type != "inline" or token.map is None or not token.content.strip():
                continue
            span = _span(token, lines, starts, cursor)
            if span is None:  # not found verbatim (never seen): leave the run as it is
                continue
            start, end = span[0][0], span[-1][1]
            run = Run()
            pieces[-1] += body[cursor:start]
            segments.append(Segment(to_fragment(token.children or [], run), "html"))
            run.layout = LineLayout.of(
                [body[a:b] for a, b in span],
                [body[span[k][1]:span[k + 1][0]] for k in range(len(span) - 1)],
                hard_breaks=len(run.hard_breaks))
            runs.append(run)
            pieces.append("")
            cursor = end
        pieces[-1] += body[cursor:]
        return MarkdownDocument(pieces, segments, runs, encoding)


def _span(token: Token, lines: list[str], starts: list[int],
          cursor: int) -> list[tuple[int, int]] | None:
    """Where each of the run's source lines starts and ends in the body, the first at or
    after `cursor`."""
    assert token.map is not None
    first_line = token.map[0]
    found_parts: list[tuple[int, int]] = []
    for number, part in enumerate(token.content.split("\n")):
        index = first_line + number
        if index >= len(lines):
            return None
        floor = max(cursor - starts[index], 0) if number == 0 else 0
        found = lines[index].find(part, floor)
        if found < 0:
            return None
        found_parts.append((starts[index] + found, starts[index] + found + len(part)))
    if not found_parts or found_parts[0][0] < cursor:
        return None
    return found_parts


FORMAT = Markdown()
