"""/translate/batch's mapping between HTTP and the serving layer: a batch's items, the
per-item work of its job or stream (server/serving/batch_jobs.py), the job's answer and
the NDJSON lines of a streamed batch."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

from fastapi import Request

from server.api.errors import to_http
from server.api.schemas import BatchRequest, TranslateResponse
from server.api.schemas_batch_jobs import BatchJobResponse, BatchStreamLine
from server.api.schemas_documents import DocumentJobError, JobProgress
from server.api.schemas_memories import memory_choice
from server.api.translate_views import (
    decoding_request,
    glossary_choice,
    quality_request,
    to_response,
)
from server.serving.batch_jobs import BatchJob, ItemWork, in_order
from server.serving.requests import Item
from server.serving.translation import Translator

NDJSON = "application/x-ndjson"


def batch_items(body: BatchRequest) -> list[Item]:
    """The batch's items, each with the request's defaults where it sets none."""
    return [Item(item.text, item.domain if "domain" in item.model_fields_set else body.domain,
                 text_field=f"items[{index}].text",
                 domain_field=(f"items[{index}].domain" if "domain" in item.model_fields_set
                               else "domain"),
                 format=item.format if "format" in item.model_fields_set else body.format,
                 split=(item.split_sentences if "split_sentences" in item.model_fields_set
                        else body.split_sentences),
                 glossary=(glossary_choice(item, f"items[{index}].")
                           if {"glossary", "glossary_id"} & item.model_fields_set
                           else glossary_choice(body)),
                 memory=(memory_choice(item.memory, f"items[{index}].memory")
                         if "memory" in item.model_fields_set else memory_choice(body.memory)))
            for index, item in enumerate(body.items)]


def wants_stream(body: BatchRequest, request: Request) -> bool:
    return body.stream or NDJSON in request.headers.get("accept", "")


def item_work(translator: Translator, items: Sequence[Item],
              body: BatchRequest,
              deadline_s: float | None) -> list[ItemWork[TranslateResponse]]:
    """One callable per item: the item translated as a request of its own (so a large
    batch queues behind its share, item by item, with each item's own deadline)."""
    decoding, quality = decoding_request(body.options), quality_request(body)

    def work(item: Item) -> ItemWork[TranslateResponse]:
        async def run() -> TranslateResponse:
            results = await translator.translate([item], decoding, quality=quality,
                                                 deadline_s=deadline_s)
            return to_response(results[0])
        return run

    return [work(item) for item in items]


def job_response(job: BatchJob[TranslateResponse]) -> BatchJobResponse:
    error = (DocumentJobError(code=job.error_code or "internal", message=job.error)
             if job.error is not None else None)
    done = len(job.results)
    return BatchJobResponse(
        id=job.id, state=job.state,
        progress=JobProgress(done=done, total=job.total,
                             fraction=done / job.total if job.total else 1.0),
        results=list(job.results), error=error,
        created_at=datetime.fromtimestamp(job.created_at, UTC),
        updated_at=datetime.fromtimestamp(job.updated_at, UTC))


def job_path(job_id: str) -> str:
    return f"/translate/batch/jobs/{job_id}"


async def ndjson_lines(work: Sequence[ItemWork[TranslateResponse]]) -> AsyncIterator[bytes]:
    """One JSON line per item in order as it finishes; a failure ends the stream with a
    line `{"error": {...}}` (the status, 200, was sent with the first line)."""
    index = 0
    try:
        async for result in in_order(work):
            line = BatchStreamLine(index=index, **result.model_dump())
            yield (line.model_dump_json() + "\n").encode()
            index += 1
    except Exception as error:  # reported in the stream: the status line is long gone
        answer = to_http(error)
        yield (json.dumps({"index": index, **answer.body()}) + "\n").encode()
