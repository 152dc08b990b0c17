"""A word-level mixture (family "mixing") served through the real HTTP stack: routing mode
"mixture" for requests without a domain, the mixture named explicitly, the debug
proportions, and the 422 refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BACKBONE, DOMAINS, build_store, make_client
from fastapi.testclient import TestClient

from server.core.settings import RoutingSettings
from server.routing.policy import RoutingPolicy
from tests.tiny import publish_word_mixture, tiny_config

MIXTURE = "mixed"
TEXT = "The patient takes one tablet a day."


def publish_mixture(root: Path, name: str = MIXTURE) -> None:
    publish_word_mixture(root, name, backbone=BACKBONE, domains=list(DOMAINS), spread=0.2)


@pytest.fixture(scope="module")
def mixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build_store(tmp_path_factory.mktemp("mixture") / "store")
    publish_mixture(root)
    return root


@pytest.fixture(scope="module")
def mixture_client(mixture_root: Path) -> Iterator[TestClient]:
    with make_client(mixture_root, routing={"mixture": MIXTURE}) as client:
        yield client


def translate(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.mark.parametrize("body", [{}, {"domain": None}, {"domain": "auto"}])
def test_requests_without_a_domain_go_through_the_mixture(mixture_client: TestClient,
                                                          body: dict[str, Any]) -> None:
    result = translate(mixture_client, text=TEXT, **body)
    assert result["routing"] == {"mode": "mixture", "domain": MIXTURE, "confidence": None,
                                 "weights": None, "module_version": 1, "module_versions": None}
    assert result["proportions"] is None
    explicit = translate(mixture_client, text=TEXT, domain=MIXTURE)
    assert explicit["routing"]["mode"] == "explicit"
    assert explicit["routing"]["domain"] == MIXTURE and explicit["routing"]["module_version"] == 1
    assert explicit["translation"] == result["translation"]
    generic = translate(mixture_client, text=TEXT, domain="generic")["translation"]
    assert result["translation"] != generic


def test_named_domains_still_use_their_modules(mixture_client: TestClient) -> None:
    routing = translate(mixture_client, text=TEXT, domain="medical")["routing"]
    assert (routing["mode"], routing["domain"]) == ("explicit", "medical")
    listed = {d["name"]: d for d in mixture_client.get("/domains").json()["domains"]}
    assert listed[MIXTURE]["family"] == "mixing" and listed[MIXTURE]["size"] > 0


def test_proportions_on_demand(mixture_client: TestClient) -> None:
    text = "The patient takes one tablet a day.\n\nClick the button."
    result = translate(mixture_client, text=text, return_proportions=True)
    shown = result["proportions"]
    assert shown["domain"] == MIXTURE and shown["domains"] == list(DOMAINS)
    assert len(shown["sentences"]) == 2
    for sentence in shown["sentences"]:
        pieces, layers = sentence["pieces"], sentence["layers"]
        assert pieces[-1] == "</s>" and len(pieces) > 2
        assert len(layers) == tiny_config().encoder_layers
        for layer in layers:
            assert len(layer) == len(pieces)
            for row in layer:
                assert len(row) == len(DOMAINS)
                assert sum(row) == pytest.approx(1.0, abs=1e-3)
                assert min(row) >= 0.1 / len(DOMAINS) - 1e-4  # the smoothing floor
    plain = translate(mixture_client, text=text)
    assert plain["translation"] == result["translation"]  # the debug pass changes nothing
    explicit = translate(mixture_client, text=text, domain=MIXTURE, return_proportions=True)
    assert explicit["proportions"] == shown


@pytest.mark.parametrize("domain", ["medical", "generic", {"medical": 0.5, "law": 0.5}])
def test_proportions_of_a_module_that_is_not_a_mixture_are_refused(
        mixture_client: TestClient, domain: Any) -> None:
    response = mixture_client.post("/translate", json={"text": TEXT, "domain": domain,
                                                      "return_proportions": True})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "return_proportions" and "word-level mixture" in error["message"]


def test_batch_requests_do_not_take_proportions(mixture_client: TestClient) -> None:
    response = mixture_client.post("/translate/batch", json={
        "items": [{"text": TEXT}], "return_proportions": True})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "return_proportions"
    batch = mixture_client.post("/translate/batch", json={"items": [{"text": TEXT}]})
    assert batch.json()["results"][0]["routing"]["mode"] == "mixture"


def test_readiness_reports_the_mixture(mixture_client: TestClient) -> None:
    checks = mixture_client.get("/health/ready").json()["checks"]
    assert checks["mixture"] == f"serving requests without a domain ({MIXTURE} v1)"


@pytest.mark.parametrize(("mixture", "check"), [
    (None, None),
    ("absent", "not served: no active domain 'absent'"),
    ("medical", "not used: domain 'medical' is of family 'adapter'"),
])
def test_without_a_served_mixture_the_classifier_routes(mixture_root: Path,
                                                        mixture: str | None,
                                                        check: str | None) -> None:
    with make_client(mixture_root, routing={"mixture": mixture}) as client:
        routing = translate(client, text=TEXT)["routing"]
        assert (routing["mode"], routing["domain"]) == ("classifier", "medical")
        checks = client.get("/health/ready").json()["checks"]
        if check is None:
            assert "mixture" not in checks
        else:
            assert checks["mixture"].startswith(check)


@pytest.mark.parametrize(("spec", "mixtures", "mode"), [
    (None, {"mixed"}, "mixture"),
    ("auto", {"mixed"}, "mixture"),
    ("mixed", {"mixed"}, "explicit"),
    ("law", {"mixed"}, "explicit"),
    (None, set(), "generic"),  # named in the settings but not a mixture: no classifier here
])
def test_policy(spec: str | None, mixtures: set[str], mode: str) -> None:
    policy = RoutingPolicy(RoutingSettings(mixture="mixed"), max_members=4)
    decision = policy.decide(spec, "x", domains={"mixed": 2, "law": 1}, classifier=None,
                             mixtures=mixtures)
    assert decision.mode == mode
    if mode == "mixture":
        assert decision.domain == "mixed" and decision.members == (("mixed", 1.0),)
