"""The readiness checks (`GET /health/ready`) of a serving state."""

from __future__ import annotations

from typing import Any

from model_store import Manifest
from server.serving.state import ServingState


def readiness(state: ServingState, *, backbone: Manifest | None, engine_loaded: bool,
              mixture: str | None) -> tuple[bool, dict[str, Any]]:
    """(ready, checks): backbone loaded, classifier loaded (or absent), every active
    domain served by some loaded version. `mixture` is `routing.mixture`."""
    checks: dict[str, Any] = {}
    checks["backbone"] = (f"loaded ({backbone.label})" if backbone and engine_loaded
                          else "failed: " + state.failures.get("backbone", "not loaded"))
    if state.classifier is not None:
        checks["classifier"] = f"loaded (v{state.classifier.version})"
    elif "classifier" in state.failures:
        checks["classifier"] = "failed: " + state.failures["classifier"]
    else:
        checks["classifier"] = "absent: auto-routed requests use the generic backbone"
    modules = {name: f"loaded (v{entry.version})" for name, entry in state.domains.items()}
    for name, problem in state.module_failures.items():
        modules[name] = modules.get(name, "not loaded") + "; failed: " + problem
    checks["modules"] = modules
    if mixture is not None:
        checks["mixture"] = mixture_check(state, mixture)
    unserved = [name for name in state.module_failures if name not in state.domains]
    ready = (engine_loaded and not unserved
             and (state.classifier is not None or "classifier" not in state.failures))
    return ready, checks


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
