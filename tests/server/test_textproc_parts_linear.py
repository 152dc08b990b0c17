"""Sentence splitting over parts looks only at the parts a piece can touch: the same result
as the scan over every part it replaced (the oracle below), on any parts Hypothesis
builds; and linear work on a text with a placeholder in every sentence, at a size where
the old scan took minutes. The test for letters in a unit (a regex, then isalpha) answers
as the character loop it replaced."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from server.textproc import masking
from server.textproc import parts as parts_module
from server.textproc.document import build_document
from server.textproc.parts import OPAQUE, Close, Keep, Open, Part, Term, Text, merged, raw_of
from server.textproc.sentences import split_text


def old_split_sentences(parts: Sequence[Part]) -> list[str | list[Part]]:
    """split_sentences as it was (lines=True): every piece scanned every part."""
    parts = merged(parts)
    probe = "".join(p.text if isinstance(p, Text) else OPAQUE for p in parts)
    starts: list[int] = []
    cursor = 0
    for part in parts:
        starts.append(cursor)
        cursor += len(part.text) if isinstance(part, Text) else 1
    out: list[str | list[Part]] = []
    offset = 0
    for piece in split_text(probe):
        end = offset + len(piece.text)
        chosen: list[Part] = []
        for part, start in zip(parts, starts, strict=True):
            if isinstance(part, Text):
                low, high = max(offset, start), min(end, start + len(part.text))
                if low < high:
                    chosen.append(Text(part.text[low - start: high - start]))
            elif offset <= start < end:
                chosen.append(part)
        out.append(chosen if piece.translate else "".join(raw_of(p) for p in chosen))
        offset = end
    return out


TEXTS = st.lists(st.sampled_from(list("ab. !?\n:;)(\"'") + ["Mr. ", "A. ", "\n\n", "..."]),
                 max_size=30).map("".join)
PARTS = st.lists(st.one_of(
    TEXTS.map(Text),
    st.just(Keep("%s")),
    st.just(Term("cat", "cat", "chat")),
    st.integers(0, 3).map(lambda n: Open("<b>", n)),
    st.integers(0, 3).map(lambda n: Close("</b>", n))), max_size=25)


@settings(max_examples=500, deadline=None)
@given(PARTS)
def test_the_same_pieces_as_the_scan_over_every_part(parts: list[Part]) -> None:
    assert parts_module.split_sentences(parts) == old_split_sentences(parts)


def test_a_placeholder_in_every_sentence_takes_linear_work() -> None:
    # 100,000 sentences: the old scan would take 10^10 steps (hours); linear, seconds
    document = build_document("Open %s now. " * 100_000)
    assert len(document.sources()) == 100_000


@settings(max_examples=500, deadline=None)
@given(st.text() | st.text(st.sampled_from(list(".,_1²½ⅷ٣aé中 \u0301\u200b"))))
def test_wordy_is_any_letter(text: str) -> None:
    assert masking._wordy(text) == any(char.isalpha() for char in text)
