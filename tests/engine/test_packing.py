"""oneDNN-prepacked linear layers: same results as `nn.Linear`, same parameters, and an
engine built with them translates like one built without."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import EngineOptions, Member, SentenceJob
from server.engine.families.adapters import adapter
from server.engine.packing import PackedLinear, pack_linears, packed_key, packing_available
from server.engine.slots import build_bank
from tests.tiny import (
    adapter_engine,
    random_backbone,
    random_module,
    tiny_backbone_files,
    tiny_config,
)

pytestmark = pytest.mark.skipif(not packing_available(), reason="torch built without oneDNN")


def test_packed_linear_matches_linear_for_any_row_count() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(48, 80)
    packed = PackedLinear.wrap(linear)
    with torch.inference_mode():
        for shape in [(1, 48), (7, 48), (3, 5, 48), (130, 48)]:
            x = torch.randn(shape)
            torch.testing.assert_close(packed(x), linear(x), atol=1e-5, rtol=1e-5)


def test_packed_linear_shares_parameters_and_falls_back_under_autograd() -> None:
    linear = nn.Linear(16, 8)
    packed = PackedLinear.wrap(linear)
    assert packed.weight is linear.weight and packed.bias is linear.bias
    x = torch.randn(4, 16, requires_grad=True)
    packed(x).sum().backward()  # the packed kernel has no backward: F.linear must run
    assert x.grad is not None and linear.weight.grad is not None


def test_repack_follows_a_changed_weight() -> None:
    linear = nn.Linear(16, 8)
    packed = PackedLinear.wrap(linear)
    with torch.no_grad():
        linear.weight.mul_(2)
    packed.repack()
    x = torch.randn(3, 16)
    with torch.inference_mode():
        torch.testing.assert_close(packed(x), linear(x), atol=1e-5, rtol=1e-5)


def test_pack_linears_keeps_the_state_dict() -> None:
    model = random_backbone(tiny_config(), seed=1)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    count = pack_linears(model)
    assert count == sum(isinstance(m, PackedLinear) for m in model.modules()) > 0
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[name], before[name]) for name in before)


@pytest.mark.parametrize("beam", [1, 3])
def test_engine_with_packed_weights_translates_like_without(beam: int) -> None:
    files = tiny_backbone_files()
    engines = [build_engine(files, EngineOptions(packed=packed)) for packed in (True, False)]
    assert any(isinstance(m, PackedLinear) for m in engines[0].model.modules())
    assert not any(isinstance(m, PackedLinear) for m in engines[1].model.modules())
    jobs = [SentenceJob([5 + i, 6, 7, 8, 3], (Member(None),), 12) for i in range(5)]
    options = SearchOptions(beam_size=beam, n_best=1)
    packed, plain = (engine.translate(jobs, options) for engine in engines)
    assert [r[0].tokens for r in packed] == [r[0].tokens for r in plain]
    assert [r[0].score for r in packed] == pytest.approx([r[0].score for r in plain], abs=1e-4)


@pytest.mark.parametrize("family", ["adapter", "highway", "gated"])
def test_a_packed_adapter_slot_computes_what_its_parameters_do(family: str) -> None:
    config = tiny_config()
    module_config, params = random_module(config, family, seed=3, bottleneck=6)
    bank = build_bank(module_config, config, n_slots=2, device=torch.device("cpu"),
                      dtype=torch.float32, pack=True)
    bank.write(1, params)
    view = bank.view(1)
    assert packed_key("dec.down_w", 0) in view and packed_key("enc.up_w", 0) in view
    hidden = torch.randn(5, 3, config.d_model)
    with torch.inference_mode():
        for side in ("encoder", "decoder"):
            torch.testing.assert_close(adapter(view, side, 0, hidden),
                                       adapter(params, side, 0, hidden), atol=1e-5, rtol=1e-5)
        _, other = random_module(config, family, seed=4, bottleneck=6)
        bank.write(1, other)  # the hot swap repacks
        torch.testing.assert_close(adapter(bank.view(1), "decoder", 1, hidden),
                                   adapter(other, "decoder", 1, hidden), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beam", [1, 2])
def test_a_batch_mixing_adapters_translates_alike_packed_or_not(beam: int) -> None:
    engines = [adapter_engine(EngineOptions(packed=packed)) for packed in (True, False)]
    jobs = [SentenceJob([5 + i, 6, 7, 8, 3], (Member(f"m{1 + i % 3}"),), 12) for i in range(6)]
    options = SearchOptions(beam_size=beam, n_best=1)
    packed, plain = (engine.translate(jobs, options) for engine in engines)
    assert [r[0].tokens for r in packed] == [r[0].tokens for r in plain]
    assert [r[0].score for r in packed] == pytest.approx([r[0].score for r in plain], abs=1e-4)
