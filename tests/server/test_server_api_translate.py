"""/translate, /translate/batch and /domains through the real HTTP stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import make_client
from fastapi.testclient import TestClient

from server.core.settings import RoutingSettings

MEDICAL_TEXT = "The patient takes one tablet a day."
AMBIGUOUS_TEXT = "the patient council"  # medical and law keywords: posteriors ~0.48 each


def translate(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_explicit_domain(shared_client: TestClient) -> None:
    result = translate(shared_client, text=MEDICAL_TEXT, domain="law")
    assert result["translation"]
    assert result["routing"] == {"mode": "explicit", "domain": "law", "confidence": None,
                                 "weights": None, "module_version": 1, "module_versions": None}


def test_generic_domain(shared_client: TestClient) -> None:
    routing = translate(shared_client, text=MEDICAL_TEXT, domain="generic")["routing"]
    assert routing["mode"] == "generic" and routing["domain"] == "generic"
    assert routing["module_version"] is None


@pytest.mark.parametrize("body", [{}, {"domain": None}, {"domain": "auto"}])
def test_classifier_above_threshold(shared_client: TestClient, body: dict[str, Any]) -> None:
    routing = translate(shared_client, text=MEDICAL_TEXT, **body)["routing"]
    assert routing["mode"] == "classifier" and routing["domain"] == "medical"
    assert routing["confidence"] > 0.9 and routing["module_version"] == 1


def test_ensemble_below_threshold(shared_client: TestClient) -> None:
    routing = translate(shared_client, text=AMBIGUOUS_TEXT)["routing"]
    assert routing["mode"] == "ensemble" and routing["domain"] is None
    assert 0.3 < routing["confidence"] < 0.5
    weights = routing["weights"]
    assert set(weights) == {"medical", "law", "it", "generic"}
    assert weights["medical"] == pytest.approx(weights["law"]) and weights["medical"] > 0.4
    assert sum(weights.values()) == pytest.approx(1.0)
    assert routing["module_versions"] == {"medical": 1, "law": 1, "it": 1}


def test_the_default_fallback_sends_unsure_text_to_the_backbone(store_root: Path) -> None:
    assert RoutingSettings().fallback == "generic"  # the shared client sets "ensemble"
    with make_client(store_root, routing={"fallback": RoutingSettings().fallback}) as client:
        routing = translate(client, text=AMBIGUOUS_TEXT)["routing"]
    assert routing["mode"] == "generic" and routing["domain"] == "generic"
    assert 0.3 < routing["confidence"] < 0.5 and routing["weights"] is None


def test_explicit_mixture(shared_client: TestClient) -> None:
    result = translate(shared_client, text=MEDICAL_TEXT, domain={"medical": 0.7, "law": 0.3})
    routing = result["routing"]
    assert routing["mode"] == "ensemble" and routing["confidence"] is None
    assert routing["weights"] == pytest.approx({"medical": 0.7, "law": 0.3})
    assert routing["module_versions"] == {"medical": 1, "law": 1}


def test_mixture_with_the_backbone_differs_from_each_member(shared_client: TestClient) -> None:
    alone = translate(shared_client, text=MEDICAL_TEXT, domain="medical")["translation"]
    generic = translate(shared_client, text=MEDICAL_TEXT, domain="generic")["translation"]
    mixed = translate(shared_client, text=MEDICAL_TEXT,
                      domain={"medical": 1.0, "generic": 0.0})["translation"]
    assert mixed == alone  # a zero weight drops the member: exactly the single module
    assert alone != generic


def test_domains_change_the_translation(shared_client: TestClient) -> None:
    outputs = {d: translate(shared_client, text=MEDICAL_TEXT, domain=d)["translation"]
               for d in ("medical", "law", "it", "generic")}
    assert len(set(outputs.values())) >= 3


def test_layout_is_preserved(shared_client: TestClient) -> None:
    text = "  First one. Second one.\n\n\tThird one.  \n"
    whole = translate(shared_client, text=text, domain="law")["translation"]
    parts = [translate(shared_client, text=s, domain="law")["translation"]
             for s in ("First one.", "Second one.", "Third one.")]
    assert whole == f"  {parts[0]} {parts[1]}\n\n\t{parts[2]}  \n"


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_empty_texts_pass_through(shared_client: TestClient, text: str) -> None:
    assert translate(shared_client, text=text, domain="law")["translation"] == text


def test_n_best_alternatives_with_scores(shared_client: TestClient) -> None:
    result = translate(shared_client, text=MEDICAL_TEXT, domain="medical",
                       options={"beam_size": 3, "n_best": 3})
    alternatives = result["alternatives"]
    assert len(alternatives) == 3
    scores = [a["score"] for a in alternatives]
    assert scores == sorted(scores, reverse=True)
    assert alternatives[0]["translation"] == result["translation"]
    assert len({a["translation"] for a in alternatives}) == 3


def test_max_length_bounds_the_output(shared_client: TestClient) -> None:
    long = translate(shared_client, text=MEDICAL_TEXT, domain="generic")["translation"]
    short = translate(shared_client, text=MEDICAL_TEXT, domain="generic",
                      options={"max_length": 2})["translation"]
    assert len(short) < len(long)


def test_batch_mixes_domains_and_matches_single_requests(shared_client: TestClient) -> None:
    items: list[dict[str, Any]] = [{"text": MEDICAL_TEXT, "domain": "medical"},
             {"text": "Click the button. Open the file.", "domain": "it"},
             {"text": MEDICAL_TEXT, "domain": "generic"},
             {"text": "The council adopted this regulation."},  # the batch default: law
             {"text": AMBIGUOUS_TEXT, "domain": "auto"},
             {"text": MEDICAL_TEXT, "domain": {"law": 1, "it": 1}}]
    response = shared_client.post("/translate/batch", json={"items": items, "domain": "law"})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["routing"]["mode"] for r in results] == [
        "explicit", "explicit", "generic", "explicit", "ensemble", "ensemble"]
    assert results[3]["routing"]["domain"] == "law"
    for item, result in zip(items, results, strict=True):
        single = translate(shared_client, text=item["text"], domain=item.get("domain", "law"))
        assert result == single


def test_domains_lists_the_served_modules(shared_client: TestClient) -> None:
    response = shared_client.get("/domains")
    assert response.status_code == 200
    body = response.json()
    assert body["backbone"]["name"] == "tiny" and body["backbone"]["version"] == 1
    assert [d["name"] for d in body["domains"]] == ["it", "law", "medical"]
    for domain in body["domains"]:
        assert domain["version"] == 1 and domain["family"] == "adapter"
        assert domain["size"] > 0 and domain["status"] == "ready"


def test_openapi_documents_every_endpoint(shared_client: TestClient) -> None:
    paths = shared_client.get("/openapi.json").json()["paths"]
    for path in ("/translate", "/translate/batch", "/domains", "/admin/domains",
                 "/admin/domains/{name}/versions", "/admin/domains/{name}/activate",
                 "/admin/domains/{name}", "/health/live", "/health/ready", "/metrics"):
        assert path in paths
    assert shared_client.get("/docs").status_code == 200
