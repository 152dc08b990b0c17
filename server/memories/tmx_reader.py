"""TMX 1.4 (and 1.1-1.3) translation units, read as a stream (xml_safety.py).

A unit becomes a pair when it holds a segment in the direction's source language and one
in its target language; codes match loosely (`en`, `en-US`, `EN`, `en_GB` are English),
whatever the header's `srclang` says. A unit's `tuid`, its attributes (`creationdate`,
`changeid`, `usagecount`, ...), its `<prop>`s and `<note>`s, and those of the two
segments' `<tuv>`s, are kept with the pair and written back on export.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any
from xml.etree.ElementTree import Element

from server.memories.read_units import (
    NO_SOURCE,
    NO_TARGET,
    ImportRefused,
    Languages,
    Progress,
    ReadPair,
    ReadReport,
)
from server.memories.xml_safety import XML_LANG, events, local, segment_text


def read_tmx(stream: IO[bytes], languages: Languages, report: ReadReport, *,
             progress: Progress | None = None) -> Iterator[ReadPair]:
    body: Element | None = None
    root_seen = False
    for event, element in events(stream, progress):
        name = local(element.tag)
        if event == "start":
            if not root_seen:
                root_seen = True
                if name != "tmx":
                    raise ImportRefused(f"not a TMX file: its root element is {name!r}, "
                                        "not 'tmx'")
            elif name == "body":
                body = element
            continue
        if name != "tu":
            continue
        report.units += 1
        found = _pair(element, languages, report)
        if found is not None:
            yield found
        if body is not None:  # read units leave the tree: memory stays flat
            body.remove(element)


def _pair(unit: Element, languages: Languages, report: ReadReport) -> ReadPair | None:
    sides: dict[str, Element] = {}
    for variant in unit:
        if local(variant.tag) != "tuv":
            continue
        code = variant.get(XML_LANG) or variant.get("lang")
        report.languages[code or "?"] += 1
        sides.setdefault(languages.primary(code), variant)
    source, target = sides.get(languages.source), sides.get(languages.target)
    if source is None or target is None:
        report.skipped[NO_SOURCE if source is None else NO_TARGET] += 1
        return None
    texts = [_segment(side) for side in (source, target)]
    if not languages.check(texts[0], texts[1], report):
        return None
    attributes: dict[str, Any] = {}
    extra = {k: v for k, v in unit.attrib.items() if k != "tuid"}
    if extra:
        attributes["attributes"] = extra
    attributes |= _annotations(unit)
    for side, variant in (("source", source), ("target", target)):
        own = _annotations(variant)
        own_attributes = {k: v for k, v in variant.attrib.items() if k not in (XML_LANG,
                                                                                 "lang")}
        if own_attributes:
            own["attributes"] = own_attributes
        if own:
            attributes[side] = own
    return ReadPair(texts[0], texts[1], unit.get("tuid"), attributes)


def _segment(variant: Element) -> str:
    for child in variant:
        if local(child.tag) == "seg":
            return segment_text(child)
    return ""


def _annotations(element: Element) -> dict[str, Any]:
    props = [[child.get("type", ""), child.text or ""] for child in element
             if local(child.tag) == "prop"]
    notes = [child.text or "" for child in element if local(child.tag) == "note"]
    return ({"props": props} if props else {}) | ({"notes": notes} if notes else {})
