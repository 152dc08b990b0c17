"""Multi-domain evaluation harness: one command reproduces the results table.

    nmt-eval --data ../shared/data [--quick] [--direction fr-en]
    (make eval [QUICK=1] [DIRECTION=fr-en]; or python -m benchmarks.quality.evaluation.evaluate)

Writes `benchmarks/results/eval.{json,md}` (`eval-quick.*` with --quick; another direction
than en-fr: `eval-fr-en.*`, `eval-fr-en-quick.*`, its backbone `default-fr-en` and the same
data read French side first): per known domain,
BLEU and chrF (sacrebleu) of the generic backbone ("Mixed"), residual adapters with the
true / the classifier's / a random wrong label, automatic routing as served, other module
families when the store has them, the uniform and soft (classifier-weighted) ensembles,
full fine-tuning on a few domains (upper bound and forgetting); on open-domain genres
(no module), the generic backbone vs uniform / soft / dev-tuned ("learnable") ensembles;
the classifier's accuracy and confusion matrix; parameter counts; how much the backbone
relies on the source (teacher-forced NLL with the own vs another sentence's source); the
targets.

Modes (any value can be overridden by its option):
- full: every test sentence of the 7 domains (200 each), the first 500 of each genre's
  test set (news has 3,003 lines: all of them would double the open-domain cost;
  --genre-sentences 0 takes all), beam 4, 4 minutes of fine-tuning per domain, 200-line
  dev slices;
- quick: the first 50 test sentences per domain and genre, greedy, 1 minute of
  fine-tuning, 30-line dev slices (a smoke run of every section, not the reported table).

Cost on this 2-core CPU machine with the default model (measured per-token decoding costs
x the reference token counts): the full run takes about 1 to 1.5 hours when nothing else
runs, half of it in the 8-member uniform ensembles and the dev-tuned weight search; the
quick run about 10 minutes. Ensembles cost about one backbone pass per member.

Translations are cached per (system, set) under the run dir (default runs/eval, one
subdirectory per mode), fine-tuned models too: an interrupted run resumes and a re-run
only decodes what changed; --fresh ignores the translation cache.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import torch

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.quality.data import domain_names, domain_set, genre_names, genre_set
from benchmarks.quality.decode import Decoder, DecodeSettings
from benchmarks.quality.evaluation.calibration import calibration_report
from benchmarks.quality.evaluation.finetune import FinetuneSettings
from benchmarks.quality.evaluation.learnable import DEFAULT_GRID
from benchmarks.quality.evaluation.reliance import source_reliance
from benchmarks.quality.evaluation.report import render
from benchmarks.quality.evaluation.sections import (
    Context,
    RunOptions,
    family_rows,
    finetuning,
    known_domains,
    open_domain,
)
from benchmarks.quality.evaluation.significance import significance
from benchmarks.quality.evaluation.systems import Router, classifier_report, routing_report
from benchmarks.quality.evaluation.targets import check_targets, summary
from benchmarks.quality.models import Models, load_models, parameter_summary
from benchmarks.report_files import write_report
from model_store import BUILTIN_DIR, NotFoundError, Store
from server.core.settings import RoutingSettings
from trainer.recipes.directions import DIRECTIONS, EN_FR, Direction

T = TypeVar("T")
# issue #43: the fr->en backbone averages >= 22 BLEU over the 7 domains' test sets at beam 4
BACKBONE_FLOORS = {"fr-en": 22.0}
MODES: dict[str, dict[str, Any]] = {
    "full": {"sentences": 0, "genre_sentences": 500, "beam": 4, "finetune_minutes": 4.0,
             "dev_lines": 200},
    "quick": {"sentences": 50, "genre_sentences": 50, "beam": 1, "finetune_minutes": 1.0,
              "dev_lines": 30},
}

METHOD = [
    "each test line is one sentence job (no sentence splitting; the server would split "
    "multi-sentence texts); the first N lines of each test file are used",
    "identical jobs (same source, same members) are decoded once and shared between "
    "systems: e.g. the classifier-label row only decodes the sentences routed elsewhere",
    "routing reuses server.routing.RoutingPolicy with the default RoutingSettings; the soft "
    "ensemble row forces the policy's ensemble branch for every sentence; the uniform row "
    "is an explicit mixture of every served domain and the backbone",
    "random wrong label: per sentence, a seeded random module of another domain",
    "dev-tuned weights: greedy decoding of a dev slice (the last lines of each genre's "
    "train split, never its test set), coordinate ascent over the shares "
    f"{{{', '.join(f'{share:g}' for share in DEFAULT_GRID)}}} of the backbone and the top "
    "soft-ensemble domains, starting from "
    "the mean soft weights; note that the default backbone's recipe trains on every extra "
    "genre's train split, so these genres (and dev slices) are not unseen by the backbone, "
    "only by the modules",
    f"full fine-tuning: every backbone parameter, trainer.training.run.train, lr "
    f"{FinetuneSettings().lr:g} ({FinetuneSettings().warmup_steps} warm-up steps, inverse "
    "square root), a wall-clock budget per domain (steps reached depend on "
    "the machine and are recorded)",
    "quick mode is a smoke run of every section on 50 sentences with greedy decoding; its "
    "numbers are not comparable with the full run's",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nmt-eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--data", type=Path, default=DEFAULT_DATA, help="the shared data dir")
    add("--quick", action="store_true", help="short version (see above)")
    add("--store", type=Path, default=None,
        help="model store root (default: a scratch registry over the built-in artifacts)")
    add("--no-builtin", action="store_true", help="do not layer the built-in artifacts")
    add("--builtin", type=Path, default=BUILTIN_DIR,
        help="the built-in artifacts' directory (default: the package's; another one "
             "evaluates a publication before it ships, e.g. the recipe's --out)")
    add("--direction", choices=sorted(DIRECTIONS), default=EN_FR.name,
        help="which side of the en-fr test sets is the source (default en-fr)")
    add("--backbone", default=None,
        help="backbone name (default: the direction's built-in one, default-<direction>, "
             "when the store has it, else the store's only one)")
    add("--families-store", type=Path, default=None,
        help="a store with modules of other families (highway, gated, ldr) for the backbone")
    add("--out", type=Path, default=RESULTS_DIR, help="where eval(.quick).{json,md} go")
    add("--run-dir", type=Path, default=None,
        help="cache dir (default runs/eval; the mode's caches go to its quick/ or full/)")
    add("--fresh", action="store_true", help="ignore cached translations")
    add("--sentences", type=int, default=None, help="test sentences per domain (0: all)")
    add("--genre-sentences", type=int, default=None, help="per open-domain genre (0: all)")
    add("--beam", type=int, default=None, help="beam size (1: greedy)")
    add("--batch-size", type=int, default=64, help="sentences per engine call")
    add("--dev-lines", type=int, default=None, help="dev slice for weight tuning")
    add("--learnable-rounds", type=int, default=1, help="coordinate-ascent rounds")
    add("--learnable-known", action="store_true",
        help="also tune ensemble weights per known domain (on its dev split)")
    add("--finetune-domains", nargs="*", default=["medical", "law"])
    add("--finetune-minutes", type=float, default=None, help="budget per fine-tuned domain")
    add("--finetune-steps", type=int, default=1_000_000, help="step cap per fine-tuning")
    add("--seed", type=int, default=1, help="seed of the random wrong labels")
    add("--threads", type=int, default=2, help="torch threads")
    return parser.parse_args(argv)


def _mode_value(args: argparse.Namespace, name: str) -> Any:
    given = getattr(args, name)
    return given if given is not None else MODES["quick" if args.quick else "full"][name]


@contextmanager
def open_stores(args: argparse.Namespace) -> Iterator[tuple[Store, Store | None]]:
    """The evaluated store (by default a scratch registry layering the built-ins, so no
    serving store is touched) and the optional families store."""
    with ExitStack() as stack:
        root = args.store
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nmt-eval-")))
        builtin = None if args.no_builtin else args.builtin
        store = stack.enter_context(Store.open(root, builtin_dir=builtin))
        families = None
        if args.families_store is not None:
            families = stack.enter_context(Store.open(args.families_store, builtin_dir=None))
        yield store, families


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "load_average": round(load[0], 2)}


def build_context(args: argparse.Namespace, models: Models, run_dir: Path) -> Context:
    direction = DIRECTIONS[args.direction]
    domains = domain_names(args.data, direction)
    limit, genre_limit = _mode_value(args, "sentences"), _mode_value(args, "genre_sentences")
    known = [domain_set(args.data, d, limit=limit, direction=direction) for d in domains]
    genres = [genre_set(args.data, g, limit=genre_limit, direction=direction)
              for g in genre_names(args.data, direction)]
    router = Router(models.served, models.classifier, settings=RoutingSettings())
    settings = DecodeSettings(beam_size=_mode_value(args, "beam"), batch_size=args.batch_size)
    cache = run_dir / "translations"
    decoder = Decoder(models.engine, label=models.backbone.backbone_fingerprint[:16],
                      settings=settings, cache_dir=cache, fresh=args.fresh)
    tuner = Decoder(models.engine, label=models.backbone.backbone_fingerprint[:16],
                    settings=DecodeSettings(beam_size=1, batch_size=args.batch_size),
                    cache_dir=cache, fresh=args.fresh)
    finetune = FinetuneSettings(minutes=_mode_value(args, "finetune_minutes"),
                                max_steps=args.finetune_steps)
    options = RunOptions(data=args.data, run_dir=run_dir, seed=args.seed,
                         dev_lines=_mode_value(args, "dev_lines"), finetune=finetune,
                         finetune_domains=tuple(args.finetune_domains),
                         learnable_rounds=args.learnable_rounds,
                         learnable_known=args.learnable_known, direction=direction)
    return Context(models, router, decoder, tuner, known, genres, options, list(models.notes))


def _meta(args: argparse.Namespace, ctx: Context, started: float) -> dict[str, Any]:
    models, settings = ctx.models, ctx.decoder.settings
    routing = RoutingSettings()
    return {
        "mode": "quick" if args.quick else "full", "data": str(args.data),
        "direction": args.direction,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "domains": [ds.name for ds in ctx.known], "genres": [ds.name for ds in ctx.genres],
        "sentences_per_domain": {ds.name: len(ds) for ds in ctx.known},
        "sentences_per_genre": {ds.name: len(ds) for ds in ctx.genres},
        "backbone": {"name": models.backbone.name, "version": models.backbone.version,
                     "fingerprint": models.backbone.backbone_fingerprint},
        "served_family": models.served_family,
        "classifier": (f"router v{models.classifier.version}" if models.classifier else None),
        "decoding": asdict(settings),
        "routing": (f"threshold {routing.threshold}, below it the plain backbone"
                    if routing.fallback == "generic" else
                    f"threshold {routing.threshold}, {routing.ensemble} ensemble of the top "
                    f"{routing.top_k} domains + backbone (floor {routing.backbone_floor}) "
                    "below it"),
        "options": ctx.options.as_dict(),
        "machine": machine(), "total_seconds": round(time.perf_counter() - started, 1),
        "method": METHOD,
    }


def bleu_table(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {key: {name: float(s["bleu"]) for name, s in row["scores"].items()}
            for key, row in rows.items()}


def _classifier_section(ctx: Context) -> dict[str, Any]:
    if ctx.router.classifier is None:
        return {"routing": {}}
    return {"routing": routing_report(ctx.router, ctx.known + ctx.genres),
            "accuracy_report": classifier_report(ctx.router, ctx.known),
            "calibration": calibration_report(ctx.router.classifier, ctx.known)}


def _timed(seconds: dict[str, float], name: str, run: Callable[[], T]) -> T:
    started = time.perf_counter()
    value = run()
    seconds[name] = round(time.perf_counter() - started, 1)
    return value


def evaluate(args: argparse.Namespace, models: Models, run_dir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    ctx = build_context(args, models, run_dir)
    seconds: dict[str, float] = {}
    known = _timed(seconds, "known_domains", lambda: known_domains(ctx))
    families = _timed(seconds, "families", lambda: family_rows(ctx))
    tuned = _timed(seconds, "finetuning", lambda: finetuning(ctx, known))
    open_rows = _timed(seconds, "open_domain", lambda: open_domain(ctx))
    classifier = _timed(seconds, "classifier", lambda: _classifier_section(ctx))
    reliance = _timed(seconds, "source_reliance",
                      lambda: source_reliance(models.backbone_files, ctx.known + ctx.genres))
    domains, genres = [ds.name for ds in ctx.known], [ds.name for ds in ctx.genres]
    accuracy = classifier.get("accuracy_report", {}).get("accuracy", {})
    targets = check_targets(bleu_table(known), bleu_table(open_rows), accuracy,
                            domains=domains, genres=genres,
                            backbone_floor=BACKBONE_FLOORS.get(args.direction))
    text = summary(bleu_table(known), bleu_table(open_rows), tuned["summary"], targets,
                   domains=domains, genres=genres)
    intervals = significance(ctx.statistics, domains=domains, genres=genres)
    meta = _meta(args, ctx, started) | {"section_seconds": seconds}
    return {"meta": meta, "parameters": parameter_summary(models),
            "known_domains": known, "families": families, "finetuning": tuned,
            "open_domain": open_rows, "classifier": classifier, "source_reliance": reliance,
            "targets": [t.as_dict() for t in targets], "significance": intervals,
            "summary": text, "notes": ctx.notes}


def results_stem(direction: str, *, quick: bool) -> str:
    """eval, eval-quick; eval-fr-en, eval-fr-en-quick for another direction than en-fr."""
    stem = "eval" if direction == EN_FR.name else f"eval-{direction}"
    return f"{stem}-quick" if quick else stem


def backbone_of(store: Store, direction: Direction) -> str | None:
    """The direction's built-in backbone when the store has it; else, for en-fr, None (the
    store's only backbone: a store built for one model, whatever its name). Another
    direction's backbone must be there: any other would be scored on the wrong side."""
    name = direction.backbone_name
    if name in store.registry.list_names("backbone"):
        return name
    if direction == EN_FR:
        return None
    raise SystemExit(f"no backbone {name} to evaluate {direction.name} with: publish it "
                     "first (the recipe's --stage publish), or pass --builtin the directory "
                     "a dry run published into, or --backbone NAME")


def write_results(result: dict[str, Any], out: Path, *, quick: bool,
                  direction: str = EN_FR.name) -> tuple[Path, Path]:
    json_path, md_path = write_report(out, results_stem(direction, quick=quick), result,
                                      render(result))
    return json_path, md_path


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    direction = DIRECTIONS[args.direction]
    default_run_dir = Path("runs/eval" if direction == EN_FR else f"runs/eval-{direction.name}")
    run_dir = (args.run_dir or default_run_dir) / ("quick" if args.quick else "full")
    domains = domain_names(args.data, direction)
    with open_stores(args) as (store, families_store):
        try:
            models = load_models(store, backbone=args.backbone or backbone_of(store, direction),
                                 domains=domains, families_store=families_store)
        except NotFoundError as error:
            raise SystemExit(f"cannot evaluate: {error}. The default model's artifacts "
                             "appear in model_store/builtin/ once `make train-default` has "
                             "published them; or pass --store DIR") from error
    result = evaluate(args, models, run_dir)
    json_path, md_path = write_results(result, args.out, quick=args.quick,
                                       direction=args.direction)
    print(f"\n{result['summary']}\n\nwrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
