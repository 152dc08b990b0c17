"""The quality estimator refit when a domain's module is published (trainer/quality/refit.py):
a real tiny store, real decoding, the estimator file read back as the server reads it."""

from __future__ import annotations

from pathlib import Path

from model_store import Store
from server.engine.artifacts import build_engine
from server.quality.estimator import Estimator
from server.quality.estimators import EstimatorBook, estimator_path
from server.quality.features import FEATURES
from tests.tiny import ENGLISH, FRENCH, random_module, tiny_config
from tests.trainer.sidecar_store import BACKBONE, build_store
from trainer.quality.refit import (
    as_rows,
    decode_and_measure,
    fit_rows,
    quality_root,
    refit_for_module,
)


def test_refit_replaces_the_domains_rows(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", router=False)
    with Store.open(root, builtin_dir=None) as store:
        backbone = store.load_backbone(BACKBONE)
        manifest = backbone.manifest
        quality = quality_root(store)
        assert quality is not None
        # nothing to refit before an estimator with rows exists
        config, params = random_module(tiny_config(), "adapter", seed=9, bottleneck=4)
        pairs = list(zip(ENGLISH, FRENCH, strict=True))
        assert refit_for_module(store, manifest, domain="religion", module_config=config,
                                params=params, dev_pairs=pairs) is None
        engine = build_engine(backbone.files)
        decoded = decode_and_measure(engine, ENGLISH, FRENCH, None)
        assert set(decoded.rows[0]) == set(FEATURES) and len(decoded.chrf) == len(ENGLISH)
        rows = as_rows("generic", decoded) + as_rows("religion", decoded)[:3]
        first = fit_rows(rows, ridge=3.0, fingerprint=manifest.backbone_fingerprint)
        quality.mkdir(parents=True, exist_ok=True)
        estimator_path(quality, BACKBONE).write_text(first.to_json())

        path = refit_for_module(store, manifest, domain="religion", module_config=config,
                                params=params, dev_pairs=pairs)
    assert path == estimator_path(quality, BACKBONE)
    refit = Estimator.from_json(path.read_bytes())
    assert refit.fitted_on["sets"] == {"generic": len(ENGLISH), "religion": len(ENGLISH)}
    assert refit.fitted_on["refit_for"] == "religion" and refit.fitted_on["ridge"] == 3.0
    assert refit.backbone_fingerprint == manifest.backbone_fingerprint
    assert EstimatorBook([quality]).get(manifest) == refit
    assert [p.name for p in quality.iterdir()] == [f"{BACKBONE}.json.xz"]  # no temporary left
