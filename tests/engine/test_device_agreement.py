"""Every module family, mixed-domain batches and ensembles decode on another device or in
another precision as they do in float32 on the CPU: on CUDA (skipped without a GPU) in
float32, float16 and bfloat16, and in bfloat16 on the CPU (the half-precision code path,
checked wherever the suite runs).

The modules are made once, on the CPU, and the same tensors are registered in both
engines; float32 must agree within float tolerance, half precision within its own (a
near-tie may flip a token, which then changes the rest of that sentence)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families import Params
from tests.engine.conftest import FAMILY_NAMES
from tests.engine.test_mixing import random_mixture
from tests.tiny import random_module, tiny_backbone_files, tiny_config

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3], [11, 12, 13, 14, 15, 16, 3], [20, 21, 22, 3]]
MIXTURES = ("mixing0", "mixing1")  # word-level mixtures: encoder side, both sides
# One batch: every family's module, both mixtures, the plain backbone, and ensembles.
MEMBERS: list[tuple[Member, ...]] = [
    *[(Member(f"{family}0"),) for family in FAMILY_NAMES],
    *[(Member(name),) for name in MIXTURES],
    (Member(None),),
    (Member("adapter0", 0.6), Member("sf0", 0.4)),
    (Member(None, 0.5), Member("mixing1", 0.5)),
    (Member("highway0"), Member("pa0"), Member("ldr0")),
]


@dataclass(frozen=True)
class Tolerance:
    flips: int  # sentences whose tokens may differ (near-ties)
    score: float  # absolute difference allowed in the scores of agreeing sentences


FLOAT32 = Tolerance(flips=1, score=1e-3)
HALF = Tolerance(flips=4, score=0.1)


def modules() -> dict[str, tuple[dict[str, object], Params]]:
    """One module of every family and two mixtures, made on the CPU from float32 weights."""
    reference = build_engine(tiny_backbone_files(), EngineOptions())
    weights = reference.model.state_dict()
    made: dict[str, tuple[dict[str, object], Params]] = {}
    for index, family in enumerate(FAMILY_NAMES):
        made[f"{family}0"] = random_module(tiny_config(), family, seed=10 * index,
                                           weights=weights)
    for copy, sides in enumerate(("encoder", "both")):
        made[MIXTURES[copy]] = random_mixture(reference.model, seed=20 + copy, sides=sides)
    return made


def engine_with(options: EngineOptions,
                made: dict[str, tuple[dict[str, object], Params]]) -> Engine:
    engine = build_engine(tiny_backbone_files(), options)
    for module_id, (config, params) in made.items():
        engine.register_module(module_id, config, {k: v.clone() for k, v in params.items()})
    return engine


def translate(engine: Engine, search: SearchOptions) -> list[tuple[list[int], float]]:
    jobs = [SentenceJob(SOURCES[row % len(SOURCES)], members, 10)
            for row, members in enumerate(MEMBERS)]
    return [(hyps[0].tokens, hyps[0].score) for hyps in engine.translate(jobs, search)]


def assert_agree(options: EngineOptions, tolerance: Tolerance) -> None:
    made = modules()
    for search in (SearchOptions(beam_size=1), SearchOptions(beam_size=3)):
        expected = translate(engine_with(EngineOptions(), made), search)
        got = translate(engine_with(options, made), search)
        flipped = [row for row, (a, b) in enumerate(zip(expected, got, strict=True))
                   if a[0] != b[0]]
        assert len(flipped) <= tolerance.flips, (search, flipped, expected, got)
        for row, ((_, want), (_, have)) in enumerate(zip(expected, got, strict=True)):
            if row not in flipped:
                assert have == pytest.approx(want, abs=tolerance.score), (search, row)


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "tolerance"),
                         [("float32", FLOAT32), ("float16", HALF), ("bfloat16", HALF)])
def test_cuda_decodes_every_family_as_the_cpu(dtype: str, tolerance: Tolerance) -> None:
    assert_agree(EngineOptions(device="cuda", dtype=dtype), tolerance)


def test_cpu_bfloat16_decodes_every_family_as_float32() -> None:
    assert_agree(EngineOptions(dtype="bfloat16"), HALF)
