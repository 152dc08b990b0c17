"""Per-memory calibrated gates against the fixed gate, on dev sets (adapter + memory).

    python -m benchmarks.quality.gate_calibration --data ../shared/data \\
        [--direction en-fr] [--domains medical law ...] [--dev-limit 60]

Per domain, a memory of the domain's training pairs (`--memory-pairs`: the first N)
decoding with the domain's adapter. Its gate is calibrated from its own pairs
(server/serving/gate_calibration.py: held-out pairs, leave-one-out retrieval, the
candidates' BLEU), timed; then the dev sentences are decoded with the adapter alone, with
the settings' fixed gate and with the calibrated gate (the same decoding when both gates
agree). Dev sets only: they decide whether calibration is on by default.

Writes <out>/gate_calibration[-<direction>].json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.quality.data import read_pairs
from benchmarks.quality.evaluation.evaluate import backbone_of
from benchmarks.quality.memory_retrieval import DOMAINS
from benchmarks.quality.models import load_models
from benchmarks.quality.retrieval_runner import Runner, bleu, memory_of
from benchmarks.report_files import write_report
from model_store import Store
from server.core.memory_settings import RetrievalSettings
from server.core.settings import DecodingSettings
from server.serving.gate_calibration import calibrate, direct_decode
from trainer.recipes.directions import DIRECTIONS


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks.quality.gate_calibration",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--direction", default="en-fr", choices=sorted(DIRECTIONS))
    parser.add_argument("--domains", nargs="+", default=list(DOMAINS))
    parser.add_argument("--dev-limit", type=int, default=60, help="dev sentences per domain")
    parser.add_argument("--memory-pairs", type=int, default=0,
                        help="training pairs per memory (0: all)")
    parser.add_argument("--beam", type=int, default=DecodingSettings().beam_size)
    parser.add_argument("--calibration-pairs", type=int, default=None,
                        help="held-out pairs per memory (default: the server's setting)")
    parser.add_argument("--note", default="", help="a line for the report")
    parser.add_argument("--builtin", type=Path, default=Path("model_store/builtin"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    direction = DIRECTIONS[args.direction]
    settings = RetrievalSettings()
    if args.calibration_pairs:
        settings = settings.model_copy(update={"calibration_pairs": args.calibration_pairs})
    if not (args.data / "domains").is_dir():  # the data root: the language pair's folder
        args.data = args.data / "-".join(sorted(args.direction.split("-")))
    with Store.open(Path(f"/tmp/nmt-gate-bench-{args.direction}"),
                    builtin_dir=args.builtin) as store:
        models = load_models(store, backbone=backbone_of(store, direction),
                             domains=list(args.domains))
    runner = Runner(models, args.beam)
    decode = direct_decode(runner.engine, runner.options)
    rows: list[dict[str, Any]] = []
    for domain in args.domains:
        module = models.served[domain].module_id
        memory = memory_of(args.data, direction, domain, args.memory_pairs)
        found = asyncio.run(calibrate(runner.engine, memory, module, settings, decode))
        print(domain, found, flush=True)
        dev = read_pairs(args.data / "domains" / domain, "dev", direction)[: args.dev_limit]
        sources, refs = [s for s, _ in dev], [t for _, t in dev]
        n = len(sources)
        adapter, _ = runner.translate(sources, [module] * n, [None] * n, None)
        fixed, _ = runner.translate(sources, [module] * n, [memory] * n, settings)
        if found.gate == settings.gate:
            tuned = fixed
        else:
            tuned, _ = runner.translate(sources, [module] * n, [memory] * n,
                                        settings.model_copy(update={"gate": found.gate}))
        rows.append({"domain": domain, "memory_pairs": len(memory), "sentences": n,
                     "calibrated_gate": found.gate, "held_out": found.held_out,
                     "held_out_off": found.off, "held_out_scores": dict(found.scores),
                     "calibration_s": found.seconds, "adapter": bleu(adapter, refs),
                     "fixed": bleu(fixed, refs), "calibrated": bleu(tuned, refs)})
        print(rows[-1], flush=True)
    mean = {k: round(statistics.mean(r[k] for r in rows), 2)
            for k in ("adapter", "fixed", "calibrated", "calibration_s")}
    return {"direction": args.direction, "beam": args.beam, "dev_limit": args.dev_limit,
            "fixed_gate": settings.gate, "candidates": list(settings.calibration_gates),
            "calibration_pairs": settings.calibration_pairs,
            "margin": settings.calibration_margin, "rows": rows, "mean": mean,
            "host_note": args.note}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Calibrated gates against the fixed gate ({result['direction']}, dev, "
             f"adapter + memory)", "",
             f"Beam {result['beam']}, {result['dev_limit']} dev sentences per domain; fixed "
             f"gate {result['fixed_gate']}; candidates {result['candidates']}, "
             f"{result['calibration_pairs']} held-out pairs, margin {result['margin']} BLEU.",
             "", "| domain | memory pairs | gate | adapter | fixed | calibrated | "
             "calibration s |", "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['domain']} | {r['memory_pairs']} | {r['calibrated_gate']:g} | "
                     f"{r['adapter']} | {r['fixed']} | {r['calibrated']} | "
                     f"{r['calibration_s']} |")
    m = result["mean"]
    lines += [f"| mean | | | {m['adapter']} | {m['fixed']} | {m['calibrated']} | "
              f"{m['calibration_s']} |", ""]
    if result["host_note"]:
        lines += [result["host_note"], ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    stem = "gate_calibration" + ("" if args.direction == "en-fr" else f"-{args.direction}")
    json_path, md_path = write_report(args.out, stem, result, markdown(result))
    print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
