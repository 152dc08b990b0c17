"""Detectors of the failures a score alone hides: an output that copies its source, loops,
drops content or invents it. Each is a rule over the sentence's features, chosen to fire
rarely on good output (thresholds table-tested in tests/server/quality/).

A copy is only a failure when the source has words to translate: a URL, a code line or a
product name comes back verbatim by design, so the copy detector asks for three or more
source words and a language identifier that still reads the output as the source language.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Literal

from server.quality.features import words

Issue = Literal["copy", "loop", "dropped", "invented"]
ISSUES: tuple[Issue, ...] = ("copy", "loop", "dropped", "invented")

COPY_SHARE = 0.7  # share of output words found in the source
LOOP_SHARE = 0.25  # share of output 3-grams repeating an earlier one (beyond the source's)
DROPPED_UNCOVERED = 0.5  # share of source tokens that received almost no attention
SHORT_RATIO = math.log(0.45)  # output tokens / source tokens, log
LONG_RATIO = math.log(2.5)
MIN_SOURCE_TOKENS = 6  # length rules need a sentence long enough for ratios to mean much
# The coverage rule needs the scoring pass; it runs only for outputs this short (under
# 0.7x the source's tokens: 2.3% of the dev sentences, and every one the rule flagged).
SUSPECT_RATIO = math.log(0.7)
# addresses come back verbatim by design: their "words" never count as translatable
_ADDRESS = re.compile(r"\S+://\S+|\S+@\S+\.\S+|www\.\S+")


# Does this text read as the source language? (None: no language identification: the
# word overlap decides alone.)
ReadsAsSource = Callable[[str], bool] | None


def detect(found: Mapping[str, float], *, source: str, output: str,
           reads_as_source: ReadsAsSource, hit_length_limit: bool) -> list[Issue]:
    """The issues of one translation, in the order of ISSUES."""
    issues: list[Issue] = []
    if _copies(found, source, output, reads_as_source):
        issues.append("copy")
    repeats = found["repeated_ngrams"] - _source_repeats(source)
    if repeats >= LOOP_SHARE or (hit_length_limit and repeats > LOOP_SHARE / 2):
        issues.append("loop")
    long_enough = math.exp(found["source_length"]) >= MIN_SOURCE_TOKENS
    if long_enough and (found["length_ratio"] < SHORT_RATIO
                        or found["uncovered"] >= DROPPED_UNCOVERED):
        issues.append("dropped")
    if long_enough and found["length_ratio"] > LONG_RATIO and "loop" not in issues:
        issues.append("invented")
    return issues


def needs_coverage(found: Mapping[str, float]) -> bool:
    """Whether the dropped-content rule would read coverage (not yet computed) here."""
    return (math.isnan(found["uncovered"]) and found["length_ratio"] < SUSPECT_RATIO
            and math.exp(found["source_length"]) >= MIN_SOURCE_TOKENS)


def _copies(found: Mapping[str, float], source: str, output: str,
            reads_as_source: ReadsAsSource) -> bool:
    source_words = [w for w in words(_ADDRESS.sub(" ", source)) if w.isalpha() and len(w) >= 3]
    if len(source_words) < 3 or found["copy_share"] < COPY_SHARE:
        return False
    return reads_as_source is None or reads_as_source(output)


def _source_repeats(source: str) -> float:
    """The source's own word 3-gram repetition: "very very very" may come back so."""
    tokens = words(source)
    grams = [tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0
