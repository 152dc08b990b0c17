"""Parallel text as uploaded: UTF-8, one `source<TAB>target` pair per line.

`parse_pairs` is the validation the server runs on an upload (every message says what is
wrong and what is allowed); the sidecar reads back the canonical files it wrote.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

Pair = tuple[str, str]
SHOWN_LINES = 5  # offending line numbers named in an error
FORMAT = "one 'source<TAB>target' pair per line, UTF-8"


class DataError(ValueError):
    """An uploaded file that cannot be used; the message names the file and the problem."""


def parse_pairs(data: bytes, *, label: str) -> list[Pair]:
    """The pairs of an uploaded file. Blank lines are skipped; a line without exactly one
    TAB or with an empty side is refused (the first few line numbers are reported)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        where = data[: error.start].count(b"\n") + 1
        raise DataError(f"{label}: not valid UTF-8 (byte 0x{data[error.start]:02x} at offset "
                        f"{error.start}, line {where}); expected {FORMAT}") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is harmless
    pairs: list[Pair] = []
    bad: list[int] = []
    # split("\n"), not splitlines(): a stray form feed or U+2028 inside a sentence must
    # not become a line break.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            bad.append(number)
            continue
        pairs.append((parts[0].strip(), parts[1].strip()))
    if bad:
        shown = ", ".join(str(n) for n in bad[:SHOWN_LINES])
        more = "" if len(bad) <= SHOWN_LINES else ", ..."
        raise DataError(f"{label}: {len(bad)} misaligned line(s) (line {shown}{more}); each "
                        f"line must hold exactly one TAB with text on both sides ({FORMAT})")
    if not pairs:
        raise DataError(f"{label}: the file is empty; expected {FORMAT}")
    return pairs


def pairs_to_bytes(pairs: Sequence[Pair]) -> bytes:
    return "".join(f"{source}\t{target}\n" for source, target in pairs).encode("utf-8")


def pairs_from_bytes(data: bytes) -> list[Pair]:
    """Read a canonical file written by `pairs_to_bytes` (already validated)."""
    out: list[Pair] = []
    for line in data.decode("utf-8").split("\n"):
        if line:
            source, _, target = line.partition("\t")
            out.append((source, target))
    return out


def hold_out(pairs: Sequence[Pair], *, seed: int, fraction: float,
             max_dev: int) -> tuple[list[Pair], list[Pair]]:
    """(train, dev): a seeded random `fraction` of the pairs (at most `max_dev`, at least
    one) becomes the dev set; training pairs whose source is also a dev source are dropped
    so that the dev score is not measured on memorised sentences."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    size = min(max_dev, max(1, round(fraction * len(pairs))))
    chosen = set(order[:size])
    dev = [pairs[i] for i in sorted(chosen)]
    dev_sources = {source for source, _ in dev}
    train = [p for i, p in enumerate(pairs) if i not in chosen and p[0] not in dev_sources]
    return train, dev
