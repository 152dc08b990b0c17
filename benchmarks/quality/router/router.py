"""The router on its own: classifier accuracy per domain (with the confusion matrix) and
the BLEU of automatic routing policies against the plain backbone, on the default model.

    python -m benchmarks.quality.router.router --data ../shared/data [--classifier-dir DIR]
        [--direction fr-en]     (make eval-router [DIRECTION=fr-en])

`--direction fr-en` measures the fr->en backbone's router (`default-fr-en`) on the same sets
read French side first, into router-fr-en.{json,md}.

Sets: every known domain's dev and test split, and every open genre (a genre without a
module: captions, conversation, news) as a dev slice (the last `--dev-lines` lines of its
train split, held out of the router's training by trainer/recipes/router_stage.py) and
its test set. Dev chooses a policy, test reports it. Translations: greedy decoding through
`Engine.translate` of the built-in backbone and its active modules, with the routing
decision of `server.routing.RoutingPolicy` (the code the server runs) per sentence.

The classifier is the built-in active router, or a candidate the recipe's classifier stage
wrote (`--classifier-dir RUN_DIR/classifier`, before it is published).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locations import REPO
from benchmarks.quality.data import (
    EvalSet,
    domain_names,
    domain_set,
    genre_dev_slice,
    genre_names,
    genre_set,
)
from benchmarks.quality.decode import GENERIC_MEMBERS, Decoder, DecodeSettings, Members
from benchmarks.quality.evaluation.evaluate import backbone_of, machine
from benchmarks.quality.evaluation.significance import paired_interval, sentence_statistics
from benchmarks.quality.evaluation.systems import Router, classifier_report, single
from benchmarks.quality.models import load_models
from benchmarks.report_files import write_report
from contract.artifacts import CLASSIFIER_MODEL_FILE
from model_store import BUILTIN_DIR, Store
from server.core.settings import RoutingSettings
from server.routing import FastTextClassifier, load_classifier
from server.routing.classifier import LABEL_PREFIX
from trainer.recipes.directions import DIRECTIONS, EN_FR
from trainer.training.evaluate import score

TARGET_DOMAINS = ("medical", "law", "it", "religion")  # issue #24: >= 90 % on their tests
TARGET_ACCURACY = 0.9

# The policies compared (name -> routing settings); the server's default is one of them.
POLICIES: dict[str, RoutingSettings] = {
    "ensemble below 0.5": RoutingSettings(threshold=0.5, fallback="ensemble"),
    "backbone below 0.5": RoutingSettings(threshold=0.5, fallback="generic"),
    "backbone below 0.7": RoutingSettings(threshold=0.7, fallback="generic"),
    "backbone below 0.8": RoutingSettings(threshold=0.8, fallback="generic"),
    "backbone below 0.9": RoutingSettings(threshold=0.9, fallback="generic"),
}


def served_policy() -> str:
    """The name of the policy the server runs with its default settings."""
    default = RoutingSettings()
    for name, settings in POLICIES.items():
        if settings == default:
            return name
    raise ValueError("the server's default routing settings are not among POLICIES")


def candidate_classifier(directory: Path) -> FastTextClassifier:
    """A classifier the recipe's classifier stage wrote (`classifier.bin`, `accuracy.json`)."""
    scores = json.loads((directory / "accuracy.json").read_text())
    model = {CLASSIFIER_MODEL_FILE: (directory / CLASSIFIER_MODEL_FILE).read_bytes()}
    config = {"labels": [], "temperature": scores["temperature"]} | (
        {"features": scores["features"]} if "features" in scores else {})
    loaded = load_classifier(model, config, version=0)
    loaded.labels = sorted(label.removeprefix(LABEL_PREFIX)
                           for label in loaded.model.get_labels())
    return loaded


def routed_members(router: Router, dataset: EvalSet) -> tuple[list[Members], Counter[str]]:
    """Each sentence's members under the router's policy, and the count of each mode."""
    decisions = [router.auto(text) for text in dataset.sources]
    return [router.members(d) for d in decisions], Counter(d.mode for d in decisions)


def bleu_rows(decoder: Decoder, routers: Mapping[str, Router], sets: Sequence[EvalSet],
              statistics: dict[tuple[str, str], np.ndarray] | None = None
              ) -> dict[str, dict[str, Any]]:
    """system -> {"bleu": set -> BLEU, "avg": mean, "modes": set -> mode counts}; each
    (system, set)'s per-sentence BLEU statistics go into `statistics` when given."""
    any_router = next(iter(routers.values()))
    rows: dict[str, dict[str, Any]] = {}

    def add(system: str, dataset: EvalSet, members: Sequence[Members]) -> None:
        decoded = decoder.run(system, dataset, members)
        row = rows.setdefault(system, {"bleu": {}, "modes": {}})
        row["bleu"][dataset.name] = round(score(decoded.hypotheses, dataset.references).bleu, 2)
        if statistics is not None:
            statistics[(system, dataset.name)] = sentence_statistics(decoded.hypotheses,
                                                                     dataset.references)

    for dataset in sets:
        add("backbone", dataset, [GENERIC_MEMBERS] * len(dataset))
        if dataset.kind == "domain":
            add("true label", dataset, [single(any_router.served.get(dataset.name))]
                * len(dataset))
        for name, router in routers.items():
            members, modes = routed_members(router, dataset)
            add(name, dataset, members)
            rows[name]["modes"][dataset.name] = dict(sorted(modes.items()))
    for row in rows.values():
        row["avg"] = round(sum(row["bleu"].values()) / len(row["bleu"]), 2)
    return rows


def generic_share(router: Router, sets: Sequence[EvalSet]) -> dict[str, float]:
    """How much of each set the classifier labels "generic" (its top prediction)."""
    return {ds.name: round(sum(router.predicted(t)[0] == "generic" for t in ds.sources)
                           / max(len(ds), 1), 4) for ds in sets}


def evaluate(args: argparse.Namespace, store: Store) -> dict[str, Any]:
    started = time.perf_counter()
    direction = DIRECTIONS[args.direction]
    domains = domain_names(args.data, direction)
    models = load_models(store, backbone=backbone_of(store, direction), domains=domains)
    classifier = (candidate_classifier(args.classifier_dir) if args.classifier_dir
                  else models.classifier)
    if classifier is None:
        raise SystemExit("no classifier: publish a router or pass --classifier-dir")
    chosen = {name: POLICIES[name] for name in args.policies}
    routers = {name: Router(models.served, classifier, settings=settings)
               for name, settings in chosen.items()}
    accuracy_sets = {"dev": [domain_set(args.data, d, split="dev", direction=direction)
                             for d in domains],
                     "test": [domain_set(args.data, d, direction=direction) for d in domains]}
    sets = {
        "dev": ([domain_set(args.data, d, split="dev", limit=args.domain_sentences,
                            direction=direction)
                 for d in domains] if args.domain_sentences else [],
                [genre_dev_slice(args.data, g, lines=args.dev_lines, direction=direction)
                 for g in genre_names(args.data, direction)]),
        "test": ([domain_set(args.data, d, limit=args.domain_sentences, direction=direction)
                  for d in domains] if args.domain_sentences else [],
                 [genre_set(args.data, g, limit=args.sentences, direction=direction)
                  for g in genre_names(args.data, direction)]),
    }
    decoder = Decoder(models.engine, label=models.backbone.backbone_fingerprint[:16],
                      settings=DecodeSettings(beam_size=1), cache_dir=args.cache_dir)
    router = Router(models.served, classifier, settings=RoutingSettings())
    results: dict[str, Any] = {"classifier": {}, "bleu": {}}
    for split, (known, genres) in sets.items():
        results["classifier"][split] = classifier_report(router, accuracy_sets[split]) | {
            "generic_share": generic_share(router, genres)}
        statistics: dict[tuple[str, str], np.ndarray] = {}
        results["bleu"][split] = {"domains": bleu_rows(decoder, routers, known) if known
                                  else {}, "genres": bleu_rows(decoder, routers, genres,
                                                               statistics)}
        if served_policy() in routers:  # is the served policy's gap to the backbone noise?
            results["bleu"][split]["served_vs_backbone"] = paired_interval(
                [(statistics[(served_policy(), g.name)], statistics[("backbone", g.name)])
                 for g in genres]).as_dict()
    results["meta"] = {
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": str(args.data), "direction": args.direction, "sentences": args.sentences,
        "dev_lines": args.dev_lines,
        "backbone": f"{models.backbone.name} v{models.backbone.version}",
        "modules": {d: f"{i.family} v{i.version}" for d, i in sorted(models.served.items())},
        "classifier": (str(args.classifier_dir) if args.classifier_dir
                       else _router_name(classifier)),
        "temperature": classifier.temperature, "served_policy": served_policy(),
        "domain_sentences": args.domain_sentences,
        "policies": {name: s.model_dump(include={"threshold", "fallback", "ensemble",
                                                 "top_k", "backbone_floor"})
                     for name, s in chosen.items()},
        "machine": machine(), "seconds": round(time.perf_counter() - started, 1),
        "note": args.note}
    return results


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |",
             "|---|" + "---:|" * (len(header) - 1)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _bleu_table(rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    names = list(next(iter(rows.values()))["bleu"])
    return _table(["system", *names, "avg"],
                  [[system, *(f"{row['bleu'][n]:.2f}" for n in names), f"{row['avg']:.2f}"]
                   for system, row in rows.items()])


def markdown(results: Mapping[str, Any]) -> str:
    meta = results["meta"]
    test = results["classifier"]["test"]
    labels = sorted({p for row in test["confusion"].values() for p in row})
    out = ["# Router: accuracy and automatic routing", "",
           f"- backbone {meta['backbone']}, modules: " + ", ".join(
               f"{d} {v}" for d, v in meta["modules"].items()),
           f"- classifier: {meta['classifier']} (temperature {meta['temperature']}); "
           f"the server's default policy: **{meta['served_policy']}**",
           f"- sets: dev = every domain's dev split and the last {meta['dev_lines']} lines of "
           f"each open genre's train split (held out of the router); test = the first "
           f"{meta['sentences']} sentences of each test set; greedy decoding",
           f"- machine: {meta['machine']['cpu']} ({meta['machine']['cores']} cores, load "
           f"{meta['machine']['load_average']} at start), {meta['seconds'] / 60:.1f} min; "
           f"{meta['note']}", "",
           "## Classifier accuracy", ""]
    dev = results["classifier"]["dev"]
    out += _table(["domain", "dev", "test"],
                  [[d, f"{100 * dev['accuracy'][d]:.1f}%", f"{100 * a:.1f}%"]
                   for d, a in sorted(test["accuracy"].items())]
                  + [["**overall**", f"{100 * dev['overall']:.1f}%",
                      f"{100 * test['overall']:.1f}%"]])
    out += ["", "Share of open-genre text the classifier labels `generic`: " + ", ".join(
        f"{g} {100 * s:.0f}% (dev {100 * dev['generic_share'][g]:.0f}%)"
        for g, s in test["generic_share"].items()), "",
        "Confusion matrix (test sentences, true \\ predicted):", ""]
    out += _table(["true \\ predicted", *labels],
                  [[t, *(row.get(p, 0) for p in labels)]
                   for t, row in sorted(test["confusion"].items())])
    for split in ("dev", "test"):
        bleu = results["bleu"][split]
        out += ["", f"## BLEU on {split}: open genres (no module)", "",
                *_bleu_table(bleu["genres"])]
        if "served_vs_backbone" in bleu:
            gap = bleu["served_vs_backbone"]
            genres = len(bleu["genres"]["backbone"]["bleu"])
            out += ["", f"The served policy minus the backbone, {genres}-genre average: "
                    f"{gap['difference']:+.2f} BLEU (95% paired-bootstrap interval "
                    f"{gap['low']:+.2f} to {gap['high']:+.2f})."]
        if bleu["domains"]:
            out += ["", f"## BLEU on {split}: known domains", "", *_bleu_table(bleu["domains"])]
    out += ["", "Routing decisions on the open-genre test sets:", ""]
    for name, row in results["bleu"]["test"]["genres"].items():
        if name != "backbone":
            out.append(f"- {name}: " + "; ".join(
                f"{g}: " + ", ".join(f"{m} {c}" for m, c in counts.items())
                for g, counts in row["modes"].items()))
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--direction", choices=sorted(DIRECTIONS), default=EN_FR.name,
                        help="the backbone's direction (its router, modules and test sides)")
    parser.add_argument("--name", default=None,
                        help="results file name (json + md; default router, "
                             "router-<direction> for another direction than en-fr)")
    parser.add_argument("--store", type=Path, default=None,
                        help="a store to evaluate (default: the built-in one, read-only)")
    parser.add_argument("--no-builtin", action="store_true",
                        help="do not layer the built-in default model under --store")
    parser.add_argument("--builtin", type=Path, default=BUILTIN_DIR,
                        help="the built-in artifacts' directory (default: the package's)")
    parser.add_argument("--classifier-dir", type=Path, default=None,
                        help="a trained, unpublished classifier (the recipe's run dir)")
    parser.add_argument("--sentences", type=int, default=200,
                        help="first sentences of each test set (domains and genres)")
    parser.add_argument("--domain-sentences", type=int, default=200,
                        help="first sentences of each domain's dev and test split decoded "
                             "for BLEU (0: no domain BLEU; accuracy reads every sentence)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES),
                        help="routing policies to decode")
    parser.add_argument("--dev-lines", type=int, default=150,
                        help="open-genre dev slice: last lines of each genre's train split")
    parser.add_argument("--cache-dir", type=Path,
                        default=REPO / "benchmarks" / "results" / "tmp" / "router",
                        help="translations cache (a re-run reuses what did not change)")
    parser.add_argument("--note", default="", help="a line for the results (e.g. the load)")
    args = parser.parse_args(argv)
    if args.name is None:
        args.name = "router" if args.direction == EN_FR.name else f"router-{args.direction}"
    builtin = None if args.no_builtin else args.builtin
    with tempfile.TemporaryDirectory(prefix="nmt-router-") as scratch, \
            Store.open(args.store or Path(scratch), builtin_dir=builtin) as store:
        results = evaluate(args, store)
    write_report(args.out, args.name, results, markdown(results))


def _router_name(classifier: FastTextClassifier) -> str:
    """`router vN`, or whose it is when the direction routes with another's."""
    origin = classifier.origin
    if origin is not None and origin.shared:
        return f"{origin.backbone}'s router v{origin.version} (shared: the same source language)"
    return f"router v{classifier.version}"


if __name__ == "__main__":
    main()

