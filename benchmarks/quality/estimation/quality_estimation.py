"""Quality estimation (make bench-quality): fit the built-in backbone's estimator on dev
sets, then measure it on test sets.

1. decode the dev sets of the 7 domains (their modules) and dev slices of news, captions
   and conversation (the generic backbone: no module serves them) at beam 4; features
   from the scoring pass, sentence chrF against the references;
2. fit the ridge estimator (the penalty chosen by leave-one-set-out Spearman within sets);
   the default threshold is the dev sentences' 20th percentile of quality; written to
   model_store/builtin/quality/<backbone>.json (--quick: results/tmp/ only);
3. decode the test sets the same way and review them as the server does (detectors,
   recovery): Spearman between quality and chrF within each set and over all, the share
   the default threshold flags and its chrF gap, BLEU of the recovered sentences before
   and after;
4. the cost: beam-4 decoding against decoding + the scoring pass, side by side.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.quality.data import domain_names, domain_set, genre_set
from benchmarks.quality.estimation.quality_runs import SetRun, cost, review_set, run_set
from benchmarks.quality.models import load_models
from benchmarks.report_files import write_report
from model_store import BUILTIN_DIR, Store
from server.engine.engine import Engine
from server.execution.engine_thread import EngineThread
from server.quality.estimator import Estimator
from server.quality.estimators import BUILTIN_QUALITY_DIR, EstimatorBook, write_estimator
from trainer.quality.fit import (
    DEV_LINES,
    GENRE_DEV_LINES,
    GENRES,
    decode_sets,
    dev_sets,
    fit_sets,
    spearman,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="few sentences; writes only "
                                                             "to results/tmp/")
    parser.add_argument("--dev-lines", type=int, default=DEV_LINES,
                        help="first sentences of each domain's dev set (0: all)")
    parser.add_argument("--genre-dev", type=int, default=GENRE_DEV_LINES,
                        help="dev-slice sentences of each genre (the end of its train set)")
    parser.add_argument("--test-lines", type=int, default=0,
                        help="first sentences of each domain's test set (0: all)")
    parser.add_argument("--genre-test", type=int, default=200,
                        help="first sentences of each genre's test set")
    parser.add_argument("--cost-only", action="store_true",
                        help="measure the cost table again, keeping the report's other "
                             "rows and the built-in estimator")
    return parser.parse_args(argv)


def evaluate_set(run: SetRun, reviewed: Any, threshold: float) -> dict[str, Any]:
    quality = [a.quality for a in reviewed.assessments]
    chrf = [sacrebleu.sentence_chrf(o, [ref]).score
            for o, ref in zip(reviewed.outputs, run.dataset.references, strict=True)]
    low = [q < threshold for q in quality]
    flagged = [c for c, f in zip(chrf, low, strict=True) if f]
    rest = [c for c, f in zip(chrf, low, strict=True) if not f]
    affected = [i for i, a in enumerate(reviewed.assessments) if a.recovered is not None]
    refs = [run.dataset.references[i] for i in affected]
    issues: dict[str, int] = {}
    for a in reviewed.assessments:
        for issue in a.issues:
            issues[issue] = issues.get(issue, 0) + 1
    return {
        "set": run.name, "sentences": len(quality), "spearman": spearman(quality, chrf),
        "flagged_share": float(np.mean(low)),
        "chrf_flagged": float(np.mean(flagged)) if flagged else None,
        "chrf_rest": float(np.mean(rest)) if rest else None,
        "issues": issues, "recovered": len(affected),
        "bleu_before": sacrebleu.corpus_bleu([run.decoded.outputs[i] for i in affected],
                                             [refs]).score if affected else None,
        "bleu_after": sacrebleu.corpus_bleu([reviewed.outputs[i] for i in affected],
                                            [refs]).score if affected else None,
        "quality": quality, "chrf": chrf, "recovered_ids": affected,
        "_affected": [(run.decoded.outputs[i], reviewed.outputs[i], run.dataset.references[i])
                      for i in affected]}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    dev_lines, test_lines = (30, 40) if args.quick else (args.dev_lines, args.test_lines)
    genre_dev = 30 if args.quick else args.genre_dev
    genre_test = 40 if args.quick else args.genre_test
    with tempfile.TemporaryDirectory(prefix="nmt-quality-") as scratch, \
            Store.open(Path(scratch), builtin_dir=BUILTIN_DIR) as store:
        domains = domain_names(args.data)
        models = load_models(store, backbone=None, domains=domains)
        engine, backbone = models.engine, models.backbone
        module = {d: models.served[d].module_id if d in models.served else None
                  for d in domains}
        if args.cost_only:
            measure_cost_again(engine, [run_set(engine, domain_set(
                args.data, d, limit=test_lines or 80), module[d]) for d in domains[:3]],
                EstimatorBook([BUILTIN_QUALITY_DIR]).get(backbone))
            return
        dev = decode_sets(engine, dev_sets(args.data, module, lines=dev_lines,
                                           genre_lines=genre_dev))
        estimator = fit_sets(dev, backbone.backbone_fingerprint)
        folder = RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR
        target = folder / "quality" if args.quick else BUILTIN_QUALITY_DIR
        write_estimator(target, backbone.name, estimator)
        book = EstimatorBook([target])
        test = [run_set(engine, domain_set(args.data, d, limit=test_lines), module[d])
                for d in domains]
        test += [run_set(engine, genre_set(args.data, g, limit=genre_test), None)
                 for g in GENRES]
        thread = EngineThread()
        try:
            rows = [evaluate_set(r, review_set(engine, backbone, book, r, thread),
                                 estimator.threshold) for r in test]
        finally:
            thread.shutdown()
        spent = cost(engine, [j for r in test[:3] for j in r.jobs][:96])
    overall = overall_row(rows, estimator.threshold)
    write(folder, estimator, rows, overall, spent)


def measure_cost_again(engine: Engine, test: list[SetRun], estimator: Estimator) -> None:
    """The cost table measured again on the sentences of a full run; the rest of the
    report (its sets and overall rows) kept as they are."""
    spent = cost(engine, [j for r in test for j in r.jobs][:96])
    kept = json.loads((RESULTS_DIR / "quality_estimation.json").read_text())
    write(RESULTS_DIR, estimator, kept["sets"], kept["overall"], spent,
          note="The sets' rows are the last full run's; the cost table was measured again "
               "(--cost-only).")


def overall_row(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    quality = [q for r in rows for q in r["quality"]]
    chrf = [c for r in rows for c in r["chrf"]]
    low = [q < threshold for q in quality]
    affected = [triple for r in rows for triple in r["_affected"]]
    before, after, refs = ([t[k] for t in affected] for k in range(3))
    issues: dict[str, int] = {}
    for r in rows:
        for issue, count in r["issues"].items():
            issues[issue] = issues.get(issue, 0) + count
    return {"set": "all", "sentences": len(quality), "spearman": spearman(quality, chrf),
            "flagged_share": float(np.mean(low)),
            "chrf_flagged": _mean([c for c, f in zip(chrf, low, strict=True) if f]),
            "chrf_rest": _mean([c for c, f in zip(chrf, low, strict=True) if not f]),
            "issues": issues, "recovered": len(affected),
            # the recovered sentences pooled over the sets: the recovery's effect
            "bleu_before": sacrebleu.corpus_bleu(before, [refs]).score if affected else None,
            "bleu_after": sacrebleu.corpus_bleu(after, [refs]).score if affected else None,
            "chrf_before": _mean([sacrebleu.sentence_chrf(o, [r]).score
                                  for o, r in zip(before, refs, strict=True)]),
            "chrf_after": _mean([sacrebleu.sentence_chrf(o, [r]).score
                                 for o, r in zip(after, refs, strict=True)])}


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def write(folder: Path, estimator: Estimator, rows: list[dict[str, Any]],
          overall: dict[str, Any], spent: dict[str, float], note: str = "") -> None:
    public = [{k: v for k, v in r.items() if k not in ("quality", "chrf", "_affected")}
              for r in rows]
    data = {"estimator": _without_rows(json.loads(estimator.to_json())), "sets": public,
            "overall": overall, "cost": spent}
    lines = ["# Quality estimation: `quality` against sentence chrF", "",
             "Built-in backbone, beam 4; estimator fitted on dev sets only (7 domains' dev, "
             "dev slices of news/captions/conversation); test sets below. Domains decoded "
             "by their modules, the three genres by the generic backbone. `make "
             "bench-quality` (benchmarks/quality/estimation/quality_estimation.py).", "",
             f"Default threshold (min_quality): {estimator.threshold:.3f} "
             f"(ridge {estimator.fitted_on.get('ridge')}).{' ' + note if note else ''}", "",
             "| set | n | Spearman | flagged | chrF flagged | chrF rest | issues | recovered "
             "| BLEU before | BLEU after |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in [*rows, overall]:
        lines.append(
            f"| {r['set']} | {r['sentences']} | {r['spearman']:.3f} | "
            f"{100 * r['flagged_share']:.1f}% | {_num(r['chrf_flagged'])} | "
            f"{_num(r['chrf_rest'])} | {_issues(r.get('issues'))} | {r.get('recovered', '')} "
            f"| {_num(r.get('bleu_before'))} | {_num(r.get('bleu_after'))} |")
    if overall.get("recovered"):
        lines += ["", f"Recovery: {overall['recovered']} test sentences had a detector's "
                  "issue fixed by a re-decode (wider beam, then the generic backbone); on "
                  f"them BLEU {overall['bleu_before']:.1f} before, {overall['bleu_after']:.1f} "
                  f"after; mean sentence chrF {overall['chrf_before']:.1f} before, "
                  f"{overall['chrf_after']:.1f} after (row all: pooled over the sets)."]
    lines += ["", "Cost, side by side on the same 96 sentences (CPU seconds of the process, "
              "one torch thread; best of 4 interleaved rounds): "
              "beam 4 alone; with the review as served (features from the search, the "
              "scoring pass only for outputs under 0.7x the source's tokens); with the "
              "scoring pass over every sentence (the review before, for comparison):",
              "", "| | beam 4 | + review (served) | overhead | + pass on every sentence | "
              "overhead |", "|---|---|---|---|---|---|",
              f"| latency per sentence, batch 1 | {spent['latency_beam4_ms']:.1f} ms | "
              f"{spent['latency_scored_ms']:.1f} ms | "
              f"{_more(spent['latency_scored_ms'], spent['latency_beam4_ms'])} | "
              f"{spent['latency_every_ms']:.1f} ms | "
              f"{_more(spent['latency_every_ms'], spent['latency_beam4_ms'])} |",
              f"| target tokens/s, batch 32 | {spent['tokens_per_s_beam4']:.0f} | "
              f"{spent['tokens_per_s_scored']:.0f} | "
              f"{_less(spent['tokens_per_s_scored'], spent['tokens_per_s_beam4'])} | "
              f"{spent['tokens_per_s_every']:.0f} | "
              f"{_less(spent['tokens_per_s_every'], spent['tokens_per_s_beam4'])} |",
              ""]
    table = "\n".join(lines)
    write_report(folder, "quality_estimation", data, table)
    print(table)


def _more(value: float, base: float) -> str:
    return f"{100 * (value / base - 1):+.1f}%"


def _less(value: float, base: float) -> str:
    return f"{-100 * (1 - value / base):+.1f}%"


def _without_rows(body: dict[str, Any]) -> dict[str, Any]:
    fitted = {k: v for k, v in body["fitted_on"].items() if k != "rows"}
    return body | {"fitted_on": fitted}


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _issues(found: dict[str, int] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(found.items())) if found else ""


if __name__ == "__main__":
    main()
