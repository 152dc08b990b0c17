"""OpenNMT-py import: the engine's outputs equal an independent pre-norm reference written
here from OpenNMT-py's definitions (interleaved positions, pre-norm layers, final norms)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from converters.checks import ConversionError
from converters.opennmt import convert_opennmt
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, Member, SentenceJob
from tests.converters.opennmt_fixture import D_MODEL, HEADS, LAYERS, opennmt_checkpoint

LOGIT_TOLERANCE = 1e-4


class Reference:
    """OpenNMT-py's Transformer over its own state dict, one sentence, no caching."""

    def __init__(self, checkpoint: dict[str, Any]) -> None:
        self.state = checkpoint["model"]
        self.generator = checkpoint["generator"]
        self.opt = checkpoint["opt"]
        self.act = F.gelu if self.opt["pos_ffn_activation_fn"] == "gelu" else F.relu

    def linear(self, x: Tensor, name: str) -> Tensor:
        out = x @ self.state[f"{name}.weight"].t()
        bias = self.state.get(f"{name}.bias")
        return out if bias is None else out + bias

    def norm(self, x: Tensor, name: str) -> Tensor:
        return F.layer_norm(x, (D_MODEL,), self.state[f"{name}.weight"],
                            self.state[f"{name}.bias"], eps=self.opt["norm_eps"])

    def attention(self, query: Tensor, memory: Tensor, name: str, *, causal: bool) -> Tensor:
        def heads(x: Tensor) -> Tensor:  # [len, d] -> [heads, len, d/heads]
            return x.view(x.shape[0], HEADS, D_MODEL // HEADS).transpose(0, 1)

        q = heads(self.linear(query, f"{name}.linear_query"))
        k = heads(self.linear(memory, f"{name}.linear_keys"))
        v = heads(self.linear(memory, f"{name}.linear_values"))
        scores = q @ k.transpose(1, 2) / math.sqrt(D_MODEL // HEADS)
        if causal:
            future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, -float("inf"))
        context = (scores.softmax(-1) @ v).transpose(0, 1).reshape(query.shape[0], D_MODEL)
        return self.linear(context, f"{name}.final_linear")

    def feed_forward(self, x: Tensor, name: str) -> Tensor:
        hidden = self.act(self.linear(self.norm(x, f"{name}.layer_norm"), f"{name}.w_1"))
        return x + self.linear(hidden, f"{name}.w_2")  # the residual is inside, as in onmt

    def embed(self, ids: list[int], side: str) -> Tensor:
        table = self.state[f"{side}.embeddings.make_embedding.emb_luts.0.weight"]
        position = torch.arange(len(ids), dtype=torch.float32)[:, None]
        rate = torch.exp(torch.arange(0, D_MODEL, 2).float() * -(math.log(10000.0) / D_MODEL))
        pe = torch.zeros(len(ids), D_MODEL)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * rate), torch.cos(position * rate)
        return table[torch.tensor(ids)] * math.sqrt(D_MODEL) + pe

    def logits(self, source: list[int], target: list[int]) -> Tensor:
        x = self.embed(source, "encoder")
        for i in range(LAYERS):
            name = f"encoder.transformer.{i}"
            h = self.norm(x, f"{name}.layer_norm")
            x = self.feed_forward(x + self.attention(h, h, f"{name}.self_attn", causal=False),
                                  f"{name}.feed_forward")
        memory = self.norm(x, "encoder.layer_norm")
        y = self.embed(target, "decoder")
        for i in range(LAYERS):
            name = f"decoder.transformer_layers.{i}"
            h = self.norm(y, f"{name}.layer_norm_1")
            y = y + self.attention(h, h, f"{name}.self_attn", causal=True)
            h = self.norm(y, f"{name}.layer_norm_2")
            y = y + self.attention(h, memory, f"{name}.context_attn", causal=False)
            y = self.feed_forward(y, f"{name}.feed_forward")
        out = self.norm(y, "decoder.layer_norm") @ self.generator["weight"].t()
        return out + self.generator["bias"]

    def greedy(self, source: list[int], *, start: int, eos: int, max_length: int) -> list[int]:
        """The slow oracle: recompute the whole prefix at every step."""
        prefix = [start]
        while len(prefix) <= max_length:
            token = int(self.logits(source, prefix)[-1].argmax())
            if token == eos:
                break
            prefix.append(token)
        return prefix[1:]


def convert(path: Path, spm_path: Path) -> dict[str, bytes]:
    return convert_opennmt(path, source_spm=spm_path, target_spm=spm_path)


def random_sources(engine: Engine, count: int) -> list[list[int]]:
    config, generator = engine.config, torch.Generator().manual_seed(5)
    specials = {config.pad_id, config.eos_id, config.decoder_start_id}
    rows = []
    for row in range(count):
        ids = torch.randint(0, config.src_vocab_size, (3 + 2 * row,), generator=generator)
        rows.append([i for i in ids.tolist() if i not in specials] + [config.eos_id])
    return rows


def variant(tmp_path: Path, **options: Any) -> tuple[Path, dict[str, Any]]:
    checkpoint = opennmt_checkpoint(**options)
    path = tmp_path / "variant.pt"
    torch.save(checkpoint, path)
    return path, checkpoint


@pytest.mark.parametrize("options", [
    {"activation": "gelu", "share": True, "qkv_bias": False},
    {"activation": "relu", "share": False, "qkv_bias": True, "seed": 1},
    {"activation": "gelu", "share": False, "qkv_bias": False, "seed": 2}])
def test_logits_equal_reference(options: dict[str, Any], tmp_path: Path, spm_path: Path) -> None:
    path, checkpoint = variant(tmp_path, **options)
    engine = build_engine(convert(path, spm_path))
    reference = Reference(checkpoint)
    target = [engine.config.decoder_start_id, 7, 19, 33, 5, 61]
    for source in random_sources(engine, 3):
        with torch.no_grad():
            ours = engine.model(torch.tensor([source]), torch.tensor([target]))[0]
        assert (ours - reference.logits(source, target)).abs().max().item() < LOGIT_TOLERANCE


def test_greedy_tokens_equal_reference(opennmt_path: Path, spm_path: Path) -> None:
    engine = build_engine(convert(opennmt_path, spm_path))
    reference = Reference(torch.load(opennmt_path, weights_only=True))
    rows = random_sources(engine, 5)
    jobs = [SentenceJob(ids, (Member(None),), 10) for ids in rows]
    ours = [hyps[0].tokens for hyps in engine.translate(jobs, SearchOptions())]
    config = engine.config
    assert ours == [reference.greedy(ids, start=config.decoder_start_id, eos=config.eos_id,
                                     max_length=10) for ids in rows]
    assert len({tuple(tokens) for tokens in ours}) > 1


def test_config_follows_the_options(opennmt_path: Path, spm_path: Path) -> None:
    config = json.loads(convert(opennmt_path, spm_path)["config.json"])
    assert config["normalize_before"] is True
    assert config["positions"] == "sinusoidal_interleaved"
    assert config["shared_embeddings"] == "none" and config["output_bias"] is True
    assert config["layer_norm_eps"] == 1e-6
    assert (config["unk_id"], config["pad_id"], config["decoder_start_id"], config["eos_id"]) \
        == (0, 1, 2, 3)


def test_shared_options_select_the_embedding_layout(tmp_path: Path, spm_path: Path) -> None:
    path, _ = variant(tmp_path, share=True)
    assert json.loads(convert(path, spm_path)["config.json"])["shared_embeddings"] == "all"


def test_sequential_generator_names_are_accepted(tmp_path: Path, spm_path: Path) -> None:
    path, checkpoint = variant(tmp_path, seed=4)
    expected = convert(path, spm_path)
    checkpoint["generator"] = {f"0.{k}": v for k, v in checkpoint["generator"].items()}
    torch.save(checkpoint, path)
    assert convert(path, spm_path) == expected


def test_shared_embeddings_that_differ_are_reported(tmp_path: Path, spm_path: Path) -> None:
    checkpoint = opennmt_checkpoint(share=False)
    checkpoint["opt"]["share_embeddings"] = True  # claims one matrix, holds two
    path = tmp_path / "untied.pt"
    torch.save(checkpoint, path)
    with pytest.raises(ConversionError, match="'decoder.embeddings.make_embedding.emb_luts.0"
                                              ".weight' should be tied"):
        convert(path, spm_path)


def test_pickled_objects_are_refused_with_the_recipe(tmp_path: Path, spm_path: Path) -> None:
    checkpoint = opennmt_checkpoint()
    checkpoint["opt"] = argparse.Namespace(**checkpoint["opt"])
    path = tmp_path / "namespace.pt"
    torch.save(checkpoint, path)
    with pytest.raises(ConversionError) as caught:
        convert(path, spm_path)
    message = str(caught.value)
    assert "weights_only=True" in message and "argparse.Namespace" in message
    assert "vars(ck['opt'])" in message  # how to re-save it with plain types


def test_unsupported_options_and_tensors_are_listed_together(tmp_path: Path,
                                                             spm_path: Path) -> None:
    checkpoint = opennmt_checkpoint()
    checkpoint["opt"] |= {"pos_ffn_activation_fn": "silu", "max_relative_positions": 20,
                          "position_encoding": False}
    del checkpoint["model"]["decoder.transformer_layers.1.context_attn.linear_keys.weight"]
    checkpoint["model"]["encoder.transformer.0.self_attn.relative_positions_embeddings.weight"] \
        = torch.zeros(41, 8)
    path = tmp_path / "unsupported.pt"
    torch.save(checkpoint, path)
    with pytest.raises(ConversionError) as caught:
        convert(path, spm_path)
    problems = caught.value.problems
    assert "pos_ffn_activation_fn='silu' is not supported (supported: relu, gelu)" in problems
    assert "max_relative_positions=20 is not supported (supported: 0)" in problems
    assert "position_encoding=False is not supported (supported: True)" in problems
    assert ("missing tensor 'decoder.transformer_layers.1.context_attn.linear_keys.weight'"
            in problems)
    assert any("unexpected tensor 'encoder.transformer.0.self_attn.relative_positions" in p
               for p in problems)
    assert len(problems) == 5


def test_missing_spm_and_bad_vocab_are_reported(tmp_path: Path) -> None:
    checkpoint = opennmt_checkpoint()
    checkpoint["vocab"]["tgt"] = [t for t in checkpoint["vocab"]["tgt"] if t != "</s>"]
    path = tmp_path / "novocab.pt"
    torch.save(checkpoint, path)
    with pytest.raises(ConversionError) as caught:
        convert_opennmt(path, source_spm=tmp_path / "none.spm", target_spm=tmp_path / "none.spm")
    problems = "; ".join(caught.value.problems)
    assert "source spm" in problems and "target spm" in problems
    assert "lacks '</s>'" in problems
