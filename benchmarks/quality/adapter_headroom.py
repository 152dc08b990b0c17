"""How much a shipped backbone already fits its domains' training pairs, beside what its
adapters gained: why one direction's adapters lift little (issue #66).

    python -m benchmarks.quality.adapter_headroom [--data DIR] [--pairs 500] [--out DIR]

For each shipped direction's published backbone: the teacher-forced negative
log-likelihood per target token (nats, no label smoothing) on the first `--pairs` pairs of
each domain's train, dev and test splits. Adapters are trained on those same train pairs,
so the gap between dev and train is how much the backbone has fit what its adapters learn
from: a backbone that already reproduces the train pairs leaves an adapter little to add.
Beside it, the adapters' average test gain (true label, beam 4) from the direction's
`make eval` report in results/ (eval.json, eval-<direction>.json).

Writes results/adapter_headroom.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.quality.data import read_pairs
from benchmarks.quality.evaluation.reliance import reference_nll
from benchmarks.report_files import write_report
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import BackboneParts, backbone_parts
from server.engine.backbone import Backbone
from server.engine.engine import load_backbone as load_backbone_tensors
from trainer.recipes.directions import DIRECTIONS, EN_FR, Direction
from trainer.recipes.training_set import DOMAINS
from trainer.training.data import encode_for_backbone

SPLITS = ("train", "dev", "test")


def load_backbone(direction: Direction) -> tuple[Backbone, BackboneParts]:
    """The built-in backbone of `direction`, in float32, and its parts (tokenizers, config)."""
    with tempfile.TemporaryDirectory() as tmp, \
            Store.open(Path(tmp), builtin_dir=BUILTIN_DIR) as store:
        loaded = store.load_backbone(direction.backbone_name)
    parts = backbone_parts(loaded.files)
    return load_backbone_tensors(parts.config, parts.tensors).eval(), parts


def nll_per_token(model: Backbone, parts: BackboneParts, pairs: list[tuple[str, str]]) -> float:
    """Mean teacher-forced NLL per reference token (the evaluation's source-reliance
    measure, benchmarks/quality/evaluation/reliance.py)."""
    data = encode_for_backbone(pairs, parts.source_tokenizer, parts.target_tokenizer,
                               parts.config, max_len=parts.config.max_positions - 1)
    return reference_nll(model, data.source, data.target, data.specials)


def adapter_gain(direction: Direction) -> float | None:
    """The adapters' average test BLEU gain over the backbone in the direction's eval."""
    name = "eval.json" if direction == EN_FR else f"eval-{direction.name}.json"
    path = RESULTS_DIR / name
    if not path.exists():
        return None
    known = json.loads(path.read_text())["known_domains"]
    return round(float(known["adapter-true"]["average"]["bleu"])
                 - float(known["generic"]["average"]["bleu"]), 2)


def measure(data: Path, pairs: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for direction in DIRECTIONS.values():
        model, parts = load_backbone(direction)
        domains = {}
        for domain in DOMAINS:
            folder = data / direction.pair / "domains" / domain
            domains[domain] = {split: round(nll_per_token(
                model, parts, read_pairs(folder, split, direction)[:pairs]), 3)
                for split in SPLITS}
        gaps = [row["dev"] - row["train"] for row in domains.values()]
        rows[direction.name] = {"backbone": direction.backbone_name, "domains": domains,
                                "mean_gap": round(sum(gaps) / len(gaps), 3),
                                "adapter_gain": adapter_gain(direction)}
    return rows


def markdown(rows: dict[str, Any], pairs: int) -> str:
    lines = ["# Adapter headroom: how far each backbone fits its domains' training pairs",
             "",
             f"Teacher-forced NLL per target token (nats), first {pairs} pairs of each "
             "domain's split, the published backbone of each shipped direction. Adapters "
             "learn from the train pairs: the dev - train gap is how much of them the "
             "backbone has already fit. Adapter gain: true-label adapters over the backbone, "
             "average test BLEU of the direction's `make eval` (beam 4).", "",
             "| direction | mean dev - train gap | adapter gain (test BLEU) |",
             "|---|---:|---:|"]
    for name, row in rows.items():
        gain = "—" if row["adapter_gain"] is None else f"{row['adapter_gain']:+.2f}"
        lines.append(f"| {name} | {row['mean_gap']:.3f} | {gain} |")
    for name, row in rows.items():
        lines += ["", f"## {name} ({row['backbone']})", "",
                  "| domain | train | dev | test | dev - train |", "|---|---:|---:|---:|---:|"]
        for domain, nll in row["domains"].items():
            lines.append(f"| {domain} | {nll['train']:.3f} | {nll['dev']:.3f} | "
                         f"{nll['test']:.3f} | {nll['dev'] - nll['train']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = measure(args.data, args.pairs)
    write_report(args.out, "adapter_headroom", rows, markdown(rows, args.pairs))


if __name__ == "__main__":
    main()
