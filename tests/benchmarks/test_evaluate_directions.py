"""`make eval DIRECTION=fr-en` and `make eval-router DIRECTION=fr-en`: the
harness and the router tables evaluate the fr->en backbone of a built-in directory that
holds both directions, with its own modules and router, on the same sets read French side
first, into results files of their own (tiny models, synthetic data); en->de reads the en-de
folder, and `make eval DIRECTION=en-de` hands the harness its direction."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks.quality.data import (
    domain_names,
    domain_set,
    genre_dev_slice,
    genre_names,
    genre_set,
)
from benchmarks.quality.evaluation.evaluate import main, results_stem
from benchmarks.quality.router import router
from model_store import Store
from tests.benchmarks.test_evaluate import build_data
from tests.trainer.builtin_directions import FR_EN_NAME, build_both, build_en_fr
from trainer.recipes.directions import EN_DE, FR_EN

ROOT = Path(__file__).resolve().parents[2]


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
        {"source": "fr", "target": "en", "pair": "en-fr", "router_from": None}
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


def test_en_de_reads_the_en_de_folder_and_make_eval_passes_the_direction(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    build_data(data)  # en-fr: medical, law, it, religion and genres
    for folder, english, german in (
            ("domains/medical", "take one tablet", "nehmen sie eine tablette"),
            ("extra/news", "the council met", "der rat tagte")):
        for split in ("train", "test"):
            (data / "en-de" / folder).mkdir(parents=True, exist_ok=True)
            (data / "en-de" / folder / f"{split}.en").write_text(english + "\n")
            (data / "en-de" / folder / f"{split}.de").write_text(german + "\n")

    assert domain_names(data, EN_DE) == ["medical"]
    assert genre_names(data, EN_DE) == ["news"]
    assert "law" in domain_names(data)  # en->fr still reads en-fr
    medical = domain_set(data, "medical", direction=EN_DE)
    assert (medical.sources, medical.references) == (["take one tablet"],
                                                     ["nehmen sie eine tablette"])
    assert genre_set(data, "news", direction=EN_DE).references == ["der rat tagte"]
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    lines = subprocess.run(["make", "--no-print-directory", "-n", "eval", "DIRECTION=en-de"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                           check=True).stdout
    assert "-m benchmarks.quality.evaluation.evaluate" in lines
    assert "--direction en-de" in lines
