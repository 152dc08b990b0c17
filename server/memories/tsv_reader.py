"""Tab-separated pairs, read as a stream: one `source<TAB>target` per line (an optional
third column is the pair's tuid), UTF-8 with or without a byte-order mark. A line
without a TAB, or with more than two, is skipped (counted "misaligned"); blank lines are
ignored. Bytes that are not UTF-8 refuse the file."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import IO

from server.memories.read_units import (
    MISALIGNED,
    ImportRefused,
    Languages,
    Progress,
    ReadPair,
    ReadReport,
)

CHUNK = 1 << 16


def read_tsv(stream: IO[bytes], languages: Languages, report: ReadReport, *,
             progress: Progress | None = None) -> Iterator[ReadPair]:
    for number, line in enumerate(_lines(stream, progress), start=1):
        line = line.removesuffix("\r")
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        report.units += 1
        columns = line.split("\t")
        if len(columns) not in (2, 3):
            report.skipped[MISALIGNED] += 1
            continue
        source, target = columns[0].strip(), columns[1].strip()
        if languages.check(source, target, report):
            tuid = columns[2].strip() if len(columns) == 3 and columns[2].strip() else None
            yield ReadPair(source, target, tuid)


def _lines(stream: IO[bytes], progress: Progress | None) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending = ""
    read = 0
    while True:
        data = stream.read(CHUNK)
        read += len(data)
        if progress is not None:
            progress(read)
        try:
            pending += decoder.decode(data, final=not data)
        except UnicodeDecodeError as error:
            raise ImportRefused(f"not UTF-8 text (near byte {read - len(data) + error.start}"
                                "); save the TSV file as UTF-8") from None
        *complete, pending = pending.split("\n")
        yield from complete
        if not data:
            if pending:
                yield pending
            return
