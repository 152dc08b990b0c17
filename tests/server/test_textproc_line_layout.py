"""split_sentences "off" and "nonewlines" on plain text: sentences that span lines, and
their translations laid back out on the source's lines (server/textproc/line_layout.py)."""

from __future__ import annotations

import pytest

from server.textproc.document import build_document, source_text
from server.textproc.line_layout import lay_out, layout_of

TEXT = ("Hello there, this is a\nwrapped sentence that goes on. Next one.\n\n"
        "  Para two line one\n  line two | pipes\n- item one\n- item two\n")


@pytest.mark.parametrize(("split", "units"), [
    ("on", ["Hello there, this is a", "wrapped sentence that goes on.", "Next one.",
            "Para two line one", "line two | pipes", "- item one", "- item two"]),
    ("nonewlines", ["Hello there, this is a wrapped sentence that goes on.", "Next one.",
                    "Para two line one line two | pipes - item one - item two"]),
    ("off", ["Hello there, this is a wrapped sentence that goes on. Next one.",
             "Para two line one line two | pipes - item one - item two"]),
])
def test_units_and_lines_of_each_mode(split: str, units: list[str]) -> None:
    document = build_document(TEXT, split=split)  # type: ignore[arg-type]
    assert [unit.masked.text for unit in document.units] == units
    assert source_text(document) == TEXT
    out = document.render([u.masked.text.upper() for u in document.units])
    assert out == TEXT.upper()  # same words, same cuts, same layout


def test_a_translation_is_cut_in_proportion_at_spaces() -> None:
    layout = layout_of("one two three four\n  five six seven eight")
    assert layout is not None and layout.joints == ("\n  ",)
    assert lay_out("un deux trois quatre cinq six sept huit", layout) == \
        "un deux trois quatre\n  cinq six sept huit"


def test_fewer_words_than_lines_still_gives_every_line() -> None:
    layout = layout_of("a\nb\nc\nd")
    assert layout is not None
    out = lay_out("x", layout)
    assert out.count("\n") == 3 and out.startswith("x")
    assert lay_out("x\ny  z", layout).count("\n") == 3  # breaks in the translation folded


def test_one_line_needs_no_layout() -> None:
    assert layout_of("no break here") is None
    assert build_document("A. B.\n", split="off").units[0].layout is None


def test_enough_words_fill_every_line() -> None:
    """Each cut leaves enough spaces for the cuts after it (the cuts Markdown's lines get,
    server/documents/formats/md_lines.py): no empty line while words remain."""
    layout = layout_of("le le bb x\npatient\npatient\nccc le\nccc ccc a dddd x")
    assert layout is not None
    assert lay_out("x ccc x dddd dddd", layout) == "x\nccc\nx\ndddd\ndddd"
