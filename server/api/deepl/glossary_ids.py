"""DeepL glossaries over the server's stored glossaries (server/serving/glossaries.py).
A stored glossary's name is its DeepL `glossary_id`: the DeepL name written as a glossary
name (letters, digits, `.-` kept; any other character as `_` and its UTF-8 bytes in hex,
so `weblate:1:en:de:ab` is `weblate_3a1_3aen_3ade_3aab`) with the language pair after a
dot (`terms.en-fr`), so the pair and the DeepL name are known without columns of their
own. The name must come back exactly: Weblate finds its synced glossary by the name it
gave. A name whose encoding does not fit is shortened (and then listed shortened); a
glossary stored another way (/admin/glossaries) is listed with the default direction's
pair."""

from __future__ import annotations

import re
import uuid
from datetime import UTC
from typing import Any

from model_store import GlossaryRecord
from server.api.deepl.requests import deepl_code
from server.textproc.languages import LanguagePair

PAIRED = re.compile(r"^(?P<name>.+)\.(?P<source>[a-z]{2,3})-(?P<target>[a-z]{2,3})$")
NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
KEPT = re.compile(r"[A-Za-z0-9.-]")
ESCAPED = re.compile(r"(?:_[0-9a-f]{2})+")
SUFFIX = re.compile(r"_-[0-9a-f]{6}$")  # "_-" is never an escape: a repeated name's mark
MAX_ID = 64  # what a stored glossary's name may have
MAX_NAME = 48  # a shortened name leaves room for a suffix and the pair


def encode_name(name: str) -> str:
    return "".join(c if KEPT.match(c) else "".join(f"_{b:02x}" for b in c.encode())
                   for c in name)


def decode_name(encoded: str) -> str:
    """The DeepL name of a stored glossary's name part (a shortened one as it is)."""
    plain = SUFFIX.sub("", encoded)
    try:
        return ESCAPED.sub(lambda m: bytes.fromhex(m[0].replace("_", "")).decode(), plain)
    except UnicodeDecodeError:  # not one of ours: shown as stored
        return plain
# a multilingual (v3) glossary's id holds no dot, so it is never a v2 id; each of its
# dictionaries is stored as `<id>.<source>-<target>` (glossaries_v3.py)
MULTILINGUAL = re.compile(r"^ml-[A-Za-z0-9_-]+-[0-9a-f]{8}$")
DICTIONARY = re.compile(r"^(?P<id>ml-[A-Za-z0-9_-]+-[0-9a-f]{8})\."
                        r"(?P<source>[a-z]{2,3})-(?P<target>[a-z]{2,3})$")


def new_id(name: str, pair: LanguagePair, taken: set[str]) -> str:
    """The glossary id (stored name) for a new DeepL glossary `name` of `pair`."""
    tail = f".{pair.source}-{pair.target}"
    slug = encode_name(name)
    if not slug[:1].isalnum() or len(slug) + len(tail) + 8 > MAX_ID:
        slug = NOT_NAME.sub("-", name).strip("-._")[:MAX_NAME] or "glossary"
    found = slug + tail
    while found in taken:  # DeepL allows several glossaries of one name
        found = f"{slug}_-{uuid.uuid4().hex[:6]}{tail}"
    return found


def glossary_pair(record: GlossaryRecord, default: LanguagePair) -> LanguagePair:
    match = PAIRED.match(record.name)
    if match is None:
        return default
    return LanguagePair(match["source"], match["target"])


def glossary_info(record: GlossaryRecord, default: LanguagePair) -> dict[str, Any]:
    """DeepL's glossary object (GET /v2/glossaries/{id})."""
    pair = glossary_pair(record, default)
    match = PAIRED.match(record.name)
    created = record.created_at
    if created.tzinfo is not None:
        created = created.astimezone(UTC).replace(tzinfo=None)
    return {"glossary_id": record.name,
            "name": decode_name(match["name"]) if match else record.name,
            "ready": True, "source_lang": deepl_code(pair.source),
            "target_lang": deepl_code(pair.target),
            "creation_time": created.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z",
            "entry_count": len(record.entries)}


def entries_tsv(record: GlossaryRecord) -> str:
    return "".join(f"{source}\t{target}\n" for source, target in record.entries)


def resolve_glossary_id(glossary_id: str | None, pair: LanguagePair) -> str | None:
    """A v3 glossary's dictionary for `pair` (its stored name); any other id as given."""
    if glossary_id is None or not MULTILINGUAL.match(glossary_id):
        return glossary_id  # a v2 id always ends in its pair (`.en-fr`)
    return f"{glossary_id}.{pair.source}-{pair.target}"
