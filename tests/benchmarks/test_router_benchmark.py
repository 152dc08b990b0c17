"""The router benchmark (benchmarks/quality/router/router.py) on a tiny store and synthetic data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.quality.router.router import POLICIES, main, served_policy
from server.core.settings import RoutingSettings
from tests.benchmarks.test_evaluate import DOMAINS, GENRES, build_data, build_store


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp_path = tmp_path_factory.mktemp("router")
    build_data(tmp_path / "data")
    build_store(tmp_path / "store")
    main(["--data", str(tmp_path / "data"), "--store", str(tmp_path / "store"),
          "--no-builtin", "--out", str(tmp_path / "out"), "--sentences", "4",
          "--dev-lines", "3", "--cache-dir", str(tmp_path / "cache")])
    return tmp_path, json.loads((tmp_path / "out" / "router.json").read_text())


def test_the_served_policy_is_the_server_default() -> None:
    assert POLICIES[served_policy()] == RoutingSettings()


def test_accuracy_and_confusion_cover_every_domain(
        results: tuple[Path, dict[str, Any]]) -> None:
    _, found = results
    test = found["classifier"]["test"]
    assert sorted(test["accuracy"]) == sorted(DOMAINS)
    assert all(0.0 <= a <= 1.0 for a in test["accuracy"].values())
    # every test sentence (6 per domain) predicted once; BLEU reads only the first 4
    assert all(sum(row.values()) == 6 for row in test["confusion"].values())
    assert sorted(test["generic_share"]) == sorted(GENRES)
    assert sorted(found["classifier"]["dev"]["accuracy"]) == sorted(DOMAINS)


def test_bleu_rows_per_split_and_kind(results: tuple[Path, dict[str, Any]]) -> None:
    _, found = results
    for split in ("dev", "test"):
        genres = found["bleu"][split]["genres"]
        domains = found["bleu"][split]["domains"]
        assert sorted(genres) == sorted(["backbone", *POLICIES])
        assert sorted(domains) == sorted(["backbone", "true label", *POLICIES])
        for row in [*genres.values(), *domains.values()]:
            assert row["avg"] == pytest.approx(sum(row["bleu"].values()) / len(row["bleu"]),
                                               abs=0.01)
        assert sorted(genres["backbone"]["bleu"]) == sorted(GENRES)
        # every sentence of a set got a routing decision under every policy
        for name in POLICIES:
            assert sum(genres[name]["modes"]["news"].values()) in (3, 4)
        # the served policy's gap to the backbone, with its bootstrap interval around it
        gap = found["bleu"][split]["served_vs_backbone"]
        assert gap["difference"] == pytest.approx(
            genres[served_policy()]["avg"] - genres["backbone"]["avg"], abs=0.02)
        assert gap["low"] <= gap["difference"] <= gap["high"]


def test_a_policy_that_falls_back_to_the_backbone_routes_unsure_text_there(
        results: tuple[Path, dict[str, Any]]) -> None:
    _, found = results
    modes = found["bleu"]["test"]["genres"]["backbone below 0.7"]["modes"]
    assert all("ensemble" not in counts for counts in modes.values())


def test_markdown_has_the_tables(results: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, _ = results
    text = (tmp_path / "out" / "router.md").read_text()
    for heading in ("## Classifier accuracy", "## BLEU on dev: open genres (no module)",
                    "## BLEU on test: known domains", "| true \\ predicted |",
                    "95% paired-bootstrap interval"):
        assert heading in text


def test_genres_only_with_one_policy(results: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, _ = results
    main(["--data", str(tmp_path / "data"), "--store", str(tmp_path / "store"),
          "--no-builtin", "--out", str(tmp_path / "out"), "--name", "genres",
          "--domain-sentences", "0", "--policies", "backbone below 0.5",
          "--cache-dir", str(tmp_path / "cache")])
    found = json.loads((tmp_path / "out" / "genres.json").read_text())
    assert found["bleu"]["test"]["domains"] == {}
    assert sorted(found["bleu"]["test"]["genres"]) == ["backbone", "backbone below 0.5"]
    assert sorted(found["classifier"]["test"]["accuracy"]) == sorted(DOMAINS)
    assert "known domains" not in (tmp_path / "out" / "genres.md").read_text()
