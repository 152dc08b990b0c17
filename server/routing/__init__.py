"""Domain routing: the fastText classifier and the policy that turns a request's `domain`
into a `RoutingDecision` (explicit | classifier | ensemble | generic)."""

from server.routing.classifier import Classifier, FastTextClassifier, load_classifier
from server.routing.features import classifier_text
from server.routing.policy import AUTO, GENERIC, DomainSpec, RoutingDecision, RoutingPolicy

__all__ = [
    "AUTO",
    "GENERIC",
    "Classifier",
    "DomainSpec",
    "FastTextClassifier",
    "RoutingDecision",
    "RoutingPolicy",
    "classifier_text",
    "load_classifier",
]
