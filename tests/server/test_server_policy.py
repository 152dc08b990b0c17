"""Routing policy (server/routing/policy.py) with a fake classifier."""

from __future__ import annotations

import math

import pytest

from server.core.errors import InvalidInput, UnknownDomain
from server.core.settings import RoutingSettings
from server.routing.policy import RoutingPolicy

DOMAINS = {"medical": 3, "law": 1, "it": 2}


class FakeClassifier:
    version = 7
    origin = None

    def __init__(self, posteriors: dict[str, float]) -> None:
        self._posteriors = posteriors

    def posteriors(self, text: str) -> dict[str, float]:
        return dict(self._posteriors)


def policy(**settings: object) -> RoutingPolicy:
    """Below the threshold the ensemble runs unless a test asks for another fallback."""
    return RoutingPolicy(RoutingSettings.model_validate({"fallback": "ensemble"} | settings),
                         max_members=4)


def test_explicit_domain() -> None:
    decision = policy().decide("law", "x", domains=DOMAINS, classifier=None)
    assert (decision.mode, decision.domain, decision.members) == ("explicit", "law",
                                                                   (("law", 1.0),))
    assert decision.confidence is None and decision.weights is None


def test_generic_is_the_plain_backbone() -> None:
    decision = policy().decide("generic", "x", domains=DOMAINS,
                               classifier=FakeClassifier({"law": 1.0}))
    assert (decision.mode, decision.domain, decision.members) == ("generic", "generic",
                                                                   ((None, 1.0),))


@pytest.mark.parametrize("spec", [None, "auto"])
def test_auto_without_classifier_is_generic(spec: str | None) -> None:
    decision = policy().decide(spec, "x", domains=DOMAINS, classifier=None)
    assert decision.mode == "generic" and decision.confidence is None


def test_classifier_above_threshold_routes_to_the_prediction() -> None:
    classifier = FakeClassifier({"medical": 0.8, "law": 0.15, "it": 0.05})
    decision = policy(threshold=0.7).decide(None, "x", domains=DOMAINS, classifier=classifier)
    assert (decision.mode, decision.domain, decision.confidence) == ("classifier", "medical",
                                                                      0.8)
    assert decision.members == (("medical", 1.0),) and decision.predicted == "medical"


def test_threshold_is_inclusive() -> None:
    classifier = FakeClassifier({"medical": 0.5, "law": 0.5})
    decision = policy(threshold=0.5).decide("auto", "x", domains=DOMAINS,
                                            classifier=classifier)
    assert decision.mode == "classifier" and decision.domain == "law"  # ties: alphabetical


def test_soft_ensemble_below_threshold() -> None:
    classifier = FakeClassifier({"medical": 0.4, "law": 0.35, "it": 0.25})
    decision = policy(threshold=0.6, top_k=2, backbone_floor=0.1).decide(
        None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.mode == "ensemble" and decision.domain is None
    assert decision.confidence == 0.4 and decision.predicted == "medical"
    raw = {"medical": 0.4, "law": 0.35, "generic": 0.25}  # backbone: 1 - (0.4 + 0.35)
    total = sum(raw.values())
    assert decision.weights == pytest.approx({d: w / total for d, w in raw.items()})
    assert dict(decision.members) == pytest.approx(
        {"medical": 0.4 / total, "law": 0.35 / total, None: 0.25 / total})


def test_soft_ensemble_keeps_the_backbone_floor() -> None:
    classifier = FakeClassifier({"medical": 0.45, "law": 0.45, "it": 0.1})
    decision = policy(threshold=0.5, top_k=3, backbone_floor=0.2).decide(
        None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.weights is not None
    assert decision.weights["generic"] == pytest.approx(0.2 / 1.2)
    assert math.isclose(sum(decision.weights.values()), 1.0)


def test_uniform_ensemble() -> None:
    classifier = FakeClassifier({"medical": 0.4, "law": 0.35, "it": 0.25})
    decision = policy(threshold=0.9, ensemble="uniform", top_k=2).decide(
        None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.weights == pytest.approx({"medical": 1 / 3, "law": 1 / 3, "generic": 1 / 3})


def test_fixed_ensemble_uses_served_domains_only() -> None:
    classifier = FakeClassifier({"medical": 0.4, "law": 0.35, "it": 0.25})
    decision = policy(threshold=0.9, ensemble="fixed",
                      fixed_weights={"law": 3.0, "gone": 5.0, "generic": 1.0}).decide(
        None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.weights == pytest.approx({"law": 0.75, "generic": 0.25})


def test_prediction_of_an_unserved_domain_falls_back_to_the_ensemble() -> None:
    classifier = FakeClassifier({"retired": 0.9, "law": 0.1})
    decision = policy(threshold=0.5).decide(None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.mode == "ensemble" and decision.predicted == "retired"
    assert set(decision.weights or {}) == {"law", "generic"}


def test_a_confident_generic_prediction_routes_to_the_backbone() -> None:
    classifier = FakeClassifier({"generic": 0.8, "law": 0.15, "medical": 0.05})
    decision = policy(threshold=0.5).decide(None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.mode == "generic" and decision.members == ((None, 1.0),)
    assert decision.predicted == "generic" and decision.confidence == 0.8


def test_an_unsure_generic_prediction_gives_the_backbone_its_mass() -> None:
    classifier = FakeClassifier({"generic": 0.45, "law": 0.35, "medical": 0.2})
    decision = policy(threshold=0.5, top_k=2).decide(None, "x", domains=DOMAINS,
                                                     classifier=classifier)
    assert decision.mode == "ensemble" and decision.weights is not None
    assert decision.weights == pytest.approx({"law": 0.35, "medical": 0.2, "generic": 0.45})


def test_no_served_posterior_mass_is_generic() -> None:
    decision = policy().decide(None, "zzz", domains=DOMAINS, classifier=FakeClassifier({}))
    assert decision.mode == "generic" and decision.members == ((None, 1.0),)


def test_explicit_mixture_is_normalised() -> None:
    decision = policy().decide({"medical": 7, "law": 2, "generic": 1}, "x", domains=DOMAINS,
                               classifier=None)
    assert decision.mode == "ensemble" and decision.domain is None
    assert decision.weights == pytest.approx({"medical": 0.7, "law": 0.2, "generic": 0.1})
    assert decision.confidence is None


def test_zero_weight_members_are_not_run() -> None:
    decision = policy().decide({"medical": 1.0, "law": 0.0}, "x", domains=DOMAINS,
                               classifier=None)
    assert decision.members == (("medical", 1.0),)
    assert decision.weights == {"medical": 1.0, "law": 0.0}


def test_unknown_domain_names_the_known_ones() -> None:
    with pytest.raises(UnknownDomain) as caught:
        policy().decide("cooking", "x", domains=DOMAINS, classifier=None, field="items[2].domain")
    assert caught.value.field == "items[2].domain"
    assert "cooking" in caught.value.message
    for name in ("it", "law", "medical", "generic", "auto"):
        assert name in caught.value.message


@pytest.mark.parametrize(("weights", "field", "message"), [
    ({"medical": -0.5}, "domain.medical", "finite number >= 0"),
    ({"medical": float("nan")}, "domain.medical", "finite"),
    ({"medical": float("inf")}, "domain.medical", "finite"),
    ({"medical": 0.0, "generic": 0.0}, "domain", "all be zero"),
    ({"cooking": 1.0}, "domain.cooking", "unknown domain 'cooking'"),
    ({}, "domain", "at least one"),
])
def test_invalid_mixtures(weights: dict[str, float], field: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        policy().decide(weights, "x", domains=DOMAINS, classifier=None)
    assert caught.value.field == field
    assert message in caught.value.message


def test_a_mixture_cannot_use_more_modules_than_slots() -> None:
    small = RoutingPolicy(RoutingSettings(fallback="ensemble"), max_members=2)
    with pytest.raises(InvalidInput, match="at most 2"):
        small.decide({"medical": 1, "law": 1, "it": 1}, "x", domains=DOMAINS, classifier=None)


@pytest.mark.parametrize("fallback, mode", [("ensemble", "ensemble"), ("generic", "generic")])
def test_fallback_decides_what_runs_below_the_threshold(fallback: str, mode: str) -> None:
    classifier = FakeClassifier({"medical": 0.45, "law": 0.35, "it": 0.2})
    decision = policy(threshold=0.5, fallback=fallback).decide(None, "x", domains=DOMAINS,
                                                               classifier=classifier)
    assert decision.mode == mode
    assert (decision.confidence, decision.predicted) == (0.45, "medical")
    if fallback == "generic":
        assert decision.members == ((None, 1.0),) and decision.domain == "generic"


def test_fallback_to_the_backbone_keeps_confident_predictions() -> None:
    classifier = FakeClassifier({"medical": 0.75, "law": 0.25})
    decision = policy(threshold=0.7, fallback="generic").decide(None, "x", domains=DOMAINS,
                                                                classifier=classifier)
    assert (decision.mode, decision.domain) == ("classifier", "medical")


def test_fallback_is_one_of_two_names() -> None:
    with pytest.raises(ValueError, match="fallback"):
        RoutingSettings.model_validate({"fallback": "uniform"})


def test_fallback_to_the_backbone_takes_an_unserved_prediction() -> None:
    classifier = FakeClassifier({"retired": 0.9, "law": 0.1})
    decision = policy(threshold=0.5, fallback="generic").decide(None, "x", domains=DOMAINS,
                                                                classifier=classifier)
    assert decision.mode == "generic" and decision.predicted == "retired"


def test_the_default_fallback_is_the_backbone() -> None:
    classifier = FakeClassifier({"medical": 0.45, "law": 0.35, "it": 0.2})
    decision = RoutingPolicy(RoutingSettings(), max_members=4).decide(
        None, "x", domains=DOMAINS, classifier=classifier)
    assert decision.mode == "generic" and decision.members == ((None, 1.0),)
