"""XLIFF 1.2 and 2.0 translation units, read as a stream (xml_safety.py): every
`trans-unit` (1.2) or `segment` (2.0) with a source and a non-empty target is a pair,
its id the tuid. A file whose declared languages are not the direction's (matched
loosely, as TMX) has its units skipped ("wrong_languages")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO
from xml.etree.ElementTree import Element

from server.memories.read_units import (
    NO_TARGET,
    WRONG_LANGUAGES,
    ImportRefused,
    Languages,
    Progress,
    ReadPair,
    ReadReport,
)
from server.memories.xml_safety import events, local, segment_text


def read_xliff(stream: IO[bytes], languages: Languages, report: ReadReport, *,
               progress: Progress | None = None) -> Iterator[ReadPair]:
    fits = True
    root_seen = False
    parents: list[Element] = []
    for event, element in events(stream, progress):
        name = local(element.tag)
        if event == "start":
            if not root_seen:
                root_seen = True
                if name != "xliff":
                    raise ImportRefused(f"not an XLIFF file: its root element is {name!r}")
                fits = _fits(element.get("srcLang"), element.get("trgLang"), languages,
                             report)
            elif name == "file" and element.get("source-language"):
                fits = _fits(element.get("source-language"),
                             element.get("target-language"), languages, report)
            parents.append(element)
            continue
        parents.pop()
        if name not in ("trans-unit", "segment"):
            continue
        report.units += 1
        found = _pair(element, parents, fits, languages, report)
        if found is not None:
            yield found
        if parents:
            parents[-1].remove(element)


def _fits(source: str | None, target: str | None, languages: Languages,
          report: ReadReport) -> bool:
    for code in (source, target):
        if code:
            report.languages[code] += 1
    return (languages.primary(source) == languages.source
            and languages.primary(target) in ("", languages.target))


def _pair(element: Element, parents: list[Element], fits: bool, languages: Languages,
          report: ReadReport) -> ReadPair | None:
    if not fits:
        report.skipped[WRONG_LANGUAGES] += 1
        return None
    texts = {local(child.tag): segment_text(child) for child in element
             if local(child.tag) in ("source", "target")}
    if "target" not in texts:
        report.skipped[NO_TARGET] += 1
        return None
    source, target = texts.get("source", ""), texts["target"]
    if not languages.check(source, target, report):
        return None
    owner = element if local(element.tag) == "trans-unit" else (parents[-1] if parents
                                                                  else element)
    tuid = element.get("id") or owner.get("id")
    return ReadPair(source, target, tuid)
