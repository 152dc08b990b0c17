"""The text normalisation shared by classifier training (trainer) and prediction (server).

Training and serving must see identical features: the trainer imports `classifier_text`
from here, so the two can never drift apart.
"""

from __future__ import annotations

import re

_PUNCTUATION = re.compile(r"([^\w\s])")
_WHITESPACE = re.compile(r"\s+")


def classifier_text(text: str) -> str:
    """Lowercased, punctuation split off as separate tokens, whitespace collapsed to single
    spaces: one line (fastText reads one example per line)."""
    separated = _PUNCTUATION.sub(r" \1 ", text.lower())
    return _WHITESPACE.sub(" ", separated).strip()
