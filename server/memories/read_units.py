"""What the memory readers (TMX, XLIFF, TSV) yield and count, shared by all three: one
pair per translation unit, the units skipped by reason, and the refusal of a whole file.

A file is refused as a whole (nothing is imported) when it cannot be read: not the
format, not well-formed, hostile (entity declarations, external references), not in the
direction's languages at all. Within a readable file, a unit that cannot be a pair is
skipped and counted by reason; the others import.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Reasons a unit is skipped (the job's report counts each)
NO_SOURCE = "no_source_segment"  # no segment in the source language
NO_TARGET = "no_target_segment"
EMPTY = "empty_segment"
TOO_LONG = "too_long"
MISALIGNED = "misaligned"  # a TSV line without exactly one TAB
WRONG_LANGUAGES = "wrong_languages"  # an XLIFF file of another language pair
OVER_LIMIT = "over_pair_limit"  # past NMT_MEMORIES__MAX_PAIRS


class ImportRefused(ValueError):
    """The whole file is refused; the message says why."""


class HostileXml(ImportRefused):
    """XML that declares entities or refers to external resources: refused when the
    parser meets the declaration, before any entity is expanded (its cause is defusedxml's
    EntitiesForbidden, DTDForbidden or ExternalReferenceForbidden)."""


@dataclass(frozen=True)
class ReadPair:
    source: str
    target: str
    tuid: str | None = None
    attributes: dict[str, Any] | None = None  # TMX props, notes, unit attributes


@dataclass
class ReadReport:
    units: int = 0  # translation units seen
    skipped: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)  # as written in the file

    def as_dict(self) -> dict[str, Any]:
        return {"units": self.units, "skipped": dict(sorted(self.skipped.items())),
                "languages": dict(self.languages.most_common(10))}


@dataclass(frozen=True)
class Languages:
    source: str  # ISO 639-1, as the direction says
    target: str
    max_chars: int  # a longer segment is skipped

    def primary(self, code: str | None) -> str:
        """`fr`, `fr-FR`, `FR`, `fr_CA` -> `fr`."""
        return re.split(r"[-_]", (code or "").strip(), maxsplit=1)[0].lower()

    def check(self, source: str, target: str, report: ReadReport) -> bool:
        """Counts the unit; False (and counted as skipped) when it cannot be a pair."""
        if not source.strip() or not target.strip():
            report.skipped[EMPTY] += 1
            return False
        if len(source) > self.max_chars or len(target) > self.max_chars:
            report.skipped[TOO_LONG] += 1
            return False
        return True


Progress = Callable[[int], None]  # bytes read so far
