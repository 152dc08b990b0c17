"""A tiny random OpenNMT-py (v3-style) Transformer checkpoint with plain-typed contents."""

from __future__ import annotations

from typing import Any

import sentencepiece as spm
import torch

from tests.tiny import spm_bytes

D_MODEL, HEADS, D_FF, LAYERS = 32, 4, 64, 2
EMBED_STD = 0.1  # scaled by sqrt(d_model) at use


def opennmt_vocab() -> list[str]:
    """OpenNMT-py's order: <unk>, <blank>, <s>, </s>, then the pieces."""
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    specials = ["<unk>", "<blank>", "<s>", "</s>"]
    return specials + [p for p in pieces if p not in specials and p != "<pad>"]


class _Weights:
    """Random tensors under OpenNMT-py names."""

    def __init__(self, seed: int, *, qkv_bias: bool) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.qkv_bias = qkv_bias
        self.state: dict[str, torch.Tensor] = {}

    def randn(self, *shape: int, std: float) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator) * std

    def linear(self, name: str, out: int, inp: int, *, bias: bool = True) -> None:
        self.state[f"{name}.weight"] = self.randn(out, inp, std=0.2)
        if bias:
            self.state[f"{name}.bias"] = self.randn(out, std=0.1)

    def norm(self, name: str) -> None:
        self.state[f"{name}.weight"] = 1.0 + self.randn(D_MODEL, std=0.1)
        self.state[f"{name}.bias"] = self.randn(D_MODEL, std=0.1)

    def attention(self, name: str) -> None:
        for part in ("linear_query", "linear_keys", "linear_values", "final_linear"):
            self.linear(f"{name}.{part}", D_MODEL, D_MODEL, bias=self.qkv_bias)

    def feed_forward(self, name: str) -> None:
        self.linear(f"{name}.w_1", D_FF, D_MODEL)
        self.linear(f"{name}.w_2", D_MODEL, D_FF)
        self.norm(f"{name}.layer_norm")


def opennmt_checkpoint(*, activation: str = "gelu", share: bool = False,
                       qkv_bias: bool = False, seed: int = 0) -> dict[str, Any]:
    """A checkpoint dict as OpenNMT-py v3 saves it, with plain `opt` and `vocab`.

    Random models with tied output embeddings tend to repeat their input token whatever the
    source; untied ones (the default) give input-dependent greedy outputs."""
    vocab = opennmt_vocab()
    w = _Weights(seed, qkv_bias=qkv_bias)
    encoder_embed = w.randn(len(vocab), D_MODEL, std=EMBED_STD)
    w.state["encoder.embeddings.make_embedding.emb_luts.0.weight"] = encoder_embed
    w.state["encoder.embeddings.make_embedding.pe.pe"] = torch.zeros(5000, 1, D_MODEL)
    for i in range(LAYERS):
        w.attention(f"encoder.transformer.{i}.self_attn")
        w.norm(f"encoder.transformer.{i}.layer_norm")
        w.feed_forward(f"encoder.transformer.{i}.feed_forward")
    w.norm("encoder.layer_norm")
    decoder_embed = encoder_embed if share else w.randn(len(vocab), D_MODEL, std=EMBED_STD)
    w.state["decoder.embeddings.make_embedding.emb_luts.0.weight"] = decoder_embed
    for i in range(LAYERS):
        prefix = f"decoder.transformer_layers.{i}"
        w.attention(f"{prefix}.self_attn")
        w.attention(f"{prefix}.context_attn")
        w.norm(f"{prefix}.layer_norm_1")
        w.norm(f"{prefix}.layer_norm_2")
        w.feed_forward(f"{prefix}.feed_forward")
    w.norm("decoder.layer_norm")
    generator = {"weight": decoder_embed if share else w.randn(len(vocab), D_MODEL, std=0.5),
                 "bias": w.randn(len(vocab), std=0.3)}
    opt = {"encoder_type": "transformer", "decoder_type": "transformer", "enc_layers": LAYERS,
           "dec_layers": LAYERS, "heads": HEADS, "enc_hid_size": D_MODEL,
           "dec_hid_size": D_MODEL, "transformer_ff": D_FF, "pos_ffn_activation_fn": activation,
           "position_encoding": True, "position_encoding_type": "SinusoidalInterleaved",
           "max_relative_positions": 0, "share_embeddings": share,
           "share_decoder_embeddings": share, "add_qkvbias": qkv_bias, "add_ffnbias": True,
           "layer_norm": "standard", "norm_eps": 1e-6, "self_attn_type": "scaled-dot",
           "dropout": [0.1], "attention_dropout": [0.1]}
    return {"model": w.state, "generator": generator, "vocab": {"src": vocab, "tgt": vocab},
            "opt": opt}
