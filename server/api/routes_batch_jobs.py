"""Jobs of /translate/batch (`"async": true`, or a batch past
NMT_SCHEDULER__BATCH_ASYNC_CHARS): `GET /translate/batch/jobs/{id}` follows one, its
results included. The work is server/serving/batch_jobs.py; this module maps HTTP onto it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from server.api.batch_views import job_response
from server.api.deps import BatchJobsDep, ListingScopeDep
from server.api.schemas import ErrorResponse
from server.api.schemas_batch_jobs import BatchJobResponse

router = APIRouter(tags=["translation"])
MAX_WAIT_S = 60.0


@router.get("/translate/batch/jobs/{job_id}", response_model=BatchJobResponse,
            responses={404: {"model": ErrorResponse, "description": "unknown job"}})
async def get_batch_job(
        job_id: Annotated[str, Path(max_length=64, description="the job's id")],
        jobs: BatchJobsDep,
        _scope: ListingScopeDep,  # the key's tenant: another tenant's job is unknown
        wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description=(
            "wait up to this many seconds for the job to finish (long polling)"))] = 0,
) -> BatchJobResponse:
    """A batch job: its state, progress (items translated of all) and the results of the
    items finished so far, in order (all of them once done)."""
    return job_response(await jobs.wait(job_id, wait))
