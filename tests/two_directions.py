"""A store of two tiny directions (en->fr and fr->en), each backbone with modules of its
own: the same domain name on both, different weights; with `german`, a third (en->de).
Shared by the server's direction tests (tests/server/test_*directions*.py), the doors'
third-direction tests and the web page's (tests/e2e/directions/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from model_store import Store
from server.engine.artifacts import module_files
from tests.tiny import random_module, tiny_backbone_files, tiny_config

EN_FR, FR_EN, EN_DE = "tiny-en-fr", "tiny-fr-en", "tiny-en-de"
# backbone -> {domain: module seed}
MODULES = {EN_FR: {"medical": 1, "law": 2}, FR_EN: {"medical": 5}, EN_DE: {"medical": 7}}
ENGLISH = "The patient takes one tablet every day with a glass of water."
FRENCH = "Le patient prend un comprimé chaque jour avec un grand verre d'eau."
GERMAN = "Der Patient nimmt jeden Tag eine Tablette mit einem Glas Wasser ein."


def build_two_directions(root: Path, *, german: bool = False) -> Path:
    """en->fr (the store's first backbone) and fr->en; with `german`, en->de as well (a
    backbone whose name gives its pair, as a published en->de one's manifest does)."""
    backbones = (EN_FR, FR_EN, EN_DE) if german else (EN_FR, FR_EN)
    with Store.open(root, builtin_dir=None) as store:
        for seed, name in enumerate(backbones):
            files = tiny_backbone_files(seed=seed)
            backbone = store.publish("backbone", name, files,
                                     config=json.loads(files["config.json"]))
            store.activate("backbone", name, backbone.version)
            for domain, module_seed in MODULES[name].items():
                config, params = random_module(tiny_config(), "adapter", seed=module_seed,
                                               bottleneck=4)
                published = store.publish("module", domain, module_files(params),
                                          config=config,
                                          backbone_fingerprint=backbone.backbone_fingerprint)
                store.activate("module", domain, published.version, backbone=name)
    return root


def translate(client: TestClient, **body: Any) -> dict[str, Any]:
    """A `/translate` answer that must succeed."""
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer
