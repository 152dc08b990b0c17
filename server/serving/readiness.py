"""The readiness checks (`GET /health/ready`) of a serving state."""

from __future__ import annotations

from typing import Any

from model_store import Manifest
from server.serving.state import ServingState


def readiness(state: ServingState, *, backbone: Manifest | None, engine_loaded: bool,
              mixture: str | None, unloaded: bool = False) -> tuple[bool, dict[str, Any]]:
    """(ready, checks): ready when the backbone is loaded, or `unloaded` by the residency
    limit (it loads on demand). Damage stays local: a broken domain (no loaded version) or
    a classifier that failed to load is listed in `checks`, not fatal. `mixture` is
    `routing.mixture`."""
    checks: dict[str, Any] = {}
    if backbone is not None and unloaded:
        checks["backbone"] = (f"unloaded ({backbone.label}): fewer backbones stay loaded "
                              "than are served (NMT_DIRECTIONS__RESIDENT); it is loaded "
                              "again on its next request")
        checks["modules"] = {}
        return True, checks
    checks["backbone"] = (f"loaded ({backbone.label})" if backbone and engine_loaded
                          else "failed: " + state.failures.get("backbone", "not loaded"))
    origin = state.classifier.origin if state.classifier is not None else None
    if state.classifier is not None:
        checks["classifier"] = (
            f"loaded (v{state.classifier.version})" if origin is None or not origin.shared
            else f"shared: {origin.backbone}'s router (v{origin.version}; this direction "
                 "has none of its own and reads the same source language)")
    elif "classifier" in state.failures:
        checks["classifier"] = ("failed: " + state.failures["classifier"] + "; "
                                "auto-routed requests use the generic backbone")
    else:
        checks["classifier"] = ("absent: " + (state.router_note + "; " if state.router_note
                                               else "") +
                                "auto-routed requests use the generic backbone")
    modules = {name: f"loaded (v{entry.version})" for name, entry in state.domains.items()}
    for name, problem in state.module_failures.items():
        modules[name] = (modules[name] + "; failed: " + problem if name in modules
                         else "broken: " + problem)
    checks["modules"] = modules
    broken = sorted(state.broken())
    if broken:
        checks["broken"] = broken
    if mixture is not None:
        checks["mixture"] = mixture_check(state, mixture)
    return engine_loaded, checks


def mixture_check(state: ServingState, name: str) -> str:
    """How requests without a domain are routed when `routing.mixture` names `name`."""
    entry = state.domains.get(name)
    if entry is None:
        return (f"not served: no active domain {name!r}; requests without a domain use "
                "the classifier")
    if not entry.mixes_domains:
        return (f"not used: domain {name!r} is of family {entry.family!r}, not a word-level "
                "mixture; requests without a domain use the classifier")
    return f"serving requests without a domain ({name} v{entry.version})"
