"""Sentences written in capitals: translated in sentence case, answered in capitals.

Why: the backbones are trained on cased text, where whole sentences in capitals are rare;
given one, the built-in model copied most of it ("DO NOT TAKE MORE THAN THE RECOMMENDED
DOSE." came back as "DO NOT TAKE MORE DE L'UTRE DE LA DE LA DOSE."). Lower-casing such a
sentence (its first letter kept) before the engine sees it and upper-casing the output
gives the translation the model knows how to make.
"""

from __future__ import annotations

import re

_LETTERS = re.compile(r"[^\W\d_]+")
MIN_WORDS = 2  # "OK" or "FAQ" alone are names more often than shouting


def is_shouted(text: str) -> bool:
    """Two or more words of letters, and no lower-case letter anywhere."""
    found = [w for w in _LETTERS.findall(text) if len(w) >= 2]
    return len(found) >= MIN_WORDS and not any(c.islower() for c in text) and all(
        w.isupper() for w in found)


def fold(text: str) -> str:
    """Sentence case: the first letter stays a capital, every other letter lower-case."""
    lowered = text.lower()
    for index, char in enumerate(lowered):
        if char.isalpha():
            return lowered[:index] + char.upper() + lowered[index + 1:]
    return lowered


def unfold(text: str) -> str:
    return text.upper()
