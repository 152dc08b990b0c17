"""The text normalisation and features shared by classifier training (trainer) and
prediction (server).

Training and serving must see identical features: the trainer imports them from here, so
the two can never drift apart.

A router reads hashed word n-grams (`HashedFeatures`): each word and each pair of adjacent
words of the normalised text becomes a number (CRC-32 modulo `buckets`), and fastText
learns one vector per number (its own word n-grams off: the pairs are features already).
What a router keeps for its retraining is then, per training sentence, the sorted numbers
of its features: no text, no word order (trainer/routers/features.py). A router whose
manifest names no features (older ones) reads the normalised text itself.

Text reaches the router from uploads (`POST /admin/domains`), so it is neutralised first:
fastText reads one example per line and takes any token that starts with `__label__` as a
label, so a line with a line break or a `__label__law` inside would add examples or labels
of the uploader's choosing. Hashed features are hexadecimal numbers, inert either way.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LABEL_MARKER = "__label__"  # fastText's label prefix
# a token is a run of word characters or one other non-space character (punctuation)
_TOKEN = re.compile(r"\w+|[^\w\s]")
# C0 and C1 control characters (tab, line breaks, NUL, escape, ...) and the Unicode line
# and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

FEATURES_KIND = "hashed-word-ngrams"  # the manifest's config["features"]["kind"]

Features = tuple[int, ...]  # one sentence's feature numbers, sorted


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


@dataclass(frozen=True)
class HashedFeatures:
    """Word n-grams up to `ngrams` of `classifier_text`, hashed into `buckets` numbers."""

    ngrams: int = 2
    buckets: int = 1 << 22

    def __post_init__(self) -> None:
        if self.ngrams < 1 or self.buckets < 2:
            raise ValueError(f"hashed features need ngrams >= 1 and buckets >= 2 "
                             f"(got {self.ngrams}, {self.buckets})")

    def of(self, text: str) -> Features:
        """The sorted feature numbers of `text` (repeats kept: fastText averages them)."""
        words = classifier_text(text).split()
        grams = [" ".join(words[i:i + n]) for n in range(1, self.ngrams + 1)
                 for i in range(len(words) - n + 1)]
        return tuple(sorted(zlib.crc32(g.encode("utf-8")) % self.buckets for g in grams))

    def as_config(self) -> dict[str, Any]:
        return {"kind": FEATURES_KIND, "ngrams": self.ngrams, "buckets": self.buckets}

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> HashedFeatures | None:
        """The features a classifier manifest's config names (None: it reads text);
        ValueError for a description this server does not know."""
        value = config.get("features")
        if value is None:
            return None
        if not isinstance(value, Mapping) or value.get("kind") != FEATURES_KIND:
            raise ValueError(f"classifier config 'features' must be {{'kind': "
                             f"{FEATURES_KIND!r}, 'ngrams': N, 'buckets': N}} (got {value!r})")
        ngrams, buckets = value.get("ngrams"), value.get("buckets")
        if not isinstance(ngrams, int) or not isinstance(buckets, int) \
                or isinstance(ngrams, bool) or isinstance(buckets, bool):
            raise ValueError(f"classifier config 'features' needs integer ngrams and "
                             f"buckets (got {value!r})")
        return cls(ngrams, buckets)


def feature_line(features: Sequence[int]) -> str:
    """What fastText reads for these features: their numbers in hexadecimal."""
    return " ".join(f"{number:x}" for number in features)


def model_input(text: str, features: HashedFeatures | None) -> str:
    """The line a classifier reading `features` (None: text) is given for `text`."""
    return classifier_text(text) if features is None else feature_line(features.of(text))
