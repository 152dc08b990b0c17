"""The answers of the memory endpoints, built from the registry's records."""

from __future__ import annotations

from model_store import MemoryImport, MemoryRecord, PairRecord
from server.api.schemas_memories import ImportJobInfo, MemoryInfo, PairInfo


def memory_info(record: MemoryRecord) -> MemoryInfo:
    return MemoryInfo(id=record.id, name=record.name, domain=record.domain,
                      owner=record.owner, source=record.source_lang,
                      target=record.target_lang, pairs=record.pairs, version=record.version,
                      created_at=record.created_at, updated_at=record.updated_at)


def pair_info(pair: PairRecord) -> PairInfo:
    return PairInfo(id=pair.id, source=pair.source, target=pair.target, tuid=pair.tuid,
                    origin=pair.origin, attributes=pair.attributes,
                    created_at=pair.created_at, updated_at=pair.updated_at)


def job_info(job: MemoryImport, memory: str) -> ImportJobInfo:
    return ImportJobInfo(id=job.id, memory=memory, state=job.state, progress=job.progress,
                         format=job.format, mode=job.mode, filename=job.filename,
                         report=job.report, error=job.error, created_at=job.created_at,
                         updated_at=job.updated_at)
