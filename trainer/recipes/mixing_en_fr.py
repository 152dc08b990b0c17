"""Recipe of the word-level domain mixture (family "mixing", Jiang et al. 2020) for the
built-in en-fr backbone: trained jointly on the 7 domains' train sets within a wall-clock
budget, then published into a model store as one domain (default name "mixed").

    python -m trainer.recipes.mixing_en_fr --data ../shared/data --run-dir runs/mixing-en-fr \
        --store var/store --minutes 60 [--sides both] [--rank R] [--activate]

Serve it for requests without a domain with `NMT_ROUTING__MIXTURE=mixed` (docs/API.md).
Re-running the command resumes training from the run directory's checkpoint (a larger
--minutes extends a run that stopped on its budget); a finished run is published once.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from contract.artifacts import MODULE_WEIGHTS_FILE
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import BackboneParts, backbone_parts, module_files
from server.engine.engine import load_backbone
from server.engine.families import get_family
from trainer.recipes.default_en_fr import DOMAINS, MAX_LEN
from trainer.recipes.default_stages import BACKBONE_NAME, domain_corpus
from trainer.training.data import EncodedPairs, encode_for_backbone, join_labelled
from trainer.training.loop import TrainSettings
from trainer.training.mixing import MixingResult, train_mixing

log = logging.getLogger("trainer.recipes.mixing_en_fr")

SETTINGS = TrainSettings(lr=5e-4, warmup_steps=200, max_tokens=4000, max_epochs=50,
                         max_minutes=60.0, eval_every=200, patience=5, log_every=25,
                         checkpoint_every_s=300.0)


@dataclass(frozen=True)
class Recipe:
    data: Path
    run_dir: Path
    store: Path
    minutes: float
    domains: tuple[str, ...] = DOMAINS
    name: str = "mixed"
    backbone: str = BACKBONE_NAME
    sides: str = "encoder"
    rank: int | None = None  # low-rank differences from the backbone (family option)
    epsilon: float = 0.1
    domain_weight: float = 1.0
    activate: bool = False
    bleu: bool = True
    builtin: bool = True  # layer the package's built-in artifacts under the store
    settings: TrainSettings = SETTINGS


def run(recipe: Recipe) -> dict[str, Any]:
    """Train (or resume) and publish; returns the published summary."""
    published = recipe.run_dir / "published.json"
    if published.exists():
        log.info("already published: %s", published)
        summary: dict[str, Any] = json.loads(published.read_text())
        return summary
    builtin = BUILTIN_DIR if recipe.builtin else None
    with Store.open(recipe.store, builtin_dir=builtin) as store:
        loaded = store.load_backbone(recipe.backbone)
        parts = backbone_parts(loaded.files)
        model = load_backbone(parts.config, parts.tensors)
        data = join_labelled(_train_sets(recipe, parts))
        dev = {d: domain_corpus(recipe.data, d, "dev").read() for d in recipe.domains}
        config = {"family": "mixing", "domains": list(recipe.domains),
                  "epsilon": recipe.epsilon, "sides": recipe.sides, "rank": recipe.rank}
        settings = replace(recipe.settings, max_minutes=recipe.minutes)
        log.info("mixture of %d domains (%s), %d training pairs, %.1fM parameters",
                 len(recipe.domains), recipe.sides, len(data), _size(parts.config, config) / 1e6)
        result = train_mixing(model, config, data, dev, source=parts.source_tokenizer,
                              target=parts.target_tokenizer, settings=settings,
                              run_dir=recipe.run_dir / "train", max_len=MAX_LEN,
                              domain_weight=recipe.domain_weight, bleu=recipe.bleu)
        summary = _summary(recipe, result, len(data), _size(parts.config, result.config))
        save_file({k: v.contiguous() for k, v in result.params.items()},
                  str(recipe.run_dir / MODULE_WEIGHTS_FILE))
        manifest = store.publish(
            "module", recipe.name, module_files(result.params, half=True), config=result.config,
            backbone_fingerprint=loaded.manifest.backbone_fingerprint,
            provenance={"recipe": "trainer/recipes/mixing_en_fr.py",
                        "data": "shared/data en-fr/domains/*/train (jointly, labelled)",
                        "pairs": len(data), "steps": result.progress.step,
                        "train_seconds": round(result.progress.elapsed_s, 1)},
            scores={"dev": summary["dev"], "dev_mean_bleu": summary["dev_mean_bleu"]})
        if recipe.activate:
            store.activate("module", recipe.name, manifest.version)
        summary |= {"version": manifest.version, "active": recipe.activate,
                    "adapters_dev": _adapter_scores(store, recipe.domains)}
    published.write_text(json.dumps(summary, indent=1))
    _log_comparison(summary)
    return summary


def _train_sets(recipe: Recipe, backbone: BackboneParts) -> list[EncodedPairs]:
    parts: list[EncodedPairs] = []
    for label, domain in enumerate(recipe.domains):
        pairs = domain_corpus(recipe.data, domain, "train").read()
        parts.append(encode_for_backbone(pairs, backbone.source_tokenizer,
                                         backbone.target_tokenizer, backbone.config,
                                         max_len=MAX_LEN, label=label))
        log.info("domain %s: %d training pairs", domain, len(parts[-1]))
    return parts


def _size(backbone: Any, config: dict[str, Any]) -> int:
    family = get_family("mixing")
    return family.parameter_count(backbone, family.normalise(config))


def _summary(recipe: Recipe, result: MixingResult, pairs: int, size: int) -> dict[str, Any]:
    dev = {d: {"loss": round(m.loss, 4), "domain_accuracy": round(m.accuracy, 4)}
           | (result.bleu[d].as_dict() if d in result.bleu else {})
           for d, m in result.dev.items()}
    bleu = [s.bleu for s in result.bleu.values()]
    return {"name": recipe.name, "config": result.config, "parameters": size, "pairs": pairs,
            "steps": result.progress.step, "stop_reason": result.progress.stop_reason,
            "train_seconds": round(result.progress.elapsed_s, 1), "dev": dev,
            "dev_mean_bleu": round(sum(bleu) / len(bleu), 2) if bleu else None}


def _adapter_scores(store: Store, domains: Sequence[str]) -> dict[str, Any]:
    """Dev BLEU of each domain's active module (the adapters), as their manifests recorded."""
    found: dict[str, Any] = {}
    active = store.active_domains()
    for domain in domains:
        if domain in active:
            scores = store.record("module", domain, active[domain]).manifest.scores
            if isinstance(scores.get("dev"), dict):
                found[domain] = scores["dev"]
    return found


def _log_comparison(summary: dict[str, Any]) -> None:
    for domain, scores in summary["dev"].items():
        adapter = summary["adapters_dev"].get(domain, {})
        log.info("%-10s mixture BLEU %s  adapter BLEU %s  domain accuracy %.2f", domain,
                 scores.get("bleu", "-"), adapter.get("bleu", "-"), scores["domain_accuracy"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--run-dir", type=Path, default=Path("runs/mixing-en-fr"))
    parser.add_argument("--store", type=Path, required=True,
                        help="model store root to publish into (built-ins layered under it)")
    parser.add_argument("--minutes", type=float, default=SETTINGS.max_minutes,
                        help="wall-clock training budget (evaluation after it not included)")
    parser.add_argument("--name", default="mixed", help="the domain name it is published as")
    parser.add_argument("--sides", choices=("encoder", "both"), default="encoder")
    parser.add_argument("--rank", type=int, default=None,
                        help="low-rank differences from the backbone (default: full copies)")
    parser.add_argument("--domains", nargs="*", default=list(DOMAINS))
    parser.add_argument("--backbone", default=BACKBONE_NAME)
    parser.add_argument("--activate", action="store_true", help="serve it once published")
    parser.add_argument("--no-bleu", action="store_true", help="skip the final dev BLEU")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    run(Recipe(args.data, args.run_dir, args.store, args.minutes, tuple(args.domains),
               name=args.name, backbone=args.backbone, sides=args.sides, rank=args.rank,
               activate=args.activate, bleu=not args.no_bleu))


if __name__ == "__main__":
    main()
