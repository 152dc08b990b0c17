"""`make eval DIRECTION=fr-en` and `make eval-router DIRECTION=fr-en` (issue #43): the
harness and the router tables evaluate the fr->en backbone of a built-in directory that
holds both directions, with its own modules and router, on the same sets read French side
first, into results files of their own (tiny models, synthetic data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.quality.data import domain_set, genre_dev_slice, genre_set
from benchmarks.quality.evaluation.evaluate import main, results_stem
from benchmarks.quality.router import router
from model_store import Store
from tests.benchmarks.test_evaluate import build_data
from tests.trainer.builtin_directions import FR_EN_NAME, build_both, build_en_fr
from trainer.recipes.directions import FR_EN


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("eval-directions")
    build_data(tmp_path / "data")
    build_both(tmp_path)
    return tmp_path


def test_the_data_readers_put_the_directions_source_first(setup: Path) -> None:
    data = setup / "data"
    forward, backward = domain_set(data, "medical"), domain_set(data, "medical", direction=FR_EN)
    assert backward.sources == forward.references and backward.references == forward.sources
    assert genre_set(data, "news", direction=FR_EN).sources[0].startswith("le patient")
    assert genre_dev_slice(data, "news", lines=2, direction=FR_EN).references == \
        genre_dev_slice(data, "news", lines=2).sources
    assert results_stem("fr-en", quick=True) == "eval-fr-en-quick"
    assert results_stem("en-fr", quick=False) == "eval"


def test_eval_of_fr_en_reads_its_backbone_modules_and_router(setup: Path) -> None:
    main(["--data", str(setup / "data"), "--quick", "--direction", "fr-en",
          "--builtin", str(setup / "builtin"), "--out", str(setup / "out"),
          "--run-dir", str(setup / "run"), "--genre-sentences", "3", "--dev-lines", "4",
          "--finetune-domains", "--threads", "1"])
    result: dict[str, Any] = json.loads((setup / "out" / "eval-fr-en-quick.json").read_text())
    assert not (setup / "out" / "eval-quick.json").exists()
    with Store.open(setup / "check", builtin_dir=setup / "builtin") as store:
        fr_en = store.load_backbone(FR_EN_NAME).manifest
        module = store.load("module", "medical", backbone=FR_EN_NAME).manifest
    meta = result["meta"]
    assert meta["direction"] == "fr-en" and meta["options"]["direction"] == \
        {"source": "fr", "target": "en", "pair": "en-fr"}
    assert meta["backbone"]["fingerprint"] == fr_en.backbone_fingerprint
    assert meta["classifier"] == "router v1"
    assert result["parameters"]["served"]["medical"]["artifact"] == f"medical v{module.version}"
    floor = next(t for t in result["targets"] if t["name"] == "backbone-floor")
    assert floor["description"].startswith("generic backbone >= 22 BLEU")
    assert (setup / "out" / "eval-fr-en-quick.md").is_file()


def test_the_router_tables_of_fr_en_have_their_own_files(setup: Path) -> None:
    router.main(["--data", str(setup / "data"), "--direction", "fr-en",
                 "--builtin", str(setup / "builtin"), "--out", str(setup / "router-out"),
                 "--sentences", "3", "--domain-sentences", "2", "--dev-lines", "3",
                 "--policies", "backbone below 0.5", "--cache-dir", str(setup / "cache")])
    results = json.loads((setup / "router-out" / "router-fr-en.json").read_text())
    assert results["meta"]["backbone"] == f"{FR_EN_NAME} v1"
    assert results["meta"]["direction"] == "fr-en"
    assert set(results["classifier"]["test"]["accuracy"]) == {"it", "law", "medical",
                                                               "religion"}
    assert (setup / "router-out" / "router-fr-en.md").is_file()


def test_a_direction_whose_backbone_is_not_published_is_refused(tmp_path: Path) -> None:
    build_data(tmp_path / "data")
    build_en_fr(tmp_path / "builtin", tmp_path / "factory")
    for run in (lambda: main(["--data", str(tmp_path / "data"), "--quick", "--direction",
                              "fr-en", "--builtin", str(tmp_path / "builtin"),
                              "--out", str(tmp_path / "out")]),
                lambda: router.main(["--data", str(tmp_path / "data"), "--direction", "fr-en",
                                     "--builtin", str(tmp_path / "builtin"),
                                     "--out", str(tmp_path / "out")])):
        with pytest.raises(SystemExit, match="no backbone default-fr-en to evaluate fr-en"):
            run()
    assert not (tmp_path / "out").exists()  # nothing half-written
