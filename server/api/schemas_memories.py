"""Request and response bodies of translation memories: the `memory` option of the
translation requests, the matches in their answers, and /admin/memories."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from server.core.errors import InvalidInput
from server.decoding.knn import KnnReport
from server.memories.book import MemoryChoice, MemoryMatch
from server.serving.memory_use import MemoryUse

MAX_NAMED = 8
MAX_SEGMENT = 100_000  # NMT_MEMORIES__MAX_SEGMENT_CHARS may be lower (422)
MemoryName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
MEMORY_DESCRIPTION = (
    'translation memories to answer from: a memory\'s name or a list of them (besides the '
    'memory of the domain the text is routed to, which is always in play); false: none '
    "(docs/API.md, Translation memories)")
MemoryField = Annotated[Literal[False] | MemoryName | list[MemoryName] | None, Field(
    description=MEMORY_DESCRIPTION)]
SegmentText = Annotated[str, StringConstraints(max_length=MAX_SEGMENT)]


class Strict(BaseModel):
    # as server/api/schemas.py's (which builds on this module: it cannot import it back)
    model_config = ConfigDict(extra="forbid", strict=True)


def valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (lone surrogate)") from None
    return text


class MemoryOptions(Strict):
    """The `memory` option of /translate, its batch and the batch's items."""

    memory: MemoryField = None


def memory_choice(value: Literal[False] | str | list[str] | None,
                  field: str = "memory") -> MemoryChoice:
    if value is False:
        return MemoryChoice(off=True, field=field)
    names = (value,) if isinstance(value, str) else tuple(value or ())
    if len(names) > MAX_NAMED:
        raise InvalidInput(f"at most {MAX_NAMED} memories per request", field=field)
    return MemoryChoice(names=tuple(dict.fromkeys(names)), field=field)


class MatchInfo(BaseModel):
    score: float = Field(description="similarity of the memory's source to the text, 0-100 "
                                     "(100: the same text)")
    memory: str = Field(description="the memory that holds the pair")
    version: int = Field(description="the memory's version that answered (it grows with "
                                     "every change to the memory's pairs)")
    source: str
    target: str
    tuid: str | None = Field(description="the pair's id in its TMX (or as added)")
    origin: str = Field(description='"import", "api" or "correction"')
    pair_id: int


def match_info(found: MemoryMatch) -> MatchInfo:
    return MatchInfo(score=found.score, memory=found.memory, source=found.source,
                     target=found.target, tuid=found.tuid, origin=found.origin,
                     pair_id=found.pair_id, version=found.version)


def memory_fields(use: MemoryUse | None) -> dict[str, Any]:
    """The answer's memory fields (absent when no memory was in play)."""
    if use is None:
        return {}
    return {"match": match_info(use.match) if use.match else None,
            "sentence_matches": [match_info(m) for m in use.sentences] or None,
            "matches": [match_info(m) for m in use.matches],
            "retrieval": retrieval_info(use.retrieval) if use.retrieval else None}


def retrieval_info(reports: list[KnnReport]) -> RetrievalInfo:
    rows = sum(r.rows for r in reports)
    return RetrievalInfo(sentences=len(reports), neighbours=sum(r.neighbours for r in reports),
                         steps=rows, steps_on=sum(r.rows_on for r in reports),
                         mean_weight=round(sum(r.weight_sum for r in reports) / rows, 4)
                         if rows else 0.0,
                         gates=sorted({r.gate for r in reports}),
                         calibrated=all(r.calibrated for r in reports))


class RetrievalInfo(BaseModel):
    """How much the memories weighed in decoding (retrieval, kNN-MT)."""

    sentences: int = Field(description="sentences decoded with retrieved memory pairs")
    neighbours: int = Field(description="memory pairs retrieved for them")
    steps: int = Field(description="decoding steps (beam rows count each)")
    steps_on: int = Field(description="steps on which the memory weighed in (the rest were "
                                      "decoded exactly as without it)")
    mean_weight: float = Field(description="the memory's mean weight over all steps (0-1)")
    gates: list[float] = Field(description="the gates the sentences decoded with (a step "
                                           "whose nearest entry is this far weighs 0)")
    calibrated: bool = Field(description="the gates are the memories' own, calibrated on "
                                         "their pairs for the module that decoded (false: "
                                         "NMT_MEMORIES__RETRIEVAL__GATE, while calibration "
                                         "is off, pending, or the memory too small)")


class MemoryAnswer(BaseModel):
    """What the translation memories in play answered (translation responses)."""

    match: MatchInfo | None = Field(
        None, exclude_if=lambda value: value is None,
        description="the text as a whole is a memory's pair: `translation` is its target "
                    "(score 100); absent otherwise")
    sentence_matches: list[MatchInfo] | None = Field(
        None, exclude_if=lambda value: value is None,
        description="sentences of the text a memory holds exactly, translated by its "
                    "target (in text order); absent when none")
    matches: list[MatchInfo] | None = Field(
        None, exclude_if=lambda value: value is None,
        description="fuzzy matches of the text (at least NMT_MEMORIES__FUZZY_THRESHOLD), "
                    "best first; present (maybe empty) when a memory is in play")
    retrieval: RetrievalInfo | None = Field(
        None, exclude_if=lambda value: value is None,
        description="how much the memories weighed in decoding (retrieval of similar pairs "
                    "during decoding); absent when no sentence retrieved a pair")


# -- /admin/memories -------------------------------------------------------------------
class MemoryCreate(Strict):
    name: MemoryName = Field(description="1-64 letters, digits, '_', '.', '-'")
    domain: str | None = Field(
        None, pattern=r"^[a-z][a-z0-9_-]{0,62}$",
        description="a domain whose requests use this memory (at most one per domain); "
                    "absent: requests name it")
    source: str | None = Field(None, pattern=r"^[a-z]{2,3}$",
                               description="default: the direction's source language")
    target: str | None = Field(None, pattern=r"^[a-z]{2,3}$",
                               description="default: the direction's target language")


class MemoryUpdate(Strict):
    name: MemoryName = Field(description="the memory's new name (409 when the direction "
                                         "has a memory of that name)")


class MemoryInfo(BaseModel):
    id: int
    name: str
    domain: str | None
    owner: str
    source: str
    target: str
    pairs: int
    version: int = Field(description="grows with every change to the memory's pairs (the id "
                                     "of its latest change); matches and TMX exports say "
                                     "the version they come from")
    created_at: datetime
    updated_at: datetime


class MemoriesResponse(BaseModel):
    memories: list[MemoryInfo]
    next_after: str | None = Field(
        None, description="more follow: ask again with `after` set to this; null on the "
                          "last page")


class PairUpload(Strict):
    source: SegmentText
    target: SegmentText
    tuid: str | None = Field(None, max_length=255, description="the pair's id (TMX tuid)")
    replace: Literal["tuid", "source"] | None = Field(
        None, description='"tuid": replaces the memory\'s pairs with this tuid; "source": '
                          "those with the same normalised source; absent: adds")

    _check_text = field_validator("source", "target")(valid_unicode)


class PairInfo(BaseModel):
    id: int
    source: str
    target: str
    tuid: str | None
    origin: str
    attributes: dict[str, Any] | None = Field(
        description="what a TMX import kept: unit attributes, props, notes")
    created_at: datetime
    updated_at: datetime


class PairsResponse(BaseModel):
    pairs: list[PairInfo]
    next_after: int | None = Field(description="`after` of the next page (null: no more)")


class ImportJobInfo(BaseModel):
    id: str
    memory: str
    state: Literal["queued", "running", "done", "failed"]
    progress: float = Field(description="0 to 1")
    format: str
    mode: str
    filename: str
    report: dict[str, Any] = Field(
        description="`pairs` imported, `units` read, `skipped` by reason, `languages` seen")
    error: str | None
    created_at: datetime
    updated_at: datetime


class MemoryDeleted(BaseModel):
    name: str
    deleted: bool
