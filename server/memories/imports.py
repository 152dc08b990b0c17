"""Importing a TMX, TSV or XLIFF file into a memory, as a job with progress.

The file is read whole first (progress 0 to 0.9: the bytes read), every unit checked;
then its pairs land in ONE registry transaction (`Registry.import_pairs`), after removing
the memory's pairs first in mode "replace": a file that fails midway (truncated, not
well-formed, hostile) imports nothing, and readers never see half a file. Units that
cannot be pairs are skipped and counted by reason in the job's report; a file with no
pair at all (wrong languages, no units) fails saying what it holds. Jobs run one at a
time per server, on a worker thread; their rows (model_store/memory_import_rows.py) say
how far they are to every replica. A small upload (NMT_MEMORIES__SYNC_IMPORT_BYTES) is
imported before the answer, beside the queue. The shared memories, and each tenant's, may
have NMT_MEMORIES__MAX_OWNER_IMPORTS unfinished jobs: a queued job holds its upload on
disk, so one more is refused (429, with when the soonest is likely done) and not kept.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal

from model_store import MemoryImport, MemoryRecord, NewPair, NotFoundError, Registry
from server.core.errors import TooManyJobs
from server.core.job_pace import soonest_done_s
from server.core.memory_settings import MemorySettings
from server.memories.normalisation import normalised, source_key
from server.memories.read_units import (
    EMPTY,
    OVER_LIMIT,
    ImportRefused,
    Languages,
    ReadPair,
    ReadReport,
)
from server.memories.tmx_reader import read_tmx
from server.memories.tsv_reader import read_tsv
from server.memories.xliff_reader import read_xliff

log = logging.getLogger(__name__)
Format = Literal["tmx", "tsv", "xliff"]
Mode = Literal["append", "replace"]
READERS = {"tmx": read_tmx, "tsv": read_tsv, "xliff": read_xliff}
EXTENSIONS: dict[str, Format] = {".tmx": "tmx", ".tsv": "tsv", ".tab": "tsv", ".txt": "tsv",
                                 ".xlf": "xliff", ".xliff": "xliff", ".sdlxliff": "xliff"}
DUPLICATE = "duplicate"  # the same source and target earlier in the file
SAVE_EVERY_S = 0.5
READ_SHARE = 0.9  # of the progress: reading; the rest: storing
PACE_PARTS = 1000  # a job's progress (0 to 1) in parts, for the pace of the soonest done


class Stopped(Exception):
    """The server is stopping: the job ends failed (nothing of it was stored)."""


@dataclass(frozen=True)
class Upload:
    file: IO[bytes]  # positioned at its start; the job closes it
    size: int
    filename: str
    format: Format
    mode: Mode


def format_of(filename: str) -> Format | None:
    dot = filename.rfind(".")
    return EXTENSIONS.get(filename[dot:].lower()) if dot >= 0 else None


class MemoryImports:
    def __init__(self, registry: Registry, settings: MemorySettings, *,
                 after: Callable[[], object] | None = None) -> None:
        self.registry = registry
        self.settings = settings
        self.after = after  # called once a job stored its pairs (this replica's sync)
        self._turn = asyncio.Semaphore(1)
        self._submitting = asyncio.Lock()  # an owner's count and its new job, one at a time
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = threading.Event()

    async def submit(self, memory: MemoryRecord, upload: Upload) -> MemoryImport:
        """A job for `upload`: finished before the answer when the file is small, else
        queued (its row says how far it is). `TooManyJobs` (the upload closed) when the
        memory's owner has as many unfinished jobs as it may."""
        async with self._submitting:
            try:
                await asyncio.to_thread(self._check_room, memory.owner)
                job = await asyncio.to_thread(self._claim, memory, upload)
            except TooManyJobs:
                upload.file.close()
                raise
        if upload.size <= self.settings.sync_import_bytes:  # small: never behind a queue
            try:
                await asyncio.to_thread(self.run_job, job, memory, upload)
            finally:
                upload.file.close()
        else:
            task = asyncio.create_task(self._run(job, memory, upload),
                                       name=f"nmt-memory-import-{job.id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        found = await asyncio.to_thread(self.registry.get_memory_import, job.id)
        return found or job

    async def check_room(self, owner: str) -> None:
        """`TooManyJobs` when `owner` has no room for another import: asked before an upload
        is read, so a refused client is not made to send (nor the server to spool) the file
        for nothing. `submit` checks again, the authoritative check."""
        await asyncio.to_thread(self._check_room, owner)

    def _claim(self, memory: MemoryRecord, upload: Upload) -> MemoryImport:
        """The job's row, or `TooManyJobs` when another replica took the owner's last place
        since `_check_room` looked."""
        job = self.registry.claim_memory_import(
            memory.id, owner=memory.owner, limit=self.settings.max_owner_imports,
            format=upload.format, mode=upload.mode, filename=upload.filename)
        if job is None:
            self._check_room(memory.owner)  # raises, with the jobs that filled it
            raise TooManyJobs("another import took these memories' last place for "
                              "unfinished imports (NMT_MEMORIES__MAX_OWNER_IMPORTS); "
                              "upload again in a moment", retry_after=1)
        return job

    def _check_room(self, owner: str) -> None:
        unfinished = self.registry.unfinished_memory_imports(owner)
        if len(unfinished) >= self.settings.max_owner_imports:
            raise TooManyJobs(
                f"these memories have {len(unfinished)} unfinished import jobs, as many as "
                "they may have (NMT_MEMORIES__MAX_OWNER_IMPORTS); follow them at "
                "GET /admin/memory-imports/{id} to their end, then upload more",
                retry_after=soonest_done_s(
                    ((PACE_PARTS, int(job.progress * PACE_PARTS), job.created_at.timestamp())
                     for job in unfinished), time.time()))

    async def stop(self) -> None:
        """Queued and running jobs end failed; nothing of theirs is stored."""
        self._stopping.set()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, job: MemoryImport, memory: MemoryRecord, upload: Upload) -> None:
        try:
            async with self._turn:
                await asyncio.to_thread(self.run_job, job, memory, upload)
        except asyncio.CancelledError:
            await asyncio.to_thread(self.registry.update_memory_import, job.id,
                                    state="failed", error="the server stopped; upload the "
                                    "file again")
            raise
        finally:
            upload.file.close()

    def run_job(self, job: MemoryImport, memory: MemoryRecord, upload: Upload) -> None:
        """The job, here and now (blocking): read, check, store, and its row says so."""
        registry = self.registry
        registry.update_memory_import(job.id, state="running")
        report = ReadReport()
        saved = [time.monotonic()]

        def progress(read: int) -> None:
            if self._stopping.is_set():
                raise Stopped
            if time.monotonic() - saved[0] >= SAVE_EVERY_S:
                saved[0] = time.monotonic()
                registry.update_memory_import(
                    job.id, progress=READ_SHARE * read / max(upload.size, 1))

        try:
            pairs = self._read(memory, upload, report, progress)
            if not pairs:
                raise ImportRefused(_nothing(report, memory))
            registry.update_memory_import(job.id, progress=READ_SHARE)
            stored = registry.import_pairs(memory.id, pairs, replace_all=upload.mode ==
                                           "replace")
        except (ImportRefused, Stopped, NotFoundError) as error:
            message = ("the memory was deleted during the import" if isinstance(
                error, NotFoundError) else str(error) or "the server stopped; upload the "
                "file again")
            registry.update_memory_import(job.id, state="failed", error=message,
                                          report=report.as_dict() | {"pairs": 0})
            return
        except Exception:
            log.exception("memory import %s failed", job.id)
            registry.update_memory_import(job.id, state="failed", report=report.as_dict()
                                          | {"pairs": 0}, error="the import failed on the "
                                          "server's side (logged); nothing was imported")
            return
        registry.update_memory_import(job.id, state="done", progress=1.0,
                                      report=report.as_dict() | {"pairs": stored})
        if self.after is not None:
            self.after()

    def _read(self, memory: MemoryRecord, upload: Upload, report: ReadReport,
              progress: Callable[[int], None]) -> list[NewPair]:
        languages = Languages(memory.source_lang, memory.target_lang,
                              max_chars=self.settings.max_segment_chars)
        room = self.settings.max_pairs - (0 if upload.mode == "replace" else memory.pairs)
        seen: set[tuple[str, str]] = set()
        pairs: list[NewPair] = []
        for read in READERS[upload.format](upload.file, languages, report,
                                           progress=progress):
            pair = _new_pair(read)
            if pair is None:
                report.skipped[EMPTY] += 1
            elif (pair.source_key, normalised(pair.target)) in seen:
                report.skipped[DUPLICATE] += 1
            elif len(pairs) >= room:
                report.skipped[OVER_LIMIT] += 1
            else:
                seen.add((pair.source_key, normalised(pair.target)))
                pairs.append(pair)
        return pairs


def _new_pair(read: ReadPair) -> NewPair | None:
    if not normalised(read.source) or not normalised(read.target):
        return None
    return NewPair(source=read.source, target=read.target, source_key=source_key(read.source),
                   tuid=read.tuid[:255] if read.tuid else None, origin="import",
                   attributes=read.attributes)


def _nothing(report: ReadReport, memory: MemoryRecord) -> str:
    if not report.units:
        return "the file holds no translation unit"
    skipped = ", ".join(f"{reason}: {count}" for reason, count in report.skipped.items())
    written = ", ".join(report.languages) or "none"
    return (f"none of the file's {report.units} units is a {memory.source_lang}->"
            f"{memory.target_lang} pair ({skipped}); languages in the file: {written}")
