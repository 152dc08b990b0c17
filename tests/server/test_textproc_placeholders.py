"""Protected spans of plain text (placeholders, entities, URLs, e-mails, numbers)."""

from __future__ import annotations

import pytest

from server.textproc.parts import Keep, Text
from server.textproc.placeholders import find_spans, protect


def spans(text: str) -> list[str]:
    return [text[start:end] for start, end in find_spans(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("Could not open %s: %d errors", ["%s", "%d"]),
    ("%1$s of %2$s", ["%1$s", "%2$s"]),
    ("Width: %-5.2f mm, %lu bytes, %%", ["%-5.2f", "%lu", "%%"]),
    ("Hello %(name)s, you have %(count)d files", ["%(name)s", "%(count)d"]),
    ("Delete {name}? {0} and {{ var }}", ["{name}", "{0}", "{{ var }}"]),
    ("{count, plural, one {# file} other {# files}} selected",
     ["{count, plural, one {# file} other {# files}}"]),
    ("Use ${HOME} or $PATH", ["${HOME}", "$PATH"]),
    ("Press <b>OK</b> to continue<br/>", ["<b>", "</b>", "<br/>"]),
    ("Tom &amp; Jerry&nbsp;&#160;&#x00A0;", ["&amp;", "&nbsp;", "&#160;", "&#x00A0;"]),
    ("Line one\\nLine two", ["\\n"]),
    ("See https://example.org/a?b=1&c=2. Then www.gnu.org/licenses, ok",
     ["https://example.org/a?b=1&c=2", "www.gnu.org/licenses"]),
    ("Mail bob.smith+nmt@mail.example.org today", ["bob.smith+nmt@mail.example.org"]),
    ("Take 2 tablets, 1,500.25 mg at 10:30", ["2", "1,500.25", "10:30"]),
])
def test_spans(text: str, expected: list[str]) -> None:
    assert spans(text) == expected


@pytest.mark.parametrize("text", [
    "50% of the files", "an mp3 file and H2O", "{ not a placeholder }", "unbalanced { brace",
    "a % s b", "cost is 5%",
])
def test_prose_is_not_protected(text: str) -> None:
    assert spans(text) == [] or all(s.isdigit() for s in spans(text))


def test_protect_concatenates_back_to_the_text() -> None:
    text = "Error %1$s: cannot open {file} (see https://x.org/a.html)."
    parts = protect(text)
    assert parts == [Text("Error "), Keep("%1$s"), Text(": cannot open "), Keep("{file}"),
                     Text(" (see "), Keep("https://x.org/a.html"), Text(").")]
