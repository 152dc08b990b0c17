"""`explain: true` on /translate: the classifier's posterior of every label and the routing
threshold, plus a word-level mixture's proportions when one translated the text; the
default answer carries no `explanation` key at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DOMAINS, build_store, make_client
from fastapi.testclient import TestClient
from test_server_mixture import MIXTURE, publish_mixture

from server.api.schemas import TranslateResponse


def translate(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_the_default_answer_has_no_explanation(shared_client: TestClient) -> None:
    result = translate(shared_client, text="Click the button.")
    assert "explanation" not in result
    # the memory fields are absent when no memory is in play (tests/server/test_memories_*)
    memory = {"match", "sentence_matches", "matches", "retrieval"}
    assert set(result) == set(TranslateResponse.model_fields) - {"explanation"} - memory


def test_explain_shows_every_posterior_behind_a_classifier_decision(
        shared_client: TestClient) -> None:
    plain = translate(shared_client, text="Click the button. Open the file.")
    explained = translate(shared_client, text="Click the button. Open the file.", explain=True)
    assert explained["translation"] == plain["translation"]
    assert explained["routing"] == plain["routing"]
    assert explained["routing"]["mode"] == "classifier"
    posteriors = explained["explanation"]["posteriors"]
    assert set(posteriors) == set(DOMAINS)
    assert max(posteriors, key=posteriors.get) == "it"
    assert posteriors["it"] == explained["routing"]["confidence"]
    assert sum(posteriors.values()) == pytest.approx(1.0, abs=1e-3)
    assert explained["explanation"]["threshold"] == 0.5
    # which router decided: the direction's own (tests/server/test_shared_router.py: another's)
    assert explained["explanation"]["router"] == {"backbone": "tiny", "name": "router",
                                                  "version": 1, "shared": False}
    assert explained["proportions"] is None  # no mixture translated it: nothing, no 422


@pytest.mark.parametrize("domain", ["law", "generic", {"law": 1.0, "generic": 1.0}])
def test_explain_without_the_classifier_has_no_posteriors(shared_client: TestClient,
                                                          domain: Any) -> None:
    explained = translate(shared_client, text="The council adopted it.", domain=domain,
                          explain=True)
    assert explained["explanation"] == {"posteriors": None, "router": None, "threshold": 0.5}


@pytest.fixture(scope="module")
def mixture_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root: Path = build_store(tmp_path_factory.mktemp("explain") / "store")
    publish_mixture(root)
    with make_client(root, routing={"mixture": MIXTURE}) as client:
        yield client


def test_explain_returns_a_mixtures_proportions(mixture_client: TestClient) -> None:
    explained = translate(mixture_client, text="The patient takes it. Click here.",
                          explain=True)
    assert explained["routing"]["mode"] == "mixture"
    proportions = explained["proportions"]
    assert proportions["domain"] == MIXTURE
    assert len(proportions["sentences"]) == 2
    first = proportions["sentences"][0]
    assert first["pieces"][-1] == "</s>"
    for layer in first["layers"]:
        assert len(layer) == len(first["pieces"])
        assert all(sum(row) == pytest.approx(1.0, abs=1e-3) for row in layer)
    assert explained["explanation"]["posteriors"] is None
