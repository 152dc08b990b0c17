"""Every module family, mixed-domain batches and ensembles decode on another device or in
another precision as they do in float32 on the CPU: on CUDA (skipped without a GPU) in
float32, float16 and bfloat16, and in bfloat16 on the CPU (the half-precision code path,
checked wherever the suite runs). A batch of several residual adapters decodes grouped
(one batched matmul per matrix and layer) as it does one module at a time.

The modules are made once, on the CPU, and the same tensors are registered in both
engines; float32 must agree within float tolerance, half precision within its own (a
near-tie may flip a token, which then changes the rest of that sentence)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families import Params
from server.engine.families.adapters import ResidualAdapter
from server.engine.hooks import Side
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
# One batch of residual adapters of one shape and plain rows, one member each: the adapters
# run grouped (one batched matmul per matrix and layer; by default on CUDA), in runs of
# unequal length, and every step is a fixed one (a CUDA graph replay on CUDA).
ADAPTER_MIX: list[tuple[Member, ...]] = [
    (Member(name),) for name in ("adapter0", "adapter1", "adapter1", None, "adapter2",
                                 "adapter0", "adapter0", "adapter0", "adapter2", None)]


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
    for copy in (1, 2):  # more residual adapters of adapter0's shape (its bank)
        made[f"adapter{copy}"] = random_module(tiny_config(), "adapter", seed=100 + copy)
    for copy, sides in enumerate(("encoder", "both")):
        made[MIXTURES[copy]] = random_mixture(reference.model, seed=20 + copy, sides=sides)
    return made


def engine_with(options: EngineOptions,
                made: dict[str, tuple[dict[str, object], Params]]) -> Engine:
    engine = build_engine(tiny_backbone_files(), options)
    for module_id, (config, params) in made.items():
        engine.register_module(module_id, config, {k: v.clone() for k, v in params.items()})
    return engine


def translate(engine: Engine, search: SearchOptions,
              members: list[tuple[Member, ...]]) -> list[tuple[list[int], float]]:
    jobs = [SentenceJob(SOURCES[row % len(SOURCES)], chosen, 10)
            for row, chosen in enumerate(members)]
    return [(hyps[0].tokens, hyps[0].score) for hyps in engine.translate(jobs, search)]


def assert_agree(options: EngineOptions, tolerance: Tolerance,
                 members: list[tuple[Member, ...]] = MEMBERS) -> None:
    made = modules()
    for search in (SearchOptions(beam_size=1), SearchOptions(beam_size=3)):
        expected = translate(engine_with(EngineOptions(), made), search, members)
        got = translate(engine_with(options, made), search, members)
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


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "tolerance"),
                         [("float32", FLOAT32), ("float16", HALF), ("bfloat16", HALF)])
def test_cuda_decodes_grouped_adapters_as_the_cpu(dtype: str, tolerance: Tolerance) -> None:
    options = EngineOptions(device="cuda", dtype=dtype)
    engine = engine_with(options, {})
    assert engine.fixed_steps and engine.modules.grouped_dtype == engine.dtype
    assert_agree(options, tolerance, ADAPTER_MIX)


def test_grouped_adapters_decode_as_one_call_per_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    grouped_calls: list[int] = []  # modules per grouped call
    original = ResidualAdapter.after_layer_grouped

    def counted(self: ResidualAdapter, stacked: Params, side: Side, index: int,
                hidden: torch.Tensor) -> torch.Tensor:
        grouped_calls.append(hidden.shape[0])
        return original(self, stacked, side, index, hidden)

    monkeypatch.setattr(ResidualAdapter, "after_layer_grouped", counted)
    assert_agree(EngineOptions(module_grouped=True), FLOAT32, ADAPTER_MIX)
    assert_agree(EngineOptions(module_grouped=True, fixed_steps=True), FLOAT32, ADAPTER_MIX)
    assert grouped_calls and max(grouped_calls) > 1  # several modules' runs in one call


@pytest.mark.parametrize(("options", "grouped"), [
    (EngineOptions(), None),  # CPU: one call per module unless asked
    (EngineOptions(module_grouped=True), torch.float32),
    (EngineOptions(dtype="bfloat16", module_grouped=True), torch.bfloat16),
    (EngineOptions(module_bf16=True), torch.bfloat16),
    (EngineOptions(module_bf16=True, module_grouped=False), torch.bfloat16),
])
def test_the_grouped_dtype_follows_the_options(options: EngineOptions,
                                               grouped: torch.dtype | None) -> None:
    assert engine_with(options, {}).modules.grouped_dtype == grouped
