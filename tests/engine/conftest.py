from __future__ import annotations

import pytest

from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions
from tests.tiny import random_module, tiny_backbone_files, tiny_config

FAMILY_NAMES = ("adapter", "highway", "gated", "ldr", "sf", "pa")


@pytest.fixture
def engine() -> Engine:
    """A tiny engine with two random modules of every family registered."""
    built = build_engine(tiny_backbone_files(), EngineOptions(slots_per_bank=4, host_capacity=16))
    weights = built.model.state_dict()  # sf / pa start from the backbone's projections
    for index, family in enumerate(FAMILY_NAMES):
        for copy in range(2):
            config, params = random_module(tiny_config(), family, seed=10 * index + copy,
                                           weights=weights)
            built.register_module(f"{family}{copy}", config, params)
    return built
