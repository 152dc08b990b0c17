"""Translation memories, part 2: retrieval during decoding (gated kNN-MT, per request).

    python -m benchmarks.quality.memory_retrieval --data ../shared/data \
        [--direction en-fr] [--limit 100] [--dev-limit 50] [--beam 4]

Per domain, a memory of the domain's training pairs (`PairIndex`, as a replica holds
it). A sentence the memory holds exactly takes the memory's target (as the server does);
every other sentence decodes with its most similar pairs (>= min_score) forced into a
per-request datastore (server/serving/memory_retrieval.py, server/engine/knn_store.py).

- **dev** (`--dev-limit` sentences per domain): the gate and the memory's weight are
  chosen on the dev sets only (backbone + memory, mean BLEU over the domains);
- **test** (`--limit` sentences per domain, scored once with the chosen settings):
  backbone, backbone + memory, adapter (the served module), adapter + memory; BLEU on all
  sentences and on those with no >= 75 fuzzy or exact match;
- **general**: the news, conversation and captions sets routed by the direction's router
  (the predicted domain's module and its memory when the confidence reaches the router's
  threshold, else the backbone and no memory), memories on against off;
- **speed**: target tokens/s of the medical test set with and without retrieval (the
  adapter), batch 32 and batch 1, side by side; and what a 5,000-pair memory stores
  besides its text (nothing: the datastore is built per request; its transient size per
  sentence is reported).

Writes <out>/memory_retrieval[-<direction>].json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sacrebleu
import torch

from benchmarks.quality.data import read_pairs
from benchmarks.quality.evaluation.evaluate import backbone_of
from benchmarks.quality.models import Models, load_models
from benchmarks.report_files import write_report
from model_store import Store
from server.core.settings import (
    DecodingSettings,
    MemorySettings,
    RetrievalSettings,
    RoutingSettings,
)
from server.decoding.knn import KnnParams, Neighbours
from server.decoding.search import SearchOptions
from server.engine.engine import Member, SentenceJob
from server.engine.forced_cache import cache_of
from server.memories.index import PairIndex, entry
from server.serving.memory_retrieval import pairs_of
from trainer.recipes.directions import DIRECTIONS, Direction

DOMAINS = ("medical", "law", "it", "subtitles", "edu", "ted", "religion")
GENERAL = ("news", "conversation", "captions")
BATCH = 32


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.quality.memory_retrieval",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--direction", default="en-fr", choices=sorted(DIRECTIONS))
    parser.add_argument("--limit", type=int, default=None,
                        help="test sentences per set (0: all; --quick: 100)")
    parser.add_argument("--dev-limit", type=int, default=None,
                        help="dev sentences per domain (default 200; --quick: 30)")
    parser.add_argument("--quick", action="store_true",
                        help="100 test and 30 dev sentences per set, greedy")
    parser.add_argument("--memory-pairs", type=int, default=0,
                        help="training pairs per memory (0: all)")
    parser.add_argument("--beam", type=int, default=None,
                        help="the server's default (4; --quick: 1)")
    parser.add_argument("--gates", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--weights", type=float, nargs="+", default=[0.5, 0.7])
    parser.add_argument("--speed-sentences", type=int, default=64,
                        help="medical test sentences timed at batch 32 (a quarter at batch 1)")
    parser.add_argument("--speed-only", action="store_true",
                        help="only the speed part (the server's default gate and weight)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="timed runs of each kind in the speed part, interleaved (best)")
    parser.add_argument("--builtin", type=Path, default=Path("model_store/builtin"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    quick = args.quick
    args.limit = args.limit if args.limit is not None else (100 if quick else 0)
    args.dev_limit = args.dev_limit if args.dev_limit is not None else (30 if quick else 200)
    args.beam = args.beam if args.beam is not None else (
        1 if quick else DecodingSettings().beam_size)
    return args


class Runner:
    """Decodes sentence lists with a module and (optionally) a memory."""

    def __init__(self, models: Models, beam: int, retrieval: RetrievalSettings) -> None:
        self.models, self.engine = models, models.engine
        self.options = SearchOptions(beam_size=beam)
        self.retrieval = retrieval
        self.threshold = MemorySettings().fuzzy_threshold

    def params(self, gate: float, weight: float) -> KnnParams:
        r = self.retrieval
        return KnnParams(k=r.k, temperature=r.temperature, gate=gate, max_weight=weight)

    def translate(self, sources: list[str], modules: list[str | None],
                  memories: list[PairIndex | None], params: KnnParams | None,
                  batch: int = BATCH) -> tuple[list[str], list[Neighbours]]:
        engine = self.engine
        ids = engine.source_tokenizer.encode(sources)
        out: list[str | None] = [None] * len(sources)
        jobs: list[SentenceJob] = []
        where: list[int] = []
        reports: list[Neighbours] = []
        for i, (text, source) in enumerate(zip(sources, ids, strict=True)):
            memory = memories[i] if params is not None else None
            exact = memory.exact(text) if memory is not None else None
            if exact is not None:
                out[i] = exact.target
                continue
            neighbours = None
            if memory is not None and params is not None:
                found = memory.fuzzy(text, threshold=self.retrieval.min_score,
                                     limit=self.retrieval.max_pairs)
                if found:
                    neighbours = Neighbours(pairs_of(engine, [(s.entry.source, s.entry.target)
                                                             for s in found]), params)
                    reports.append(neighbours)
            jobs.append(SentenceJob(source, (Member(modules[i]),),
                                    engine.max_length(len(source)), neighbours=neighbours))
            where.append(i)
        order = sorted(range(len(jobs)), key=lambda j: len(jobs[j].source_ids))
        for start in range(0, len(order), batch):
            chunk = order[start: start + batch]
            results = engine.translate([jobs[j] for j in chunk], self.options)
            for j, hyps in zip(chunk, results, strict=True):
                out[where[j]] = engine.target_tokenizer.decode(hyps[0].tokens)
        return [o or "" for o in out], reports


def bleu(hyps: list[str], refs: list[str]) -> float:
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) if hyps else 0.0


def memory_of(data: Path, direction: Direction, domain: str, limit: int) -> PairIndex:
    pairs = read_pairs(data / "domains" / domain, "train", direction)
    pairs = pairs[:limit] if limit else pairs
    return PairIndex(entry(i, s, t) for i, (s, t) in enumerate(pairs, 1))


def weighed(reports: list[Neighbours]) -> dict[str, float]:
    rows = sum(n.report.rows for n in reports)
    return {"guided_sentences": len(reports),
            "steps_on_share": round(sum(n.report.rows_on for n in reports) / rows, 3)
            if rows else 0.0,
            "mean_weight": round(sum(n.report.weight_sum for n in reports) / rows, 3)
            if rows else 0.0}


def choose(runner: Runner, dev: dict[str, list[tuple[str, str]]],
           memories: dict[str, PairIndex], args: argparse.Namespace) -> dict[str, Any]:
    """The gate and weight of the best mean dev BLEU (backbone + memory)."""
    grid: list[dict[str, Any]] = []
    for gate in args.gates:
        for weight in args.weights:
            scores = []
            for domain, pairs in dev.items():
                hyps, _ = runner.translate([s for s, _ in pairs], [None] * len(pairs),
                                           [memories[domain]] * len(pairs),
                                           runner.params(gate, weight))
                scores.append(bleu(hyps, [t for _, t in pairs]))
            grid.append({"gate": gate, "max_weight": weight,
                         "dev_bleu": round(statistics.mean(scores), 2)})
            print(grid[-1], flush=True)
    best = max(grid, key=lambda row: row["dev_bleu"])
    return {"grid": grid, "chosen": {"gate": best["gate"], "max_weight": best["max_weight"]}}


def score_test(runner: Runner, models: Models, test: dict[str, list[tuple[str, str]]],
               memories: dict[str, PairIndex], params: KnnParams) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for domain, pairs in test.items():
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        memory = memories[domain]
        novel = [i for i, s in enumerate(sources) if memory.exact(s) is None
                 and not memory.fuzzy(s, threshold=runner.threshold, limit=1)]
        adapter = models.served[domain].module_id if domain in models.served else None
        row: dict[str, Any] = {"domain": domain, "sentences": len(pairs), "novel": len(novel)}
        for label, module, use in (("backbone", None, False), ("backbone+memory", None, True),
                                   ("adapter", adapter, False),
                                   ("adapter+memory", adapter, True)):
            hyps, reports = runner.translate(sources, [module] * len(sources),
                                             [memory if use else None] * len(sources),
                                             params if use else None)
            row[label] = bleu(hyps, refs)
            row[f"{label} novel"] = bleu([hyps[i] for i in novel], [refs[i] for i in novel])
            if use:
                row[f"{label} weighed"] = weighed(reports)
        rows.append(row)
        print(row, flush=True)
    return rows


def score_general(runner: Runner, models: Models, general: dict[str, list[tuple[str, str]]],
                  memories: dict[str, PairIndex], params: KnnParams) -> list[dict[str, Any]]:
    threshold = RoutingSettings().threshold
    rows: list[dict[str, Any]] = []
    for name, pairs in general.items():
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        domains: list[str | None] = []
        for text in sources:
            posteriors = models.classifier.posteriors(text) if models.classifier else {}
            best = max(posteriors, key=lambda d: posteriors[d]) if posteriors else None
            domains.append(best if best and posteriors[best] >= threshold
                           and best in models.served else None)
        modules = [models.served[d].module_id if d else None for d in domains]
        mems = [memories.get(d) if d else None for d in domains]
        off, _ = runner.translate(sources, modules, [None] * len(sources), None)
        on, reports = runner.translate(sources, modules, mems, params)
        rows.append({"set": name, "sentences": len(pairs), "routed_to_a_domain":
                     sum(d is not None for d in domains), "memories off": bleu(off, refs),
                     "memories on": bleu(on, refs), "weighed": weighed(reports)})
        print(rows[-1], flush=True)
    return rows


def speed(runner: Runner, models: Models, pairs: list[tuple[str, str]], memory: PairIndex,
          params: KnnParams, repeats: int = 2) -> list[dict[str, Any]]:
    sources = [s for s, _ in pairs]
    module = models.served["medical"].module_id if "medical" in models.served else None
    rows = []
    for batch in (BATCH, 1):
        chosen = sources if batch == BATCH else sources[: max(1, len(sources) // 4)]
        timing: dict[str, float] = {}
        # "on": forced pairs cache emptied first (every pair forced, as for new text);
        # "warm": the same sentences again, their pairs already forced
        for label in ("off", "on") * repeats + ("off", "warm") * repeats:
            if label == "on":
                cache_of(runner.engine.model).clear()
            use = label != "off"
            started = time.perf_counter()
            hyps, _ = runner.translate(chosen, [module] * len(chosen),
                                       [memory if use else None] * len(chosen),
                                       params if use else None, batch=batch)
            seconds = time.perf_counter() - started
            tokens = sum(len(ids) for ids in runner.engine.target_tokenizer.encode(hyps))
            timing[label] = max(timing.get(label, 0.0), tokens / seconds)  # best of runs
        rows.append({"batch": batch, "sentences": len(chosen),
                     "tokens_per_s_off": round(timing["off"], 1),
                     "tokens_per_s_on": round(timing["on"], 1),
                     "ratio": round(timing["on"] / timing["off"], 3),
                     "tokens_per_s_warm": round(timing["warm"], 1),
                     "ratio_warm": round(timing["warm"] / timing["off"], 3)})
        print(rows[-1], flush=True)
    return rows


def speed_part(runner: Runner, models: Models, args: argparse.Namespace,
               direction: Direction) -> list[dict[str, Any]]:
    """The speed part alone, with the server's default gate and weight."""
    memory = memory_of(args.data, direction, "medical", args.memory_pairs)
    pairs = read_pairs(args.data / "domains" / "medical", "test", direction)
    params = runner.params(runner.retrieval.gate, runner.retrieval.max_weight)
    return speed(runner, models, pairs[: args.speed_sentences], memory, params, args.repeats)


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    direction = DIRECTIONS[args.direction]
    retrieval = RetrievalSettings()
    if not (args.data / "domains").is_dir():  # the data root: the language pair's folder
        args.data = args.data / "en-fr"
    with Store.open(Path(f"/tmp/nmt-knn-bench-{args.direction}"),
                    builtin_dir=args.builtin) as store:
        models = load_models(store, backbone=backbone_of(store, direction),
                             domains=list(DOMAINS))
    runner = Runner(models, args.beam, retrieval)
    if args.speed_only:
        return {"direction": args.direction, "beam": args.beam, "limit": args.limit,
                "retrieval": retrieval.model_dump(), "speed_only": True,
                "repeats": args.repeats,
                "speed": speed_part(runner, models, args, direction)}
    memories = {d: memory_of(args.data, direction, d, args.memory_pairs) for d in DOMAINS}

    def split(folder: Path, name: str, limit: int) -> list[tuple[str, str]]:
        pairs = read_pairs(folder, name, direction)
        return pairs[:limit] if limit else pairs

    dev = {d: split(args.data / "domains" / d, "dev", args.dev_limit) for d in DOMAINS}
    selection = choose(runner, dev, memories, args)
    params = runner.params(selection["chosen"]["gate"], selection["chosen"]["max_weight"])
    test = {d: split(args.data / "domains" / d, "test", args.limit) for d in DOMAINS}
    general = {g: split(args.data / "extra" / g, "test", args.limit) for g in GENERAL}
    domains = score_test(runner, models, test, memories, params)
    keys = ("backbone", "backbone+memory", "adapter", "adapter+memory")
    mean = {k: round(statistics.mean(r[k] for r in domains), 2) for k in keys}
    mean_novel = {k: round(statistics.mean(r[f"{k} novel"] for r in domains), 2)
                  for k in keys}
    return {"direction": args.direction, "beam": args.beam, "limit": args.limit,
            "dev_limit": args.dev_limit, "retrieval": retrieval.model_dump(),
            "selection": selection, "domains": domains, "mean": mean,
            "mean_novel": mean_novel,
            "general": score_general(runner, models, general, memories, params),
            "speed": speed(runner, models, read_pairs(args.data / "domains" / "medical", "test",
                                                      direction)[: args.speed_sentences],
                           memories["medical"], params, args.repeats),
            "stored_bytes_per_memory_besides_text": 0}


def speed_lines(r: dict[str, Any]) -> list[str]:
    lines = ["| batch | sentences | tokens/s off | tokens/s on | ratio | tokens/s on, pairs "
             "cached | ratio |", "|---|---|---|---|---|---|---|"]
    return lines + [f"| {s['batch']} | {s['sentences']} | {s['tokens_per_s_off']} | "
                    f"{s['tokens_per_s_on']} | {s['ratio']} | {s.get('tokens_per_s_warm', '-')}"
                    f" | {s.get('ratio_warm', '-')} |" for s in r["speed"]]


def markdown(r: dict[str, Any]) -> str:
    if r.get("speed_only"):
        return "\n".join([f"# Retrieval during decoding: speed only ({r['direction']})", "",
                          f"Beam {r['beam']}; medical test sentences, the adapter, the "
                          "server's default retrieval settings; best of "
                          f"{r.get('repeats', 2)} interleaved runs each. On: every pair "
                          "forced (cache emptied first); cached: the same sentences again.",
                          "",
                          *speed_lines(r)]) + "\n"
    keys = ("backbone", "backbone+memory", "adapter", "adapter+memory")
    lines = [f"# Translation memories, part 2: retrieval during decoding ({r['direction']})",
             "", f"Beam {r['beam']}; test sentences per set: {r['limit'] or 'all'}; dev "
             f"sentences per domain: {r['dev_limit']}. Chosen on dev: "
             f"{r['selection']['chosen']}.", "",
             "| domain | sentences (novel) | " + " | ".join(keys) + " |",
             "|---|---|" + "---|" * len(keys)]
    for row in r["domains"]:
        cells = [f"{row[k]} ({row[f'{k} novel']})" for k in keys]
        lines.append(f"| {row['domain']} | {row['sentences']} ({row['novel']}) | "
                     + " | ".join(cells) + " |")
    lines.append("| **mean** | | " + " | ".join(
        f"{r['mean'][k]} ({r['mean_novel'][k]})" for k in keys) + " |")
    lines += ["", "BLEU on all sentences (in brackets: only those with no >= 75 match).", "",
              "| routed set | sentences | routed to a domain | memories off | memories on |",
              "|---|---|---|---|---|"]
    lines += [f"| {g['set']} | {g['sentences']} | {g['routed_to_a_domain']} | "
              f"{g['memories off']} | {g['memories on']} |" for g in r["general"]]
    lines += ["", *speed_lines(r)]
    lines += ["", "Stored per memory besides its text: 0 bytes (datastores are built per "
              "request from the retrieved pairs)."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    stem = "memory_retrieval" + ("" if args.direction == "en-fr" else f"-{args.direction}")
    if args.speed_only:
        stem += "-speed"
    elif args.limit:
        stem += "-subset"
    json_path, md_path = write_report(args.out, stem, result, markdown(result))
    print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
