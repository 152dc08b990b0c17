"""Bodies of the corrections' endpoints: `POST /corrections` (a translator's post-edit) and
the admin ones under /admin/corrections (list, summary, delete, review, refresh).

A stored correction is answered as the registry's record (model_store CorrectionRecord,
the one declaration of its fields): `CorrectionInfo` adds no field of its own."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, field_validator
from pydantic.dataclasses import dataclass

from model_store.correction_rows import CorrectionRecord, CorrectionStatus
from server.api.schemas import DomainName, Strict, TextField, valid_unicode
from server.serving.refresh_jobs import REFRESH_TRAINING

MAX_IDS = 10_000
DirectionCode = Annotated[str, StringConstraints(max_length=16,
                                                 pattern=r"^[a-z]{2,3}-[a-z]{2,3}$")]


class OriginalRouting(BaseModel):
    """The `routing` object of the answer that was corrected (other fields ignored)."""

    mode: str | None = Field(None, max_length=16)
    domain: DomainName | None = None


class CorrectionRequest(Strict):
    source: TextField = Field(description="the source text that was translated")
    corrected: TextField = Field(description="the corrected translation")
    machine: TextField | None = Field(None, description="the machine translation that was "
                                                        "corrected (refused when unchanged)")
    domain: DomainName | None = Field(
        None, description="the domain the correction is for (the corrector's choice); "
                          "default: the domain of `routing`, else the router's choice now")
    routing: OriginalRouting | None = Field(
        None, description="the original answer's `routing` (mode and domain)")
    direction: DirectionCode | None = Field(
        None, description='the translation direction, "en-fr" (default: the served one)')

    _check_text = field_validator("source", "corrected", "machine")(valid_unicode)


class CorrectionReceived(BaseModel):
    id: str
    status: CorrectionStatus = Field(
        description='"accepted" (sent with an API key) or "pending" (anonymous: trains '
                    "nothing until an admin approves it)")
    domain: str | None = Field(description="the domain it will train (null: none known)")
    direction: str
    created_at: datetime


# The registry's record as it is: a field added there is answered here too.
@dataclass(frozen=True)
class CorrectionInfo(CorrectionRecord):
    pass


class CorrectionList(BaseModel):
    corrections: list[CorrectionInfo]


class DomainCounts(BaseModel):
    accepted: int = 0
    pending: int = 0
    approved: int = 0
    rejected: int = 0
    new: int = Field(0, description="trainable (accepted or approved), not used by a "
                                    "refresh yet")


class PairScores(BaseModel):
    served: dict[str, float] = Field(description="BLEU and chrF of the module it refreshed")
    refreshed: dict[str, float] = Field(description="... of the refreshed module")


class HeldOutScores(PairScores):
    sentences: int | None = None
    delta_chrf_95: list[float] | None = Field(
        None, description="95% paired-bootstrap interval of the chrF gain")


class LastRefresh(BaseModel):
    job_id: str
    state: str = Field(description="queued, running, evaluating, published or failed")
    trigger: str | None = Field(None, description="admin, or corrections (enough new ones)")
    created_at: str
    updated_at: str
    base_version: int | None = Field(None, description="the module version it refreshed")
    module_version: int | None = Field(None, description="the version it trained")
    active: bool = Field(False, description="the trained version was activated")
    gate: str | None = Field(None, description="passed or refused (null: not gated yet)")
    dev: PairScores | None = None
    held_out_corrections: HeldOutScores | None = None
    corrections: dict[str, Any] | None = Field(
        None, description="how many trained, were held back, were left out and why")
    error: str | None = None


class CorrectionSummary(BaseModel):
    domains: dict[str, DomainCounts] = Field(description='domain ("" = none known) -> counts')
    refreshes: dict[str, LastRefresh] = Field(
        default_factory=dict, description="domain -> its last refresh job and gate scores")


class Deleted(BaseModel):
    deleted: int


class ReviewRequest(Strict):
    action: Literal["approve", "reject"]
    ids: list[Annotated[str, Field(max_length=36)]] | None = Field(
        None, max_length=MAX_IDS, description="these pending corrections")
    domain: DomainName | None = Field(None, description="or every pending one of a domain")
    all: bool = Field(False, description="or every pending one")


class Reviewed(BaseModel):
    changed: int


class RefreshRequest(Strict):
    domain: DomainName = Field(description="the domain whose module is refreshed")
    options: dict[str, Any] | None = Field(
        None, description="training options of the job (those of POST /admin/domains' "
                          f"config); refresh defaults: {REFRESH_TRAINING}")
