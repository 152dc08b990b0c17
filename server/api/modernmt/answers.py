"""ModernMT's shapes of our records: a memory (`id`, `name`, `description`,
`creationDate`, plus ours: languages, pairs, domain) and an import job (`id`, `memory`,
`size`, `progress` 0..1, plus ours: `state`, `report`)."""

from __future__ import annotations

from typing import Any

from model_store import MemoryImport, MemoryRecord, PairRecord

PAIR_JOB = "pair-"  # a single pair is added at once: its "job" is done when answered
GLOSSARY_JOB = "glossary-"


def memory(record: MemoryRecord) -> dict[str, Any]:
    return {"id": record.id, "name": record.name, "description": None,
            "creationDate": record.created_at.isoformat(),
            "source": record.source_lang, "target": record.target_lang,
            "pairs": record.pairs, "domain": record.domain}


def import_job(job: MemoryImport) -> dict[str, Any]:
    return {"id": job.id, "memory": job.memory_id, "size": job.report.get("units", 0),
            "progress": 1.0 if job.state in ("done", "failed") else float(job.progress),
            "state": job.state, "report": job.report, "error": job.error}


def pair_job(memory_id: int, pair: PairRecord) -> dict[str, Any]:
    return {"id": f"{PAIR_JOB}{memory_id}-{pair.id}", "memory": memory_id, "size": 1,
            "progress": 1.0, "state": "done"}


def glossary_job(memory_id: int, terms: int) -> dict[str, Any]:
    return {"id": f"{GLOSSARY_JOB}{memory_id}-{terms}", "memory": memory_id,
            "size": terms, "progress": 1.0, "state": "done"}


def done_job(job_id: str) -> dict[str, Any] | None:
    """The answer for the id of a pair or glossary "job" (None: not one of those)."""
    for prefix in (PAIR_JOB, GLOSSARY_JOB):
        if job_id.startswith(prefix):
            parts = job_id[len(prefix):].split("-")
            if len(parts) == 2 and all(p.isdigit() for p in parts):
                size = 1 if prefix == PAIR_JOB else int(parts[1])
                return {"id": job_id, "memory": int(parts[0]), "size": size,
                        "progress": 1.0, "state": "done"}
    return None
