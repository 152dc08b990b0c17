"""The markup benchmark's check: the source's markup back in order, text escapes allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.quality.text.markup import markup_back, page_sentences

SOURCE = '<p>Read <a href="/x?a=1&amp;b=2">this</a> &nbsp;now<!-- c --></p>'


@pytest.mark.parametrize(("output", "found", "escapes"), [
    ('<p>Lisez <a href="/x?a=1&amp;b=2">ceci</a> &nbsp;maintenant<!-- c --></p>', 6, 0),
    ('<p>R&amp;D &lt;b> <a href="/x?a=1&amp;b=2">ceci</a> &nbsp;là<!-- c --></p>', 6, 2),
    ('<p>Lisez <a href="/x?a=1&amp;b=2">ceci &nbsp;maintenant<!-- c --></p>', 2, 0),  # lost
    ('<p>Lisez <a href="/x?a=1&amp;b=2"><i>ceci</i></a> &nbsp;<!-- c --></p>', 2, 0),  # extra
    ('<p><a href="/x?a=1&amp;b=2">ceci</a> <!-- c -->&nbsp;</p>', 3, 0),  # moved
])
def test_markup_back(output: str, found: int, escapes: int) -> None:
    assert markup_back(SOURCE, output) == (found, escapes)


def test_pages_cover_each_test_set_in_order(tmp_path: Path) -> None:
    for domain in ("medical", "law", "it", "subtitles", "edu", "ted", "religion"):
        folder = tmp_path / "en-fr" / "domains" / domain
        folder.mkdir(parents=True)
        (folder / "test.en").write_text("".join(f"{domain} {i}\n" for i in range(15)))
    pages = page_sentences(tmp_path, None)
    assert len(pages) == 14 and pages[0] == ("medical", [f"medical {i}" for i in range(7)])
    assert pages[1][1][-1] == "medical 13"  # the 15th line does not fill a page
    assert len(page_sentences(tmp_path, 1)) == 7
