"""End-to-end: the evaluation harness in quick mode on a tiny store and tiny synthetic data
(same layout as ../shared/data, which is never read here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.quality.evaluation.evaluate import bleu_table, main
from benchmarks.quality.evaluation.targets import check_targets
from benchmarks.quality.models import domain_of, mixing_candidate
from model_store import Store
from server.engine.artifacts import backbone_parts, module_files
from server.engine.families import Params, get_family
from tests.tiny import random_module, tiny_backbone_files, tiny_config
from trainer.routers.classifier import ClassifierSettings, train_classifier
from trainer.routers.features import featurize

DOMAINS = ("it", "law", "medical", "religion")
GENRES = ("captions", "news")
WORDS = {
    "medical": ["the patient takes one tablet a day", "the dose must be adjusted for children",
                "do not use this medicine after the expiry date"],
    "law": ["the council adopted this regulation", "member states shall comply with this "
            "directive", "this decision is addressed to the member states"],
    "it": ["click the button to open a file", "the window shows the list of files",
           "click the window to open the list"],
    "religion": ["in the name of god the merciful", "god is merciful to the patient",
                 "in the name of god"],
    "news": ["where are you going tonight", "we will talk about science today"],
    "captions": ["i love you", "thank you very much for listening"],
}
FRENCH = "le patient prend un comprimé par jour"
FAMILY_SEEDS = {"medical": 11, "law": 12}
# Module options per family (the rest: adapters of bottleneck 4).
OPTIONS: dict[str, dict[str, Any]] = {"ldr": {"rank": 2}, "sf": {}, "pa": {},
                                      "mixing": {"domains": list(DOMAINS)}}
OVERRIDES = ("sf", "pa", "mixing")  # families that start from the backbone's projections


def _write_split(directory: Path, split: str, lines: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
    (directory / f"{split}.fr").write_text("".join(f"{FRENCH} {i}\n" for i in range(len(lines))))


def build_data(root: Path) -> Path:
    """en-fr/domains/<domain>/{train,dev,test} and en-fr/extra/<genre>/{train,test}, plus a
    genre without a test set (must be ignored)."""
    for name, lines in WORDS.items():
        kind = "domains" if name in DOMAINS else "extra"
        directory = root / "en-fr" / kind / name
        _write_split(directory, "train", [f"{line} {i}" for i in range(4) for line in lines])
        _write_split(directory, "test", [f"{line}" for line in lines] * 2)
        if kind == "domains":
            _write_split(directory, "dev", lines)
    _write_split(root / "en-fr" / "extra" / "biomedical", "train", WORDS["medical"])
    return root


def _backbone_weights() -> Params:
    return backbone_parts(tiny_backbone_files()).tensors


def _publish_module(store: Store, name: str, family: str, seed: int, fingerprint: str, *,
                    activate: bool = True) -> None:
    options = OPTIONS.get(family, {"bottleneck": 4})
    weights = _backbone_weights() if family in OVERRIDES else None
    config, params = random_module(tiny_config(), family, seed=seed,
                                   std=0.05 if weights else 0.3, weights=weights, **options)
    manifest = store.publish("module", name, module_files(params), config=config,
                             backbone_fingerprint=fingerprint)
    if activate:
        store.activate("module", name, manifest.version)


def build_store(root: Path) -> str:
    """A tiny backbone, one random adapter per domain and a fastText router trained on a
    few synthetic lines; returns the backbone fingerprint."""
    with Store.open(root, builtin_dir=None) as store:
        files = tiny_backbone_files()
        backbone = store.publish("backbone", "tiny", files,
                                 config=json.loads(files["config.json"]))
        store.activate("backbone", "tiny", backbone.version)
        fingerprint = backbone.backbone_fingerprint
        for seed, domain in enumerate(DOMAINS, start=1):
            _publish_module(store, domain, "adapter", seed, fingerprint)
        # another family in the same store, not served: a "gated" row for religion only
        _publish_module(store, "religion-gated", "gated", 21, fingerprint, activate=False)
        # the word-level mixture, served as "mixed" (as the recipe publishes it): one module
        # for every domain, evaluated without a label and never as a served domain
        _publish_module(store, "mixed", "mixing", 31, fingerprint)
        settings = ClassifierSettings(epoch=40, dim=8, bucket=2000, min_examples=1,
                                      quantize=False)
        examples = [(d, line) for d in DOMAINS for line in WORDS[d]] * 5
        data = train_classifier(featurize(examples, settings.features()), settings)
        router = store.publish("classifier", "router", {"classifier.bin": data},
                               config={"labels": list(DOMAINS), "temperature": 2.0,
                                       "features": settings.features().as_config()},
                               backbone_fingerprint=fingerprint)
        store.activate("classifier", "router", router.version)
    return fingerprint


def build_families_store(root: Path, fingerprint: str) -> None:
    """Highway and factorized "sf" modules for two domains only (the others' cells stay
    empty), a "pa" module for it (published under the plain domain name)."""
    with Store.open(root, builtin_dir=None) as store:
        for domain, seed in FAMILY_SEEDS.items():
            _publish_module(store, f"{domain}-highway", "highway", seed, fingerprint)
            _publish_module(store, f"{domain}-sf", "sf", seed + 10, fingerprint)
        _publish_module(store, "it", "pa", 41, fingerprint)


def run_harness(tmp_path: Path, *extra: str) -> dict[str, Any]:
    main(["--data", str(tmp_path / "data"), "--quick", "--store", str(tmp_path / "store"),
          "--no-builtin", "--families-store", str(tmp_path / "families"),
          "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "run"),
          "--genre-sentences", "3", "--dev-lines", "4", "--finetune-minutes", "0.2",
          "--finetune-steps", "2", "--threads", "1", *extra])
    result: dict[str, Any] = json.loads((tmp_path / "out" / "eval-quick.json").read_text())
    return result


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp_path = tmp_path_factory.mktemp("eval")
    build_data(tmp_path / "data")
    fingerprint = build_store(tmp_path / "store")
    build_families_store(tmp_path / "families", fingerprint)
    return tmp_path, run_harness(tmp_path)


def _assert_scores(row: dict[str, Any], sets: tuple[str, ...]) -> None:
    assert sorted(row["scores"]) == sorted(sets)
    for scores in row["scores"].values():
        assert 0.0 <= scores["bleu"] <= 100.0 and 0.0 <= scores["chrf"] <= 100.0
        assert scores["sentences"] > 0
    assert row["average"]["sets"] == len(sets)
    assert set(row["timing"]) == set(sets)


@pytest.mark.parametrize(("name", "expected"), [
    ("medical", "medical"), ("medical-gated", "medical"), ("gated_medical", "medical"),
    ("it-highway", "it"), ("news", None), ("italian", None),
])
def test_domain_of_artifact_names(name: str, expected: str | None) -> None:
    assert domain_of(name, DOMAINS) == expected


def test_every_section_is_present(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    assert set(result) == {"meta", "parameters", "known_domains", "families", "finetuning",
                           "open_domain", "classifier", "source_reliance", "targets",
                           "significance", "summary", "notes"}
    assert result["meta"]["mode"] == "quick"
    assert result["meta"]["domains"] == list(DOMAINS)
    assert result["meta"]["genres"] == list(GENRES)
    assert result["meta"]["decoding"]["beam_size"] == 1
    assert result["meta"]["machine"]["cores"] >= 1


def test_known_domain_rows(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    known = result["known_domains"]
    assert list(known) == ["generic", "adapter-true", "adapter-predicted", "auto",
                           "adapter-random", "ensemble-soft", "ensemble-uniform", "mixing"]
    for row in known.values():
        _assert_scores(row, DOMAINS)
    assert known["generic"]["parameters"] == result["parameters"]["backbone"]["parameters"]


def _mixing_parameters() -> int:
    family = get_family("mixing")
    return family.parameter_count(tiny_config(), family.normalise(
        {"family": "mixing", "domains": list(DOMAINS)}))


def test_mixing_row_has_every_domain_and_its_parameter_count(
        harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    row = result["known_domains"]["mixing"]
    assert row["label"] == "Word-level mixing (no label)"
    _assert_scores(row, DOMAINS)
    assert all(scores["sentences"] == result["meta"]["sentences_per_domain"][name]
               for name, scores in row["scores"].items())
    assert row["parameters"] == _mixing_parameters() > 0
    summary = result["parameters"]["mixing"]
    assert summary["name"] == "mixed" and summary["domains"] == list(DOMAINS)
    assert summary["family"] == "mixing" and summary["parameters"] == row["parameters"]
    # the mixture is not a served domain: no ensemble or label row routes to it
    assert set(result["parameters"]["served"]) == set(DOMAINS)
    assert any("module mixed v1 is a word-level mixture" in n for n in result["notes"])


def test_family_rows_cover_only_their_domains(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    families = result["families"]
    assert set(families) == {f"{family}-{label}" for family in ("gated", "highway", "sf", "pa")
                             for label in ("true", "random")}
    for key in ("highway-true", "highway-random", "sf-true", "sf-random"):
        _assert_scores(families[key], ("law", "medical"))
    for key in ("gated-true", "gated-random"):
        _assert_scores(families[key], ("religion",))
    for key in ("pa-true", "pa-random"):
        _assert_scores(families[key], ("it",))
    assert families["sf-true"]["label"] == "sf, true label"
    for family in ("sf", "pa"):
        expected = get_family(family).parameter_count(
            tiny_config(), get_family(family).normalise({"family": family}))
        assert families[f"{family}-true"]["parameters"] == expected > 0
        assert {row["parameters"] for row in
                result["parameters"]["families"][family].values()} == {expected}
    assert any("family highway: no module for it, religion" in n for n in result["notes"])
    assert result["meta"]["served_family"] == "adapter"


def test_finetuning_rows_and_forgetting(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    section = result["finetuning"]
    assert set(section["rows"]) == {"finetune-medical", "finetune-law"}
    for row in section["rows"].values():
        _assert_scores(row, DOMAINS)
    for domain in ("medical", "law"):
        run = section["runs"][domain]
        assert 1 <= run["steps"] <= 2
        assert run["parameters_trained"] == result["parameters"]["backbone"]["parameters"]
        summary = section["summary"][domain]
        in_domain = section["rows"][f"finetune-{domain}"]["scores"][domain]["bleu"]
        assert summary["in_domain"] == in_domain


def test_open_domain_rows_and_learnable_weights(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    rows = result["open_domain"]
    assert list(rows) == ["generic", "ensemble-uniform", "ensemble-soft", "auto", "mixing",
                          "ensemble-learnable"]
    assert rows["mixing"]["parameters"] == _mixing_parameters()
    for row in rows.values():
        _assert_scores(row, GENRES)
    for genre, search in rows["ensemble-learnable"]["search"].items():
        assert genre in GENRES
        assert search["dev_split"] == "dev-slice" and search["dev_sentences"] == 4
        assert abs(sum(search["weights"].values()) - 1.0) < 1e-4
        assert set(search["weights"]) <= set(DOMAINS) | {"generic"}
        assert search["evaluations"] >= 1


def test_classifier_and_parameters(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    report = result["classifier"]["accuracy_report"]
    assert set(report["accuracy"]) == set(DOMAINS)
    assert all(0.0 <= value <= 1.0 for value in report["accuracy"].values())
    for domain, counts in report["confusion"].items():
        assert sum(counts.values()) == result["meta"]["sentences_per_domain"][domain]
    assert set(result["classifier"]["routing"]) == set(DOMAINS) | set(GENRES)
    calibration = result["classifier"]["calibration"]
    assert calibration["temperature"] == 2.0
    assert calibration["sentences"] == sum(result["meta"]["sentences_per_domain"].values())
    served, raw = calibration["served"], calibration["uncalibrated"]
    assert served["accuracy"] == raw["accuracy"] == report["overall"]  # same argmax
    assert served["mean_confidence"] < raw["mean_confidence"]  # T > 1 flattens
    expected = get_family("adapter").parameter_count(tiny_config(), {"bottleneck": 4})
    assert {row["parameters"] for row in result["parameters"]["served"].values()} == {expected}
    highway = result["parameters"]["families"]["highway"]
    assert set(highway) == {"law", "medical"}
    gated = get_family("gated").parameter_count(tiny_config(), {"bottleneck": 4})
    assert result["parameters"]["families"]["gated"]["religion"]["parameters"] == gated


def test_targets_follow_from_the_numbers(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    accuracy = result["classifier"]["accuracy_report"]["accuracy"]
    expected = check_targets(bleu_table(result["known_domains"]),
                             bleu_table(result["open_domain"]), accuracy,
                             domains=DOMAINS, genres=GENRES)
    assert result["targets"] == [t.as_dict() for t in expected]
    assert len(result["targets"]) == 6
    assert all(t["met"] in (True, False) for t in result["targets"])
    met = sum(t["met"] for t in result["targets"])
    assert f"{met} of 6 targets are met" in result["summary"]


def test_significance_intervals_hold_the_observed_differences(
        harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    rows = {(r["comparison"], r["sets"]): r for r in result["significance"]}
    known, open_rows = result["known_domains"], result["open_domain"]
    average = rows[("adapters (true label) - generic", f"{len(DOMAINS)}-set average")]
    expected = known["adapter-true"]["average"]["bleu"] - known["generic"]["average"]["bleu"]
    assert average["difference"] == pytest.approx(expected, abs=0.02)
    for genre in GENRES:
        row = rows[("soft ensemble - generic", genre)]
        expected = (open_rows["ensemble-soft"]["scores"][genre]["bleu"]
                    - open_rows["generic"]["scores"][genre]["bleu"])
        assert row["difference"] == pytest.approx(expected, abs=0.01)
    for row in result["significance"]:
        assert row["low"] <= row["high"]


def test_markdown_has_the_tables(harness: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, result = harness
    text = (tmp_path / "out" / "eval-quick.md").read_text()
    for heading in ("## Known domains: BLEU", "## Known domains: chrF",
                    "## Full fine-tuning", "## Open domain (genres without a module): BLEU",
                    "## Classifier (test sets)", "## Parameters (#P)", "## Targets",
                    "### Significance (paired bootstrap", "## What this shows",
                    "Calibration on the same test sentences",
                    "## Backbone: reliance on the source", "## Timings (decoding)"):
        assert heading in text
    assert "| system | #P | it | law | medical | religion | avg |" in text
    assert "| system | #P | captions | news | avg |" in text
    assert "| Adapters, true label |" in text and "| highway, true label |" in text
    assert "| sf, true label | +" in text and "| pa, true label | +" in text
    assert text.count("| Word-level mixing (no label) | +") == 4  # BLEU, chrF x 2 sections
    assert "| mixing: mixed (4 domains) | mixing |" in text
    assert result["summary"] in text
    assert "| set | sentences | own source | another sentence's source | gap |" in text


def test_source_reliance_covers_every_set(harness: tuple[Path, dict[str, Any]]) -> None:
    _, result = harness
    reliance = result["source_reliance"]
    assert list(reliance) == [*DOMAINS, *GENRES]
    for row in reliance.values():
        assert row["sentences"] >= 2
        assert row["gap"] == pytest.approx(row["nll_other_source"] - row["nll_own_source"],
                                           abs=1e-3)


def test_rerun_resumes_from_the_cache(harness: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, first = harness
    second = run_harness(tmp_path)
    for section in ("known_domains", "families", "open_domain"):
        for key, row in second[section].items():
            assert all(t["cached"] for t in row["timing"].values()), (section, key)
            assert row["scores"] == first[section][key]["scores"]
    assert second["finetuning"]["runs"] == first["finetuning"]["runs"]


def testmixing_candidate_prefers_the_active_module(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", builtin_dir=None) as store:
        files = tiny_backbone_files()
        backbone = store.publish("backbone", "tiny", files,
                                 config=json.loads(files["config.json"]))
        fingerprint = backbone.backbone_fingerprint
        assert mixing_candidate(store) is None
        _publish_module(store, "medical", "adapter", 1, fingerprint)
        assert mixing_candidate(store) is None  # adapters are not mixtures
        _publish_module(store, "mixed", "mixing", 2, fingerprint, activate=False)
        _publish_module(store, "mixed", "mixing", 3, fingerprint, activate=False)
        found = mixing_candidate(store)
        assert found is not None and (found.name, found.version) == ("mixed", 2)
        store.activate("module", "mixed", 1)
        found = mixing_candidate(store)
        assert found is not None and (found.name, found.version) == ("mixed", 1)
