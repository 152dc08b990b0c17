"""Translation memories, part 1: how fast a TMX imports, how fast a sentence is looked up
in a large memory, and how much of each domain's test set a memory of its own training
pairs answers.

    python -m benchmarks.quality.memories --data ../shared/data [--quick]

- **import**: a 5,000-pair TMX (the 7 domains' first training pairs, written by the
  server's own TMX writer into a temporary file) imported as the server does
  (`MemoryImports.run_job`: read, check, one registry transaction) into a fresh SQLite
  registry, then loaded into a replica's book (`MemoryBook`); best of `--rounds`.
- **lookup**: one memory of 100,000 pairs (the 7 domains' training pairs, then the extra
  corpora's, in a fixed order) indexed as a replica holds it; every domain test sentence
  looked up as a request's text is (exact, then fuzzy >= 75, 3 matches): time per
  sentence (mean, median, 95th percentile).
- **coverage**: per domain, a memory of the domain's training pairs; how many of its test
  sentences get an exact match, and how many a fuzzy one (>= 75, and >= 90), with the
  chrF of the best match's target against the reference (what a translator starts from).
- **hostile**: the time until a billion-laughs TMX is refused (the parser stops at the
  first entity declaration; nothing expands).

Nothing read from the data is written anywhere but the temporary directory. Writes
<out>/memories.json and .md.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sacrebleu

from benchmarks.quality.data import read_pairs
from benchmarks.quality.text.pipeline import environment
from benchmarks.report_files import write_report
from model_store import PairRecord, Registry
from server.core.memory_settings import MemorySettings
from server.memories.book import MemoryBook
from server.memories.imports import MemoryImports, Upload
from server.memories.index import PairIndex, entry
from server.memories.read_units import HostileXml, Languages, ReadReport
from server.memories.tmx_reader import read_tmx
from server.memories.tmx_writer import TMX_FOOTER, tmx_header, tmx_units

DOMAINS = ("medical", "law", "it", "subtitles", "edu", "ted", "religion")
EXTRA = ("software-docs", "package-descriptions", "fiction", "news", "conversation",
         "finance", "parliament", "software-ui")
THRESHOLD = 75.0
HIGH = 90.0
LAUGHS = 9  # nested entity levels: 10^9 "lol"s if they expanded


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.quality.memories",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "results")
    parser.add_argument("--quick", action="store_true",
                        help="500-pair import, 10,000-pair lookup memory, 50 test sentences "
                             "per domain")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args(argv)


def domain_dir(data: Path, name: str) -> Path:
    return data / "en-fr" / "domains" / name


def bench_import(data: Path, pairs: int, rounds: int) -> dict[str, Any]:
    chosen = [p for name in DOMAINS for p in read_pairs(domain_dir(data, name), "train")
              ][:pairs]
    best: dict[str, Any] = {}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as scratch:
            registry = Registry(f"sqlite:///{Path(scratch) / 'registry.sqlite'}")
            try:
                result = _import_once(registry, chosen, Path(scratch))
            finally:
                registry.close()
        if not best or result["import_s"] < best["import_s"]:
            best = result
    return best


def _import_once(registry: Registry, pairs: list[tuple[str, str]],
                 scratch: Path) -> dict[str, Any]:
    memory = registry.create_memory("bench", backbone="b", source_lang="en",
                                    target_lang="fr")
    now = memory.created_at
    records = [PairRecord(i, memory.id, f"u{i}", s, t, "", "import", None, now, now)
               for i, (s, t) in enumerate(pairs, 1)]
    path = scratch / "bench.tmx"
    path.write_bytes(tmx_header(memory) + b"".join(tmx_units(memory, records)) + TMX_FOOTER)
    settings = MemorySettings()
    imports = MemoryImports(registry, settings)
    job = registry.create_memory_import(memory.id, format="tmx", mode="append",
                                        filename=path.name)
    started = time.perf_counter()
    with path.open("rb") as file:
        imports.run_job(job, memory, Upload(file, path.stat().st_size, path.name, "tmx",
                                            "append"))
    imported = time.perf_counter() - started
    done = registry.get_memory_import(job.id)
    assert done is not None and done.state == "done", done
    started = time.perf_counter()
    book = MemoryBook(registry, settings, backbone="b")
    loaded = time.perf_counter() - started
    assert len(book.view.by_id[memory.id].index) == done.report["pairs"]
    return {"pairs": done.report["pairs"], "bytes": path.stat().st_size,
            "import_s": round(imported, 3), "book_load_s": round(loaded, 3)}


def lookup_pairs(data: Path, size: int) -> list[tuple[str, str]]:
    found = [p for name in DOMAINS for p in read_pairs(domain_dir(data, name), "train")]
    for genre in EXTRA:
        if len(found) >= size:
            break
        folder = data / "en-fr" / "extra" / genre
        if (folder / "train.en").is_file():
            found += read_pairs(folder, "train")
    return found[:size]


def bench_lookup(data: Path, size: int, per_domain: int) -> dict[str, Any]:
    pairs = lookup_pairs(data, size)
    started = time.perf_counter()
    index = PairIndex(entry(i, s, t) for i, (s, t) in enumerate(pairs, 1))
    built = time.perf_counter() - started
    queries = [s for name in DOMAINS
               for s, _ in read_pairs(domain_dir(data, name), "test")[:per_domain]]
    times: list[float] = []
    matched = 0
    for text in queries:
        started = time.perf_counter()
        exact = index.exact(text)
        fuzzy = index.fuzzy(text, threshold=THRESHOLD, limit=3)
        times.append(time.perf_counter() - started)
        matched += bool(exact or fuzzy)
    ordered = sorted(times)
    return {"pairs": len(index), "sentences": len(queries), "build_s": round(built, 2),
            "mean_ms": round(1000 * statistics.fmean(times), 3),
            "median_ms": round(1000 * statistics.median(times), 3),
            "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 3),
            "with_a_match": matched}


def bench_coverage(data: Path, per_domain: int) -> list[dict[str, Any]]:
    rows = []
    for name in DOMAINS:
        train = read_pairs(domain_dir(data, name), "train")
        test = read_pairs(domain_dir(data, name), "test")[:per_domain]
        index = PairIndex(entry(i, s, t) for i, (s, t) in enumerate(train, 1))
        exact = fuzzy = high = 0
        starts: list[str] = []
        references: list[str] = []
        for source, reference in test:
            found = index.exact(source)
            if found is not None:
                exact += 1
                starts.append(found.target)
                references.append(reference)
                continue
            matches = index.fuzzy(source, threshold=THRESHOLD, limit=1)
            if matches:
                fuzzy += 1
                high += matches[0].score >= HIGH
                starts.append(matches[0].entry.target)
                references.append(reference)
        chrf = (sacrebleu.corpus_chrf(starts, [references]).score if starts else None)
        rows.append({"domain": name, "sentences": len(test), "train_pairs": len(train),
                     "exact": exact, "fuzzy_75": fuzzy, "fuzzy_90": high,
                     "matched_share": round((exact + fuzzy) / max(len(test), 1), 4),
                     "chrf_of_matches": None if chrf is None else round(chrf, 1)})
    return rows


def billion_laughs() -> bytes:
    levels = ['<!ENTITY l0 "lol">'] + [
        f'<!ENTITY l{n} "{("&l" + str(n - 1) + ";") * 10}">' for n in range(1, LAUGHS + 1)]
    return (f'<?xml version="1.0"?><!DOCTYPE tmx [{"".join(levels)}]><tmx version="1.4">'
            f'<body><tu><tuv xml:lang="en"><seg>&l{LAUGHS};</seg></tuv></tu></body></tmx>'
            ).encode()


def bench_hostile() -> dict[str, Any]:
    data = billion_laughs()
    started = time.perf_counter()
    try:
        list(read_tmx(io.BytesIO(data), Languages("en", "fr", 10_000), ReadReport()))
    except HostileXml as error:
        refused = type(error.__cause__).__name__
    else:
        raise AssertionError("the billion laughs were read")
    return {"file_bytes": len(data), "expanded_bytes_if_read": 3 * 10**LAUGHS,
            "refused_by": refused, "refused_ms": round(1000 * (time.perf_counter() - started),
                                                       3)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    per_domain = 50 if quick else 0
    return {
        "environment": environment("quick" if quick else "full"),
        "import": bench_import(args.data, 500 if quick else 5000, args.rounds),
        "lookup": bench_lookup(args.data, 10_000 if quick else 100_000,
                               per_domain or 10**9),
        "coverage": bench_coverage(args.data, per_domain or 10**9),
        "hostile": bench_hostile(),
    }


def markdown(results: dict[str, Any]) -> str:
    imp, look, bomb = results["import"], results["lookup"], results["hostile"]
    lines = [
        "# Translation memories (part 1)", "",
        f"{results['environment']['machine']}; {results['environment']['note']} run.", "",
        "| measure | result |", "|---|---|",
        f"| import of a {imp['pairs']:,}-pair TMX ({imp['bytes']:,} bytes): read, check, "
        f"store | {imp['import_s']} s |",
        f"| a replica's book loading those pairs | {imp['book_load_s']} s |",
        f"| lookup per sentence, {look['pairs']:,} pairs (exact + fuzzy >= 75; mean / "
        f"median / p95) | {look['mean_ms']} / {look['median_ms']} / {look['p95_ms']} ms |",
        f"| indexing {look['pairs']:,} pairs | {look['build_s']} s |",
        f"| billion-laughs TMX refused ({bomb['refused_by']}, before any expansion) | "
        f"{bomb['refused_ms']} ms |", "",
        "Each domain's test sentences against a memory of its own training pairs "
        "(chrF: the best match's target against the reference):", "",
        "| domain | sentences | exact | fuzzy >= 75 | of which >= 90 | matched | chrF of "
        "matches |", "|---|---|---|---|---|---|---|"]
    for row in results["coverage"]:
        chrf = "-" if row["chrf_of_matches"] is None else row["chrf_of_matches"]
        lines.append(f"| {row['domain']} | {row['sentences']} | {row['exact']} | "
                     f"{row['fuzzy_75']} | {row['fuzzy_90']} | "
                     f"{100 * row['matched_share']:.1f}% | {chrf} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    write_report(args.out, "memories", results, markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
