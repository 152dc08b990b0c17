"""Forward translation for a direction's adapters: does in-domain source text the backbone
has never seen, translated by the backbone and the domain's adapter, lift a new adapter?

    python -m benchmarks.quality.forward_translation [--direction en-de] [--domains law it]
        [--data DIR] [--steps 1200] [--minutes 40] [--beam 1] [--lr 3e-3] [--out DIR]

For each domain: the source side of another pair's train split of the same domain (for
en->de, en-fr's: the same OPUS corpora, other sentences), less every sentence of the
direction's own train, dev and test splits of any domain, is translated by the published
backbone and the domain's published adapter (the teacher). A new adapter of the published
one's configuration is then trained from its initialisation on the domain's real train pairs
plus these synthetic ones (self-training with in-domain source text: Zhang and Zong 2016,
"Exploiting Source-side Monolingual Data in Neural Machine Translation"; He et al. 2020,
"Revisiting Self-Training for Neural Sequence Generation"), its best dev BLEU (greedy, the
recipe's selection) beside the backbone's and the published adapter's. Test sets are not read.

Writes results/forward_translation-<direction>.{json,md}.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.quality.adapter_headroom import SPLITS, load_backbone
from benchmarks.quality.data import read_pairs
from benchmarks.report_files import write_report
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import BackboneParts, module_params
from server.engine.backbone import Backbone
from server.engine.families import Params, get_family
from server.engine.single import SingleModuleHooks
from trainer.recipes.default_en_fr import ADAPTER_SETTINGS
from trainer.recipes.directions import DIRECTIONS, Direction
from trainer.recipes.training_set import DOMAINS, MAX_LEN
from trainer.training.data import encode_for_backbone
from trainer.training.evaluate import evaluate_texts, translate_ids
from trainer.training.loop import TrainSettings
from trainer.training.modules import train_module

log = logging.getLogger(__name__)


def published_module(direction: Direction, domain: str) -> tuple[dict[str, Any], Params]:
    """The configuration and parameters of `domain`'s active module for `direction`."""
    with tempfile.TemporaryDirectory() as tmp, \
            Store.open(Path(tmp), builtin_dir=BUILTIN_DIR) as store:
        loaded = store.load("module", domain, backbone=direction.backbone_name)
    return dict(loaded.manifest.config), module_params(loaded.files)


def unseen_sources(data: Path, direction: Direction, other: Direction,
                   domain: str) -> list[str]:
    """`other`'s train sources of `domain` that no split of `direction`'s domains holds."""
    seen = {source for name in DOMAINS for split in SPLITS
            for source, _ in read_pairs(data / direction.pair / "domains" / name, split,
                                        direction)}
    fresh = dict.fromkeys(source for source, _ in read_pairs(
        data / other.pair / "domains" / domain, "train", other) if source not in seen)
    return list(fresh)


def translate(model: Backbone, parts: BackboneParts, hooks: SingleModuleHooks,
              sources: list[str], beam: int) -> list[tuple[str, str]]:
    """(source, translation) pairs; sources the backbone cannot take whole are left out."""
    ids = parts.source_tokenizer.encode(sources)
    kept = [i for i, row in enumerate(ids) if len(row) < MAX_LEN]
    outputs = translate_ids(model, [ids[i] for i in kept], hooks=hooks, beam_size=beam)
    return [(sources[i], parts.target_tokenizer.decode(out))
            for i, out in zip(kept, outputs, strict=True)]


def measure_domain(model: Backbone, parts: BackboneParts, direction: Direction,
                   other: Direction, domain: str, data: Path,
                   settings: TrainSettings, beam: int) -> dict[str, Any]:
    config, params = published_module(direction, domain)
    family = get_family(str(config["family"]))
    teacher = SingleModuleHooks(family, params)
    folder = data / direction.pair / "domains" / domain
    real, dev = read_pairs(folder, "train", direction), read_pairs(folder, "dev", direction)
    source, target = parts.source_tokenizer, parts.target_tokenizer
    backbone_dev, _ = evaluate_texts(model, source, target, dev)
    published_dev, _ = evaluate_texts(model, source, target, dev, hooks=teacher)
    began = time.monotonic()
    synthetic = translate(model, parts, teacher, unseen_sources(data, direction, other, domain),
                          beam)
    translate_s = time.monotonic() - began
    log.info("%s: %d synthetic pairs in %.0f s; dev BLEU backbone %.2f, published adapter "
             "%.2f", domain, len(synthetic), translate_s, backbone_dev.bleu, published_dev.bleu)
    encoded = encode_for_backbone(real + synthetic, source, target, parts.config,
                                  max_len=MAX_LEN)
    with tempfile.TemporaryDirectory(prefix="nmt-forward-") as run_dir:
        student = train_module(model, config, encoded, dev, source=source, target=target,
                               settings=settings, run_dir=Path(run_dir))
    return {"real_pairs": len(real), "synthetic_pairs": len(synthetic),
            "translate_s": round(translate_s, 1), "config": student.config,
            "backbone_dev": round(backbone_dev.bleu, 2),
            "published_dev": round(published_dev.bleu, 2),
            "student_dev": round(student.dev.bleu, 2), "student_steps": student.progress.step,
            "student_s": round(student.progress.elapsed_s, 1)}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Forward translation for {report['direction']}'s adapters",
             "",
             f"In-domain {report['source_language']} text from {report['from_pair']}'s train "
             "splits (none of it in any split of this direction's domains), translated by the "
             f"published backbone and the domain's published adapter (beam {report['beam']}); "
             "a new adapter of the published one's configuration trained on the domain's real "
             f"train pairs plus these (peak rate {report['lr']}, at most {report['steps']} "
             "steps, best dev checkpoint). Dev BLEU: greedy, the domain's dev split, as the "
             "recipe selects adapters. The published adapters learnt from the real pairs "
             "alone, within the recipe's budgets (docs/DIRECTIONS.md; often fewer steps): part "
             "of a difference can be the longer budget, not the synthetic pairs.", "",
             "| domain | real pairs | synthetic pairs | backbone dev | published adapter dev "
             "| adapter on real + synthetic dev | difference |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for domain, row in report["domains"].items():
        lines.append(f"| {domain} | {row['real_pairs']} | {row['synthetic_pairs']} | "
                     f"{row['backbone_dev']:.2f} | {row['published_dev']:.2f} | "
                     f"{row['student_dev']:.2f} | "
                     f"{row['student_dev'] - row['published_dev']:+.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direction", choices=sorted(DIRECTIONS), default="en-de")
    parser.add_argument("--from-pair", default="en-fr",
                        help="the data folder whose same-domain train sources are translated")
    parser.add_argument("--domains", nargs="+", choices=DOMAINS, default=["law", "it"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--minutes", type=float, default=40.0)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    direction = DIRECTIONS[args.direction]
    languages = args.from_pair.split("-")
    if len(languages) != 2 or direction.source not in languages:
        parser.error(f"--from-pair {args.from_pair!r}: a pair folder with "
                     f"{direction.source!r} on one side, such as en-fr")
    other = Direction(direction.source, next(lang for lang in languages
                                             if lang != direction.source), pair=args.from_pair)
    # the recipe's adapter settings (its evaluation, patience, batches), another budget
    settings = replace(ADAPTER_SETTINGS, lr=args.lr, max_steps=args.steps,
                       max_minutes=args.minutes)
    model, parts = load_backbone(direction)
    report = {"direction": direction.name, "from_pair": args.from_pair,
              "source_language": direction.source, "beam": args.beam, "lr": args.lr,
              "steps": args.steps,
              "domains": {domain: measure_domain(model, parts, direction, other, domain,
                                                 args.data, settings, args.beam)
                          for domain in args.domains}}
    write_report(args.out, f"forward_translation-{direction.name}", report, markdown(report))


if __name__ == "__main__":
    main()
