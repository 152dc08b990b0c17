"""The router without its training text: does a router trained on hashed features (what
its artifact keeps for retraining now, trainer/routers/features.py) route as well as one
trained on the text itself (what the artifact kept before: `examples.tsv.gz`)?

Per direction, on the recipe's router examples (trainer/recipes/router_stage.py) with the
recipe's settings and several seeds:

- text: fastText on the normalised text with its own word bigrams (200,000 buckets), as
  the router was trained before;
- features: the recipe's router now: hashed words and word pairs, those of at least
  `min_examples` distinct examples;

and the shipped router. Scored: top-1 accuracy per class on the recipe's dev set (each
domain's dev split, the open genres' held-out lines for `generic`; 150 lines a class).

A domain added to either form (`--new-domain`, an en-fr extra genre no router learnt
from; seed 1): its lines repeated to the median class (the sidecar's balance) in both
forms, and the sidecar's default for the features form (claim + median,
trainer/routers/update.py). Scored: the new domain's unseen lines (top-1) and the same dev
set. No translation is decoded.

    python -m benchmarks.quality.router.router_artifacts --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import fasttext

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.report_files import write_report
from contract.artifacts import CLASSIFIER_FEATURES_FILE, CLASSIFIER_MODEL_FILE
from model_store import BUILTIN_DIR, Store
from server.routing.classifier import LABEL_PREFIX
from server.routing.features import HashedFeatures, classifier_text
from trainer.recipes.default_en_fr import DOMAINS
from trainer.recipes.default_stages import ROUTER_NAME
from trainer.recipes.directions import DIRECTIONS, Direction
from trainer.recipes.router_stage import GENERIC_LABEL, ROUTER_SETTINGS, router_examples
from trainer.routers.balance import reference_size, updated_examples
from trainer.routers.classifier import ClassifierSettings, Example, accuracy, train_classifier
from trainer.routers.features import features_from_bytes, featurize, pruned, pruned_new

TEXT_BUCKET = 200_000  # the former router's fastText buckets for its word bigrams
SEEDS = (1, 2, 3)
CLASSES = (*DOMAINS, GENERIC_LABEL)
NEW_TRAIN, NEW_UNSEEN = 3000, 500


def train_on_text(examples: Sequence[Example], settings: ClassifierSettings) -> bytes:
    """The former router: fastText on `classifier_text`, its own word n-grams."""
    shuffled = list(examples)
    random.Random(settings.seed).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "train.txt", Path(tmp) / "classifier.bin"
        data.write_text("".join(f"{LABEL_PREFIX}{label} {classifier_text(text)}\n"
                                for label, text in shuffled), encoding="utf-8")
        model = fasttext.train_supervised(
            str(data), epoch=settings.epoch, lr=settings.lr, dim=settings.dim,
            wordNgrams=settings.word_ngrams, minn=0, maxn=0, bucket=TEXT_BUCKET, thread=1,
            seed=settings.seed, verbose=0)
        model.quantize(input=str(data), qnorm=True, retrain=False, cutoff=100_000)
        model.save_model(str(out))
        return out.read_bytes()


def train_on_features(examples: Sequence[Example], settings: ClassifierSettings) -> bytes:
    return train_classifier(pruned(featurize(examples, settings.features()),
                                   settings.min_examples), settings)


def scores(model: bytes, dev: Sequence[Example], features: HashedFeatures | None
           ) -> dict[str, float]:
    found = accuracy(model, dev, features)
    return {"all": round(100 * found.overall, 1),
            **{label: round(100 * found.per_label[label], 1) for label in CLASSES}}


def shipped(direction: Direction) -> tuple[bytes, HashedFeatures | None, dict[str, Any]]:
    """The built-in router of `direction`: its model, what it reads, and what it ships
    (version, file sizes, stored examples and distinct feature numbers)."""
    with tempfile.TemporaryDirectory() as tmp, \
            Store.open(Path(tmp), builtin_dir=BUILTIN_DIR) as store:
        loaded = store.load("classifier", ROUTER_NAME, backbone=direction.backbone_name)
    files = loaded.files
    stored = (features_from_bytes(files[CLASSIFIER_FEATURES_FILE])
              if CLASSIFIER_FEATURES_FILE in files else [])
    facts = {"version": loaded.manifest.version,
             "files": {name: len(data) for name, data in sorted(files.items())},
             "examples": len(stored),
             "features": len({number for _, bag in stored for number in bag})}
    return (files[CLASSIFIER_MODEL_FILE], HashedFeatures.from_config(loaded.manifest.config),
            facts)


def new_domain_lines(data: Path, genre: str, language: str) -> tuple[list[str], list[str]]:
    """(train, unseen) distinct lines of the genre, drawn seeded from the whole file."""
    path = data / "en-fr" / "extra" / genre / f"train.{language}"
    pool = list(dict.fromkeys(line for line in path.read_text(encoding="utf-8").split("\n")
                              if line.strip()))
    random.Random(0).shuffle(pool)
    return pool[:NEW_TRAIN], pool[NEW_TRAIN:NEW_TRAIN + NEW_UNSEEN]


def add_domain(examples: list[Example], dev: list[Example], genre: str, data: Path,
               direction: Direction) -> list[dict[str, Any]]:
    """The new-domain rows (see the module docstring)."""
    train, unseen = new_domain_lines(data, genre, direction.source)
    settings, features = ROUTER_SETTINGS, ROUTER_SETTINGS.features()
    stored = pruned(featurize(examples, features), settings.min_examples)
    size = max(reference_size(stored, "median"), len(train))
    repeated = [(genre, train[i % len(train)]) for i in range(size)]
    rows = [_new_row("text, median", train_on_text(examples + repeated, settings), None, genre,
                     unseen, dev)]
    bags = pruned_new([features.of(line) for line in train], stored, settings.min_examples)
    for name, claim in (("features, median", None), ("features, claim + median", settings)):
        updated = updated_examples(stored, genre, bags, max_lines=len(bags), balance="median",
                                   claim=claim)
        rows.append(_new_row(name, train_classifier(updated, settings), features, genre,
                             unseen, dev))
    return rows


def _new_row(name: str, model: bytes, features: HashedFeatures | None, genre: str,
             unseen: list[str], dev: list[Example]) -> dict[str, Any]:
    new = accuracy(model, [(genre, line) for line in unseen], features)
    row = {"router": name, "new_top1": round(100 * new.overall, 1),
           "new_went": dict(sorted(new.confusion[genre].items(), key=lambda kv: -kv[1])[:3]),
           **scores(model, dev, features)}
    print(json.dumps(row), flush=True)
    return row


def measure(data: Path, direction: Direction, seeds: Sequence[int], genre: str | None
            ) -> dict[str, Any]:
    examples, dev = router_examples(data, DOMAINS, direction)
    model, reads, facts = shipped(direction)
    rows = [{"router": f"shipped v{facts['version']}", "seed": "", **scores(model, dev, reads)}]
    for seed in seeds:
        settings = replace(ROUTER_SETTINGS, seed=seed)
        rows.append({"router": "text", "seed": seed,
                     **scores(train_on_text(examples, settings), dev, None)})
        rows.append({"router": "features", "seed": seed,
                     **scores(train_on_features(examples, settings), dev,
                              settings.features())})
        print(json.dumps(rows[-2:]), flush=True)
    added = add_domain(examples, dev, genre, data, direction) if genre else []
    return {"direction": direction.name, "shipped": facts, "retrained": rows,
            "new_domain": genre, "added": added}


def mean_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per form, the mean of its seeds' rows."""
    out = []
    for form in ("text", "features"):
        mine = [row for row in rows if row["router"] == form]
        if len(mine) > 1:
            out.append({"router": f"**{form}, mean**", "seed": len(mine),
                        **{k: round(sum(r[k] for r in mine) / len(mine), 1)
                           for k in ("all", *CLASSES)}})
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    s = ROUTER_SETTINGS
    out = ["# Router artifacts: hashed features instead of training text", "",
           "What a router learns from, per direction: the text itself (how the router was "
           "trained while its artifact kept its examples as text, `examples.tsv.gz`) or "
           f"hashed word uni+bigrams kept where at least {s.min_examples} distinct examples "
           f"hold them ({s.bucket:,} numbers; what the artifact keeps now, "
           "`features.npz.xz`, no text). Same examples (the recipe's), same settings "
           f"({s.epoch} epochs, dim {s.dim}, quantized), seeds as listed; seed "
           f"{s.seed} is the recipe's, so `text` seed {s.seed} is how the router shipped "
           "before was trained (en-fr v9 and fr-en v3 had these very dev scores) and "
           f"`features` seed {s.seed} the router shipped now (`shipped`, unless it was "
           "retrained since). Top-1 accuracy in % on the recipe's dev set (150 lines a "
           "class: each domain's dev split, the open genres' held-out lines for generic); "
           "`all` over the 1,200 lines."]
    head = ["router", "seed", "all", *CLASSES]
    for result in results:
        out += ["", f"## {result['direction']}: the router retrained", "",
                "| " + " | ".join(head) + " |", "|---|---:|" + "---:|" * (len(head) - 2)]
        out += ["| " + " | ".join(str(row[k]) for k in head) + " |"
                for row in result["retrained"] + mean_rows(result["retrained"])]
        facts = result["shipped"]
        out += ["", f"Shipped v{facts['version']}: " + ", ".join(
            f"`{name}` {size / 1e6:.2f} MB" for name, size in facts["files"].items())
            + f"; {facts['examples']:,} examples stored, {facts['features']:,} distinct "
              "feature numbers."]
        if result["added"]:
            genre = result["new_domain"]
            out += ["", f"## {result['direction']}: {genre} added as a new domain (seed 1)", "",
                    f"{NEW_TRAIN:,} lines of the en-fr extra genre `{genre}` (no router learnt "
                    "from it) repeated to the median domain class; `claim + median` also moves "
                    "the stored examples that look like them to the new class (the sidecar's "
                    f"default). New: top-1 on {NEW_UNSEEN} unseen lines of the genre, and where "
                    "they went; the classes: the dev set above.", "",
                    "| router | new: top-1 | new: went to | all | " + " | ".join(CLASSES) + " |",
                    "|---|---:|---|---:|" + "---:|" * len(CLASSES)]
            out += ["| " + " | ".join([row["router"], str(row["new_top1"]),
                                       ", ".join(f"{k} {v}" for k, v in row["new_went"].items()),
                                       str(row["all"]), *(str(row[c]) for c in CLASSES)]) + " |"
                    for row in result["added"]]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--directions", nargs="*", default=sorted(DIRECTIONS))
    parser.add_argument("--seeds", nargs="*", type=int, default=list(SEEDS))
    parser.add_argument("--new-domain", default="finance",
                        help="an en-fr extra genre (empty: none)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    results = [measure(args.data, DIRECTIONS[name], args.seeds, args.new_domain or None)
               for name in args.directions]
    write_report(args.out, "router-artifacts", results, markdown(results))


if __name__ == "__main__":
    main()
