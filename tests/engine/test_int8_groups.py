"""The grouped int8 kernel (server/engine/int8_groups.py) and the int8 banks that use it
(`EngineOptions.module_int8` with matrices of 64-column blocks): the kernel equals float32
arithmetic on the dequantized weights for any rows, slots and ReLU; a bank's grouped form
equals each module on its rows within int8 rounding; a hot swap repacks; a batch mixing
adapters gives each row the tokens it gets alone; where nothing compiles, int8 banks keep
one matmul per module."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine import int8_groups
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.engine.families.adapters import adapter
from server.engine.hooks import Side
from server.engine.packing import quantized_key
from server.engine.slots import BatchHooks, ModuleBank, RowRun, build_bank
from tests.services import install_hint, require_program, unavailable
from tests.tiny import random_module, tiny_backbone_files, tiny_config

CPU = torch.device("cpu")
FITTING = tiny_config(d_model=64, d_ff=128)  # adapters of 64-column blocks
BOTTLENECK = 64



@pytest.fixture(autouse=True)
def kernel_built(request: pytest.FixtureRequest) -> None:
    """Skip (locally) or fail (CI) where the kernel does not build; the test of that case
    builds nothing."""
    if "no_kernel" in request.fixturenames:
        return
    if "CC" not in os.environ:
        require_program("cc")
    if not int8_groups.available():
        unavailable(f"the grouped int8 kernel did not build ({install_hint('cc')}; the log "
                    "holds the compiler's error)")


def dequantized(weights: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """`pack`'s output back as `[..., in, out]` float32."""
    *lead, blocks, rows, block = weights.shape
    columns = weights.float().transpose(-3, -2).reshape(*lead, rows, blocks * block)
    return columns * scales.unsqueeze(-2)


@pytest.mark.parametrize("rows", [1, 4, 7, 13])
@pytest.mark.parametrize("relu", [True, False])
def test_the_kernel_equals_float32_on_the_dequantized_weights(rows: int, relu: bool) -> None:
    generator = torch.Generator().manual_seed(rows)
    matrices = torch.randn(3, 40, 192, generator=generator)  # 3 slots, 40 in, 192 out
    weights, scales = int8_groups.pack(matrices)
    slots = torch.tensor([2, 0, 2, 1])  # a slot may serve two groups
    x = torch.randn(4, rows, 40, generator=generator)
    bias = torch.randn(4, 1, 192, generator=generator)
    got = int8_groups.matmul(x, weights, scales, slots, bias, relu=relu)
    want = torch.bmm(x, dequantized(weights, scales)[slots]) + bias
    torch.testing.assert_close(got, want.relu() if relu else want, atol=1e-4, rtol=1e-5)


def test_a_call_on_all_threads_equals_its_groups_on_one() -> None:
    """Large calls run on torch's threads, small ones on one; every output is computed
    the same way either way."""
    generator = torch.Generator().manual_seed(5)
    weights, scales = int8_groups.pack(torch.randn(8, 512, 256, generator=generator))
    slots = torch.arange(8)
    x = torch.randn(8, 4, 512, generator=generator)
    bias = torch.randn(8, 1, 256, generator=generator)
    assert 8 * 512 * 256 > int8_groups.PARALLEL_BYTES >= 512 * 256  # all, then one group
    together = int8_groups.matmul(x, weights, scales, slots, bias, relu=False)
    for group in range(8):
        alone = int8_groups.matmul(x[group:group + 1], weights, scales, slots[group:group + 1],
                                   bias[group:group + 1], relu=False)
        assert torch.equal(together[group:group + 1], alone)


def test_packing_rounds_each_weight_to_its_columns_step() -> None:
    matrices = torch.randn(2, 3, 16, 128, generator=torch.Generator().manual_seed(0))
    weights, scales = int8_groups.pack(matrices)
    assert weights.dtype == torch.int8 and weights.shape == (2, 3, 2, 16, 64)
    assert scales.shape == (2, 3, 128)
    error = (dequantized(weights, scales) - matrices).abs()
    assert bool((error <= scales.unsqueeze(-2) / 2 + 1e-6).all())
    assert int(weights.abs().max()) == 127  # each column's largest weight uses the range


def test_mismatched_inputs_are_refused() -> None:
    weights, scales = int8_groups.pack(torch.randn(2, 32, 64))
    with pytest.raises(ValueError, match="mismatched inputs"):
        int8_groups.matmul(torch.randn(2, 3, 31), weights, scales, torch.tensor([0, 1]),
                           torch.zeros(2, 1, 64), relu=False)
    with pytest.raises(ValueError, match="mismatched inputs"):
        int8_groups.matmul(torch.randn(2, 3, 32), weights, scales, torch.tensor([0]),
                           torch.zeros(2, 1, 64), relu=False)


def int8_bank() -> tuple[ModuleBank, list[dict[str, torch.Tensor]]]:
    bank = build_bank(random_module(FITTING, "adapter", seed=0, bottleneck=BOTTLENECK)[0],
                      FITTING, n_slots=4, device=CPU, dtype=torch.float32, int8=True)
    modules = [random_module(FITTING, "adapter", seed=10 + slot, bottleneck=BOTTLENECK)[1]
               for slot in range(4)]
    for slot, params in enumerate(modules):
        bank.write(slot, params)
    return bank, modules


def close_to_each_module(bank: ModuleBank, modules: list[dict[str, torch.Tensor]],
                         layout: list[tuple[int, int, int]], hidden: torch.Tensor) -> None:
    hooks = BatchHooks([RowRun(bank, slot, start, end) for start, end, slot in layout])
    assert hooks._grouped is not None
    with torch.inference_mode():
        sites: list[tuple[Side, int]] = [("encoder", 0), ("decoder", 1)]
        for side, index in sites:
            got = hooks.after_layer(side, index, hidden)
            for start, end, slot in layout:
                change = adapter(modules[slot], side, index, hidden[start:end])
                error = (got[start:end] - hidden[start:end] - change).abs().max()
                assert 0 < float(error) < 0.02 * float(change.abs().max())  # int8 rounding


@pytest.mark.parametrize("layout", [[(0, 2, 0), (2, 4, 3), (4, 6, 1)],
                                    [(0, 1, 2), (1, 4, 0), (5, 6, 1)], [(0, 6, 2)]])
def test_an_int8_bank_runs_grouped_close_to_each_module(
        layout: list[tuple[int, int, int]]) -> None:
    bank, modules = int8_bank()
    assert bank.int8_grouped
    assert quantized_key("dec.down_w", 0) not in bank.view(0)  # no per-module copies
    hidden = torch.randn(6, 3, FITTING.d_model, generator=torch.Generator().manual_seed(1))
    close_to_each_module(bank, modules, layout, hidden)


def test_a_hot_swap_repacks_the_slot() -> None:
    bank, modules = int8_bank()
    hidden = torch.randn(4, 2, FITTING.d_model, generator=torch.Generator().manual_seed(2))
    layout = [(0, 2, 1), (2, 4, 2)]
    close_to_each_module(bank, modules, layout, hidden)
    modules[2] = random_module(FITTING, "adapter", seed=99, bottleneck=BOTTLENECK)[1]
    bank.write(2, modules[2])
    close_to_each_module(bank, modules, layout, hidden)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    built = build_engine(tiny_backbone_files(FITTING), EngineOptions(module_int8=True))
    for seed in range(1, 4):
        built.register_module(f"m{seed}", *random_module(FITTING, "adapter", seed=seed,
                                                         bottleneck=BOTTLENECK))
    yield built


@pytest.mark.parametrize("beam", [1, 3])
def test_an_int8_batch_mixing_adapters_equals_rows_alone(engine: Engine, beam: int) -> None:
    """Modules, plain rows and an ensemble in one batch, sources of different lengths: the
    kernel computes every row on its own (no scale shared between rows), so each row
    decodes as it does alone."""
    members = [(Member("m1"),), (Member("m2"),), (Member(None),), (Member("m3"),),
               (Member("m1", 0.5), Member("m3", 0.5)), (Member("m2"),)]
    jobs = [SentenceJob([5 + i, 6, 7, 8, 3][: 5 - i % 3] + [3], chosen, 12)
            for i, chosen in enumerate(members)]
    options = SearchOptions(beam_size=beam, n_best=1)
    translate = engine.translate
    mixed = translate(jobs, options)
    for job, got in zip(jobs, mixed, strict=True):
        alone = translate([job], options)[0]
        assert got[0].tokens == alone[0].tokens
        assert got[0].score == pytest.approx(alone[0].score, abs=1e-4)
    plain = translate([SentenceJob(jobs[0].source_ids, (Member(None),), 12)], options)
    assert plain[0][0].score != pytest.approx(mixed[0][0].score, abs=1e-4)


@pytest.fixture
def no_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A machine where the kernel does not build: an empty cache and a failing compiler."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    int8_groups._library.cache_clear()
    try:
        yield
    finally:
        monkeypatch.undo()
        int8_groups._library.cache_clear()


def test_without_the_kernel_int8_banks_keep_one_matmul_per_module(
        no_kernel: None, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=int8_groups.__name__):
        assert not int8_groups.available()
    assert "did not build" in caplog.text and "false failed" in caplog.text
    assert list((tmp_path / "nmt-server").iterdir()) == []  # no library, no partial file
    bank = build_bank(random_module(FITTING, "adapter", seed=0, bottleneck=BOTTLENECK)[0],
                      FITTING, n_slots=2, device=CPU, dtype=torch.float32, int8=True)
    bank.write(0, random_module(FITTING, "adapter", seed=1, bottleneck=BOTTLENECK)[1])
    assert not bank.int8_grouped
    assert quantized_key("dec.down_w", 0) in bank.view(0)
    assert BatchHooks([RowRun(bank, 0, 0, 2)])._grouped is None
