"""benchmarks/quality/router/router_artifacts.py on a tiny corpus: each domain's text carries its
own words, so both the text router and the features router must tell them apart, and a
domain added from its own words must be found."""

from __future__ import annotations

from pathlib import Path

from benchmarks.quality.router.router_artifacts import (
    CLASSES,
    NEW_TRAIN,
    NEW_UNSEEN,
    markdown,
    measure,
)
from tests.benchmarks.test_router_extras import build_data, write
from trainer.recipes.directions import EN_FR


def test_both_forms_are_scored_per_class_and_a_new_domain_is_added(tmp_path: Path) -> None:
    data = build_data(tmp_path)
    write(data / "en-fr" / "extra" / "finance", "train",
          [f"financeword ledger {i}" for i in range(NEW_TRAIN + NEW_UNSEEN)])
    result = measure(data, EN_FR, [1], "finance")
    shipped, text, features = result["retrained"]
    assert shipped["router"].startswith("shipped v") and shipped["seed"] == ""
    assert set(result["shipped"]["files"]) == {"classifier.bin", "features.npz.xz"}
    assert result["shipped"]["examples"] > 30_000
    assert (text["router"], features["router"]) == ("text", "features")
    for row in (text, features):
        assert set(row) == {"router", "seed", "all", *CLASSES}
        assert min(row[d] for d in CLASSES if d != "generic") >= 80.0  # own words: easy
    added = {row["router"]: row for row in result["added"]}
    assert list(added) == ["text, median", "features, median", "features, claim + median"]
    assert all(row["new_top1"] >= 90.0 and "finance" in row["new_went"]
               for row in added.values())
    table = markdown([result])
    assert "## en-fr: the router retrained" in table
    assert "## en-fr: finance added as a new domain (seed 1)" in table
    assert "| features, claim + median | " in table
    assert "features.npz.xz` " in table
