"""Fitting a backbone's quality estimator from scratch (issue #44): each domain's dev set
translated by its served module, dev slices of the open-domain genres (the last lines of
their train split, never a test set) by the backbone alone; the ridge penalty chosen by
leave-one-set-out Spearman within the held-out set (a post-editor ranks the sentences of
one document, so knowing the set must not be what scores).

`make bench-quality` fits the built-in estimator this way before measuring it on the test
sets; the default recipe's publish stage (trainer/recipes/default_en_fr.py) refits it for
the backbone and modules it publishes, since an estimator holds its backbone's fingerprint
and each domain's rows come from the module that translated them. A domain module the
sidecar publishes later is folded in by trainer/quality/refit.py.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model_store import Store, StoreError
from server.engine.artifacts import build_engine, module_params
from server.engine.engine import Engine, EngineOptions
from server.quality.estimator import Estimator, fit
from server.quality.estimators import QUALITY_DIR, write_estimator
from server.quality.features import DECODE_FEATURES
from trainer.quality.refit import Decoded, as_rows, decode_and_measure, fit_rows
from trainer.training.data import Corpus

RIDGES = (0.3, 3.0, 30.0, 300.0)
GENRES = ("news", "captions", "conversation")
DEV_LINES = 0  # first sentences of each domain's dev set (0: all, 150 in the shared data)
GENRE_DEV_LINES = 150  # last sentences of each genre's train set
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DevSet:
    name: str  # a domain or a genre
    pairs: list[tuple[str, str]]
    module_id: str | None  # the module that translates it (None: the backbone alone)


def dev_sets(data_dir: Path, modules: Mapping[str, str | None], *, lines: int = DEV_LINES,
             genre_lines: int = GENRE_DEV_LINES, source: str = "en",
             target: str = "fr", pair: str = "en-fr") -> list[DevSet]:
    """The dev set of every domain in `modules` (domain -> module id) that has one under
    `<data>/<pair>/domains/`, then the genres' dev slices that exist (`lines` <= 0: all);
    `source`/`target`: which side of the pairs the backbone translates from."""
    root = data_dir / pair
    found: list[DevSet] = []
    for domain, module_id in sorted(modules.items()):
        folder = root / "domains" / domain
        if (folder / f"dev.{source}").is_file():
            pairs = Corpus(domain, folder / f"dev.{source}", folder / f"dev.{target}").read()
            found.append(DevSet(domain, pairs[:lines] if lines > 0 else pairs, module_id))
    for genre in GENRES:
        folder = root / "extra" / genre
        if (folder / f"train.{source}").is_file() and genre_lines > 0:
            pairs = Corpus(genre, folder / f"train.{source}", folder / f"train.{target}").read()
            found.append(DevSet(genre, pairs[-genre_lines:], None))
    return found


def decode_sets(engine: Engine, sets: Sequence[DevSet]) -> list[tuple[str, Decoded]]:
    return [(s.name, decode_and_measure(engine, [a for a, _ in s.pairs],
                                        [b for _, b in s.pairs], s.module_id)) for s in sets]


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of average ranks (ties share their mean rank);
    0 when one side is constant (it ranks nothing)."""
    left, right = _ranks(a), _ranks(b)
    if left.std() == 0 or right.std() == 0:
        return 0.0
    return float(np.corrcoef(left, right)[0, 1])


def _ranks(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    order = array.argsort(kind="stable")
    ranks = np.empty(len(array))
    ranks[order] = np.arange(len(array), dtype=float)
    for value in np.unique(array):
        tied = array == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def choose_ridge(sets: Sequence[tuple[str, Decoded]],
                 names: Sequence[str] = DECODE_FEATURES) -> tuple[float, dict[str, float]]:
    """The penalty whose leave-one-set-out fits rank best within the held-out sets."""
    scores: dict[str, float] = {}
    for ridge in RIDGES:
        within = []
        for index, (_, held) in enumerate(sets):
            rest = [d for i, (_, d) in enumerate(sets) if i != index]
            model = fit([x for d in rest for x in d.rows], [c / 100 for d in rest
                                                            for c in d.chrf],
                        ridge=ridge, names=names)
            within.append(spearman([model.predict(x) for x in held.rows], held.chrf))
        scores[str(ridge)] = float(np.mean(within))
    best = max(RIDGES, key=lambda r: scores[str(r)])
    return best, scores


def fit_sets(sets: Sequence[tuple[str, Decoded]], fingerprint: str) -> Estimator:
    """The estimator of these decoded dev sets, its penalty chosen by `choose_ridge`."""
    if len(sets) < 2:
        raise ValueError(f"need at least 2 dev sets to choose the penalty, got {len(sets)}")
    ridge, cv = choose_ridge(sets)
    rows = [row for name, decoded in sets for row in as_rows(name, decoded)]
    return fit_rows(rows, ridge=ridge, fingerprint=fingerprint,
                    extra={"cv_spearman_within": cv})


def refit_builtin(builtin_dir: Path, data_dir: Path, *, lines: int = DEV_LINES,
                  genre_lines: int = GENRE_DEV_LINES, backbone: str | None = None,
                  source: str = "en", target: str = "fr", pair: str = "en-fr") -> Path:
    """Fit the estimator of the built-in directory's backbone `backbone` (default: its only
    one) with that backbone's active modules, on the dev sets of its direction (`source`
    -> `target`, read from `<data>/<pair>/`), and write it to
    `<builtin_dir>/quality/<backbone>.json.xz` (the one the package ships)."""
    with tempfile.TemporaryDirectory(prefix="nmt-quality-fit-") as scratch, \
            Store.open(Path(scratch), builtin_dir=builtin_dir) as store:
        loaded = store.load_backbone(backbone)
        scope = loaded.manifest.name
        fingerprint = loaded.manifest.backbone_fingerprint
        engine = build_engine(loaded.files, EngineOptions())
        modules: dict[str, str | None] = {}
        for domain, version in sorted(store.active_domains(scope).items()):
            try:
                module = store.load("module", domain, version, expected_fingerprint=fingerprint,
                                    backbone=scope)
                module_id = f"{domain}@{version}"
                engine.register_module(module_id, dict(module.manifest.config),
                                       module_params(module.files))
            except (StoreError, ValueError) as error:
                log.warning("quality fit: module %s v%d left out: %s", domain, version, error)
                continue
            modules[domain] = module_id
        sets = dev_sets(data_dir, modules, lines=lines, genre_lines=genre_lines, source=source,
                        target=target, pair=pair)
        estimator = fit_sets(decode_sets(engine, sets), fingerprint)
        path = write_estimator(builtin_dir / QUALITY_DIR, loaded.manifest.name, estimator)
    log.info("quality estimator of %s fitted on %s: %s", loaded.manifest.label,
             ", ".join(f"{s.name} ({len(s.pairs)})" for s in sets), path)
    return path
