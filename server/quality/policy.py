"""What a request asked to be done with sentences below its quality floor, and the
per-sentence report of a text.

    on_low_quality   a sentence whose quality < min_quality ...
    keep             is returned as translated; `flagged` stays false
    flag (default)   is returned as translated, with `flagged: true`
    source           is replaced by its source text (`flagged: true`)
    omit             is replaced by nothing (`flagged: true`); the layout around it stays
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from server.quality.detectors import Issue
from server.quality.review import Assessment
from server.textproc.document import Document
from server.textproc.parts import raw_of

LowQuality = Literal["keep", "flag", "source", "omit"]
LOW_QUALITY_ACTIONS: tuple[LowQuality, ...] = get_args(LowQuality)


@dataclass(frozen=True)
class QualityRequest:
    min_quality: float | None = None  # None: the server's default (settings, estimator)
    on_low_quality: LowQuality = "flag"


@dataclass(frozen=True)
class SentenceResult:
    source: str
    translation: str  # what the answer carries for it (after on_low_quality)
    quality: float
    flagged: bool
    issues: tuple[Issue, ...]
    recovered: Issue | None


def apply(document: Document, finals: Sequence[str], assessments: Sequence[Assessment], *,
          threshold: float, action: LowQuality) -> tuple[list[str], list[SentenceResult]]:
    """Every unit's text after `action`, and the report of each unit."""
    texts: list[str] = []
    report: list[SentenceResult] = []
    for unit, final, assessment in zip(document.units, finals, assessments, strict=True):
        source = "".join(raw_of(part) for part in unit.parts)
        low = assessment.quality < threshold
        text = final
        if low and action == "source":
            text = source
        elif low and action == "omit":
            text = ""
        texts.append(text)
        report.append(SentenceResult(source, text, assessment.quality,
                                     low and action != "keep", assessment.issues,
                                     assessment.recovered))
    return texts, report
