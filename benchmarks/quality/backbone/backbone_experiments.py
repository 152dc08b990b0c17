"""Short backbone training runs compared at equal CPU time (issue #24): corpus temperature
sampling warm-started from one checkpoint of the main run, and architecture shapes from
scratch. Each arm trains with one thread for the same *process* CPU time
(time.process_time: the machine is shared, so wall time would measure the neighbours),
then is scored on the same sets (benchmarks/quality/backbone/checkpoint_scores.py).

    python -m benchmarks.quality.backbone.backbone_experiments run \\
        --base /work/runs/h24train/base --init /work/runs/h24train/base/step-4413.pt \\
        --arms t1 t3 --cpu-minutes 20 \\
        --work /work/runs/h24train/exp

`run` starts the arms side by side (one process each, `nice`), waits, and writes
benchmarks/results/backbone_experiments.{json,md}; `arm` trains and scores one arm.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.quality.backbone.checkpoint_scores import RunFiles, score_model, score_sets, summary
from benchmarks.quality.data import domain_names
from benchmarks.report_files import write_report
from contract.backbone import BackboneConfig
from server.engine.backbone import Backbone
from trainer.recipes.default_en_fr import BACKBONE, SETTINGS, backbone_trainable, prepare
from trainer.training.loop import TrainSettings
from trainer.training.run import train

log = logging.getLogger("benchmarks.backbone_experiments")


@dataclass(frozen=True)
class Arm:
    """One experimental condition: a sampling temperature, a shape (changes to the
    recipe's BackboneConfig) and whether it warm-starts from `--init`."""

    temperature: float = 1.0
    shape: dict[str, Any] = field(default_factory=dict)
    warm_start: bool = True


ARMS = {
    "t1": Arm(),
    "t2": Arm(temperature=2.0),
    "t3": Arm(temperature=3.0),
    "t5": Arm(temperature=5.0),
    # shapes, from scratch with the main run's T=3 (~10M parameters each but the wide one)
    "recipe": Arm(temperature=3.0, warm_start=False),
    "wide": Arm(temperature=3.0, shape={"d_model": 384, "d_ff": 1536, "n_heads": 6,
                                        "encoder_layers": 4}, warm_start=False),
    "deep-decoder": Arm(temperature=3.0, shape={"encoder_layers": 4, "decoder_layers": 5},
                        warm_start=False),
}


def arm_config(arm: Arm) -> BackboneConfig:
    return BackboneConfig.from_dict({**BACKBONE.to_dict(), **arm.shape})


def train_arm(name: str, *, base: Path, init: Path | None, work: Path, data_dir: Path,
              cpu_minutes: float, bleu_sentences: int) -> dict[str, Any]:
    """Train arm `name` for `cpu_minutes` of this process's CPU time, score it, and write
    <work>/<name>/result.json."""
    arm = ARMS[name]
    run_dir = work / name
    run_dir.mkdir(parents=True, exist_ok=True)
    _, data = prepare(data_dir, base)  # the cached set, with each corpus's size
    config = arm_config(arm)
    torch.manual_seed(SETTINGS.seed)
    model = Backbone(config)
    if arm.warm_start:
        if init is None:
            raise ValueError(f"arm {name} warm-starts: give --init")
        saved = torch.load(init, weights_only=True)
        # weights and position only: Adam starts fresh, as the main run's warm start did
        torch.save({"model": saved["model"], "progress": saved["progress"]},
                   run_dir / "checkpoint.pt")
    settings = TrainSettings(**{**SETTINGS.__dict__, "temperature": arm.temperature,
                                "max_minutes": 10_000.0, "checkpoint_every_s": 1e9})
    start = time.process_time()
    progress = train(backbone_trainable(model), data, settings, run_dir,
                     should_stop=lambda: time.process_time() - start >= cpu_minutes * 60)
    cpu_s = time.process_time() - start
    scores = score_model(model.eval().requires_grad_(False), RunFiles.of(base).tokenizer,
                         score_sets(data_dir, bleu_sentences=bleu_sentences, genre_lines=300))
    result = {"arm": name, **asdict(arm), "warm_start_from": str(init) if arm.warm_start else None,
              "parameters": sum(p.numel() for p in model.parameters()),
              "cpu_seconds": round(cpu_s, 1), "steps": progress.step,
              "target_tokens": progress.target_tokens, "scores": scores,
              "summary": summary(scores, domain_names(data_dir))}
    (run_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result


def run_side_by_side(args: argparse.Namespace) -> None:
    """One `nice` process per arm, at once; then the report."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = []
    for name in args.arms:
        command = ["nice", "-n", str(args.nice), sys.executable, "-m",
                   "benchmarks.quality.backbone.backbone_experiments", "arm", name,
                   "--base", str(args.base), "--work", str(args.work), "--data", str(args.data),
                   "--cpu-minutes", str(args.cpu_minutes),
                   "--bleu-sentences", str(args.bleu_sentences)]
        if args.init is not None:
            command += ["--init", str(args.init)]
        args.work.mkdir(parents=True, exist_ok=True)
        log_file = open(args.work / f"{name}.log", "w")  # noqa: SIM115 (closed below)
        procs.append((name, subprocess.Popen(command, env=env, stdout=log_file,
                                             stderr=subprocess.STDOUT), log_file))
    for name, proc, log_file in procs:
        code = proc.wait()
        log_file.close()
        if code != 0:
            raise SystemExit(f"arm {name} failed ({code}): see {args.work / (name + '.log')}")
    report_arms(args.work, args.arms, args.out)


def report_arms(work: Path, arms: list[str], out: Path) -> None:
    results = [json.loads((work / a / "result.json").read_text()) for a in arms]
    payload = {"notes": "each arm: 1 thread, the same process CPU time (time.process_time), "
                        "run side by side on a 2-core machine shared with other developers "
                        "and the main backbone run", "arms": results}
    write_report(out.parent, out.name, payload, _markdown(results))


def _markdown(results: list[dict[str, Any]]) -> str:
    sets = list(results[0]["scores"])
    lines = ["# Backbone experiments at equal CPU time", "",
             "Each arm trained with one thread for the same process CPU time "
             "(`time.process_time`), side by side, on the shared 2-core machine. Loss: "
             "nats per target token (domain dev splits; first 300 lines of the genres' "
             "test sets). BLEU: greedy, first sentences of each domain's dev split and of "
             "news test.", "",
             "| arm | T | shape | start | CPU s | steps | " + " | ".join(sets)
             + " | domain loss | domain BLEU | genre loss |",
             "|---|---:|---|---|---:|---:|" + "---:|" * (len(sets) + 3)]
    for r in results:
        cells = [f"{r['scores'][s]['loss']:.3f}"
                 + (f" / {r['scores'][s]['bleu']:.1f}" if "bleu" in r["scores"][s] else "")
                 for s in sets]
        shape = ", ".join(f"{k}={v}" for k, v in r["shape"].items()) or "recipe"
        start = "warm" if r["warm_start_from"] else "scratch"
        s = r["summary"]
        bleu = s.get("domain_bleu", math.nan)
        lines.append(f"| {r['arm']} | {r['temperature']:g} | {shape} | {start} | "
                     f"{r['cpu_seconds']:.0f} | {r['steps']} | " + " | ".join(cells)
                     + f" | {s['domain_loss']:.3f} | "
                     + ("not decoded" if math.isnan(bleu) else f"{bleu:.2f}")
                     + f" | {s.get('genre_loss', math.nan):.3f} |")
    lines += ["", "Cells: loss / BLEU (BLEU where decoded)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("run", "arm", "report"))
    parser.add_argument("arms", nargs="*", choices=sorted(ARMS), default=["t1", "t3"])
    parser.add_argument("--base", type=Path, required=True,
                        help="a backbone run dir (spm.model, train.npz; the corpus sizes "
                             "are derived there when missing)")
    parser.add_argument("--init", type=Path, help="checkpoint the warm-started arms start from")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cpu-minutes", type=float, default=20.0)
    parser.add_argument("--bleu-sentences", type=int, default=100)
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "backbone_experiments")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(1)
    if args.command == "arm":
        train_arm(args.arms[0], base=args.base, init=args.init, work=args.work,
                  data_dir=args.data, cpu_minutes=args.cpu_minutes,
                  bleu_sentences=args.bleu_sentences)
    elif args.command == "run":
        run_side_by_side(args)
    else:
        report_arms(args.work, args.arms, args.out)


if __name__ == "__main__":
    main()
