"""A store of two tiny directions (en->fr and fr->en), each backbone with modules of its
own: the same domain name on both, different weights. Shared by the server's direction
tests (tests/server/test_*directions*.py) and the web page's (tests/e2e/directions/)."""

from __future__ import annotations

import json
from pathlib import Path

from model_store import Store
from server.engine.artifacts import module_files
from tests.tiny import random_module, tiny_backbone_files, tiny_config

EN_FR, FR_EN = "tiny-en-fr", "tiny-fr-en"
# backbone -> {domain: module seed}
MODULES = {EN_FR: {"medical": 1, "law": 2}, FR_EN: {"medical": 5}}
ENGLISH = "The patient takes one tablet every day with a glass of water."
FRENCH = "Le patient prend un comprimé chaque jour avec un grand verre d'eau."


def build_two_directions(root: Path) -> Path:
    with Store.open(root, builtin_dir=None) as store:
        for seed, name in enumerate((EN_FR, FR_EN)):
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
