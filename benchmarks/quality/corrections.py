"""A domain refreshed from corrections, measured: BLEU/chrF of the shipped module and of the
refreshed one on test lines no correction covers, and two poisoned refreshes the gate
must refuse.

    python -m benchmarks.quality.corrections [--data DIR] [--domain medical] [--quick]

The shipped data has no unused in-domain pairs (each domain's train split trained its
shipped module), so the corrections are simulated from the domain's test split: a seeded
half of its lines are sent as corrections (by four API keys, as translators' post-edits
would be), the other half scores the modules. Everything runs through the real path: the
corrections are registry rows, the refresh is a job the sidecar's job runner claims
(`Sidecar.run(once=True)`), trains, gates and publishes in a store layered on the shipped
artifacts; the shipped module's own data is read from `--data`
(NMT_TRAINER__REFRESH__DATA_DIR).

Poisoned refreshes, each in a fresh store:
- "term flip": every training line of the domain that has `--term` sent with it replaced
  by `--flip` (plausible, fluent, wrong), from two keys (one key alone is capped by the
  per-key share: tests/trainer/test_refresh_selection.py);
- "shuffled": the honest run's corrections with their targets shuffled among them
  (fluent French, the wrong sentence), from two keys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import DEFAULT_DATA, RESULTS_DIR
from benchmarks.provenance import stamped
from contract.tsv import Pair
from model_store import Store
from model_store.correction_rows import NewCorrection
from server.engine.artifacts import backbone_parts, module_params
from server.engine.engine import load_backbone
from server.engine.families import get_family
from server.engine.single import SingleModuleHooks
from server.serving.refresh_jobs import submit_refresh
from trainer.evaluate import evaluate_texts
from trainer.refresh_settings import RefreshSettings
from trainer.settings import WorkerSettings
from trainer.sidecar import Sidecar

KEYS = ("translator-1", "translator-2", "translator-3", "translator-4")


def read_pairs(folder: Path, split: str) -> list[Pair]:
    source = (folder / f"{split}.en").read_text(encoding="utf-8").splitlines()
    target = (folder / f"{split}.fr").read_text(encoding="utf-8").splitlines()
    return [(s, t) for s, t in zip(source, target, strict=True) if s.strip() and t.strip()]


def add_corrections(store: Store, pairs: list[Pair], keys: tuple[str, ...], *,
                    domain: str, backbone: str) -> None:
    for number, (source, corrected) in enumerate(pairs):
        key = keys[number % len(keys)]
        digest = hashlib.sha256(f"en-fr\0{source}\0{corrected}".encode()).hexdigest()
        store.registry.add_correction(NewCorrection(
            source=source, machine=None, corrected=corrected, domain=domain, routed=None,
            direction="en-fr", backbone=backbone, key_id=key, key_name=key,
            fingerprint=digest))


def scores_of(store: Store, backbone: str, domain: str, version: int,
              pairs: list[Pair]) -> dict[str, float]:
    parts = backbone_parts(store.load("backbone", backbone).files)
    model = load_backbone(parts.config, parts.tensors)
    loaded = store.load("module", domain, version, backbone=backbone)
    hooks = SingleModuleHooks(get_family(str(loaded.manifest.config["family"])),
                              module_params(loaded.files))
    scores, _ = evaluate_texts(model, parts.source_tokenizer, parts.target_tokenizer, pairs,
                               hooks=hooks)
    return scores.as_dict()


def modules_of(store: Store, backbone: str) -> dict[str, str]:
    """Every active module's weights digest: the other domains must not change."""
    out = {}
    for name, version in store.registry.active_versions("module", backbone=backbone).items():
        manifest = store.record("module", name, version, backbone=backbone).manifest
        out[name] = f"v{version} {manifest.files['module.safetensors'].sha256[:12]}"
    return out


def refresh(root: Path, corrections: list[Pair], keys: tuple[str, ...], args: argparse.Namespace,
            *, score_on: list[Pair] | None) -> dict[str, Any]:
    """One refresh in a fresh store: the job's outcome, and the test scores before/after."""
    with Store.open(root) as store:
        backbone = store.registry.default_backbone()
        manifest = store.record("backbone", backbone).manifest
        base = store.registry.get_active("module", args.domain, backbone=backbone)
        assert base is not None, f"no shipped module {args.domain!r}"
        others_before = {k: v for k, v in modules_of(store, backbone).items() if k != args.domain}
        add_corrections(store, corrections, keys, domain=args.domain, backbone=backbone)
        job = submit_refresh(store, args.domain, backbone=manifest, trigger="admin",
                             options={"max_epochs": args.epochs, "eval_every": 1000})
        settings = WorkerSettings(worker_name="bench", checkpoint_every_s=600.0,
                                  refresh=RefreshSettings(
                                      data_dir=args.data, min_new_corrections=0,
                                      max_original_pairs=args.original_pairs))
        started = time.monotonic()
        Sidecar(store, settings).run(once=True)
        seconds = time.monotonic() - started
        done = store.registry.get_job(job.id)
        row: dict[str, Any] = {"base_version": base, "state": done.state, "error": done.error,
                               "scores": done.scores, "result": done.result,
                               "job_seconds": round(seconds, 1)}
        others_after = {k: v for k, v in modules_of(store, backbone).items() if k != args.domain}
        row["others_unchanged"] = others_before == others_after
        row["active_version"] = store.registry.get_active("module", args.domain,
                                                          backbone=backbone)
        trained = (done.result or {}).get("module_version")
        if score_on is not None:
            row["test_before"] = scores_of(store, backbone, args.domain, base, score_on)
            if trained is not None:  # published, or refused and kept inactive: its effect
                row["test_after"] = scores_of(store, backbone, args.domain, trained,
                                              score_on)
                row["trained_version"] = trained
        return row


def markdown(rows: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> str:
    honest = rows["honest"]
    before = honest["test_before"]
    after = honest.get("test_after", before)
    lines = [
        f"# Refreshing the {args.domain} module from corrections",
        "",
        f"{sizes['corrections']} corrections simulated from a seeded half of the "
        f"{args.domain} test split (sent by {len(KEYS)} API keys), {sizes['scored']} other "
        f"test lines scored (greedy, sacrebleu). The refresh fine-tunes the shipped module "
        f"for {args.epochs} epoch(s) on {args.original_pairs} of its own training pairs plus "
        "the corrections (x4), through the sidecar's job runner; the gate compares it with "
        "the shipped module on the dev split and on the held-back 20% of the corrections.",
        "",
        "| module | test BLEU | test chrF |",
        "|---|---|---|",
        f"| shipped (v{honest['base_version']}) | {before['bleu']:.2f} | {before['chrf']:.2f} |",
        f"| refreshed (v{honest.get('trained_version')}, job {honest['state']}, active: "
        f"v{honest['active_version']}) | {after['bleu']:.2f} | {after['chrf']:.2f} |",
        f"| difference | {after['bleu'] - before['bleu']:+.2f} | "
        f"{after['chrf'] - before['chrf']:+.2f} |",
        "",
        "| refresh | job | corrections used / held back / left out | dev BLEU served -> "
        "refreshed | held-back BLEU served -> refreshed | other domains | why |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        scores = row["scores"]
        chosen = scores.get("refresh", {})
        left = sum(chosen.get(k, 0) for k in ("merged_duplicates", "in_dev_set",
                                                "contradict_own_data", "over_key_share"))
        dev = scores.get("dev", {})
        held = scores.get("held_out_corrections", {})

        def pair(block: dict[str, Any]) -> str:
            if not block:
                return "not trained"
            return f"{block['served']['bleu']:.2f} -> {block['refreshed']['bleu']:.2f}"

        why = (row["error"] or "gate passed").replace("|", "/")
        lines.append(f"| {name} | {row['state']} ({row['job_seconds']:.0f} s) | "
                     f"{chosen.get('train', 0)} / {chosen.get('held_out', 0)} / {left} | "
                     f"{pair(dev)} | {pair(held)} | "
                     f"{'bit-identical' if row['others_unchanged'] else 'CHANGED'} | {why} |")
    lines += ["", "Raw numbers: corrections.json."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--domain", default="medical")
    parser.add_argument("--term", default="comprimé", help="the poisoner's flipped term")
    parser.add_argument("--flip", default="gélule")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--original-pairs", type=int, default=300)
    parser.add_argument("--quick", action="store_true",
                        help="1 epoch, and no shuffled-poison run")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    args.data = args.data.resolve()
    if args.quick:
        args.epochs = 1
    folder = args.data / "en-fr" / "domains" / args.domain
    test = read_pairs(folder, "test")
    random.Random(1).shuffle(test)
    corrections, scored = test[: len(test) // 2], test[len(test) // 2:]
    flipped = [(s, t.replace(args.term, args.flip)) for s, t in read_pairs(folder, "train")
               if args.term in t]
    shuffled_targets = [t for _, t in corrections]
    random.Random(2).shuffle(shuffled_targets)
    shuffled = [(s, t) for (s, _), t in zip(corrections, shuffled_targets, strict=True)]
    torch.manual_seed(1)
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-corrections-") as tmp:
        rows["honest"] = refresh(Path(tmp) / "honest", corrections, KEYS, args,
                                 score_on=scored)
        rows["poisoned: term flip"] = refresh(Path(tmp) / "flip", flipped, KEYS[:2], args,
                                              score_on=None)
        if not args.quick:
            rows["poisoned: shuffled"] = refresh(Path(tmp) / "shuffled", shuffled, KEYS[:2],
                                                 args, score_on=None)
    sizes = {"corrections": len(corrections), "scored": len(scored), "flipped": len(flipped)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "corrections.json").write_text(json.dumps(
        {"args": {k: str(v) for k, v in vars(args).items()}, "sizes": sizes, "rows": rows},
        indent=1, ensure_ascii=False) + "\n")
    (args.out / "corrections.md").write_text(stamped(markdown(rows, args, sizes)))
    print((args.out / "corrections.md").read_text())


if __name__ == "__main__":
    main()
