"""Fitting a backbone's quality estimator, and refitting it when a domain is published.

The estimator file keeps the rows it was fitted on (`fitted_on.rows`: set name, features,
sentence chrF). When the sidecar publishes a domain's module, the module's dev pairs are
translated as the server would (beam 4, the module), their rows replace that set's rows
and the estimator is fitted again, with the same ridge penalty and the same rule for the
threshold; the result goes to the store root's `quality/<backbone>.json.xz`, which the
server prefers to the shipped one and rereads when it changes. `make bench-quality` fits
the built-in one from scratch on every dev set
(benchmarks/quality/estimation/quality_estimation.py).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu

from model_store import Manifest, Store
from model_store.storage import LocalStorage
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families import Params
from server.quality.estimator import Estimator, fit
from server.quality.estimators import (
    BUILTIN_QUALITY_DIR,
    QUALITY_DIR,
    EstimatorBook,
    write_estimator,
)
from server.quality.features import DECODE_FEATURES, Candidate, features
from server.quality.signals import score

BEAM = 4
BATCH = 32
FLAG_SHARE = 0.2  # the default threshold flags this share of the dev sentences
DEFAULT_RIDGE = 30.0
log = logging.getLogger(__name__)


@dataclass
class Decoded:
    """Sentences translated as the server does, with their features and chrF."""

    jobs: list[SentenceJob]
    hypotheses: list[list[Hypothesis]]
    outputs: list[str]
    rows: list[dict[str, float]] = field(default_factory=list)
    chrf: list[float] = field(default_factory=list)


def decode(engine: Engine, jobs: Sequence[SentenceJob], options: SearchOptions
           ) -> list[list[Hypothesis]]:
    """Batches of similar lengths, like the scheduler forms them; input order kept."""
    order = sorted(range(len(jobs)), key=lambda i: len(jobs[i].source_ids))
    out: list[list[Hypothesis]] = [[] for _ in jobs]
    for start in range(0, len(order), BATCH):
        chunk = order[start:start + BATCH]
        for index, found in zip(chunk, engine.translate([jobs[i] for i in chunk], options),
                                strict=True):
            out[index] = found
    return out


def decode_and_measure(engine: Engine, sources: Sequence[str], references: Sequence[str],
                       module_id: str | None) -> Decoded:
    ids = engine.source_tokenizer.encode(list(sources))
    jobs = [SentenceJob(i, (Member(module_id),), engine.max_length(len(i), limit=256))
            for i in ids]
    hypotheses = decode(engine, jobs, SearchOptions(beam_size=BEAM, n_best=BEAM))
    text = engine.target_tokenizer.decode
    decoded = Decoded(jobs, hypotheses, [text(h[0].tokens) for h in hypotheses])
    signals = []
    for start in range(0, len(jobs), BATCH):
        part = range(start, min(len(jobs), start + BATCH))
        signals += score(engine, [jobs[i] for i in part], [hypotheses[i][0].tokens
                                                           for i in part])
    for index, (job, own, signal) in enumerate(zip(jobs, hypotheses, signals, strict=True)):
        output = decoded.outputs[index]
        candidate = Candidate(sources[index], output, job.source_ids, own[0].tokens,
                              [h.tokens for h in own[1:]], [h.score for h in own],
                              source_eos=engine.config.source_eos,
                              alternative_outputs=[text(h.tokens) for h in own[1:]])
        decoded.rows.append(features(candidate, signal))
        decoded.chrf.append(sacrebleu.sentence_chrf(output, [references[index]]).score)
    return decoded


def as_rows(name: str, decoded: Decoded) -> list[dict[str, Any]]:
    """The rows an estimator file keeps (NaN, a missing beam feature, as null)."""
    return [{"set": name, "chrf": round(chrf, 2),
             "features": {k: (round(v, 4) if math.isfinite(v) else None)
                          for k, v in row.items()}}
            for row, chrf in zip(decoded.rows, decoded.chrf, strict=True)]


def fit_rows(rows: Sequence[Mapping[str, Any]], *, ridge: float, fingerprint: str,
             extra: Mapping[str, Any] | None = None,
             names: Sequence[str] = DECODE_FEATURES) -> Estimator:
    """The estimator of these rows; its threshold flags FLAG_SHARE of them. The rows keep
    every feature; the estimator reads the search's own (DECODE_FEATURES: the server then
    runs no scoring pass for most sentences, server/quality/review.py)."""
    found = [{k: (math.nan if v is None else float(v)) for k, v in r["features"].items()}
             for r in rows]
    model = fit(found, [float(r["chrf"]) / 100 for r in rows], ridge=ridge, names=names)
    predicted = [model.predict(x) for x in found]
    sets: dict[str, int] = {}
    for r in rows:
        sets[r["set"]] = sets.get(r["set"], 0) + 1
    summary = {"sets": sets, "ridge": ridge, "target": "sentence chrF / 100 (sacrebleu)",
               "flag_share_dev": FLAG_SHARE, **(extra or {}), "rows": list(rows)}
    return replace(model, threshold=round(float(np.quantile(predicted, FLAG_SHARE)), 4),
                   backbone_fingerprint=fingerprint, fitted_on=summary)


def quality_root(store: Store) -> Path | None:
    """Where refits go: the store root's quality/ (a local store only)."""
    if not isinstance(store.storage, LocalStorage):
        return None
    return store.storage.path(QUALITY_DIR)


def refit_for_module(store: Store, backbone: Manifest, *, domain: str,
                     module_config: dict[str, Any], params: Params,
                     dev_pairs: Sequence[tuple[str, str]]) -> Path | None:
    """Refit the backbone's estimator with `domain`'s dev rows from this module; None
    when there is nothing to refit (no estimator with rows, no pairs, no local store)."""
    root = quality_root(store)
    if root is None or not dev_pairs:
        return None
    current = EstimatorBook([root, BUILTIN_QUALITY_DIR], recheck_s=0.0).get(backbone)
    rows = current.fitted_on.get("rows")
    if not isinstance(rows, list) or not rows:
        log.info("no quality estimator with training rows for %s: nothing to refit",
                 backbone.label)
        return None
    loaded = store.load("backbone", backbone.name, backbone.version)
    engine = build_engine(loaded.files, EngineOptions())
    engine.register_module(f"{domain}@refit", module_config, params)
    decoded = decode_and_measure(engine, [s for s, _ in dev_pairs], [t for _, t in dev_pairs],
                                 f"{domain}@refit")
    kept = [r for r in rows if r.get("set") != domain] + as_rows(domain, decoded)
    ridge = float(current.fitted_on.get("ridge", DEFAULT_RIDGE))
    refit = fit_rows(kept, ridge=ridge, fingerprint=backbone.backbone_fingerprint,
                     extra={"refit_for": domain})
    path = write_estimator(root, backbone.name, refit)
    log.info("quality estimator of %s refit with %d %s dev sentences: %s", backbone.label,
             len(dev_pairs), domain, path)
    return path
