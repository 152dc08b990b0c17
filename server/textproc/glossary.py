"""Glossaries: validated source -> target term pairs, matched case-insensitively with the
longest term first, and the CSV/TSV files DeepL and Google accept.

DeepL (`entries_format` csv or tsv) and Google (unidirectional glossaries) both take one
entry per row: `source,target` (CSV, RFC 4180 quoting) or `source<TAB>target`; DeepL's CSV
may carry two more columns, the source and target language codes.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from server.core.errors import InvalidInput
from server.textproc.parts import Part, Term, Text

_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


@dataclass(frozen=True)
class Glossary:
    """Entries in the order given; `pattern` finds them (longest first at a position)."""

    entries: tuple[tuple[str, str], ...]
    pattern: re.Pattern[str]
    targets: dict[str, tuple[str, str]]  # lowercased source -> (source, target)
    forbidden: tuple[str, ...] = ()  # target terms the output must not hold (TBX)

    def forbidden_in(self, translation: str) -> list[str]:
        """The forbidden target terms `translation` holds (whole words, any case)."""
        return forbidden_hits(self.forbidden, translation)

    def apply(self, parts: Sequence[Part]) -> list[Part]:
        """Text parts with every glossary term cut out as a Term part."""
        out: list[Part] = []
        for part in parts:
            if not isinstance(part, Text) or not self.entries:
                out.append(part)
                continue
            cursor = 0
            for match in self.pattern.finditer(part.text):
                found = self.targets.get(match.group(0).lower())
                if found is None:  # a case-insensitive match that lower() does not map back
                    continue
                key, target = found
                out.append(Text(part.text[cursor: match.start()]))
                # do-not-translate (target = source): kept as the text writes it
                written = match.group(0) if target == key else target
                out.append(Term(match.group(0), key, written))
                cursor = match.end()
            out.append(Text(part.text[cursor:]))
        return [p for p in out if not (isinstance(p, Text) and not p.text)]


def build_glossary(entries: Iterable[tuple[str, str]], *, field: str, max_entries: int,
                   max_term_chars: int, forbidden: Sequence[str] = ()) -> Glossary:
    """Validate the entries (and forbidden target terms, which count against
    `max_entries` too); the first bad one is named in a 422 (`field[...]`)."""
    pairs = list(entries)
    if len(pairs) + len(forbidden) > max_entries:
        raise InvalidInput(f"{len(pairs) + len(forbidden)} glossary entries and forbidden "
                           f"terms; at most {max_entries}", field=field)
    for index, term in enumerate(forbidden):
        _check_term(term, side="forbidden", index=index, label=term,
                    where=f"forbidden[{index}]", max_term_chars=max_term_chars)
    targets: dict[str, tuple[str, str]] = {}
    for index, (source, target) in enumerate(pairs):
        where = f"{field}[{index}]"
        for side, term in (("source", source), ("target", target)):
            _check_term(term, side=side, index=index, label=source, where=where,
                        max_term_chars=max_term_chars)
        if source.lower() in targets:
            raise InvalidInput(f"entry {index} ({source!r}) repeats the source term "
                               f"{targets[source.lower()][0]!r} (matching ignores case)",
                               field=where)
        targets[source.lower()] = (source, target)
    longest = sorted(targets.values(), key=lambda pair: -len(pair[0]))
    alternatives = "|".join(re.escape(source) for source, _ in longest) or "(?!)"
    pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)
    return Glossary(tuple(pairs), pattern, targets, tuple(forbidden))


def _check_term(term: str, *, side: str, index: int, label: str, where: str,
                max_term_chars: int) -> None:
    if not term.strip():
        raise InvalidInput(f"entry {index} ({label!r}): the {side} term is empty", field=where)
    if term != term.strip() or any(c in term for c in "\t\r\n"):
        raise InvalidInput(f"entry {index} ({label!r}): the {side} term has "
                           "surrounding whitespace or a tab/line break", field=where)
    if len(term) > max_term_chars:
        raise InvalidInput(f"entry {index} ({label[:40]!r}): the {side} term has "
                           f"{len(term)} characters; at most {max_term_chars}", field=where)


@functools.lru_cache(maxsize=256)
def forbidden_pattern(forbidden: tuple[str, ...]) -> re.Pattern[str]:
    """Any of `forbidden` as a whole word, any case."""
    longest = sorted(forbidden, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, longest)) + r")(?!\w)",
                      re.IGNORECASE)


def forbidden_hits(forbidden: tuple[str, ...], translation: str) -> list[str]:
    """The terms of `forbidden` that `translation` holds as whole words (any case), once
    each, in the glossary's spelling."""
    if not forbidden:
        return []
    spelled = {term.lower(): term for term in forbidden}
    found = (spelled.get(m.group(0).lower())
             for m in forbidden_pattern(forbidden).finditer(translation))
    return list(dict.fromkeys(term for term in found if term is not None))


def parse_table(data: bytes, *, delimiter: str, field: str) -> list[tuple[str, str]]:
    """Rows of a CSV (`,`) or TSV (tab) glossary file: 2 columns, or 4 with language codes
    (DeepL); blank rows are skipped. A bad row is named by its line number."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"the glossary file is not UTF-8 (byte {error.start})",
                           field=field) from None
    rows: list[tuple[str, str]] = []
    # TSV has no quoting (DeepL and Google read a tab-separated row as is)
    reader = (csv.reader(io.StringIO(text), delimiter=",", strict=True) if delimiter == ","
              else csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) not in (2, 4):
                raise InvalidInput(f"line {line}: {len(row)} columns; a glossary row has 2 "
                                   "(source, target) or 4 (source, target, source language, "
                                   "target language)", field=f"{field}[line {line}]")
            if len(row) == 4 and not all(_LANGUAGE.match(code) for code in row[2:]):
                raise InvalidInput(f"line {line}: columns 3 and 4 must be language codes, "
                                   f"not {row[2]!r}, {row[3]!r}", field=f"{field}[line {line}]")
            rows.append((row[0].strip(), row[1].strip()))
    except csv.Error as error:
        raise InvalidInput(f"line {reader.line_num}: {error}", field=field) from None
    return rows
