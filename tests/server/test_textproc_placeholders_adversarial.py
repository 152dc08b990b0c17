"""Placeholder spans on hostile text: the same spans as the patterns before they were made
linear (the oracle below), on any text Hypothesis builds; and the shapes that made them
quadratic, at a size where quadratic work would take hours (1,000,000 characters: the
test would never end), answered with the spans they hold."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from server.textproc import placeholders
from server.textproc.placeholders import find_spans

# The e-mail and printf branches as they were (quadratic on runs of word characters and
# of zeros); the other branches are unchanged.
_OLD = placeholders._PATTERNS.replace(
    r"(?<![\w.+-])[\w.+-]+@", r"[\w.+-]+@").replace(
    r"[-+#0]*(?:[1-9]\d*)?", r"[-+#0]*\d*").replace(
    r"[-+#0']*(?:[1-9]\d*|\*)?", r"[-+#0']*(?:\d+|\*)?")
ORACLE = re.compile(_OLD)

ALPHABET = st.sampled_from(list("aZ_0159.,:;%$#+-'*@&<>/{}()[] \n\\\"lhdsfqz") +
                           ["http://", "www.", "%(", "${", "&#", "</", ".com", "%1$"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)


_EMAIL_LOCAL_PART = re.compile(r"[\w.+-]+@")


def starts_inside_a_run(text: str, start: int, end: int) -> bool:
    r"""The one intended difference: an e-mail's local part now starts where its run of
    [\w.+-] starts. The old pattern also began one inside a run that an earlier span had
    cut ('www.www.www.@www.a': after the URL 'www.www.www', it took '.@www.a')."""
    local_part = _EMAIL_LOCAL_PART.match(text, start)
    return (start > 0 and local_part is not None and local_part.end() <= end
            and re.match(r"[\w.+-]", text[start - 1]) is not None)


def oracle_spans(text: str) -> list[tuple[int, int]]:
    found = [(m.start(), m.end()) for m in ORACLE.finditer(text)
             if not starts_inside_a_run(text, m.start(), m.end())]
    found += list(placeholders._braces(text))
    found.sort(key=lambda span: (span[0], -span[1]))
    chosen: list[tuple[int, int]] = []
    for start, end in found:
        if not chosen or start >= chosen[-1][1]:
            chosen.append((start, end))
    return chosen


def test_the_oracle_really_is_the_old_pattern() -> None:
    assert _OLD != placeholders._PATTERNS
    assert _OLD.count("(?<!") == placeholders._PATTERNS.count("(?<!") - 1


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
@example("www.www.www.@www.a")
def test_linear_patterns_find_the_same_spans_as_before(text: str) -> None:
    assert find_spans(text) == oracle_spans(text)


@pytest.mark.parametrize(("text", "spans"), [
    ("a" * 1_000_000, []),
    ("." * 1_000_000, []),
    ("_" * 1_000_000, []),
    ("x-" * 500_000 + "@", []),
    ("%" + "0" * 1_000_000, [(1, 1_000_001)]),  # no conversion: the zeros are a number
    ("%(a)" + "0" * 1_000_000, [(4, 1_000_004)]),
    ("write to " + "a" * 1_000_000 + "@example.org", [(9, 1_000_021)]),
])
def test_shapes_that_were_quadratic_take_linear_work(text: str,
                                                     spans: list[tuple[int, int]]) -> None:
    assert find_spans(text) == spans
