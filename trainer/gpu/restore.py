"""The restore side of a GPU run (issue #47): its shards and log -> the default recipe's
run dir -> (en-fr) a published built-in version, keeping the router.

    python -m trainer.gpu.restore --shards DIR --pack .gpu --data ../shared/data \
        --run-dir runs/gpu-en-fr [--publish] [--builtin model_store/builtin]

The run dir is what the recipe's stages would have left: config.json, spm.model, train.npz
(+ train.corpora.json), backbone/checkpoint.pt (the averaged weights, with the averaged
steps), adapters/<domain>/ (module.safetensors, result.json with dev BLEU scored here, on
the CPU), classifier/ (the built-in router, unchanged: it reads only the source) and
gpu_run.json (the run's log, and the storage chosen here). Storage: int8 with per-row
scales (server/engine/row_int8.py) when the 7 domains' dev BLEU stays within 0.1 of the
float32 weights, float16 otherwise; both scores are kept. `--publish` (en-fr) ships the run
dir beside fr->en, which it leaves as it is, and refits en->fr's quality estimator; a fr-en
run dir is published by the recipe (`python -m trainer.recipes.default_en_fr --direction
fr-en --stage publish --run-dir DIR`).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from contract.artifacts import (
    BACKBONE_CONFIG_FILE,
    CLASSIFIER_FEATURES_FILE,
    CLASSIFIER_MODEL_FILE,
    MODULE_WEIGHTS_FILE,
)
from contract.backbone import BackboneConfig
from model_store import Store
from server.engine.artifacts import backbone_files, backbone_parts
from server.engine.backbone import Backbone
from server.engine.families import get_family
from server.engine.single import SingleModuleHooks
from server.engine.tokenizer import Tokenizer
from trainer.gpu.packed import Pack, read_pack
from trainer.gpu.run import RUN_FILE
from trainer.gpu.shards import read_shards
from trainer.recipes import default_en_fr as recipe
from trainer.recipes.default_stages import BACKBONE_NAME, ROUTER_NAME
from trainer.recipes.directions import DIRECTIONS, EN_FR
from trainer.recipes.snapshot import SNAPSHOT_DIR
from trainer.training.data import EOS_ID
from trainer.training.evaluate import Scores, evaluate_texts
from trainer.training.loop import Checkpoints, Progress
from trainer.training.sampling import CorpusSizes

log = logging.getLogger("trainer.gpu.restore")
GPU_RUN_FILE = "gpu_run.json"
INT8_BLEU_TOLERANCE = 0.1  # issue #47: int8 storage within 0.1 BLEU of float32


def write_training_set(pack: Pack, run_dir: Path) -> None:
    """train.npz in the recipe's layout (sources end with EOS) and its corpus sizes."""
    train = pack.train
    eos = np.uint16(EOS_ID)
    src = np.concatenate([np.append(row, eos) for row in train.rows("src")]).astype(np.int32)
    np.savez(run_dir / "train.npz", src=src, tgt=train.tgt.astype(np.int32),
             src_len=train.src_len.astype(np.int32) + 1, tgt_len=train.tgt_len.astype(np.int32))
    CorpusSizes(pack.info.names, pack.info.pairs).save(run_dir / "train.corpora.json")


def write_backbone(run_dir: Path, config: BackboneConfig, weights: dict[str, torch.Tensor],
                   report: dict[str, Any]) -> Progress:
    backbone = report["backbone"]
    progress = Progress(step=backbone["steps"], epoch=int(backbone["epochs"]),
                        elapsed_s=backbone["seconds"], target_tokens=backbone["target_tokens"],
                        finished=True, stop_reason="max_minutes")
    (run_dir / BACKBONE_CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=1))
    checkpoints = Checkpoints(run_dir / "backbone")
    # `averaged` names the snapshots as trainer/training/average.py does: the model card lists them
    checkpoints.save({"model": weights, "progress": asdict(progress),
                      "averaged": [f"step-{s}.pt" for s in backbone["averaged_steps"]]},
                     progress)
    return progress


def dev_sets(data_dir: Path, direction: str) -> dict[str, list[tuple[str, str]]]:
    found = recipe.corpora(data_dir, "dev", DIRECTIONS[direction])
    return {corpus.name: corpus.read() for corpus in found}


def dev_scores(model: Backbone, tokenizer: Tokenizer,
               dev: dict[str, list[tuple[str, str]]]) -> dict[str, Scores]:
    return {d: evaluate_texts(model, tokenizer, tokenizer, pairs)[0] for d, pairs in dev.items()}


def mean_bleu(scores: dict[str, Scores]) -> float:
    return sum(s.bleu for s in scores.values()) / len(scores)


def choose_storage(config: BackboneConfig, weights: dict[str, torch.Tensor], spm: bytes,
                   tokenizer: Tokenizer, dev: dict[str, list[tuple[str, str]]]
                   ) -> tuple[str, dict[str, Any], dict[str, Scores]]:
    """int8-rows when its mean dev BLEU is within the tolerance of float32's."""
    model = Backbone(config)
    model.load_state_dict(weights)
    model.eval()
    exact = dev_scores(model, tokenizer, dev)
    files = backbone_files(config, weights, source_spm=spm, target_spm=spm, int8_rows=True)
    model.load_state_dict(backbone_parts(files).tensors)
    mean_exact, mean_compact = mean_bleu(exact), mean_bleu(dev_scores(model, tokenizer, dev))
    storage = "int8-rows" if mean_exact - mean_compact <= INT8_BLEU_TOLERANCE else "float16"
    check = {"float32_dev_bleu": round(mean_exact, 2), "int8_rows_dev_bleu": round(
        mean_compact, 2), "chosen": storage}
    log.info("storage: %s", check)
    return storage, check, exact


def write_adapters(run_dir: Path, model: Backbone, tokenizer: Tokenizer,
                   adapters: dict[str, torch.Tensor], report: dict[str, Any],
                   dev: dict[str, list[tuple[str, str]]], backbone: dict[str, Scores]) -> None:
    config = report["adapter_settings"]["config"]
    family = get_family(str(config["family"]))
    for domain, summary in report["adapters"].items():
        params = {name.split("/", 1)[1]: t for name, t in adapters.items()
                  if name.startswith(domain + "/")}
        out = run_dir / "adapters" / domain
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in params.items()}, str(out / MODULE_WEIGHTS_FILE))
        scores, _ = evaluate_texts(model, tokenizer, tokenizer, dev[domain],
                                   hooks=SingleModuleHooks(family, params))
        plain = backbone[domain]
        (out / "result.json").write_text(json.dumps(
            {"domain": domain, "config": summary["config"],
             "lr": report["adapter_settings"]["lr"], "pairs": summary["pairs"],
             "dev": scores.as_dict(), "backbone_dev": plain.as_dict(),
             "steps": summary["steps"], "stop_reason": summary["stop_reason"],
             "train_seconds": summary["seconds"], "dev_loss": summary["dev_loss"]}, indent=1))
        log.info("adapter %s: dev BLEU %.2f (backbone %.2f)", domain, scores.bleu, plain.bleu)


def keep_router(builtin: Path, run_dir: Path) -> None:
    """The built-in router's files and scores as the recipe's classifier stage leaves them
    (its accuracy.json rebuilt from the published manifest): publishing ships it again,
    unchanged, for the new backbone."""
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp), builtin_dir=builtin) as store:
        # named: fr->en ships a router of the same name for its own backbone
        loaded = store.load("classifier", ROUTER_NAME, backbone=BACKBONE_NAME)
    out = run_dir / "classifier"
    out.mkdir(parents=True, exist_ok=True)
    for name in (CLASSIFIER_MODEL_FILE, CLASSIFIER_FEATURES_FILE):
        (out / name).write_bytes(loaded.files[name])
    scores = dict(loaded.manifest.scores)
    config = loaded.manifest.config
    (out / "accuracy.json").write_text(json.dumps(
        {**scores, "temperature": config.get("temperature", 1.0),
         "features": config["features"]}, indent=1))


def restore(shards: Path, pack_dir: Path, data_dir: Path, run_dir: Path, *,
            builtin: Path) -> dict[str, Any]:
    report = json.loads((shards / RUN_FILE).read_text())
    pack = read_pack(pack_dir)
    if report["pack"]["spm_sha256"] != pack.info.spm_sha256:
        raise ValueError(f"the run was trained on another vocabulary than {pack_dir}'s")
    config = BackboneConfig.from_dict(report["config"])
    weights = read_shards(shards, "backbone")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spm.model").write_bytes(pack.spm)
    write_training_set(pack, run_dir)
    write_backbone(run_dir, config, weights, report)
    tokenizer = Tokenizer(pack.spm, vocab=None, eos_id=config.eos_id, unk_id=config.unk_id,
                          pad_id=config.pad_id)
    dev = dev_sets(data_dir, pack.info.direction)
    storage, check, backbone_scores = choose_storage(config, weights, pack.spm, tokenizer, dev)
    model = Backbone(config)
    model.load_state_dict(weights)
    model.eval().requires_grad_(False)
    write_adapters(run_dir, model, tokenizer, read_shards(shards, "adapters"), report, dev,
                   backbone_scores)
    if pack.info.direction == "en-fr":
        keep_router(builtin, run_dir)
    report |= {"storage": storage, "storage_check": check}
    (run_dir / GPU_RUN_FILE).write_text(json.dumps(report, indent=1))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.gpu.restore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=Path, required=True,
                        help="what the GPU run wrote (run.json, backbone-NN, adapters-NN)")
    parser.add_argument("--pack", type=Path, default=Path(".gpu"))
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--run-dir", type=Path, default=Path("runs/gpu-en-fr"))
    parser.add_argument("--builtin", type=Path, default=recipe.BUILTIN_DIR)
    parser.add_argument("--publish", action="store_true",
                        help="publish the run dir as the next built-in version (en-fr)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    report = restore(args.shards, args.pack, args.data, args.run_dir, builtin=args.builtin)
    if args.publish:
        if report["pack"]["direction"] != "en-fr":
            parser.error("only en-fr publishes from a GPU run for now: publish fr-en's "
                         "run dir with the recipe's --direction fr-en --stage publish")
        recipe.publish(args.data, args.run_dir, args.builtin, EN_FR, snapshot=SNAPSHOT_DIR)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
