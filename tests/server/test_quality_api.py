"""Per-sentence quality on /translate and /translate/batch, min_quality and on_low_quality,
through the real HTTP stack (tiny store: random weights, so the numbers only need to be
well-formed; what they mean is measured by make bench-quality)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import make_client
from fastapi.testclient import TestClient

TEXT = "The patient takes one tablet a day. Click the button.\n\nThank you very much."
SOURCES = ["The patient takes one tablet a day.", "Click the button.", "Thank you very much."]


def post(client: TestClient, path: str, **body: Any) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_every_sentence_has_a_quality(shared_client: TestClient) -> None:
    result = post(shared_client, "/translate", text=TEXT, domain="medical")
    sentences = result["sentences"]
    assert [s["source"] for s in sentences] == SOURCES
    for sentence in sentences:
        assert 0.0 <= sentence["quality"] <= 1.0
        assert set(sentence) == {"source", "translation", "quality", "flagged", "issues",
                                 "recovered"}
        assert sentence["translation"] in result["translation"]
    assert result["quality"] == min(s["quality"] for s in sentences)
    assert result["translation"].count("\n") == TEXT.count("\n")


def test_batch_items_have_sentences(shared_client: TestClient) -> None:
    result = post(shared_client, "/translate/batch", items=[{"text": SOURCES[0]},
                                                           {"text": SOURCES[1]}])
    assert [len(r["sentences"]) for r in result["results"]] == [1, 1]
    assert all(r["quality"] is not None for r in result["results"])


def test_text_without_words_has_no_sentences(shared_client: TestClient) -> None:
    result = post(shared_client, "/translate", text="42 %s https://example.org")
    assert result["sentences"] == [] and result["quality"] is None
    assert result["translation"] == "42 %s https://example.org"


@pytest.mark.parametrize(("action", "expected"), [
    ("source", "The patient takes one tablet a day. Click the button.\n\nThank you very much."),
    ("omit", " \n\n"),
])
def test_low_sentences_replaced_as_asked(shared_client: TestClient, action: str,
                                         expected: str) -> None:
    result = post(shared_client, "/translate", text=TEXT, min_quality=1.0,
                  on_low_quality=action)
    assert result["translation"] == expected
    assert all(s["flagged"] for s in result["sentences"])


def test_keep_never_flags_and_zero_floor_flags_nothing(shared_client: TestClient) -> None:
    kept = post(shared_client, "/translate", text=TEXT, min_quality=1.0, on_low_quality="keep")
    assert not any(s["flagged"] for s in kept["sentences"])
    plain = post(shared_client, "/translate", text=TEXT, min_quality=0.0)
    assert not any(s["flagged"] for s in plain["sentences"])
    assert kept["translation"] == plain["translation"]


@pytest.mark.parametrize("body", [{"min_quality": 1.5}, {"min_quality": -0.1},
                                  {"on_low_quality": "drop"}])
def test_bad_quality_options_are_422(shared_client: TestClient, body: dict[str, Any]) -> None:
    response = shared_client.post("/translate", json={"text": "hello", **body})
    assert response.status_code == 422
    assert next(iter(body)) in response.text


def test_scores_and_issues_are_counted(shared_client: TestClient) -> None:
    post(shared_client, "/translate", text=TEXT)
    metrics = shared_client.get("/metrics").text
    assert "nmt_quality_score_count" in metrics
    count = next(float(line.split()[-1]) for line in metrics.splitlines()
                 if line.startswith("nmt_quality_score_count"))
    assert count >= 3


def test_scoring_off_leaves_the_fields_out(store_root: Path) -> None:
    with make_client(store_root, quality={"enabled": False}) as client:
        result = post(client, "/translate", text=TEXT)
    assert result["sentences"] is None and result["quality"] is None


def test_recovery_reports_what_it_replaced(store_root: Path) -> None:
    # random weights: outputs run to the length cap repeating themselves
    with make_client(store_root, quality={"recover": True},
                     decoding={"beam_size": 1, "max_length": 24}) as client:
        result = post(client, "/translate", text=TEXT, domain="medical")
        metrics = client.get("/metrics").text
    # random weights loop: every first output repeats itself
    assert all("loop" in sentence["issues"] for sentence in result["sentences"])
    for sentence in result["sentences"]:
        assert sentence["recovered"] is None or sentence["recovered"] in sentence["issues"]
    recovered = sum(s["recovered"] is not None for s in result["sentences"])
    counted = sum(float(line.split()[-1]) for line in metrics.splitlines()
                  if line.startswith("nmt_quality_recoveries_total{"))
    assert counted == recovered
