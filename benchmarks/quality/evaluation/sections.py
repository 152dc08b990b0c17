"""The sections of the evaluation: known domains, other families, full fine-tuning and the
open-domain genres. Each returns plain dicts that go into eval.json as they are.

The word-level mixture (one module for every domain, no label) is a row of both the
known-domain and the open-domain sections: every sentence goes through that one module."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.data import EvalSet, domain_set, domain_train_pairs, genre_dev_slice
from benchmarks.quality.decode import GENERIC_MEMBERS, Decoded, Decoder, Members
from benchmarks.quality.evaluation.finetune import FinetuneSettings, finetune
from benchmarks.quality.evaluation.learnable import Weights, coordinate_ascent
from benchmarks.quality.evaluation.significance import sentence_statistics
from benchmarks.quality.evaluation.systems import (
    Router,
    mean_soft_weights,
    predicted_label,
    routed,
    true_label,
    wrong_label,
)
from benchmarks.quality.models import Models, ModuleInfo
from server.engine.engine import Member
from server.routing import GENERIC
from trainer.recipes.directions import EN_FR, Direction
from trainer.training.evaluate import score

MembersOf = Callable[[EvalSet], list[Members]]
MIXING_KEY = "mixing"
MIXING_LABEL = "Word-level mixing (no label)"


@dataclass(frozen=True)
class RunOptions:
    data: Path
    run_dir: Path  # caches: translations/, finetune/
    seed: int  # of the random wrong labels
    dev_lines: int  # dev slice used to tune ensemble weights
    finetune: FinetuneSettings
    finetune_domains: tuple[str, ...]
    learnable_rounds: int
    learnable_known: bool  # also tune weights per known domain (on its dev split)
    direction: Direction = EN_FR  # which side of the en-fr data is the source

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        return {k: str(v) if isinstance(v, Path) else v for k, v in values.items()}


@dataclass
class Context:
    """Everything the sections share: models, decoders, sets and the run's options."""

    models: Models
    router: Router
    decoder: Decoder  # the run's beam
    tuner: Decoder  # greedy, for dev-set weight search
    known: list[EvalSet]
    genres: list[EvalSet]
    options: RunOptions
    notes: list[str] = field(default_factory=list)
    # (system, set) -> per-sentence BLEU statistics, for the significance section
    statistics: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)


def system_row(label: str, group: str, parameters: int | None,
               results: Mapping[str, tuple[EvalSet, Decoded]]) -> dict[str, Any]:
    """Scores per set, their average, and the decoding timings of one system."""
    scores: dict[str, dict[str, float | int]] = {}
    for name, (dataset, decoded) in results.items():
        found = score(decoded.hypotheses, dataset.references)
        scores[name] = {**found.as_dict(), "sentences": len(dataset)}
    average = None
    if scores:
        average = {key: round(sum(float(s[key]) for s in scores.values()) / len(scores), 2)
                   for key in ("bleu", "chrf")} | {"sets": len(scores)}
    return {"label": label, "group": group, "parameters": parameters, "scores": scores,
            "average": average,
            "timing": {name: decoded.timing() for name, (_, decoded) in results.items()}}


def run_system(ctx: Context, key: str, label: str, group: str, members_of: MembersOf,
               sets: Sequence[EvalSet], *, parameters: int | None,
               decoder: Decoder | None = None) -> dict[str, Any]:
    chosen = decoder or ctx.decoder
    results: dict[str, tuple[EvalSet, Decoded]] = {}
    for dataset in sets:
        decoded = chosen.run(key, dataset, members_of(dataset))
        results[dataset.name] = (dataset, decoded)
        ctx.statistics[(key, dataset.name)] = sentence_statistics(decoded.hypotheses,
                                                                  dataset.references)
        origin = "cached" if decoded.cached else f"{decoded.seconds:.1f}s"
        print(f"  {key:<22} {dataset.name:<14} {len(dataset):>5} sentences  "
              f"decoded {decoded.decoded:>5} reused {decoded.reused:>5}  {origin}", flush=True)
    return system_row(label, group, parameters, results)


def _module_size(modules: Mapping[str, ModuleInfo]) -> int | None:
    sizes = [info.parameters for info in modules.values()]
    return round(sum(sizes) / len(sizes)) if sizes else None


def _all_modules(ctx: Context) -> int:
    return sum(info.parameters for info in ctx.models.served.values())


def known_domains(ctx: Context) -> dict[str, dict[str, Any]]:
    """Generic, adapters (true / predicted / random label), routing, ensembles."""
    served, router, sets = ctx.models.served, ctx.router, ctx.known
    backbone, module = ctx.models.backbone_parameters, _module_size(served)
    seed = ctx.options.seed
    rows: dict[str, dict[str, Any]] = {}
    uniform = router.members(router.uniform()) if served else GENERIC_MEMBERS
    family = ctx.models.served_family
    name = "Adapters" if family == "adapter" else f"{family} modules"
    plan: list[tuple[str, str, str, MembersOf, int | None]] = [
        ("generic", "Generic backbone (Mixed)", "baseline",
         lambda ds: [GENERIC_MEMBERS] * len(ds), backbone),
        ("adapter-true", f"{name}, true label", "adapters",
         lambda ds: true_label(ds, served), module),
        ("adapter-predicted", f"{name}, classifier's label", "adapters",
         lambda ds: predicted_label(ds, router), module),
        ("auto", "Automatic routing (as served)", "routing",
         lambda ds: routed(ds, router, "auto"), module),
        ("adapter-random", f"{name}, random wrong label", "robustness",
         lambda ds: wrong_label(ds, served, seed=seed), module),
        ("ensemble-soft", "Soft ensemble (classifier-weighted)", "ensembles",
         lambda ds: routed(ds, router, "soft"), _all_modules(ctx)),
        ("ensemble-uniform", "Uniform ensemble (all modules + backbone)", "ensembles",
         lambda ds: [uniform] * len(ds), _all_modules(ctx)),
    ]
    needs_classifier = {"adapter-predicted", "auto", "ensemble-soft"}
    for key, label, group, members_of, parameters in plan:
        if key in needs_classifier and router.classifier is None:
            ctx.notes.append(f"{key}: skipped (no classifier in the store)")
            continue
        if key != "generic" and not served:
            ctx.notes.append(f"{key}: skipped (no served domain modules)")
            continue
        print(f"[known domains] {label}", flush=True)
        chosen = [ds for ds in sets if ds.name in served] if key == "adapter-true" else sets
        rows[key] = run_system(ctx, key, label, group, members_of, chosen,
                               parameters=parameters)
    rows |= mixing_row(ctx, sets, group="routing")
    if ctx.models.mixing is None:
        ctx.notes.append("no word-level mixing module (family mixing) in the store or the "
                         "families store: the mixing rows are skipped")
    unserved = sorted(ds.name for ds in sets if ds.name not in served)
    if unserved and served:
        ctx.notes.append(f"no served module for {', '.join(unserved)}: the true-label row "
                         "leaves those cells empty and the targets that need them are not "
                         "evaluated")
    if ctx.options.learnable_known and served:
        rows["ensemble-learnable"] = learnable_rows(ctx, sets, dev_of=_domain_dev(ctx))
    return rows


def mixing_row(ctx: Context, sets: Sequence[EvalSet], *,
               group: str) -> dict[str, dict[str, Any]]:
    """`{"mixing": row}`: every sentence of `sets` through the word-level mixture, which
    weighs its domains per token and needs no label; `{}` without a mixture."""
    info = ctx.models.mixing
    if info is None:
        return {}
    members: Members = (Member(info.module_id),)
    print(f"[{group}] {MIXING_LABEL}: {info.name} v{info.version}", flush=True)
    return {MIXING_KEY: run_system(ctx, MIXING_KEY, MIXING_LABEL, group,
                                   lambda ds: [members] * len(ds), sets,
                                   parameters=info.parameters)}


def family_rows(ctx: Context) -> dict[str, dict[str, Any]]:
    """True-label and random-wrong-label rows of every other module family."""
    rows: dict[str, dict[str, Any]] = {}
    seed = ctx.options.seed
    for family, modules in sorted(ctx.models.families.items()):
        sets = [ds for ds in ctx.known if ds.name in modules]
        missing = sorted(ds.name for ds in ctx.known if ds.name not in modules)
        if missing:
            ctx.notes.append(f"family {family}: no module for {', '.join(missing)} "
                             "(those cells are empty; its average covers fewer domains)")
        size = _module_size(modules)
        print(f"[families] {family}", flush=True)
        rows[f"{family}-true"] = run_system(
            ctx, f"{family}-true", f"{family}, true label", "families",
            partial(true_label, modules=modules), sets, parameters=size)
        rows[f"{family}-random"] = run_system(
            ctx, f"{family}-random", f"{family}, random wrong label", "robustness",
            partial(wrong_label, modules=modules, seed=seed), sets, parameters=size)
    if not ctx.models.families:
        ctx.notes.append("no other module family (highway, gated, ldr, sf, pa) in the store: "
                         "family rows skipped; publish them or pass --families-store DIR")
    return rows


def finetuning(ctx: Context, known: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Fine-tune the whole backbone per domain; evaluate it on every known domain."""
    settings = ctx.options.finetune
    rows: dict[str, dict[str, Any]] = {}
    runs: dict[str, Any] = {}
    names = [ds.name for ds in ctx.known]
    for domain in ctx.options.finetune_domains:
        if domain not in names:
            ctx.notes.append(f"fine-tuning {domain}: skipped (not a known domain here)")
            continue
        print(f"[fine-tuning] {domain}: {settings.minutes:g} min budget", flush=True)
        try:
            tuned = finetune(ctx.models.backbone_files,
                             domain_train_pairs(ctx.options.data, domain,
                                                ctx.options.direction), domain=domain,
                             fingerprint=ctx.models.backbone.backbone_fingerprint,
                             settings=settings, run_root=ctx.options.run_dir / "finetune")
        except ValueError as error:
            ctx.notes.append(f"fine-tuning {domain}: skipped ({error})")
            continue
        decoder = Decoder(tuned.engine, label=tuned.label, settings=ctx.decoder.settings,
                          cache_dir=ctx.decoder.cache_dir, fresh=ctx.decoder.fresh)
        rows[f"finetune-{domain}"] = run_system(
            ctx, f"finetune-{domain}", f"Full fine-tuning on {domain}", "fine-tuning",
            lambda ds: [GENERIC_MEMBERS] * len(ds), ctx.known,
            parameters=tuned.info["parameters_trained"], decoder=decoder)
        runs[domain] = tuned.info
    return {"rows": rows, "runs": runs, "summary": forgetting(rows, known, names)}


def _bleu(row: Mapping[str, Any] | None, name: str) -> float | None:
    if row is None or name not in row["scores"]:
        return None
    return float(row["scores"][name]["bleu"])


def forgetting(rows: Mapping[str, dict[str, Any]], known: Mapping[str, dict[str, Any]],
               names: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """In-domain BLEU of each fine-tuned model (with the adapter and the generic backbone
    on the same domain) and its mean BLEU change vs generic on the other domains."""
    out: dict[str, dict[str, float | None]] = {}
    generic, adapter = known.get("generic"), known.get("adapter-true")
    for key, row in rows.items():
        domain = key.removeprefix("finetune-")
        deltas: list[float] = []
        for name in names:
            tuned, plain = _bleu(row, name), _bleu(generic, name)
            if name != domain and tuned is not None and plain is not None:
                deltas.append(tuned - plain)
        in_domain, base = _bleu(row, domain), _bleu(generic, domain)
        if in_domain is None or base is None:
            continue
        out[domain] = {"in_domain": in_domain, "generic": base,
                       "adapter": _bleu(adapter, domain),
                       "forgetting": round(sum(deltas) / len(deltas), 2) if deltas else None}
    return out


def _domain_dev(ctx: Context) -> Callable[[str], EvalSet]:
    return lambda name: domain_set(ctx.options.data, name, split="dev",
                                   limit=ctx.options.dev_lines,
                                   direction=ctx.options.direction)


def _genre_dev(ctx: Context) -> Callable[[str], EvalSet]:
    return lambda name: genre_dev_slice(ctx.options.data, name,
                                        lines=ctx.options.dev_lines,
                                        direction=ctx.options.direction)


def _weights_key(weights: Weights) -> str:
    text = ",".join(f"{k}={v:.6f}" for k, v in sorted(weights.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def tune_weights(ctx: Context, dev: EvalSet) -> dict[str, Any]:
    """Coordinate ascent on dev BLEU (greedy decoding), starting from the mean soft
    weights on the dev slice (or uniform without a classifier)."""
    router = ctx.router
    if router.classifier is not None:
        start = mean_soft_weights(dev, router, top_k=router.settings.top_k)
    else:
        start = {d: 1.0 for d in router.served} | {GENERIC: 1.0}

    def dev_bleu(weights: Weights) -> float:
        members = router.members(router.fixed(weights))
        decoded = ctx.tuner.run(f"dev-{_weights_key(weights)}", dev, [members] * len(dev))
        return score(decoded.hypotheses, dev.references).bleu

    started = time.perf_counter()
    search = coordinate_ascent(start, dev_bleu, rounds=ctx.options.learnable_rounds)
    return {"start": start, "weights": search.weights, "dev_bleu": round(search.score, 2),
            "evaluations": len(search.trace), "trace": search.trace,
            "dev_sentences": len(dev), "dev_split": dev.split,
            "seconds": round(time.perf_counter() - started, 1)}


def learnable_rows(ctx: Context, sets: Sequence[EvalSet],
                   dev_of: Callable[[str], EvalSet]) -> dict[str, Any]:
    """Per set: weights tuned on its dev data, then one test decode with them."""
    searches = {}
    for dataset in sets:
        print(f"[learnable] tuning weights for {dataset.name}", flush=True)
        searches[dataset.name] = tune_weights(ctx, dev_of(dataset.name))
    router = ctx.router

    def members_of(ds: EvalSet) -> list[Members]:
        return [router.members(router.fixed(searches[ds.name]["weights"]))] * len(ds)

    row = run_system(ctx, "ensemble-learnable", "Dev-tuned ensemble (learnable)",
                     "ensembles", members_of, sets, parameters=_all_modules(ctx))
    return row | {"search": searches}


def open_domain(ctx: Context) -> dict[str, dict[str, Any]]:
    """Genres without a module: generic vs uniform / soft / dev-tuned ensembles."""
    router, sets = ctx.router, ctx.genres
    rows: dict[str, dict[str, Any]] = {}
    if not sets:
        ctx.notes.append("no open-domain genre with a test set: open-domain section skipped")
        return rows
    uniform = router.members(router.uniform()) if router.served else GENERIC_MEMBERS
    modules = _all_modules(ctx)
    plan: list[tuple[str, str, MembersOf, int | None]] = [
        ("generic", "Generic backbone", lambda ds: [GENERIC_MEMBERS] * len(ds),
         ctx.models.backbone_parameters),
        ("ensemble-uniform", "Uniform ensemble", lambda ds: [uniform] * len(ds), modules),
        ("ensemble-soft", "Soft ensemble", lambda ds: routed(ds, router, "soft"), modules),
        ("auto", "Automatic routing (as served)", lambda ds: routed(ds, router, "auto"),
         _module_size(ctx.models.served)),
    ]
    for key, label, members_of, parameters in plan:
        if key != "generic" and not router.served:
            continue
        if key in ("ensemble-soft", "auto") and router.classifier is None:
            ctx.notes.append(f"open domain {key}: skipped (no classifier)")
            continue
        print(f"[open domain] {label}", flush=True)
        group = "baseline" if key == "generic" else "open domain"
        rows[key] = run_system(ctx, key, label, group, members_of, sets,
                               parameters=parameters)
    rows |= mixing_row(ctx, sets, group="open domain")
    if router.served:
        rows["ensemble-learnable"] = learnable_rows(ctx, sets, dev_of=_genre_dev(ctx))
    return rows
