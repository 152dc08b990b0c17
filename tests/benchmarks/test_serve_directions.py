"""The directions benchmark (benchmarks/speed/serve/serve_directions.py): the copies it
publishes take language pairs no backbone of the store declares (a shipped en->de stays
as it was), the split runs spread requests over the directions, and a tiny end-to-end run
serves one, two and three directions with every copy answering as the original. Nothing
here asserts on speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.speed.serve.direction_copies import (
    COPY_NAMES,
    CopyDirection,
    add_copy_directions,
    free_pairs,
    spread,
)
from benchmarks.speed.serve.loadgen import SINGLE, LevelRun, LoadRequest, Outcome
from benchmarks.speed.serve.serve_directions import ARMS, copy_answers, main, rotated
from benchmarks.speed.serve.store import StoreSpec, seed_tiny_store
from server.execution.placement import plan_placement
from server.textproc.languages import LanguagePair

COPIES = [CopyDirection("bench-copy", LanguagePair("en", "de")),
          CopyDirection("bench-copy-2", LanguagePair("en", "eo"))]


def test_the_copies_take_the_first_pairs_no_backbone_declares() -> None:
    assert free_pairs("en", {("en", "fr"), ("fr", "en")}, 2) == [
        LanguagePair("en", "de"), LanguagePair("en", "eo")]
    assert free_pairs("en", {("en", "fr"), ("fr", "en"), ("en", "de")}, 2) == [
        LanguagePair("en", "eo"), LanguagePair("en", "ia")]
    with pytest.raises(SystemExit, match="every pair"):
        free_pairs("en", {("en", t) for t in ("de", "eo", "ia", "vo")}, 1)


def test_the_split_runs_send_requests_to_the_directions_in_turn() -> None:
    base = [LoadRequest(SINGLE, {"text": f"text {i}", "domain": "auto"}) for i in range(6)]
    three = spread(base, COPIES)
    assert [r.body.get("target") for r in three] == [None, "de", "eo"] * 2
    assert all(r.body.get("source") in (None, "en") for r in three)
    assert [r.body["text"] for r in three] == [r.body["text"] for r in base]
    assert [r.body.get("target") for r in spread(base, COPIES[:1])] == [None, "de"] * 3
    assert spread(base, []) == base


def test_copy_answers_compare_each_copy_with_the_default_direction() -> None:
    def run(answers: dict[int, str]) -> LevelRun:
        return LevelRun(4, 1.0, [Outcome(i, 200, 0.1, None, [{"translation": text}])
                                 for i, text in answers.items()])

    runs = {"one": run({i: f"t{i}" for i in range(6)}),
            "two": run({i: f"t{i}" for i in range(6)}),
            "three": run({0: "t0", 1: "t1", 2: "other", 4: "t4", 5: "t5"})}
    # two: 1, 3, 5 to the first copy; three: 1, 4 to the first, 2, 5 to the second
    assert copy_answers(runs, COPIES, 6) == {"bench-copy": [5, 5], "bench-copy-2": [1, 2]}


def test_each_run_takes_each_place_in_turn() -> None:
    orders = [rotated(n) for n in range(1, 4)]
    assert all(sorted(order) == sorted(ARMS) for order in orders)
    assert [order[0] for order in orders] == list(ARMS)
    assert rotated(4) == rotated(1)


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> StoreSpec:
    return seed_tiny_store(tmp_path_factory.mktemp("serve-directions") / "store")


@pytest.mark.slow
def test_a_shipped_en_de_backbone_is_kept_and_the_copies_move_on(
        tiny_store: StoreSpec) -> None:
    with tiny_store.open() as store:
        tiny = store.load_backbone("tiny")
        shipped = store.publish("backbone", "shipped-en-de", tiny.files,
                                config=tiny.manifest.config,
                                provenance={"languages": {"source": "en", "target": "de"}})
        store.activate("backbone", "shipped-en-de", shipped.version)
    original, copies = add_copy_directions(tiny_store, 2)
    assert original == "tiny"
    assert [(c.backbone, c.label) for c in copies] == [(COPY_NAMES[0], "en->eo"),
                                                       (COPY_NAMES[1], "en->ia")]
    with tiny_store.open() as store:
        assert store.active_backbones()["shipped-en-de"] == shipped.version
        assert store.load_backbone("shipped-en-de").manifest.provenance["languages"] == {
            "source": "en", "target": "de"}
        for copy in copies:  # each copy serves the original's domains
            assert store.active_domains(copy.backbone).keys() == store.active_domains(
                "tiny").keys()
    with pytest.raises(SystemExit, match="already holds"):  # never over a backbone
        add_copy_directions(tiny_store, 1)


@pytest.mark.slow
def test_a_tiny_run_serves_one_two_and_three_directions(tmp_path: Path) -> None:
    assert main(["--tiny", "--rounds", "1", "--beam-size", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "serve_directions.json").read_text())
    assert [(c["backbone"], c["source"], c["target"]) for c in report["copies"]] == [
        ("bench-copy", "en", "de"), ("bench-copy-2", "en", "eo")]
    [row] = report["rows"]
    assert sorted(row["runs"]) == sorted(ARMS)
    for run in row["runs"].values():
        assert run["errors"] == 0
        assert run["tokens_per_s"] > 0
        assert run["sentences_per_batch"] == 0  # continuous batching: no static batches
        assert run["rows_per_step"] >= 1  # ... but live steps of beam rows
    for identical, compared in row["identical"].values():  # same weights, same answers
        # (batches of other partners may flip a near tie: most, not all, must match; a
        # copy with other weights or another direction's answers would match almost none)
        assert compared > 0
        assert 2 * identical > compared
    text = (tmp_path / "serve_directions.md").read_text()
    assert "**Three / two:" in text and "Two / one:" in text
    assert "beam rows a live step" in text and " rows | " in text


@pytest.mark.slow
def test_a_tiny_run_with_the_servers_cpu_placement(tmp_path: Path) -> None:
    """`make bench-serve DIRECTIONS=1 FRONT_CPUS=1 STATIC=1`: the server placed on CPUs
    with static batches, the load generator on the front's, the report named after both."""
    placement = plan_placement(1)
    assert main(["--tiny", "--rounds", "1", "--beam-size", "1", "--front-cpus", "1",
                 "--static", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "serve_directions-front-cpus-1-static.json").read_text())
    assert all(run["errors"] == 0 for run in report["rows"][0]["runs"].values())
    assert all(run["sentences_per_batch"] >= 1 for run in report["rows"][0]["runs"].values())
    if placement is not None:  # a host with one CPU places nothing
        assert "NMT_EXECUTION__FRONT_CPUS=1" in report["description"]
