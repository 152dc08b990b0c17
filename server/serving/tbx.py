"""Terminology from TBX files into a glossary: enforced entries, and forbidden targets.

Read: TBX-Basic and TBX v2 (ISO 30042:2008, root `martif`: `termEntry` / `langSet` /
`tig` or `ntig` / `term`) and TBX v3 (ISO 30042:2019, root `tbx`: `conceptEntry` /
`langSec` / `termSec` / `term`), as Weblate (translate-toolkit), memoQ, Crowdin and
Trados write them. The XML is read with entity declarations and external references
refused (server/memories/xml_safety.py).

A term's status is its `termNote` `administrativeStatus` or `normativeAuthorization`,
with or without TBX-Basic's suffix (`preferredTerm-admn-sts`): `preferred`, `admitted`
(and no status) are allowed; `deprecated`, `superseded`, `forbidden` and `obsolete` (as
Weblate marks forbidden terms) are forbidden.

Per concept entry, every source-language term (whatever its status: a deprecated source
term still occurs in texts) maps to the best allowed target term (preferred, then
admitted, then one without a status). Forbidden target terms are collected as the
glossary's `forbidden` strings, unless some entry enforces the same string. An entry is
do-not-translate (its source terms map to themselves) when it has no allowed target term
and it says so the way producers write it: a `descrip` typed `Translation needed` of `no`
(what translate-toolkit and Weblate read as untranslatable), a `termNote`
`translationNote` of `no`, ITS-style `translate="no"` on an element, or a note or
`descrip` typed `doNotTranslate` (value anything but `no`/`false`). An
entry whose target term equals its source term is do-not-translate by itself.

A later entry repeating an earlier entry's source term (case-insensitively) is skipped:
the first concept wins, as glossary matching allows one target per source term.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from server.core.errors import InvalidInput
from server.memories.read_units import HostileXml, ImportRefused
from server.memories.xml_safety import XML_LANG, events, local

ENTRY_TAGS = frozenset({"termEntry", "conceptEntry"})
LANGUAGE_TAGS = frozenset({"langSet", "langSec"})
TERM_GROUP_TAGS = frozenset({"tig", "ntig", "termSec"})
STATUS_TYPES = frozenset({"administrativeStatus", "normativeAuthorization"})
ALLOWED = {"preferred": 0, "admitted": 1, "": 2, "standardized": 0, "legal": 0,
           "regulated": 0}  # rank: lower is better
FORBIDDEN = frozenset({"deprecated", "superseded", "forbidden", "obsolete",
                       "notrecommended"})
DNT_TYPES = frozenset({"doNotTranslate", "donottranslate", "do-not-translate"})
NO_VALUES = frozenset({"no", "false", "0"})
# "is a translation needed?" marks; "Translation needed" is translate-toolkit's
NEEDED_TYPES = frozenset({"Translation needed", "translationNote"})


@dataclass
class Terminology:
    """What a TBX file gives a glossary of one language pair."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    do_not_translate: list[str] = field(default_factory=list)  # also among `entries`
    skipped: int = 0  # concepts without a usable term in both languages, or repeats
    languages: set[str] = field(default_factory=set)  # every language the file has


@dataclass
class _Term:
    text: str
    status: str  # normalized: "preferred", "deprecated", ... ("" when none)


def read_tbx(data: bytes, *, source: str, target: str, field_name: str = "body"
             ) -> Terminology:
    """The terminology of `data` for `source` -> `target` (language codes matched by their
    primary subtag: `en` reads `en-US`). InvalidInput (422) names what is wrong: not XML,
    entity declarations, not TBX, a language the file lacks, no usable term."""
    found = Terminology()
    root_seen = False
    try:
        for event, element in events(io.BytesIO(data)):
            name = local(element.tag)
            if event == "start":
                if not root_seen:
                    root_seen = True
                    if name not in ("martif", "tbx"):
                        raise InvalidInput(f"not a TBX file: the root element is <{name}>, "
                                           "not <martif> (TBX 2008) or <tbx> (TBX 2019)",
                                           field=field_name)
                continue
            if name in ENTRY_TAGS:
                _take(found, _concept(element), source=source, target=target)
                element.clear()  # a large termbase is read entry by entry
    except HostileXml as error:
        raise InvalidInput(f"TBX {error}", field=field_name) from None
    except ImportRefused as error:
        raise InvalidInput(f"the TBX file is {error}", field=field_name) from None
    _check(found, source=source, target=target, field_name=field_name)
    enforced = {t.lower() for _, t in found.entries}
    found.forbidden = [t for t in dict.fromkeys(found.forbidden) if t.lower() not in enforced]
    return found


def _check(found: Terminology, *, source: str, target: str, field_name: str) -> None:
    missing = [code for code in (source, target) if code not in found.languages]
    if missing:
        have = ", ".join(sorted(found.languages)) or "none"
        raise InvalidInput(f"the TBX file has no terms in {' or '.join(missing)} (its "
                           f"languages: {have}); the glossary is {source}->{target}",
                           field=field_name)
    if not found.entries and not found.forbidden:
        raise InvalidInput(f"the TBX file has no {source}->{target} term pair, "
                           "do-not-translate term or forbidden target term",
                           field=field_name)


@dataclass
class _Concept:
    terms: dict[str, list[_Term]]  # primary language subtag -> terms in file order
    do_not_translate: bool


def _concept(entry: Element) -> _Concept:
    terms: dict[str, list[_Term]] = {}
    dnt = _says_do_not_translate(entry)
    for section in entry.iter():
        if local(section.tag) not in LANGUAGE_TAGS:
            continue
        language = _primary(section.get(XML_LANG) or section.get("lang") or "")
        if not language:
            continue
        for group in section.iter():
            if local(group.tag) not in TERM_GROUP_TAGS:
                continue
            term = next((e for e in group.iter() if local(e.tag) == "term"), None)
            text = " ".join("".join(term.itertext()).split()) if term is not None else ""
            if text:
                terms.setdefault(language, []).append(_Term(text, _status(group)))
    return _Concept(terms, dnt)


def _take(found: Terminology, concept: _Concept, *, source: str, target: str) -> None:
    found.languages.update(concept.terms)
    sources = concept.terms.get(source, [])
    targets = concept.terms.get(target, [])
    allowed = sorted((t for t in targets if t.status not in FORBIDDEN),
                     key=lambda t: ALLOWED.get(t.status, 2))
    found.forbidden += [t.text for t in targets if t.status in FORBIDDEN]
    if not sources:
        found.skipped += 1
        return
    known = {s.lower() for s, _ in found.entries}
    if allowed:
        chosen = allowed[0].text
    elif concept.do_not_translate:
        chosen = ""
    else:
        found.skipped += 1
        return
    for term in sources:
        if term.text.lower() in known:
            found.skipped += 1
            continue
        mapped = chosen or term.text
        found.entries.append((term.text, mapped))
        known.add(term.text.lower())
        if mapped == term.text:
            found.do_not_translate.append(term.text)


def _status(group: Element) -> str:
    for note in group.iter():
        if local(note.tag) == "termNote" and note.get("type") in STATUS_TYPES:
            value = "".join(note.itertext()).strip()
            for suffix in ("Term-admn-sts", "-admn-sts", "Term"):
                value = value.removesuffix(suffix)
            return value.lower()
    return ""


def _says_do_not_translate(entry: Element) -> bool:
    for element in entry.iter():
        if (element.get("translate") or "").lower() in NO_VALUES:
            return True
        kind = element.get("type") or ""
        value = "".join(element.itertext()).strip().lower()
        if kind in NEEDED_TYPES and value in NO_VALUES:
            return True
        if kind in DNT_TYPES and value not in NO_VALUES:
            return True
    return False


def _primary(code: str) -> str:
    return code.replace("_", "-").split("-")[0].lower()
