"""Routing policy: which module(s), with which weights, translate a text.

A request's `domain` is one of
- a served domain name -> `explicit`;
- "generic" -> the plain backbone (`generic`);
- absent / null / "auto" -> with `routing.mixture` naming a served word-level mixture
  (family "mixing"), that module translates (`mixture`: it weighs its domains per token,
  no label needed); otherwise the classifier decides: at or above the threshold the text
  goes to the predicted domain (`classifier`), or to the plain backbone when the predicted
  label is "generic" (a router may learn that class from general text that fits no module:
  `generic`); below it (or when the predicted domain is not served) the open-domain
  ensemble runs (`ensemble`), or, with `routing.fallback` "generic", the plain backbone
  (`generic`: an unsure classifier's text is mostly open-domain text, which the backbone
  translates as well as a mixture of domain modules); without a classifier the backbone
  translates (`generic`);
- a mapping domain -> weight ("generic" allowed) -> an explicit mixture (`ensemble`).

Automatic ensembles take the `top_k` most probable served domains plus the plain backbone.
Their weights (setting `routing.ensemble`):
- soft (default): each domain's classifier posterior; the backbone gets the mass the
  classifier put on no chosen domain, `1 - sum(top-k posteriors)`, but at least
  `backbone_floor` (below the threshold the classifier is unsure, so the open-domain
  backbone always keeps a say). Weights are then normalised to sum to 1;
- uniform: equal weights for the same members;
- fixed: `routing.fixed_weights` restricted to served domains (and "generic").

The policy is pure: no engine, no I/O; the caller passes the served domains and the
classifier of one serving state.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from server.core.errors import InvalidInput, UnknownDomain
from server.core.settings import RoutingSettings
from server.routing.classifier import Classifier, RouterOrigin

# how a text was routed: the policy decides it, the API returns it (schemas.Routing.mode)
RoutingMode = Literal["explicit", "classifier", "ensemble", "generic", "mixture"]
GENERIC = "generic"
AUTO = "auto"
DomainSpec = str | Mapping[str, float] | None


@dataclass(frozen=True)
class RoutingDecision:
    """How one text is routed. `members` are (domain, weight > 0) pairs, domain None being
    the plain backbone; `weights` (ensembles) are the normalised weights by domain name."""

    mode: RoutingMode
    domain: str | None
    members: tuple[tuple[str | None, float], ...]
    confidence: float | None = None
    predicted: str | None = None
    weights: dict[str, float] | None = None
    # The classifier's calibrated posterior of every label, when it was asked (shown by
    # `explain`; not part of what the decision *is*, so equality ignores it).
    posteriors: dict[str, float] | None = field(default=None, compare=False)
    # The router that gave them (shown by `explain`): a direction's own, or the one of a
    # direction of the same source language (server/routing/shared_router.py).
    router: RouterOrigin | None = field(default=None, compare=False)

    @property
    def module_domains(self) -> list[str]:
        return [domain for domain, _ in self.members if domain is not None]


GENERIC_DECISION = RoutingDecision("generic", GENERIC, ((None, 1.0),))


class RoutingPolicy:
    def __init__(self, settings: RoutingSettings, *, max_members: int) -> None:
        self.settings = settings
        self.max_members = max_members

    def decide(self, spec: DomainSpec, text: str, *, domains: Mapping[str, int],
               classifier: Classifier | None, field: str = "domain",
               mixtures: Collection[str] = ()) -> RoutingDecision:
        """`mixtures`: the served domains whose module is a word-level mixture."""
        if spec is None or spec == AUTO:
            mixture = self.settings.mixture
            if mixture is not None and mixture in domains and mixture in mixtures:
                return RoutingDecision("mixture", mixture, ((mixture, 1.0),))
            return self._auto(text, domains, classifier)
        if isinstance(spec, str):
            return self._explicit(spec, domains, field)
        return self._mixture(spec, domains, field)

    def from_posteriors(self, posteriors: Mapping[str, float], *,
                        domains: Mapping[str, int],
                        router: RouterOrigin | None = None) -> RoutingDecision:
        """The automatic decision for posteriors computed elsewhere (a document's,
        aggregated over its sentences, by `router`), as `decide` makes it for one text's."""
        return replace(self._choose(posteriors, domains), posteriors=dict(posteriors),
                       router=router)

    def _explicit(self, name: str, domains: Mapping[str, int], field: str) -> RoutingDecision:
        if name == GENERIC:
            return GENERIC_DECISION
        if name not in domains:
            raise UnknownDomain(f"unknown domain {_shown(name)}; known: "
                                f"{', '.join(known_names(domains))}", field=field)
        return RoutingDecision("explicit", name, ((name, 1.0),))

    def _mixture(self, weights: Mapping[str, float], domains: Mapping[str, int],
                 field: str) -> RoutingDecision:
        if not weights:
            raise InvalidInput("a mixture needs at least one domain", field=field)
        for name, weight in weights.items():
            where = f"{field}.{name}"
            if name != GENERIC and name not in domains:
                raise InvalidInput(f"unknown domain {_shown(name)} in the mixture; known: "
                                   f"{', '.join(known_names(domains, auto=False))}", field=where)
            if not math.isfinite(weight) or weight < 0:
                raise InvalidInput(f"weight of {_shown(name)} must be a finite number >= 0 "
                                   f"(got {weight})", field=where)
        total = sum(weights.values())
        if total <= 0:
            raise InvalidInput("mixture weights must not all be zero", field=field)
        modules = [name for name, weight in weights.items() if name != GENERIC and weight > 0]
        if len(modules) > self.max_members:
            raise InvalidInput(f"a mixture may use at most {self.max_members} domains "
                               f"(got {len(modules)})", field=field)
        normalised = {name: weight / total for name, weight in weights.items()}
        return _ensemble(normalised, confidence=None, predicted=None)

    def _auto(self, text: str, domains: Mapping[str, int],
              classifier: Classifier | None) -> RoutingDecision:
        if classifier is None:
            return GENERIC_DECISION
        posteriors = classifier.posteriors(text)
        return replace(self._choose(posteriors, domains), posteriors=posteriors,
                       router=classifier.origin)

    def _choose(self, posteriors: Mapping[str, float],
                domains: Mapping[str, int]) -> RoutingDecision:
        # The most probable domain (ties: the first name in alphabetical order).
        predicted, confidence = min(posteriors.items(), key=lambda item: (-item[1], item[0]),
                                    default=(None, 0.0))
        if predicted in domains and confidence >= self.settings.threshold:
            return RoutingDecision("classifier", predicted, ((predicted, 1.0),),
                                   confidence=confidence, predicted=predicted)
        # Not a confident prediction of a served domain: the backbone, when the prediction
        # is a confident "generic" or when the fallback says so.
        if (predicted == GENERIC and confidence >= self.settings.threshold) or \
                self.settings.fallback == "generic":
            return RoutingDecision("generic", GENERIC, ((None, 1.0),), confidence=confidence,
                                   predicted=predicted)
        served = {d: p for d, p in posteriors.items() if d in domains and p > 0}
        ranked = sorted(served.items(), key=lambda item: (-item[1], item[0]))
        top = dict(ranked[: min(self.settings.top_k, self.max_members)])
        weights = self._weights(top, domains)
        if set(weights) <= {GENERIC}:
            return RoutingDecision("generic", GENERIC, ((None, 1.0),), confidence=confidence,
                                   predicted=predicted)
        return _ensemble(weights, confidence=confidence, predicted=predicted)

    def _weights(self, top: Mapping[str, float], domains: Mapping[str, int]) -> dict[str, float]:
        """Normalised ensemble weights (see the module docstring)."""
        settings = self.settings
        if settings.ensemble == "fixed":
            chosen = {d: w for d, w in settings.fixed_weights.items()
                      if (d == GENERIC or d in domains) and w > 0}
            ranked = sorted(chosen.items(), key=lambda item: -item[1])
            modules = [item for item in ranked if item[0] != GENERIC][: self.max_members]
            raw = dict(modules) | ({GENERIC: chosen[GENERIC]} if GENERIC in chosen else {})
        elif settings.ensemble == "uniform":
            raw = {d: 1.0 for d in top} | {GENERIC: 1.0}
        else:
            raw = dict(top) | {GENERIC: max(settings.backbone_floor, 1.0 - sum(top.values()))}
        total = sum(raw.values())
        if total <= 0:
            return {GENERIC: 1.0}
        return {d: w / total for d, w in raw.items()}


def _ensemble(weights: Mapping[str, float], *, confidence: float | None,
              predicted: str | None) -> RoutingDecision:
    members = tuple((None if d == GENERIC else d, w) for d, w in weights.items() if w > 0)
    return RoutingDecision("ensemble", None, members, confidence=confidence,
                           predicted=predicted, weights=dict(weights))


def known_names(domains: Mapping[str, int], *, auto: bool = True) -> list[str]:
    """What a request may name: the served domains, "generic" (and "auto")."""
    extra = [GENERIC, AUTO] if auto else [GENERIC]
    return sorted(domains) + extra


def _shown(name: str) -> str:
    return repr(name if len(name) <= 64 else name[:64] + "...")
