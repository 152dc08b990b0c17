"""Glossary matching, validation and the CSV/TSV files DeepL and Google accept."""

from __future__ import annotations

import pytest

from server.core.errors import InvalidInput
from server.textproc.glossary import Glossary, build_glossary, parse_table
from server.textproc.parts import Keep, Term, Text


def glossary(entries: dict[str, str], **limits: int) -> Glossary:
    return build_glossary(entries.items(), field="glossary",
                          max_entries=limits.get("max_entries", 100),
                          max_term_chars=limits.get("max_term_chars", 50))


def test_longest_term_first_and_case_insensitive() -> None:
    g = glossary({"blood": "sang", "blood pressure": "tension artérielle", "C++": "C++"})
    parts = g.apply([Text("High Blood Pressure and blood; C++ code"), Keep("%s")])
    assert parts == [Text("High "), Term("Blood Pressure", "blood pressure",
                                         "tension artérielle"),
                     Text(" and "), Term("blood", "blood", "sang"), Text("; "),
                     Term("C++", "C++", "C++"), Text(" code"), Keep("%s")]


def test_terms_match_whole_words_only() -> None:
    g = glossary({"art": "art"})
    assert g.apply([Text("start the art")]) == [Text("start the "), Term("art", "art", "art")]


@pytest.mark.parametrize(("entries", "field", "words"), [
    ({"": "x"}, "glossary[0]", "source term is empty"),
    ({"ok": "fine", "bad": "  "}, "glossary[1]", "target term is empty"),
    ({"tab\there": "x"}, "glossary[0]", "tab"),
    ({"x" * 51: "y"}, "glossary[0]", "at most 50"),
    ({"Dose": "dose", "dose": "posologie"}, "glossary[1]", "repeats"),
])
def test_bad_entries_are_named(entries: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        glossary(entries)
    assert raised.value.field == field and words in raised.value.message


def test_too_many_entries() -> None:
    with pytest.raises(InvalidInput, match="at most 2"):
        glossary({"a": "b", "c": "d", "e": "f"}, max_entries=2)


def test_csv_with_quotes_and_language_columns() -> None:
    data = b'\xef\xbb\xbfblood pressure,tension art\xc3\xa9rielle\n"dose, daily",dose\n\n' \
           b'tablet,comprim\xc3\xa9,en,fr\n'
    assert parse_table(data, delimiter=",", field="entries") == [
        ("blood pressure", "tension artérielle"), ("dose, daily", "dose"),
        ("tablet", "comprimé")]


def test_tsv() -> None:
    assert parse_table(b'say "hi"\tdis "salut"\n', delimiter="\t", field="entries") == [
        ('say "hi"', 'dis "salut"')]


@pytest.mark.parametrize(("data", "words"), [
    (b"a,b,c\n", "line 1: 3 columns"),
    (b"a,b\nx,y,en,12\n", "line 2: columns 3 and 4"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_bad_files(data: bytes, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        parse_table(data, delimiter=",", field="entries")
