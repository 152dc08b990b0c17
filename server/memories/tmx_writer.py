"""A memory as a TMX 1.4 file (UTF-8), written page by page: the header's props name the
memory and its version when the export began (`x-memory`, `x-memory-version`); each pair
a `<tu>` with its tuid, the attributes, `<prop>`s and `<note>`s it was imported with, and
two `<tuv>`s.

Markup in a segment (`Click <b>Save</b>`) is written as TMX inline codes: a tag whose
closing tag follows as `<bpt i="n">`/`<ept i="n">`, any other as `<ph>`, each holding
the native code escaped, so that CAT tools show it as a tag and an import reads it back
as it was. Characters XML 1.0 cannot hold (control characters) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from model_store import MemoryRecord, PairRecord

TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)(?:\s[^<>]*)?/?>")
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def tmx_header(memory: MemoryRecord) -> bytes:
    source = memory.source_lang or "*all*"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n'
        f'  <header creationtool="nmt-server" creationtoolversion="1" segtype="sentence" '
        f'o-tmf="nmt-server" adminlang="en" srclang={quoteattr(source)} '
        f'datatype="plaintext"><prop type="x-memory">{_text(memory.name)}</prop>'
        f'<prop type="x-memory-version">{memory.version}</prop></header>\n'
        "  <body>\n").encode()


def tmx_units(memory: MemoryRecord, pairs: Iterable[PairRecord]) -> Iterator[bytes]:
    for pair in pairs:
        yield _unit(memory, pair).encode("utf-8")


TMX_FOOTER = b"  </body>\n</tmx>\n"


def _unit(memory: MemoryRecord, pair: PairRecord) -> str:
    extra: dict[str, Any] = pair.attributes or {}
    attributes = {"tuid": pair.tuid} if pair.tuid else {}
    attributes |= {str(k): str(v) for k, v in (extra.get("attributes") or {}).items()
                   if k != "tuid"}
    out = ["    <tu", *(f" {_name(k)}={quoteattr(_clean(v))}" for k, v in attributes.items()
                        if _name(k)), ">\n"]
    out += _annotations(extra, "      ")
    for side, text, lang in (("source", pair.source, memory.source_lang),
                             ("target", pair.target, memory.target_lang)):
        own: dict[str, Any] = extra.get(side) or {}
        out.append(f"      <tuv xml:lang={quoteattr(_clean(lang or side))}")
        out += [f" {_name(k)}={quoteattr(_clean(str(v)))}"
                for k, v in (own.get("attributes") or {}).items() if _name(k)]
        out.append(">")
        out += _annotations(own, "")
        out.append(f"<seg>{segment(text)}</seg></tuv>\n")
    out.append("    </tu>\n")
    return "".join(out)


def _annotations(extra: dict[str, Any], indent: str) -> list[str]:
    out = [f"{indent}<prop type={quoteattr(_clean(str(kind)))}>{_text(str(value))}</prop>"
           + ("\n" if indent else "") for kind, value in extra.get("props") or []]
    out += [f"{indent}<note>{_text(str(note))}</note>" + ("\n" if indent else "")
            for note in extra.get("notes") or []]
    return out


def segment(text: str) -> str:
    """A segment's content: its text escaped, its tags as inline codes."""
    tags = list(TAG.finditer(text))
    partner: dict[int, int] = {}
    opened: list[tuple[str, int]] = []
    for index, tag in enumerate(tags):
        name = tag.group(2).lower()
        if tag.group(0).endswith("/>"):
            continue
        if not tag.group(1):
            opened.append((name, index))
        elif opened and opened[-1][0] == name:
            partner[opened.pop()[1]] = index
    closing = {close: open_ for open_, close in partner.items()}
    out: list[str] = []
    cursor = 0
    for index, tag in enumerate(tags):
        out.append(_text(text[cursor: tag.start()]))
        code = _text(tag.group(0))
        if index in partner:
            out.append(f'<bpt i="{index + 1}">{code}</bpt>')
        elif index in closing:
            out.append(f'<ept i="{closing[index] + 1}">{code}</ept>')
        else:
            out.append(f"<ph>{code}</ph>")
        cursor = tag.end()
    out.append(_text(text[cursor:]))
    return "".join(out)


def _clean(text: str) -> str:
    return NOT_XML.sub("", text)


def _text(text: str) -> str:
    return escape(_clean(text))


def _name(key: str) -> str:
    """An attribute name as written (anything else is left out)."""
    return key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key) else ""
