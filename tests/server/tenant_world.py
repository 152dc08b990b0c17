"""Two tenants on one live server (tests/server/test_tenants_*.py): the tiny en->fr store
with a shared domain (`medical`) and one domain of each tenant (`acme-legal`,
`beta-legal`), a router that knows all three; API keys on. The operator makes the
tenants and their keys over HTTP, as a deployment would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from conftest import BACKBONE, admin_headers, module_artifact
from fasttext_tiny import classifier_bytes

from model_store import Store
from tests.tiny import tiny_backbone_files

ROUTER_WORDS = {
    "medical": ["patient", "tablet", "dose"],
    "acme-legal": ["contract", "clause", "tenancy"],
    "beta-legal": ["court", "verdict", "appeal"],
}
DOMAIN_SEEDS = {"medical": 1, "acme-legal": 2, "beta-legal": 3}


def build_tenant_store(root: Path) -> Path:
    with Store.open(root, builtin_dir=None) as store:
        files = tiny_backbone_files()
        backbone = store.publish("backbone", BACKBONE, files,
                                 config=json.loads(files["config.json"]),
                                 provenance={"languages": {"source": "en", "target": "fr"}})
        store.activate("backbone", BACKBONE, backbone.version)
        fingerprint = store.record("backbone", BACKBONE).fingerprint
        for name, seed in DOMAIN_SEEDS.items():
            config, module = module_artifact(seed)
            manifest = store.publish("module", name, module, config=config,
                                     backbone_fingerprint=fingerprint)
            store.activate("module", name, manifest.version)
        router = store.publish("classifier", "router",
                               {"classifier.bin": classifier_bytes(ROUTER_WORDS)},
                               config={"labels": list(ROUTER_WORDS)},
                               backbone_fingerprint=fingerprint)
        store.activate("classifier", "router", router.version)
    return root


@dataclass(frozen=True)
class World:
    base: str
    acme: str  # a member key of tenant acme
    acme_admin: str
    beta: str
    beta_admin: str
    shared: str  # a key of no tenant
    beta_key_id: str


def _post(base: str, path: str, body: dict[str, Any], token: str | None = None) -> Any:
    answer = httpx.post(base + path, json=body, headers=admin_headers(token)
                        if token else admin_headers(), timeout=30)
    assert answer.status_code == 201, answer.text
    return answer.json()


def make_world(base: str) -> World:
    for tenant in ("acme", "beta"):
        _post(base, "/admin/tenants", {"name": tenant})
    keys = {f"{tenant}{suffix}": _post(base, f"/admin/tenants/{tenant}/keys",
                                       {"name": f"{tenant}{suffix}", "role": role})
            for tenant in ("acme", "beta")
            for suffix, role in (("", "member"), ("_admin", "admin"))}
    shared = _post(base, "/admin/keys", {"name": "everyone"})["key"]
    return World(base, keys["acme"]["key"], keys["acme_admin"]["key"], keys["beta"]["key"],
                 keys["beta_admin"]["key"], shared, keys["beta"]["id"])


def same_refusal(first: httpx.Response, second: httpx.Response, first_name: str,
                 second_name: str) -> bool:
    """Whether two answers are the same but for the name each asked about: a key cannot
    tell another tenant's resource from one that does not exist."""
    return (first.status_code == second.status_code
            and first.text.replace(first_name, "X") == second.text.replace(second_name, "X"))
