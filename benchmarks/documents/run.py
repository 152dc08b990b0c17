"""Documents through a live server: per file, what came back and what it cost.

    python -m benchmarks.documents.run [--path FOLDER] [--data ../shared/data] [--quick]

Starts `python -m server` (the default model; `--tiny`: a toy model, for tests) and, for
every file of FOLDER (default: a folder built from the shared corpora, one document per
format: benchmarks/documents/corpus.py), in `--rounds` rounds alternating which goes
first:

- (after one untimed pass of the first file through both paths, to warm the server up)
  sends it to `POST /translate/file` (a large one becomes a job: its time runs until the
  result is downloaded);
- sends the same segments (read by the same format reader) to `POST /translate/batch`,
  with the document's routing decision as the domain, in batches of the same size and
  as many in flight as the server uses for a document: the cost of the same text without
  the file around it;
- measures the output with an independent pass (benchmarks/documents/coverage.py): text
  units in and out, the share of output units identified as the target language, and
  whether the untranslated structure is unchanged.

Reports per file: format, segments, units in/out, % translated, structure kept, seconds
(median of rounds) of each path, the file path's overhead over the batch path (target: at
most 15 %) and pages per second (1,800 characters a page). Writes <out>/documents.json
and documents.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from benchmarks.documents import corpus
from benchmarks.documents.coverage import measure
from benchmarks.live_server import live_server
from benchmarks.locations import DEFAULT_DATA, REPO
from benchmarks.report_files import results_dir, write_report
from benchmarks.speed.serve.store import seed_default_store, seed_tiny_store
from server.core.settings import DocumentSettings
from server.documents import formats
from server.documents.formats.base import ReadOptions, Segment

BATCH_ITEMS = 64
TIMEOUT_S = 1800.0
# A translation page as the trade counts it: 1,800 characters with spaces (the German
# "Normseite", also the unit of translation agencies' quotes).
PAGE_CHARS = 1800


def translate_file(client: httpx.Client, path: Path) -> tuple[bytes, dict[str, Any], float]:
    """The translated file, its routing, and the seconds until it was in hand."""
    start = time.perf_counter()
    answer = client.post("/translate/file", files={"file": (path.name, path.read_bytes())})
    if answer.status_code == 202:
        location = answer.headers["location"]
        while True:
            job = client.get(location, params={"wait": 60}).json()
            if job["state"] in ("done", "failed"):
                break
        if job["state"] != "done":
            raise RuntimeError(f"{path.name}: the job failed: {job['error']}")
        answer = client.get(job["result_url"])
    if answer.status_code != 200:
        raise RuntimeError(f"{path.name}: {answer.status_code} {answer.text[:300]}")
    seconds = time.perf_counter() - start
    return answer.content, json.loads(answer.headers["x-nmt-routing"]), seconds


def domain_of(routing: dict[str, Any]) -> Any:
    if routing["mode"] == "ensemble":
        return routing["weights"]
    return routing["domain"] or "generic"


def batches(segments: Sequence[Segment], chunk_chars: int) -> list[list[Segment]]:
    out: list[list[Segment]] = []
    size = 0
    for segment in segments:
        if not out or len(out[-1]) >= BATCH_ITEMS or size + len(segment.text) > chunk_chars:
            out.append([])
            size = 0
        out[-1].append(segment)
        size += len(segment.text)
    return out


def translate_batches(client: httpx.Client, segments: Sequence[Segment], domain: Any,
                      settings: DocumentSettings) -> float:
    """Seconds to translate the segments through /translate/batch."""
    def send(chunk: list[Segment]) -> None:
        answer = client.post("/translate/batch", json={"domain": domain, "items": [
            {"text": s.text, "format": s.fmt} for s in chunk]})
        if answer.status_code != 200:
            raise RuntimeError(f"/translate/batch: {answer.status_code} {answer.text[:300]}")

    start = time.perf_counter()
    with ThreadPoolExecutor(settings.parallel_chunks) as pool:
        list(pool.map(send, batches(segments, settings.chunk_chars)))
    return time.perf_counter() - start


def languages(client: httpx.Client) -> tuple[str, str]:
    answer = client.get("/libretranslate/languages")
    if answer.status_code != 200:
        return "en", "fr"
    source = next(lang for lang in answer.json() if lang["targets"])
    return source["code"], source["targets"][0]


def warm_up(client: httpx.Client, path: Path, settings: DocumentSettings) -> None:
    """One untimed pass of each path: the first requests load the model's pieces, start
    the text worker and fill caches, a cost neither path should be charged with."""
    source, target = languages(client)
    segments = list(formats.by_filename(path.name).read(
        path.read_bytes(), ReadOptions(source=source, target=target)).segments)
    _, routing, _ = translate_file(client, path)
    translate_batches(client, segments, domain_of(routing), settings)


def run_file(client: httpx.Client, path: Path, *, rounds: int, settings: DocumentSettings,
             first: int = 0) -> dict[str, Any]:
    source, target = languages(client)
    data = path.read_bytes()
    segments = list(formats.by_filename(path.name).read(
        data, ReadOptions(source=source, target=target)).segments)
    file_times: list[float] = []
    batch_times: list[float] = []
    output = b""
    routing: dict[str, Any] = {}
    for number in range(rounds):
        order = ("file", "batch") if (number + first) % 2 == 0 else ("batch", "file")
        for which in order:
            if which == "file":
                output, routing, seconds = translate_file(client, path)
                file_times.append(seconds)
            else:
                domain = domain_of(routing) if routing else "generic"
                batch_times.append(translate_batches(client, segments, domain, settings))
    found = measure(path.name, data, output, source=source, target=target)
    file_s, batch_s = statistics.median(file_times), statistics.median(batch_times)
    characters = sum(len(s.text) for s in segments)
    return {"file": path.name, "format": formats.by_filename(path.name).name,
            "bytes": len(data), "segments": len(segments), "characters": characters,
            "pages_per_s": round(characters / PAGE_CHARS / file_s, 3) if file_s else None,
            "units_in": found.units_in,
            "units_out": found.units_out, "translated": round(found.translated, 4),
            "structure_kept": found.structure_kept, "problems": found.problems,
            "routing": routing, "file_s": round(file_s, 3), "batch_s": round(batch_s, 3),
            "overhead": round(file_s / batch_s - 1, 4) if batch_s else None,
            "file_rounds_s": [round(t, 3) for t in file_times],
            "batch_rounds_s": [round(t, 3) for t in batch_times]}


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| file | format | segments | units in / out | translated | structure kept | "
             "file s | batch s | overhead | pages/s |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for row in rows:
        overhead = f"{row['overhead'] * 100:+.1f} %" if row["overhead"] is not None else "-"
        kept = "yes" if row["structure_kept"] else "no: " + "; ".join(row["problems"])
        lines.append(f"| {row['file']} | {row['format']} | {row['segments']} | "
                     f"{row['units_in']} / {row['units_out']} | "
                     f"{row['translated'] * 100:.1f} % | {kept} | {row['file_s']:.2f} | "
                     f"{row['batch_s']:.2f} | {overhead} | {row['pages_per_s']:.2f} |")
    total_file = sum(r["file_s"] for r in rows)
    total_batch = sum(r["batch_s"] for r in rows)
    if total_batch:
        pages = sum(r["characters"] for r in rows) / PAGE_CHARS
        lines.append(f"| all | | {sum(r['segments'] for r in rows)} | | | | "
                     f"{total_file:.2f} | {total_batch:.2f} | "
                     f"{(total_file / total_batch - 1) * 100:+.1f} % | "
                     f"{pages / total_file:.2f} |")
    return (f"Pages: {PAGE_CHARS:,} characters of text to translate.\n\n"
            + "\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks.documents.run",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", type=Path, help="a folder of documents (default: built "
                                                  "from --data)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--lines", type=int, default=150,
                        help="source lines per built document")
    parser.add_argument("--rounds", type=int, help="rounds per file (default 2; --quick 1)")
    parser.add_argument("--quick", action="store_true", help="40 lines, 1 round")
    parser.add_argument("--formats", help="only these formats, comma-separated (e.g. "
                                          "docx,pptx,xlsx,odt,odp,ods)")
    parser.add_argument("--tiny", action="store_true", help="a toy model (tests)")
    parser.add_argument("--out", type=Path, help="results directory (default: results/)")
    args = parser.parse_args(argv)
    lines, rounds = (40, 1) if args.quick else (args.lines, 2)
    rounds = args.rounds or rounds
    with tempfile.TemporaryDirectory(prefix="bench-documents-") as scratch:
        root = Path(scratch)
        if args.path is not None:
            paths = sorted(p for p in args.path.iterdir() if p.is_file())
        else:
            paths = corpus.build(args.data, root / "corpus", lines=lines)
        supported = set(formats.supported_extensions())
        paths = [p for p in paths if p.suffix.lower() in supported]
        if args.formats:
            wanted = {name.strip() for name in args.formats.split(",")}
            paths = [p for p in paths if formats.by_filename(p.name).name in wanted]
        spec = seed_tiny_store(root / "store") if args.tiny else \
            seed_default_store(root / "store")
        settings = DocumentSettings()
        log = REPO / "runs" / "bench-documents" / "server.log"
        # the toy model writes nonsense up to its length limit: keep its sentences short
        quick = {"NMT_DECODING__MAX_LENGTH": "12", "NMT_DECODING__BEAM_SIZE": "1"}
        # a busy host must not turn the comparison into timeouts: both paths get the time
        patient = {"NMT_SCHEDULER__REQUEST_TIMEOUT_S": "600"}
        environment = spec.environment() | patient | (quick if args.tiny else {})
        with live_server(environment, log) as base, \
                httpx.Client(base_url=base, timeout=TIMEOUT_S) as client:
            if paths:
                warm_up(client, paths[0], settings)
            # which path goes first alternates by round and by file
            rows = [run_file(client, path, rounds=rounds, settings=settings, first=number)
                    for number, path in enumerate(paths)]
    description = ("POST /translate/file against the same segments through "
                   "/translate/batch; units and % translated by an independent pass")
    write_report(results_dir(args.out, tiny=args.tiny), "documents",
                 {"description": description, "rows": rows}, table(rows))
    print(table(rows))


if __name__ == "__main__":
    main()
