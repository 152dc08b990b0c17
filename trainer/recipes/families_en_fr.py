"""Recipe: one module per domain for each of the other module families (factorized
Transformer SF/PA, highway, gated, lexicalised embeddings) against the built-in backbone,
published into a separate store that `make eval` reads with `--families-store`.

    python -m trainer.recipes.families_en_fr --data ../shared/data \
        --run-dir runs/families-en-fr --store runs/families-store --minutes 3

Resumable: a (family, domain) with a finished result is skipped; an interrupted one
continues from its checkpoint. Every module gets the same wall-clock budget, so rows of
the evaluation table compare families at equal training time, not at convergence.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from contract.artifacts import MODULE_WEIGHTS_FILE
from model_store import Store
from server.engine.artifacts import backbone_parts, module_files
from server.engine.backbone import Backbone
from server.engine.engine import load_backbone
from server.engine.families import get_family
from server.engine.tokenizer import Tokenizer
from trainer.recipes.default_en_fr import BUILTIN_DIR, DOMAINS, MAX_LEN
from trainer.recipes.default_stages import domain_corpus
from trainer.training.data import encode_pairs
from trainer.training.loop import TrainSettings
from trainer.training.modules import train_module

log = logging.getLogger("trainer.recipes.families_en_fr")

# Per family: the module configuration and its learning rate. Weight-override families
# start from copies of trained projections, so they take a smaller step than modules
# that start from zero.
FAMILIES: dict[str, tuple[dict[str, Any], float]] = {
    "sf": ({"family": "sf"}, 2e-4),
    "pa": ({"family": "pa"}, 2e-4),
    "highway": ({"family": "highway", "bottleneck": 128}, 1e-3),
    "gated": ({"family": "gated", "bottleneck": 128}, 1e-3),
    "ldr": ({"family": "ldr", "rank": 8}, 1e-3),
}


def settings_for(lr: float, minutes: float) -> TrainSettings:
    return TrainSettings(lr=lr, warmup_steps=100, max_tokens=5000, max_epochs=8,
                         max_minutes=minutes, eval_every=50, patience=3, log_every=25,
                         checkpoint_every_s=120.0)


def load_builtin(store: Store) -> tuple[Backbone, Tokenizer, str]:
    loaded = store.load_default_backbone()
    parts = backbone_parts(loaded.files)
    model = load_backbone(parts.config, parts.tensors)
    return model, parts.source_tokenizer, loaded.manifest.backbone_fingerprint


def train_one(model: Backbone, tokenizer: Tokenizer, data_dir: Path, out_dir: Path,
              domain: str, family: str, minutes: float) -> dict[str, Any]:
    """Train (or resume) one module; returns its result summary (saved beside it)."""
    result_path = out_dir / "result.json"
    if result_path.exists():
        log.info("%s %s: already trained", family, domain)
        summary: dict[str, Any] = json.loads(result_path.read_text())
        return summary
    config, lr = FAMILIES[family]
    train = domain_corpus(data_dir, domain, "train").read()
    dev = domain_corpus(data_dir, domain, "dev").read()
    data = encode_pairs(train, tokenizer.processor, max_len=MAX_LEN)
    result = train_module(model, dict(config), data, dev, source=tokenizer, target=tokenizer,
                          settings=settings_for(lr, minutes), run_dir=out_dir)
    save_file({k: v.detach().contiguous() for k, v in result.params.items()},
              str(out_dir / MODULE_WEIGHTS_FILE))
    summary = {"domain": domain, "family": family, "config": result.config,
               "pairs": len(data), "dev": result.dev.as_dict(), "steps": result.progress.step,
               "stop_reason": result.progress.stop_reason,
               "train_seconds": round(result.progress.elapsed_s, 1),
               "parameters": get_family(family).parameter_count(model.config, result.config)}
    result_path.write_text(json.dumps(summary, indent=1))
    log.info("%s %s: dev BLEU %.2f after %d steps", family, domain, result.dev.bleu,
             result.progress.step)
    return summary


def publish(store: Store, out_dir: Path, summary: dict[str, Any], fingerprint: str) -> None:
    """Publish a trained module once (its record is remembered beside it)."""
    marker = out_dir / "published.json"
    if marker.exists():
        return
    params = load_file(str(out_dir / MODULE_WEIGHTS_FILE))
    record = store.publish(
        "module", summary["domain"], module_files(params, half=True), config=summary["config"],
        backbone_fingerprint=fingerprint,
        provenance={"recipe": "trainer/recipes/families_en_fr.py",
                    "data": f"shared/data en-fr/domains/{summary['domain']}/train",
                    "pairs": summary["pairs"], "steps": summary["steps"],
                    "train_seconds": summary["train_seconds"]},
        scores={"dev": summary["dev"]})
    marker.write_text(json.dumps({"name": record.name, "version": record.version}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--run-dir", type=Path, default=Path("runs/families-en-fr"))
    parser.add_argument("--store", type=Path, default=Path("runs/families-store"),
                        help="the store the modules are published into (created if absent)")
    parser.add_argument("--families", nargs="*", default=list(FAMILIES),
                        choices=list(FAMILIES))
    parser.add_argument("--domains", nargs="*", default=list(DOMAINS), choices=list(DOMAINS))
    parser.add_argument("--minutes", type=float, default=3.0,
                        help="wall-clock training budget of each module")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    with Store.open(args.store, builtin_dir=BUILTIN_DIR) as store:
        model, tokenizer, fingerprint = load_builtin(store)
        for family in args.families:
            for domain in args.domains:
                out_dir = args.run_dir / family / domain
                summary = train_one(model, tokenizer, args.data, out_dir, domain, family,
                                    args.minutes)
                publish(store, out_dir, summary, fingerprint)


if __name__ == "__main__":
    main()
