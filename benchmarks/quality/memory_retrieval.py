"""Translation memories, part 2: retrieval during decoding (gated kNN-MT, per request).

    python -m benchmarks.quality.memory_retrieval --data ../shared/data \
        [--direction en-fr] [--limit 100] [--dev-limit 50] [--beam 4] [--work DIR]

Per domain, a memory of the domain's training pairs (`PairIndex`, as a replica holds
it). A sentence the memory holds exactly takes the memory's target (as the server does);
every other sentence decodes with its most similar pairs (>= min_score) forced into a
per-request datastore (server/serving/memory_retrieval.py, server/engine/knn_store.py).

- **dev** (`--dev-limit` sentences per domain): the retrieval settings are chosen on the
  dev sets only, for the configuration the server runs on domain text (adapter +
  memory): the grid point of the best mean among those with no domain more than
  `--floor` below the adapter alone (else the one whose worst domain is least below);
- **test** (`--limit` sentences per domain, scored once with the chosen settings):
  backbone, backbone + memory, adapter (the served module), adapter + memory; BLEU on all
  sentences and on those with no >= 75 fuzzy or exact match;
- **general**: the news, conversation and captions sets routed by the direction's router
  (the predicted domain's module and its memory when the confidence reaches the router's
  threshold, else the backbone and no memory), memories on against off;
- **speed**: target tokens/s of the medical test set with and without retrieval (the
  adapter), batch 32 and batch 1, side by side; and what a 5,000-pair memory stores
  besides its text (nothing: the datastore is built per request).

Every finished part (a dev grid point of a domain, a test configuration of a domain, a
routed set, the speed rows) is kept under `--work` (benchmarks/quality/work_cache.py): a
killed run started again with the same options continues where it stopped.

Writes <out>/memory_retrieval[-<direction>][-subset].json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.quality.data import read_pairs
from benchmarks.quality.evaluation.evaluate import backbone_of
from benchmarks.quality.memory_retrieval_report import CONFIGURATIONS, markdown
from benchmarks.quality.models import Models, load_models
from benchmarks.quality.retrieval_runner import (
    Runner,
    bleu,
    calibrated_gate,
    memory_of,
    speed,
    weighed,
)
from benchmarks.quality.work_cache import WorkCache
from benchmarks.report_files import write_report
from model_store import Store
from server.core.memory_settings import RetrievalSettings
from server.core.settings import DecodingSettings, RoutingSettings
from server.memories.index import PairIndex
from trainer.recipes.directions import DIRECTIONS, Direction

DOMAINS = ("medical", "law", "it", "subtitles", "edu", "ted", "religion")
GENERAL = ("news", "conversation", "captions")
GENERAL_CHUNK = 250  # routed sentences per kept part
TUNED = ("gate", "max_weight", "min_score")  # the settings the dev grid may vary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.quality.memory_retrieval",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--direction", default="en-fr", choices=sorted(DIRECTIONS))
    parser.add_argument("--limit", type=int, default=None,
                        help="test sentences per set (0: all; --quick: 100)")
    parser.add_argument("--dev-limit", type=int, default=None,
                        help="dev sentences per domain (0: all, the default; --quick: 30)")
    parser.add_argument("--quick", action="store_true",
                        help="100 test and 30 dev sentences per set, greedy")
    parser.add_argument("--memory-pairs", type=int, default=0,
                        help="training pairs per memory (0: all)")
    parser.add_argument("--beam", type=int, default=None,
                        help="the server's default (4; --quick: 1)")
    parser.add_argument("--gates", type=float, nargs="+", default=None,
                        help="dev grid (default: the server's setting alone)")
    parser.add_argument("--weights", type=float, nargs="+", default=None,
                        help="dev grid (default: the server's setting alone)")
    parser.add_argument("--min-scores", type=float, nargs="+", default=None,
                        help="dev grid (default: the server's setting alone)")
    parser.add_argument("--floor", type=float, default=0.3,
                        help="dev: no domain's adapter+memory more than this below adapter")
    parser.add_argument("--speed-sentences", type=int, default=64,
                        help="medical test sentences timed at batch 32 (a quarter at batch 1)")
    parser.add_argument("--speed-only", action="store_true",
                        help="only the speed part (the server's default settings)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="timed runs of each kind in the speed part, interleaved (best)")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep each finished part here; a rerun continues from them")
    parser.add_argument("--note", default="",
                        help="a line for the report (e.g. that the host was loaded)")
    parser.add_argument("--builtin", type=Path, default=Path("model_store/builtin"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    quick = args.quick
    args.limit = args.limit if args.limit is not None else (100 if quick else 0)
    args.dev_limit = args.dev_limit if args.dev_limit is not None else (30 if quick else 0)
    args.beam = args.beam if args.beam is not None else (
        1 if quick else DecodingSettings().beam_size)
    return args


def grid_of(args: argparse.Namespace, base: RetrievalSettings) -> list[RetrievalSettings]:
    """The dev grid's points: every combination of the given values (the server's own
    setting where a list is not given)."""
    points = [base]
    for name, values in (("gate", args.gates), ("max_weight", args.weights),
                         ("min_score", args.min_scores)):
        if values:
            points = [p.model_copy(update={name: v}) for p in points for v in values]
    return points


def label_of(settings: RetrievalSettings) -> str:
    return " ".join(f"{name}={getattr(settings, name):g}" for name in TUNED)


def pick(grid: list[dict[str, Any]], floor: float) -> tuple[dict[str, Any], str]:
    """The grid row of the best dev mean among those whose worst domain is at most `floor`
    below the adapter alone; when none is, the row whose worst domain is least below."""
    within = [row for row in grid if row["worst_gain"] >= -floor]
    if within:
        return (max(within, key=lambda row: row["dev_bleu"]),
                f"best mean with no domain more than {floor} below the adapter")
    return (max(grid, key=lambda row: row["worst_gain"]),
            "no point kept every domain within the floor: the least-worst domain")


class Bench:
    """One direction's run: models, memories and the work folder its parts are kept in."""

    def __init__(self, args: argparse.Namespace, models: Models, direction: Direction,
                 memories: dict[str, PairIndex]) -> None:
        self.args, self.models, self.direction = args, models, direction
        self.runner = Runner(models, args.beam)
        self.memories = memories
        folder = args.work / args.direction if args.work else None
        self.work = WorkCache(folder)
        self.gates: dict[str, dict[str, Any]] = {}  # "domain module": its calibration

    def module_of(self, domain: str | None) -> str | None:
        served = self.models.served
        return served[domain].module_id if domain in served else None

    def with_gate(self, domain: str, module: str | None,
                  settings: RetrievalSettings) -> RetrievalSettings:
        """`settings` with the domain memory's gate for `module`: calibrated from the
        memory's own pairs as the server does (kept in the work folder), or the settings'
        own when calibration is off."""
        key = {"domain": domain, "module": module, "beam": self.args.beam,
               "memory_pairs": self.args.memory_pairs, "direction": self.args.direction,
               "retrieval": settings.model_dump()}
        found = self.work.get_or_compute(
            f"gate-{domain}-{module or 'backbone'}", key,
            lambda: calibrated_gate(self.runner, self.memories[domain], module, settings))
        self.gates[f"{domain} {module or 'backbone'}"] = found
        return settings.model_copy(update={"gate": found["gate"]})

    def decode(self, part: str, split: str, domain: str, pairs: list[tuple[str, str]],
               module: str | None, settings: RetrievalSettings | None) -> dict[str, Any]:
        """One domain's sentences under one configuration (kept in the work folder)."""
        if settings is not None:
            settings = self.with_gate(domain, module, settings)
        key = {"split": split, "domain": domain, "sentences": len(pairs), "beam":
               self.args.beam, "module": module, "memory_pairs": self.args.memory_pairs,
               "direction": self.args.direction,
               "retrieval": settings.model_dump() if settings else None}

        def compute() -> dict[str, Any]:
            started = time.perf_counter()
            sources = [s for s, _ in pairs]
            memory = self.memories[domain] if settings is not None else None
            hyps, reports = self.runner.translate(sources, [module] * len(sources),
                                                  [memory] * len(sources), settings)
            return {"hyps": hyps, "weighed": weighed(reports) if settings else None,
                    "seconds": round(time.perf_counter() - started, 1)}

        result = self.work.get_or_compute(part, key, compute)
        print(f"{time.strftime('%H:%M:%S')} {part}: {result['seconds']} s", flush=True)
        return result

    def choose(self, dev: dict[str, list[tuple[str, str]]],
               base: RetrievalSettings) -> dict[str, Any]:
        """The dev grid point for adapter + memory (the module doc's rule)."""
        adapter = {d: bleu(self.decode(f"dev-{d}-adapter", "dev", d, pairs,
                                       self.module_of(d), None)["hyps"],
                           [t for _, t in pairs]) for d, pairs in dev.items()}
        grid: list[dict[str, Any]] = []
        for point in grid_of(self.args, base):
            scores = {d: bleu(self.decode(f"dev-{d}-adapter+memory-{label_of(point)}", "dev",
                                          d, pairs, self.module_of(d), point)["hyps"],
                              [t for _, t in pairs]) for d, pairs in dev.items()}
            gains = {d: round(scores[d] - adapter[d], 2) for d in scores}
            worst = min(gains, key=lambda d: gains[d])
            shown = label_of(point).replace(f"gate={point.gate:g}", "gate=calibrated") \
                if point.calibrate else label_of(point)
            grid.append({"point": shown, "settings": point.model_dump(),
                         "dev_bleu": round(statistics.mean(scores.values()), 2),
                         "per_domain": scores,
                         "gain": round(statistics.mean(gains.values()), 2),
                         "worst_domain": worst, "worst_gain": gains[worst]})
            print(grid[-1], flush=True)
        best, rule = pick(grid, self.args.floor)
        return {"grid": grid, "adapter_dev_bleu": round(statistics.mean(adapter.values()), 2),
                "adapter_per_domain": adapter, "chosen": best["point"],
                "chosen_settings": best["settings"], "rule": rule}

    def score_test(self, test: dict[str, list[tuple[str, str]]],
                   settings: RetrievalSettings) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        threshold = self.runner.threshold
        for domain, pairs in test.items():
            sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
            memory = self.memories[domain]
            novel = [i for i, s in enumerate(sources) if memory.exact(s) is None
                     and not memory.fuzzy(s, threshold=threshold, limit=1)]
            row: dict[str, Any] = {"domain": domain, "sentences": len(pairs),
                                   "novel": len(novel)}
            for label in CONFIGURATIONS:
                module = self.module_of(domain) if label.startswith("adapter") else None
                chosen = settings if label.endswith("+memory") else None
                result = self.decode(f"test-{domain}-{label}", "test", domain, pairs, module,
                                     chosen)
                hyps = result["hyps"]
                row[label] = bleu(hyps, refs)
                row[f"{label} novel"] = bleu([hyps[i] for i in novel],
                                             [refs[i] for i in novel])
                if chosen is not None:
                    row[f"{label} weighed"] = result["weighed"]
                    row[f"{label} gate"] = self.gates[f"{domain} {module or 'backbone'}"]["gate"]
            rows.append(row)
            print(row, flush=True)
        return rows

    def score_general(self, general: dict[str, list[tuple[str, str]]],
                      settings: RetrievalSettings) -> list[dict[str, Any]]:
        models, threshold = self.models, RoutingSettings().threshold
        rows: list[dict[str, Any]] = []
        for name, pairs in general.items():
            sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
            domains: list[str | None] = []
            for text in sources:
                posteriors = models.classifier.posteriors(text) if models.classifier else {}
                best = max(posteriors, key=lambda d: posteriors[d]) if posteriors else None
                domains.append(best if best and posteriors[best] >= threshold
                               and best in models.served else None)
            off: list[str] = []
            on: list[str] = []
            sums = {"guided": 0, "rows": 0, "rows_on": 0, "weight_sum": 0.0}
            for start in range(0, len(pairs), GENERAL_CHUNK):  # a kill loses one chunk
                part = self.general_chunk(name, sources[start: start + GENERAL_CHUNK],
                                          domains[start: start + GENERAL_CHUNK], start,
                                          settings)
                off += part["off"]
                on += part["on"]
                for field in sums:
                    sums[field] += part[field]
            rows_seen = sums["rows"]
            weighed_on = {
                "guided_sentences": sums["guided"],
                "steps_on_share": round(sums["rows_on"] / rows_seen, 3) if rows_seen else 0.0,
                "mean_weight": round(sums["weight_sum"] / rows_seen, 3) if rows_seen else 0.0}
            rows.append({"set": name, "sentences": len(pairs), "routed_to_a_domain":
                         sum(d is not None for d in domains),
                         "memories off": bleu(off, refs), "memories on": bleu(on, refs),
                         "weighed": weighed_on})
            print(rows[-1], flush=True)
        return rows

    def general_chunk(self, name: str, sources: list[str], domains: list[str | None],
                      start: int, settings: RetrievalSettings) -> dict[str, Any]:
        """Memories off and on for a chunk of a routed set (kept in the work folder)."""
        modules = [self.module_of(d) for d in domains]
        mems = [self.memories.get(d) if d else None for d in domains]
        # each domain's memory with its own gate for the domain's module
        own = {d: self.with_gate(d, self.module_of(d), settings) for d in set(domains) if d}
        key = {"set": name, "start": start, "sentences": len(sources), "beam": self.args.beam,
               "direction": self.args.direction, "domains": domains,
               "memory_pairs": self.args.memory_pairs, "retrieval": settings.model_dump(),
               "gates": {d: own[d].gate for d in sorted(own)}}

        def compute() -> dict[str, Any]:
            off, _ = self.runner.translate(sources, modules, [None] * len(sources), None)
            # a sentence with no memory in play decodes as with memories off (the server
            # attaches nothing to it): only those routed to a domain are decoded again
            on, reports = list(off), []
            for domain, domain_settings in own.items():
                routed = [i for i, d in enumerate(domains) if d == domain]
                again, found = self.runner.translate(
                    [sources[i] for i in routed], [modules[i] for i in routed],
                    [mems[i] for i in routed], domain_settings)
                reports += found
                for i, text in zip(routed, again, strict=True):
                    on[i] = text
            return {"off": off, "on": on, "guided": len(reports),
                    "rows": sum(n.report.rows for n in reports),
                    "rows_on": sum(n.report.rows_on for n in reports),
                    "weight_sum": sum(n.report.weight_sum for n in reports)}

        result = self.work.get_or_compute(f"general-{name}-{start}", key, compute)
        print(f"{time.strftime('%H:%M:%S')} general-{name}-{start}", flush=True)
        return result

    def speed(self, settings: RetrievalSettings) -> list[dict[str, Any]]:
        pairs = read_pairs(self.args.data / "domains" / "medical", "test", self.direction)
        key = {"sentences": self.args.speed_sentences, "beam": self.args.beam,
               "repeats": self.args.repeats, "direction": self.args.direction,
               "retrieval": settings.model_dump()}
        module = self.module_of("medical")
        settings = self.with_gate("medical", module, settings)
        key["retrieval"] = settings.model_dump()
        result = self.work.get_or_compute("speed", key, lambda: {"rows": speed(
            self.runner, module, pairs[: self.args.speed_sentences],
            self.memories["medical"], settings, self.args.repeats)})
        rows: list[dict[str, Any]] = result["rows"]
        return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    direction = DIRECTIONS[args.direction]
    retrieval = RetrievalSettings()
    if not (args.data / "domains").is_dir():  # the data root: the language pair's folder
        args.data = args.data / "-".join(sorted(args.direction.split("-")))
    with Store.open(Path(f"/tmp/nmt-knn-bench-{args.direction}"),
                    builtin_dir=args.builtin) as store:
        models = load_models(store, backbone=backbone_of(store, direction),
                             domains=list(DOMAINS))
    head = {"direction": args.direction, "beam": args.beam, "limit": args.limit,
            "retrieval": retrieval.model_dump()}
    if args.speed_only:
        memory = {"medical": memory_of(args.data, direction, "medical", args.memory_pairs)}
        bench = Bench(args, models, direction, memory)
        return {**head, "speed_only": True, "repeats": args.repeats,
                "speed": bench.speed(retrieval)}
    bench = Bench(args, models, direction,
                  {d: memory_of(args.data, direction, d, args.memory_pairs) for d in DOMAINS})

    def split(folder: Path, name: str, limit: int) -> list[tuple[str, str]]:
        pairs = read_pairs(folder, name, direction)
        return pairs[:limit] if limit else pairs

    dev = {d: split(args.data / "domains" / d, "dev", args.dev_limit) for d in DOMAINS}
    selection = bench.choose(dev, retrieval)
    chosen = RetrievalSettings(**selection["chosen_settings"])
    test = {d: split(args.data / "domains" / d, "test", args.limit) for d in DOMAINS}
    general = {g: split(args.data / "extra" / g, "test", args.limit) for g in GENERAL}
    domains = bench.score_test(test, chosen)
    mean = {k: round(statistics.mean(r[k] for r in domains), 2) for k in CONFIGURATIONS}
    mean_novel = {k: round(statistics.mean(r[f"{k} novel"] for r in domains), 2)
                  for k in CONFIGURATIONS}
    general_rows = bench.score_general(general, chosen)
    speed_rows = bench.speed(chosen)
    print(f"parts reused from {args.work}: {bench.work.reused}, computed: "
          f"{bench.work.computed}", flush=True)
    return {**head, "dev_limit": args.dev_limit, "selection": selection,
            "domains": domains, "mean": mean, "mean_novel": mean_novel,
            "general": general_rows, "speed": speed_rows, "gates": bench.gates,
            "stored_bytes_per_memory_besides_text": stored_bytes(bench.gates),
            "host_note": args.note,
            "stored_note": "bounded cache of recently forced pairs, per backbone, is shared "
                           "by every memory"}


def stored_bytes(gates: dict[str, dict[str, Any]]) -> int:
    """What a memory stores besides its text: its calibrations (a registry row per module
    it decodes with: the gate and the held-out scores), at most two modules here."""
    sizes = [len(json.dumps(found)) for found in gates.values()]
    return 2 * max(sizes) if sizes else 0


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
