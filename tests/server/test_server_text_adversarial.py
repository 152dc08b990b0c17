"""The splitter on adversarial shapes: same pieces as the old regex splitter (the oracle in
text_reference.py) on any text Hypothesis builds, and work that grows linearly with the
input, counted as operations (never wall time): executed lines of server/textproc/sentences.py
plus the characters its patterns scan."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import server.textproc.sentences
from server.textproc.sentences import join_pieces, sentences, split_text
from tests.server import text_reference

# Characters that matter to the rule, plus letters of several scripts and odd whitespace.
ALPHABET = st.sampled_from(list(
    ".!?…\"'“‘«»”’()[]_ \t\u00a0\f\v\n\r\u2028 aAzZéÉßİΣσЖж中日ア٣5"
    "ا\u0301\u200b\x1c"))
WORDS = st.sampled_from(["Dr.", "e.g.", "J.", "Art.", "approx.", "i.e.", "...", "?!",
                         "A.", "a.", "(", ")", "\"", "Hello", "world", "3.5", " ", "  ",
                         "\n", "\r\n", "Élodie", "«", "»", "x" * 9 + "."])
TEXTS = st.one_of(st.text(ALPHABET, max_size=80),
                  st.lists(WORDS, max_size=30).map("".join),
                  st.text(max_size=40))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_linear_splitter_agrees_with_the_reference(text: str) -> None:
    assert split_text(text) == text_reference.split_text(text)


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_pieces_rebuild_the_text_and_sentences_are_not_blank(text: str) -> None:
    pieces = split_text(text)
    assert "".join(piece.text for piece in pieces) == text
    assert all(s.strip() for s in sentences(pieces))
    assert join_pieces(pieces, sentences(pieces)) == text


class CountingPattern:
    """A compiled pattern that adds the characters each call scans to `counter[0]`. The
    splitter's patterns are single character classes (or a fixed alternation), so the
    regex engine's work is the span it scans."""

    def __init__(self, pattern: re.Pattern[str], counter: list[int]) -> None:
        self.pattern = pattern
        self.counter = counter

    def _scanned(self, found: re.Match[str] | None, pos: int, endpos: int) -> None:
        self.counter[0] += (found.end() if found else endpos) - pos + 1

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        found = self.pattern.search(text, pos, endpos)
        self._scanned(found, pos, min(endpos, len(text)))
        return found

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        found = self.pattern.match(text, pos, endpos)
        self._scanned(found, pos, pos)
        return found

    def fullmatch(self, text: str) -> Any:
        self.counter[0] += len(text)
        return self.pattern.fullmatch(text)

    def split(self, text: str) -> list[str]:
        self.counter[0] += len(text)
        return self.pattern.split(text)


def count_operations(function: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> int:
    """Lines of server/textproc/sentences.py executed while `function` runs, plus the characters its
    patterns scan (an operation count that covers the regex engine's work too)."""
    counter = [0]
    for name in ("_TERMINALS", "_CLOSERS", "_SPACE", "_LINE_BREAK"):
        monkeypatch.setattr(server.textproc.sentences, name,
                            CountingPattern(getattr(server.textproc.sentences, name), counter))
    target = server.textproc.sentences.__file__

    def tracer(frame: FrameType, event: str, _arg: object) -> Any:
        if frame.f_code.co_filename != target:
            return None
        if event == "line":
            counter[0] += 1
        return tracer

    sys.settrace(tracer)
    try:
        function()
    finally:
        sys.settrace(None)
        monkeypatch.undo()
    return counter[0]


# The shapes of issue #19 and more: each builds a text of about n characters.
SHAPES: dict[str, Callable[[int], str]] = {
    "closing bracket then lowercase": lambda n: "a" * (n // 2) + "). b" * (n // 8),
    "run of dots": lambda n: "." * n,
    "dots and spaces": lambda n: ". " * (n // 2),
    "abbreviations": lambda n: "Dr. " * (n // 4),
    "initials": lambda n: "A. " * (n // 3),
    "one word": lambda n: "a" * n,
    "sentences": lambda n: "A b. " * (n // 5),
    "brackets": lambda n: "([" * (n // 4) + ")]" * (n // 4),
    "quotes after stops": lambda n: ".\"' " * (n // 4),
    "mixed scripts": lambda n: "Жж. 中日。 ا. " * (n // 12),
    "line breaks": lambda n: "A.\n" * (n // 3),
    "no spaces": lambda n: "a.B" * (n // 3),
    "long word before a stop": lambda n: ("x" * 50 + ". b ") * (n // 54),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_work_grows_linearly(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    build = SHAPES[shape]
    small = count_operations(lambda: split_text(build(2_000)), monkeypatch)
    large = count_operations(lambda: split_text(build(20_000)), monkeypatch)
    # 10x the input: linear work is ~10x the lines; quadratic would be ~100x.
    assert large <= 12 * small + 50, (shape, small, large)


def test_issue_text_is_split_like_the_reference_at_a_small_size() -> None:
    text = "a" * 200 + "). b" * 20
    assert split_text(text) == text_reference.split_text(text)
    assert len(sentences(split_text(text))) == 1
