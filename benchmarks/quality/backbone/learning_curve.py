"""The backbone's learning curve: every saved checkpoint copy (`<curve>/step-N.pt` with its
`step-N.progress.json`) scored for dev loss per domain, greedy BLEU on the first dev
sentences of each domain and the first news test sentences, against CPU-hours; and the
average of the last k checkpoints (trainer/training/average.py) against the newest one alone.

    python -m benchmarks.quality.backbone.learning_curve --curve /work/runs/curve \\
        --run-files /work/runs/default-en-fr --run-threads 2

Incremental: checkpoints already in the results are skipped, so re-running after more
training scores only the new ones. CPU-hours = the run's elapsed wall seconds (its
progress.json) x the threads it trained with (`--run-threads`): an upper bound on a
shared machine, where a thread does not always get its core. Where the copying script's
log (`--cpu-log`, lines "<time> step N cpu_s_this_session S") gives the CPU seconds the
training used since the session's first copy (`--session-start`), that measure is used:
CPU-hours(N) = CPU-hours(session start) + S / 3600.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.quality.backbone.checkpoint_scores import (
    RunFiles,
    checkpoint_weights,
    score_model,
    score_sets,
    summary,
)
from benchmarks.quality.data import domain_names
from benchmarks.report_files import write_report
from trainer.training.average import average_checkpoints, checkpoint_step, last_checkpoints

log = logging.getLogger("benchmarks.learning_curve")
SPARKS = "▁▂▃▄▅▆▇█"


def pending(curve: Path, done: set[int], *, min_gap: int) -> list[Path]:
    """Checkpoint copies not yet scored, at least `min_gap` steps from every scored one
    (the copies come every few minutes; the curve needs fewer points)."""
    chosen: list[Path] = []
    taken = sorted(done)
    for path in sorted(curve.glob("step-*.pt"), key=checkpoint_step):
        step = checkpoint_step(path)
        if all(abs(step - other) >= min_gap for other in taken):
            chosen.append(path)
            taken.append(step)
    return chosen


def elapsed_cpu_hours(path: Path, threads: int) -> float:
    """Wall seconds trained (the copy's progress) x threads, in hours."""
    progress = json.loads(path.with_name(path.stem + ".progress.json").read_text())
    return float(progress["elapsed_s"]) * threads / 3600


CPU_LINE = re.compile(r"step (\d+) cpu_s_this_session (\d+(?:\.\d+)?)")


def session_cpu_seconds(log_path: Path | None) -> dict[int, float]:
    """{step: CPU seconds since the session started} from the copying script's log."""
    if log_path is None or not log_path.exists():
        return {}
    found = (CPU_LINE.search(line) for line in log_path.read_text().splitlines())
    return {int(m.group(1)): float(m.group(2)) for m in found if m}


def cpu_hours(path: Path, threads: int, *, session: dict[int, float],
              session_start: Path | None, start_hours: float | None = None) -> float:
    """`start_hours`: the session start's CPU-hours when known better than its elapsed
    time says (a warm start from a snapshot trained on a loaded machine)."""
    step = checkpoint_step(path)
    if step in session and session_start is not None:
        start = (start_hours if start_hours is not None
                 else elapsed_cpu_hours(session_start, threads))
        return round(start + session[step] / 3600, 3)
    return round(elapsed_cpu_hours(path, threads), 3)


def update(args: argparse.Namespace) -> dict[str, Any]:
    out_json = args.out.with_suffix(".json")
    results: dict[str, Any] = json.loads(out_json.read_text()) if out_json.exists() else {}
    points: list[dict[str, Any]] = results.get("points", [])
    averages: list[dict[str, Any]] = results.get("averages", [])
    files = RunFiles.of(args.run_files)
    sets = score_sets(args.data, bleu_sentences=args.bleu_sentences, genre_lines=300)
    domains = domain_names(args.data)
    session = session_cpu_seconds(args.cpu_log)
    start = None if args.session_start is None else args.curve / f"step-{args.session_start}.pt"
    for path in pending(args.curve, {p["step"] for p in points}, min_gap=args.min_gap):
        model = files.model(checkpoint_weights(path))
        scores = score_model(model, files.tokenizer, sets)
        points.append({"step": checkpoint_step(path),
                       "cpu_hours": cpu_hours(path, args.run_threads, session=session,
                                              session_start=start,
                                              start_hours=args.session_start_cpu_hours),
                       "scores": scores,
                       "summary": summary(scores, domains)})
        points.sort(key=lambda p: p["step"])
        log.info("step %d: %s", points[-1]["step"], points[-1]["summary"])
        _write(args.out, points, averages, args)  # a long run keeps what it has scored
    all_copies = sorted(args.curve.glob("step-*.pt"), key=checkpoint_step)
    if args.average > 1 and len(all_copies) >= args.average:
        chosen = last_checkpoints(all_copies, args.average)
        newest = checkpoint_step(chosen[-1])
        if newest not in {a["step"] for a in averages}:
            entry: dict[str, Any] = {"step": newest,
                                     "averaged_steps": [checkpoint_step(p) for p in chosen]}
            for key, weights in (("average", average_checkpoints(chosen)["model"]),
                                 ("newest", checkpoint_weights(chosen[-1]))):
                scores = score_model(files.model(weights), files.tokenizer, sets)
                entry[key] = {"scores": scores, "summary": summary(scores, domains)}
            averages.append(entry)
    return _write(args.out, points, averages, args)


def _write(out: Path, points: list[dict[str, Any]], averages: list[dict[str, Any]],
           args: argparse.Namespace) -> dict[str, Any]:
    results = {"notes": f"CPU-hours = elapsed wall seconds x {args.run_threads} threads (an "
                        "upper bound on a shared machine), or, for copies the copying "
                        "script's log gives CPU seconds for, those seconds added to the "
                        "session start's CPU-hours. Loss: nats per target token; "
                        f"BLEU: greedy, first {args.bleu_sentences} sentences.",
               "points": points, "averages": averages}
    write_report(out.parent, out.name, results, markdown(results))
    return results


def sparkline(values: list[float]) -> str:
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(SPARKS[int((v - low) / span * (len(SPARKS) - 1))] for v in values)


def markdown(results: dict[str, Any]) -> str:
    points = results["points"]
    if not points:
        return "# Backbone learning curve\n\nNo checkpoint scored yet.\n"
    sets = list(points[0]["scores"])
    lines = ["# Backbone learning curve", "", results["notes"], "",
             "| step | CPU-h | " + " | ".join(sets) + " | domain loss | domain BLEU |",
             "|---:|---:|" + "---:|" * (len(sets) + 2)]
    for p in points:
        lines.append(f"| {p['step']} | {p['cpu_hours']:.2f} | " + " | ".join(
            _cell(p["scores"][s]) for s in sets)
            + f" | {p['summary']['domain_loss']:.3f} | {p['summary']['domain_bleu']:.2f} |")
    lines += ["", "Cells: loss / BLEU.", "",
              f"Domain BLEU by step: `{sparkline([p['summary']['domain_bleu'] for p in points])}`"
              f"; domain loss: `{sparkline([p['summary']['domain_loss'] for p in points])}`"]
    if results["averages"]:
        lines += ["", "## Checkpoint averaging", "",
                  "| newest step | averaged steps | domain loss | domain BLEU | news BLEU | "
                  "newest alone: domain loss | domain BLEU | news BLEU |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for a in results["averages"]:
            lines.append(f"| {a['step']} | {', '.join(map(str, a['averaged_steps']))} | "
                         + _summary_cells(a["average"]) + " | " + _summary_cells(a["newest"])
                         + " |")
    return "\n".join(lines) + "\n"


def _cell(score: dict[str, float]) -> str:
    return f"{score['loss']:.3f}" + (f" / {score['bleu']:.1f}" if "bleu" in score else "")


def _summary_cells(point: dict[str, Any]) -> str:
    news = point["scores"].get("news", {}).get("bleu", float("nan"))
    return (f"{point['summary']['domain_loss']:.3f} | {point['summary']['domain_bleu']:.2f} | "
            f"{news:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--curve", type=Path, required=True, help="dir of step-N.pt copies")
    parser.add_argument("--run-files", type=Path, required=True,
                        help="the run dir holding config.json and spm.model")
    parser.add_argument("--run-threads", type=int, default=2)
    parser.add_argument("--cpu-log", type=Path,
                        help="the copying script's log with cpu_s_this_session per step")
    parser.add_argument("--session-start", type=int,
                        help="the step of the copy those CPU seconds count from")
    parser.add_argument("--session-start-cpu-hours", type=float,
                        help="CPU-hours of the session start's copy, when its elapsed wall "
                             "time x threads overstates them")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--bleu-sentences", type=int, default=100)
    parser.add_argument("--min-gap", type=int, default=500,
                        help="fewest steps between two scored checkpoints")
    parser.add_argument("--average", type=int, default=5,
                        help="also score the average of the last k copies (1: never)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "learning_curve")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    update(args)


if __name__ == "__main__":
    main()
