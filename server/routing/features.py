"""The text normalisation shared by classifier training (trainer) and prediction (server).

Training and serving must see identical features: the trainer imports `classifier_text`
from here, so the two can never drift apart.

Text reaches the router's fastText training file from uploads (`POST /admin/domains`), so
it is neutralised first: fastText reads one example per line and takes any token that
starts with `__label__` as a label, so a training line with a line break or a
`__label__law` inside would add examples or labels of the uploader's choosing.
"""

from __future__ import annotations

import re

LABEL_MARKER = "__label__"  # fastText's label prefix
# a token is a run of word characters or one other non-space character (punctuation)
_TOKEN = re.compile(r"\w+|[^\w\s]")
# C0 and C1 control characters (tab, line breaks, NUL, escape, ...) and the Unicode line
# and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def neutralise(text: str) -> str:
    """`text` as one inert line: control characters become spaces and fastText's label
    marker loses its meaning (the replacement holds spaces, so no new marker can form)."""
    return _CONTROL.sub(" ", text).replace(LABEL_MARKER, " label ")


def classifier_text(text: str) -> str:
    """Lowercased, neutralised (see `neutralise`), punctuation split off as separate tokens,
    whitespace collapsed to single spaces: one line (fastText reads one example per line)."""
    # findall, not a substitution with a template: Python 3.11 expands a template in
    # Python once per match, 60 ms for 10,000 dots
    return " ".join(_TOKEN.findall(neutralise(text.lower())))
