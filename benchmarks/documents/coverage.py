"""How much of a translated file is in the target language, and did its structure survive?

Measured on the output file by a pass of its own, independent of the readers that chose
what to translate (server/documents/formats): each format's text units are found here
with other means (line rules for text and subtitles, polib entries, lxml for XLIFF and
HTML, markdown-it's rendering for Markdown), and each unit's language is identified by
py3langid restricted to the source and the target language. A unit without letters (a
number, a placeholder, a URL) says nothing and is not counted.

    units_in     text units of the source file
    units_out    text units of the translated file
    translated   share of the output's units identified as the target language
    structure    the parts that must not change are equal (per format, see `_skeleton`)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import PurePath

import polib
from lxml import etree
from lxml import html as lxml_html
from markdown_it import MarkdownIt
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from benchmarks.documents import office_coverage

_TIMING = re.compile(r"-->")
_INDEX = re.compile(r"^\s*\d+\s*$")
_TAG = re.compile(r"<[^>]*>|\{\\[^}]*\}")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}|%[-+ #0-9.$]*[a-zA-Z]|\$\{?\w+\}?")
_LETTERS = re.compile(r"[^\W\d_]{2,}")
_URL = re.compile(r"https?://\S+|\S+@\S+")
_SKIPPED_HTML = {"script", "style", "code", "pre", "kbd", "samp", "var", "textarea"}
_VTT_BLOCKS = ("WEBVTT", "NOTE", "STYLE", "REGION")
OFFICE = (".docx", ".pptx", ".xlsx", ".odt", ".odp", ".ods")  # zips: office_coverage.py


@dataclass(frozen=True)
class Coverage:
    units_in: int
    units_out: int
    translated: float  # share of counted output units in the target language (0..1)
    structure_kept: bool
    problems: list[str]


@cache
def _identifier(source: str, target: str) -> LanguageIdentifier:
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages([source, target])
    return identifier


def language_of(text: str, *, source: str, target: str) -> str | None:
    """`source`, `target`, or None for a unit without words to tell by (tags,
    placeholders, URLs and numbers are not words)."""
    words = _PLACEHOLDER.sub(" ", _URL.sub(" ", _TAG.sub(" ", text)))
    if not _LETTERS.search(words):
        return None
    language, _ = _identifier(source, target).classify(words)
    return str(language)


def measure(name: str, before: bytes, after: bytes, *, source: str,
            target: str) -> Coverage:
    kind = PurePath(name).suffix.lower()
    units = UNITS[kind]
    units_in, units_out = units(before), units(after)
    # an empty unit (a catalogue entry or XLIFF target left empty) is an untranslated one
    told = [language_of(u, source=source, target=target) if u.strip() else source
            for u in units_out]
    counted = [lang for lang in told if lang is not None]
    share = sum(lang == target for lang in counted) / len(counted) if counted else 1.0
    problems = _compare(kind, before, after, len(units_in), len(units_out))
    return Coverage(len(units_in), len(units_out), share, not problems, problems)


# -- text units, per format --------------------------------------------------------------
def _text(data: bytes) -> str:
    for bom, codec in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"),
                       (b"\xfe\xff", "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(codec)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _lines(data: bytes) -> list[str]:
    return [line.strip() for line in _text(data).splitlines() if line.strip()]


def _cue_lines(data: bytes) -> list[str]:
    units: list[str] = []
    for block in re.split(r"\n\s*\n", _text(data).replace("\r\n", "\n")):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines or lines[0].strip().split(" ")[0] in _VTT_BLOCKS:
            continue
        timing = next((i for i, line in enumerate(lines) if _TIMING.search(line)), None)
        if timing is not None:
            units += [_TAG.sub("", line).strip() for line in lines[timing + 1:]]
    return units


def _po_units(data: bytes) -> list[str]:
    catalogue = polib.pofile(_text(data))
    out: list[str] = []
    for entry in catalogue:
        if entry.obsolete or not entry.msgid:
            continue
        out.append(entry.msgstr or entry.msgstr_plural.get(0, ""))
    return out


def _xliff_units(data: bytes) -> list[str]:
    root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    out: list[str] = []
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.endswith("}source"):
            target = element.getnext()
            while target is not None and not (isinstance(target.tag, str) and
                                              target.tag.endswith("}target")):
                target = target.getnext()
            out.append("".join(target.itertext()) if target is not None else "")
    return out


def _html_units(data: bytes) -> list[str]:
    tree = lxml_html.document_fromstring(data)
    out: list[str] = []
    for element in tree.iter():
        if not isinstance(element.tag, str) or element.tag in _SKIPPED_HTML:
            continue
        for text in (element.text, *(child.tail for child in element)):
            if text and text.strip() and not any(
                    a.tag in _SKIPPED_HTML for a in element.iterancestors()):
                out.append(text.strip())
    return out


def _md_units(data: bytes) -> list[str]:
    rendered = MarkdownIt("commonmark").enable("table").render(_text(data))
    return _html_units(f"<html><body>{rendered}</body></html>".encode()) if rendered.strip() \
        else []


UNITS: dict[str, Callable[[bytes], list[str]]] = {
    ".txt": _lines, ".srt": _cue_lines, ".vtt": _cue_lines, ".po": _po_units,
    ".pot": _po_units, ".xlf": _xliff_units, ".xliff": _xliff_units, ".html": _html_units,
    ".htm": _html_units, ".md": _md_units, ".markdown": _md_units,
    **dict.fromkeys(OFFICE, office_coverage.units)}


# -- structure, per format ---------------------------------------------------------------
def _skeleton(kind: str, data: bytes) -> list[str]:
    """What must be equal before and after."""
    if kind in OFFICE:
        return office_coverage.skeleton(data)
    text = _text(data)
    if kind == ".txt":
        return ["" if not line.strip() else "x" for line in text.splitlines()]
    if kind in (".srt", ".vtt"):
        return [line for line in text.splitlines()
                if _TIMING.search(line) or _INDEX.match(line) or
                line.strip().split(" ")[0] in _VTT_BLOCKS]
    if kind in (".po", ".pot"):
        return [f"{e.msgctxt}\x04{e.msgid}\x04{e.msgid_plural}\x04{e.obsolete}"
                for e in polib.pofile(text)]
    if kind in (".xlf", ".xliff"):
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False))
        return [f"{e.tag}{sorted(_kept_attributes(e))}" if not e.tag.endswith("}source")
                else etree.tostring(e, encoding="unicode", with_tail=False)
                for e in root.iter() if isinstance(e.tag, str) and
                not e.tag.endswith("}target") and "}target" not in
                "".join(a.tag for a in e.iterancestors() if isinstance(a.tag, str))]
    if kind in (".html", ".htm"):
        return [element.tag for element in lxml_html.document_fromstring(data).iter()
                if isinstance(element.tag, str)]
    # Markdown: every block on the same source lines (`map`), so lines are kept too
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return [f"{t.type}:{t.map}:"
            f"{t.content if t.type in ('fence', 'code_block', 'html_block') else ''}"
            for t in tokens if t.type != "inline"]


# what a translation sets by design: the target language and the machine-translation marks
_MARKS = frozenset({"target-language", "trgLang", "state", "state-qualifier"})


def _kept_attributes(element: etree._Element) -> list[tuple[str, str]]:
    return [(k, v) for k, v in element.attrib.items() if k not in _MARKS]


def _compare(kind: str, before: bytes, after: bytes, units_in: int,
             units_out: int) -> list[str]:
    problems: list[str] = []
    if units_in != units_out:
        problems.append(f"{units_in} text units in, {units_out} out")
    if _skeleton(kind, before) != _skeleton(kind, after):
        problems.append("the untranslated structure changed")
    return problems
