"""What makes two sources "the same" for a memory, and the words fuzzy lookup indexes.

Exact matching compares `normalised` texts: Unicode compatibility forms folded (NFKC: a
no-break space is a space, a ligature its letters), typographic quotes and apostrophes
as their ASCII forms, whitespace runs as one space, the ends trimmed. Case counts: "Save"
and "save" are not the same sentence (a CAT tool's 100% match is case-exact). Fuzzy
scoring compares `folded` texts (also case-folded) and indexes their words.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                         "\u2032": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
                         "\u201f": '"', "\u00ab": '"', "\u00bb": '"'})
_WORD = re.compile(r"\w+")


_HAS_QUOTE = re.compile("[\u2018\u2019\u201a\u201b\u2032\u201c-\u201f\u00ab\u00bb]")


def normalised(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    if _HAS_QUOTE.search(text):  # translate() looks up every character: only when needed
        text = text.translate(_QUOTES)
    return " ".join(text.split())


def source_key(text: str, *, done: bool = False) -> str:
    """What the registry indexes for exact matching (fixed length, any text length);
    `done`: `text` is normalised already."""
    plain = text if done else normalised(text)
    return hashlib.sha256(plain.encode("utf-8")).hexdigest()


def folded(text: str) -> str:
    return normalised(text).casefold()


def words(folded_text: str) -> list[str]:
    """The distinct words of a folded text, in order of first appearance."""
    return list(dict.fromkeys(_WORD.findall(folded_text)))
