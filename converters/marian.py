"""Import a Hugging Face Marian / OPUS-MT checkpoint directory as backbone artifact files.

The directory holds `config.json`, `model.safetensors` (or its shards, or
`pytorch_model.bin`, read with `torch.load(weights_only=True)`), `source.spm`,
`target.spm`, `vocab.json` (piece -> id) and, for separate vocabularies,
`target_vocab.json`. Marian is post-norm with sinusoidal positions laid out as all sines
then all cosines, and a `final_logits_bias`; the position tables are recomputed, tied
copies of the embedding are checked and dropped.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
from safetensors.torch import load_file
from torch import Tensor

from contract.backbone import BackboneConfig
from converters.checks import (
    Checker,
    ConversionError,
    TensorSource,
    expected_shapes,
    fill,
    ordered_vocab,
)
from server.engine.artifacts import backbone_files

SUPPORTED_ACTIVATIONS: dict[str, str] = {
    "relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
    "swish": "swish", "silu": "swish"}

# Options whose other values describe another architecture (BART/MBart-style layouts).
FIXED_OPTIONS: dict[str, tuple[Any, tuple[Any, ...]]] = {  # name -> (default, supported)
    "model_type": ("marian", ("marian",)),
    "normalize_before": (False, (False,)),
    "normalize_embedding": (False, (False,)),
    "layernorm_embedding": (False, (False,)),
    "add_final_layer_norm": (False, (False,)),
    "add_bias_logits": (False, (False,)),
    "static_position_embeddings": (True, (True,)),
}
REQUIRED_INTS = ("vocab_size", "d_model", "encoder_layers", "decoder_layers",
                 "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
                 "decoder_ffn_dim", "pad_token_id", "eos_token_id")
REQUIRED_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")

# Engine module -> Hugging Face module, inside one layer.
_LAYER = {
    "self_attn.q_proj": "self_attn.q_proj", "self_attn.k_proj": "self_attn.k_proj",
    "self_attn.v_proj": "self_attn.v_proj", "self_attn.o_proj": "self_attn.out_proj",
    "self_attn_norm": "self_attn_layer_norm",
    "ffn.fc1": "fc1", "ffn.fc2": "fc2", "ffn_norm": "final_layer_norm"}
_CROSS = {
    "cross_attn.q_proj": "encoder_attn.q_proj", "cross_attn.k_proj": "encoder_attn.k_proj",
    "cross_attn.v_proj": "encoder_attn.v_proj", "cross_attn.o_proj": "encoder_attn.out_proj",
    "cross_attn_norm": "encoder_attn_layer_norm"}
SHARED, ENCODER_EMBED, DECODER_EMBED, LM_HEAD = (
    "model.shared.weight", "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight", "lm_head.weight")


def tensor_source(*, shared: bool, tied: bool) -> TensorSource:
    """The declarative map from engine names to Marian names."""
    top = {"output_bias": "final_logits_bias"}
    if shared and tied:  # engine "all": one matrix
        top["embed.weight"] = SHARED
        copies = {ENCODER_EMBED: SHARED, DECODER_EMBED: SHARED, LM_HEAD: SHARED}
    elif tied:  # engine "decoder": the output projection is the decoder's embedding
        top |= {"encoder.embed.weight": ENCODER_EMBED, "decoder.embed.weight": DECODER_EMBED}
        copies = {LM_HEAD: DECODER_EMBED}
    else:  # engine "none": three matrices (the input ones may be one shared matrix)
        encoder, decoder = (SHARED, SHARED) if shared else (ENCODER_EMBED, DECODER_EMBED)
        top |= {"encoder.embed.weight": encoder, "decoder.embed.weight": decoder,
                "output.weight": LM_HEAD}
        copies = {ENCODER_EMBED: SHARED, DECODER_EMBED: SHARED} if shared else {}
    return TensorSource(
        top=top,
        layers={"encoder": "model.encoder.layers.{}", "decoder": "model.decoder.layers.{}"},
        modules={"encoder": _LAYER, "decoder": _LAYER | _CROSS},
        transforms={"output_bias": lambda t: t.reshape(-1)},  # [1, V] -> [V]
        # Checkpoints saved before final_logits_bias existed have none: it is zero.
        zero_if_missing=lambda name: name == "output_bias",
        tied=copies,
        ignored=(r"model\.(encoder|decoder)\.embed_positions\.weight",))


def _flags(hf: Mapping[str, Any]) -> tuple[bool, bool]:
    """(encoder/decoder embeddings shared, output projection tied)."""
    return (bool(hf.get("share_encoder_decoder_embeddings", True)),
            bool(hf.get("tie_word_embeddings", True)))


def backbone_config(hf: Mapping[str, Any], *, source_vocab: list[str], target_vocab: list[str],
                    check: Checker) -> BackboneConfig | None:
    """BackboneConfig from Marian's config.json; None (with problems recorded) if impossible."""
    for name, (default, supported) in FIXED_OPTIONS.items():
        check.option(hf, name, default, supported=supported)
    bad = [k for k in REQUIRED_INTS if type(hf.get(k)) is not int]  # bool is not an id
    check.extend(f"config.json: {k} must be an integer (got {hf.get(k)!r})" for k in bad)
    for encoder, decoder in (("encoder_attention_heads", "decoder_attention_heads"),
                             ("encoder_ffn_dim", "decoder_ffn_dim")):
        check.require(hf.get(encoder) == hf.get(decoder),
                      f"{encoder} ({hf.get(encoder)}) != {decoder} ({hf.get(decoder)}): "
                      "the engine uses one value for both stacks")
    activation = check.choice("activation_function", hf.get("activation_function", "gelu"),
                              SUPPORTED_ACTIVATIONS, fallback="relu")
    check.require("<unk>" in target_vocab, "the target vocabulary has no '<unk>' piece")
    if bad:
        return None
    shared, tied = _flags(hf)
    vocab_size = hf["vocab_size"]
    target_size = vocab_size if shared else (hf.get("decoder_vocab_size") or vocab_size)
    check.require(len(source_vocab) == vocab_size, f"vocab.json has {len(source_vocab)} "
                  f"pieces but the model's source vocabulary has {vocab_size}")
    check.require(len(target_vocab) == target_size, f"the target vocabulary has "
                  f"{len(target_vocab)} pieces but the model's has {target_size}")
    return check.config(
        src_vocab_size=vocab_size, tgt_vocab_size=target_size, d_model=hf["d_model"],
        n_heads=hf["encoder_attention_heads"], d_ff=hf["encoder_ffn_dim"],
        encoder_layers=hf["encoder_layers"], decoder_layers=hf["decoder_layers"],
        activation=activation, normalize_before=False, positions="sinusoidal",
        max_positions=hf.get("max_position_embeddings", 1024),
        scale_embedding=bool(hf.get("scale_embedding", False)),
        shared_embeddings="all" if shared and tied else "decoder" if tied else "none",
        output_bias=True, layer_norm_eps=1e-5,  # Marian uses nn.LayerNorm's default
        dropout=float(hf.get("dropout", 0.1)),
        attention_dropout=float(hf.get("attention_dropout", 0.0)),
        activation_dropout=float(hf.get("activation_dropout", 0.0)),
        pad_id=hf["pad_token_id"], eos_id=hf["eos_token_id"],
        unk_id=target_vocab.index("<unk>") if "<unk>" in target_vocab else 0,
        decoder_start_id=hf.get("decoder_start_token_id", hf["pad_token_id"]))


def read_state(src_dir: Path, check: Checker) -> dict[str, Tensor]:
    """The checkpoint's tensors: safetensors (single or sharded) first, else the .bin."""
    single, index = src_dir / "model.safetensors", src_dir / "model.safetensors.index.json"
    if single.is_file():
        return load_file(single)
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return {k: v for shard in shards for k, v in load_file(src_dir / shard).items()}
    binary = src_dir / "pytorch_model.bin"
    if binary.is_file():
        return load_weights_only(binary, check)
    check.add("no weights: expected model.safetensors or pytorch_model.bin")
    return {}


def load_weights_only(path: Path, check: Checker) -> dict[str, Tensor]:
    """A plain state dict from a pickle file, never unpickling arbitrary objects."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        check.add(f"{path.name}: refused to load: torch.load(weights_only=True) failed "
                  f"({str(error).splitlines()[0]})")
        return {}
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        check.add(f"{path.name}: not a state dict of tensors")
        return {}
    return state


def _read_inputs(src_dir: Path, check: Checker) -> dict[str, bytes]:
    if not src_dir.is_dir():
        check.add(f"{src_dir} is not a directory")
        return {}
    names = (*REQUIRED_FILES, "target_vocab.json")
    found = {name: (src_dir / name).read_bytes() for name in names if (src_dir / name).is_file()}
    check.extend(f"missing file {name}" for name in REQUIRED_FILES if name not in found)
    for name in ("source.spm", "target.spm"):
        if name in found and not _is_spm(found[name]):
            check.add(f"{name} is not a sentencepiece model")
    return found


def _is_spm(data: bytes) -> bool:
    try:
        spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError:
        return False
    return True


def _json(found: Mapping[str, bytes], name: str, check: Checker) -> dict[str, Any] | None:
    """The JSON object in file `name`; None when absent or invalid (a problem is recorded)."""
    if name not in found:
        return None
    try:
        value = json.loads(found[name])
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        check.add(f"{name} is not valid JSON ({error})")
        return None
    if not isinstance(value, dict):
        check.add(f"{name} is not a JSON object")
        return None
    return value


def convert_marian(src_dir: Path) -> dict[str, bytes]:
    """Backbone artifact files from a Marian checkpoint directory; raises ConversionError
    listing every problem (files, options, tensors) at once."""
    check = Checker(f"Marian checkpoint {src_dir}")
    found = _read_inputs(src_dir, check)
    hf = _json(found, "config.json", check)
    source_vocab = ordered_vocab(_json(found, "vocab.json", check) or {}, "vocab.json", check)
    target_vocab = source_vocab
    if "target_vocab.json" in found:
        target_vocab = ordered_vocab(_json(found, "target_vocab.json", check) or {},
                                     "target_vocab.json", check)
    state = read_state(src_dir, check) if src_dir.is_dir() else {}
    config = None if hf is None else backbone_config(
        hf, source_vocab=source_vocab, target_vocab=target_vocab, check=check)
    tensors: dict[str, Tensor] = {}
    if hf is not None and config is not None:
        shared, tied = _flags(hf)
        tensors, problems = fill(tensor_source(shared=shared, tied=tied), state,
                                 expected_shapes(config))
        check.extend(problems)
    if config is None or check.problems:
        raise ConversionError(check.what, check.problems or ["no usable config.json"])
    return backbone_files(config, tensors, source_spm=found["source.spm"],
                          target_spm=found["target.spm"], source_vocab=source_vocab,
                          target_vocab=target_vocab)
