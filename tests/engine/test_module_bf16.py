"""Residual adapters run grouped (`EngineOptions.module_bf16`): every module of a batch in
one batched matmul per matrix. The grouped form equals the per-module adapter (within
float32 rounding in float32, bfloat16 rounding in bfloat16) for any layout of runs, a hot
swap drops the gathered copies, and a batch mixing adapters gives each row the tokens it
gets alone."""

from __future__ import annotations

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.engine import EngineOptions, Member, SentenceJob
from server.engine.families import Params
from server.engine.families.adapters import adapter
from server.engine.hooks import Side
from server.engine.slots import BatchHooks, ModuleBank, RowRun, build_bank
from tests.tiny import adapter_engine, random_module, tiny_config

CPU = torch.device("cpu")


def grouped_bank(dtype: torch.dtype,
                 family: str = "adapter") -> tuple[ModuleBank, list[Params]]:
    config = tiny_config()
    bank = build_bank(random_module(config, family, seed=0, bottleneck=6)[0], config,
                      n_slots=4, device=CPU, dtype=torch.float32, grouped_dtype=dtype)
    modules = [random_module(config, family, seed=10 + slot, bottleneck=6)[1]
               for slot in range(4)]
    for slot, params in enumerate(modules):
        bank.write(slot, params)
    return bank, modules


Layout = list[tuple[int, int, int]]  # (start, end, slot) runs
# Equal runs covering the batch (a view), unequal runs, plain rows between and around runs,
# one run.
LAYOUTS: list[Layout] = [[(0, 2, 0), (2, 4, 3), (4, 6, 1)], [(0, 1, 2), (1, 4, 0), (4, 6, 1)],
                         [(1, 3, 1), (4, 5, 3)], [(0, 6, 2)]]


def per_run(modules: list[Params], layout: Layout, hidden: torch.Tensor, side: Side,
            index: int) -> torch.Tensor:
    want = hidden.clone()
    for start, end, slot in layout:
        want[start:end] = hidden[start:end] + adapter(modules[slot], side, index,
                                                      hidden[start:end])
    return want


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_adapters_equal_each_module_on_its_rows(layout: Layout,
                                                        dtype: torch.dtype) -> None:
    bank, modules = grouped_bank(dtype)
    hooks = BatchHooks([RowRun(bank, slot, start, end) for start, end, slot in layout])
    assert hooks._grouped is not None
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(6, 3, tiny_config().d_model, generator=generator)
    with torch.inference_mode():
        sites: list[tuple[Side, int]] = [("encoder", 0), ("decoder", 1)]
        for side, index in sites:
            got = hooks.after_layer(side, index, hidden)
            want = per_run(modules, layout, hidden, side, index)
            if dtype == torch.float32:
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            else:  # bfloat16 keeps 8 bits of mantissa: the adapter's part moves by ~1%
                change = (want - hidden).abs().max()
                assert float((got - want).abs().max()) < 0.03 * float(change)
            covered = {row for start, end, _ in layout for row in range(start, end)}
            for row in set(range(6)) - covered:  # rows without a module: untouched
                assert torch.equal(got[row], hidden[row])


def test_a_hot_swap_regathers_the_grouped_copies() -> None:
    bank, modules = grouped_bank(torch.float32)
    hooks = BatchHooks([RowRun(bank, 1, 0, 2), RowRun(bank, 2, 2, 4)])
    hidden = torch.randn(4, 2, tiny_config().d_model)
    with torch.inference_mode():
        before = hooks.after_layer("decoder", 0, hidden)
        _, other = random_module(tiny_config(), "adapter", seed=99, bottleneck=6)
        bank.write(2, other)
        after = hooks.after_layer("decoder", 0, hidden)
    torch.testing.assert_close(after[:2], before[:2])
    want = hidden[2:] + adapter(other, "decoder", 0, hidden[2:])
    torch.testing.assert_close(after[2:], want, atol=1e-5, rtol=1e-5)


def test_highway_adapters_keep_the_per_module_path() -> None:
    bank, _ = grouped_bank(torch.bfloat16, family="highway")
    assert bank.grouped_dtype is None
    assert BatchHooks([RowRun(bank, 0, 0, 2)])._grouped is None


@pytest.mark.parametrize("beam", [1, 3])
def test_a_grouped_batch_mixing_adapters_equals_rows_alone(beam: int) -> None:
    """Modules, plain rows and an ensemble in one batch, sources of different lengths:
    each row decodes as it does alone."""
    engine = adapter_engine(EngineOptions(module_bf16=True))
    members = [(Member("m1"),), (Member("m2"),), (Member(None),), (Member("m3"),),
               (Member("m1", 0.5), Member("m3", 0.5)), (Member("m2"),)]
    jobs = [SentenceJob([5 + i, 6, 7, 8, 3][: 5 - i % 3] + [3], chosen, 12)
            for i, chosen in enumerate(members)]
    options = SearchOptions(beam_size=beam, n_best=1)
    mixed = engine.translate(jobs, options)
    for job, got in zip(jobs, mixed, strict=True):
        alone = engine.translate([job], options)[0]
        assert got[0].tokens == alone[0].tokens
        assert got[0].score == pytest.approx(alone[0].score, abs=1e-3)
    plain = engine.translate([SentenceJob(jobs[0].source_ids, (Member(None),), 12)], options)
    assert plain[0][0].tokens != mixed[0][0].tokens or \
        plain[0][0].score != pytest.approx(mixed[0][0].score, abs=1e-3)
