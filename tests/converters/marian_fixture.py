"""A tiny random Hugging Face Marian checkpoint, saved the way OPUS-MT models are."""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm
import torch
from transformers import MarianConfig, MarianMTModel

from tests.tiny import spm_bytes


def marian_vocab() -> dict[str, int]:
    """A Marian-style vocab.json over the tiny sentencepiece pieces: `</s>` = 0,
    `<unk>` = 1, the other pieces, `<pad>` last (so model ids differ from spm ids)."""
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    others = [p for p in pieces if p not in ("</s>", "<unk>", "<pad>")]
    return {piece: i for i, piece in enumerate(["</s>", "<unk>", *others, "<pad>"])}


def random_std(name: str) -> float:
    """Spreads that make greedy outputs of a random model depend on the input: strong token
    identity (embeddings), moderate matrices (so attention is not one-hot), small biases."""
    if "embed" in name or "emb_luts" in name or name.startswith("generator"):
        return 1.0
    return 0.1 if name.endswith("bias") else 0.2


def marian_model(*, activation: str = "swish", seed: int = 0,
                 shared: bool = True) -> MarianMTModel:
    """A tiny MarianMTModel with random weights."""
    size = len(marian_vocab())
    config = MarianConfig(
        vocab_size=size, decoder_vocab_size=size, d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
        pad_token_id=size - 1, eos_token_id=0, decoder_start_token_id=size - 1,
        forced_eos_token_id=None, activation_function=activation,
        scale_embedding=True, share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=True, dropout=0.0)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_positions" not in name and not name.endswith("layer_norm.weight"):
                param.normal_(0.0, random_std(name))
        model.final_logits_bias.normal_(0.0, 0.3)
    return model


def save_marian(model: MarianMTModel, path: Path, *, binary: bool = False) -> Path:
    """The checkpoint directory: weights, config.json, spm models and vocab.json."""
    path.mkdir(parents=True, exist_ok=True)
    if binary:  # the pickle layout of older OPUS-MT uploads, tied copies and all
        model.config.save_pretrained(path)
        torch.save(model.state_dict(), path / "pytorch_model.bin")
    else:
        model.save_pretrained(path)
    (path / "source.spm").write_bytes(spm_bytes())
    (path / "target.spm").write_bytes(spm_bytes())
    (path / "vocab.json").write_text(json.dumps(marian_vocab()), encoding="utf-8")
    return path
