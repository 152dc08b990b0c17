"""The admin answers made from registry records: a training job, a stored correction (one
JSON line of the export too), a domain's last refresh from its corrections."""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from model_store import Job
from model_store.correction_rows import CorrectionRecord
from server.api.schemas_corrections import CorrectionInfo, HeldOutScores, LastRefresh, PairScores
from server.api.schemas_jobs import JobResponse

_CORRECTION = TypeAdapter(CorrectionInfo)


def job_response(job: Job) -> JobResponse:
    return JobResponse(
        id=job.id, domain=job.domain, state=job.state, progress=job.progress, loss=job.loss,
        scores=job.scores, error=job.error, config=job.config, result=job.result,
        worker=job.worker, attempts=job.attempts, created_at=job.created_at,
        updated_at=job.updated_at, heartbeat_at=job.heartbeat_at)


def correction_info(record: CorrectionRecord) -> CorrectionInfo:
    return CorrectionInfo(**vars(record))


def correction_line(record: CorrectionRecord) -> str:
    """The export's line of a correction: the list's object, on one line."""
    shown = _CORRECTION.dump_python(correction_info(record), mode="json")
    return json.dumps(shown, ensure_ascii=False) + "\n"


def last_refresh(job: Job) -> LastRefresh:
    """A refresh job as the summary shows it: its state and its gate's scores."""
    scores, result = job.scores or {}, job.result or {}
    dev, held = scores.get("dev"), scores.get("held_out_corrections")
    return LastRefresh(
        job_id=job.id, state=job.state, trigger=job.config["refresh"].get("trigger"),
        created_at=job.created_at.isoformat(), updated_at=job.updated_at.isoformat(),
        base_version=job.config["refresh"].get("base_version"),
        module_version=result.get("module_version"), active=bool(result.get("active")),
        gate=scores.get("gate") if dev else None,
        dev=PairScores(served=dev["served"], refreshed=dev["refreshed"]) if dev else None,
        held_out_corrections=HeldOutScores(
            served=held["served"], refreshed=held["refreshed"],
            sentences=held.get("sentences"), delta_chrf_95=held.get("delta_chrf_95"))
        if held else None,
        corrections=scores.get("refresh"), error=job.error)
