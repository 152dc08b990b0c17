"""Import an OpenNMT-py (v3-style) Transformer checkpoint as backbone artifact files.

The checkpoint is read with `torch.load(weights_only=True)`: a dict with "model" (the
state dict), "generator" (the output layer's state dict), "vocab" ({"src": [tokens],
"tgt": [tokens]}) and "opt" (a plain dict of training options). Checkpoints that pickle
Python objects (an argparse Namespace, torchtext vocabularies) are refused with the recipe
to re-save them with plain types.

OpenNMT-py's Transformer is pre-norm (`layer_norm` before self-attention, `layer_norm_1` /
`layer_norm_2` in the decoder, the feed-forward's own `layer_norm`, a final norm per stack)
with sinusoidal positions interleaved (pe[:, 0::2] = sin, pe[:, 1::2] = cos) and
embeddings scaled by sqrt(d_model). Its LayerNorm eps defaults to 1e-6.

OpenNMT-py v3 feeds sources without `</s>`, while the engine's tokenizer appends EOS to
every source: the converted weights are exact, the serving-time input differs by that token.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from converters.checks import Checker, ConversionError, TensorSource, expected_shapes, fill
from server.engine.artifacts import backbone_files

SPECIALS = {"pad": "<blank>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}  # DefaultTokens
MAX_POSITIONS = 5000  # OpenNMT-py's PositionalEncoding table length
# Gated variants (silu, gated-gelu) add a third matrix `w_3` that the engine does not have.
SUPPORTED_ACTIVATIONS = {"relu": "relu", "gelu": "gelu"}
# opt name -> (default, supported values): the other values are other architectures.
FIXED_OPTIONS: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "encoder_type": ("transformer", ("transformer",)),
    "decoder_type": ("transformer", ("transformer",)),
    "self_attn_type": ("scaled-dot", ("scaled-dot",)),
    "position_encoding": (False, (True,)),
    "position_encoding_type": ("SinusoidalInterleaved", ("SinusoidalInterleaved",)),
    "max_relative_positions": (0, (0,)),
    "relative_positions_buckets": (0, (0,)),
    "layer_norm": ("standard", ("standard",)),
    "parallel_residual": (False, (False,)),
    "multiquery": (False, (False,)),
    "copy_attn": (False, (False,)),
}
REQUIRED_INTS = ("enc_layers", "dec_layers", "heads", "transformer_ff")
WIDTH_OPTIONS = ("enc_hid_size", "hidden_size", "rnn_size", "dec_hid_size", "word_vec_size",
                 "src_word_vec_size", "tgt_word_vec_size")
RESAVE_RECIPE = (
    "in a trusted environment re-save it with plain types: ck = torch.load(path, "
    "weights_only=False); torch.save({'model': ck['model'], 'generator': ck['generator'], "
    "'vocab': {'src': [...source tokens...], 'tgt': [...target tokens...]}, "
    "'opt': vars(ck['opt'])}, 'plain.pt')")

# Engine module -> OpenNMT-py module, inside one layer.
_ATTENTION = {"q_proj": "linear_query", "k_proj": "linear_keys", "v_proj": "linear_values",
              "o_proj": "final_linear"}
_FFN = {"ffn.fc1": "feed_forward.w_1", "ffn.fc2": "feed_forward.w_2",
        "ffn_norm": "feed_forward.layer_norm"}
_ENCODER = {**{f"self_attn.{k}": f"self_attn.{v}" for k, v in _ATTENTION.items()},
            "self_attn_norm": "layer_norm", **_FFN}
_DECODER = {**_ENCODER, "self_attn_norm": "layer_norm_1", "cross_attn_norm": "layer_norm_2",
            **{f"cross_attn.{k}": f"context_attn.{v}" for k, v in _ATTENTION.items()}}
ENCODER_EMBED = "encoder.embeddings.make_embedding.emb_luts.0.weight"
DECODER_EMBED = "decoder.embeddings.make_embedding.emb_luts.0.weight"


def tensor_source(opt: Mapping[str, Any]) -> TensorSource:
    """The declarative map from engine names to OpenNMT-py names."""
    share_all = bool(opt.get("share_embeddings", False))
    share_output = bool(opt.get("share_decoder_embeddings", False))
    top = {"output.weight": "generator.weight", "output_bias": "generator.bias",
           "embed.weight": ENCODER_EMBED, "encoder.embed.weight": ENCODER_EMBED,
           "decoder.embed.weight": DECODER_EMBED}
    for side in ("encoder", "decoder"):
        top |= {f"{side}.final_norm.{p}": f"{side}.layer_norm.{p}" for p in ("weight", "bias")}
    tied = {DECODER_EMBED: ENCODER_EMBED} if share_all else {}
    if share_output:
        tied["generator.weight"] = DECODER_EMBED
    qkv_bias = bool(opt.get("add_qkvbias", False))
    ffn_bias = bool(opt.get("add_ffnbias", True))

    def zero_if_missing(name: str) -> bool:  # bias-free layers (add_qkvbias / add_ffnbias)
        if re.fullmatch(r".+_attn\.[qkvo]_proj\.bias", name):
            return not qkv_bias
        return not ffn_bias and re.fullmatch(r".+\.ffn\.fc[12]\.bias", name) is not None

    return TensorSource(
        top=top,
        layers={"encoder": "encoder.transformer.{}", "decoder": "decoder.transformer_layers.{}"},
        modules={"encoder": _ENCODER, "decoder": _DECODER}, zero_if_missing=zero_if_missing,
        tied=tied, ignored=(r"(encoder|decoder)\.embeddings\.make_embedding\.pe\.pe",))


def _width(opt: Mapping[str, Any], check: Checker) -> int | None:
    """d_model: every width option that is set (> 0) must agree."""
    widths = {k: opt[k] for k in WIDTH_OPTIONS if type(opt.get(k)) is int and opt[k] > 0}
    if not widths:
        check.add(f"opt names no model width (one of {', '.join(WIDTH_OPTIONS[:3])})")
        return None
    if len(set(widths.values())) > 1:
        check.add(f"opt widths disagree ({widths}); the engine needs one d_model")
    return int(next(iter(widths.values())))


def _special_ids(vocab: Mapping[str, list[str]], start: str, check: Checker) -> dict[str, int]:
    """Ids of the special tokens; the engine uses one pad/eos/unk id on both sides."""
    ids: dict[str, int] = {}
    for role, token in (SPECIALS | {"bos": start}).items():
        if token not in vocab["tgt"]:
            check.add(f"the target vocabulary lacks {token!r} ({role})")
            continue
        ids[role] = vocab["tgt"].index(token)
        if role != "bos" and token in vocab["src"] and vocab["src"].index(token) != ids[role]:
            check.add(f"{token!r} has id {vocab['src'].index(token)} in the source vocabulary "
                      f"but {ids[role]} in the target one; the engine needs the same id")
    return ids


def _first(value: Any) -> float:
    """Dropout options are lists (per schedule step) in v3, numbers before."""
    return float(value[0] if isinstance(value, list) else value)


def backbone_config(opt: Mapping[str, Any], vocab: Mapping[str, list[str]], *,
                    output_bias: bool, check: Checker) -> BackboneConfig | None:
    """BackboneConfig from the checkpoint's options; None (problems recorded) if impossible."""
    for name, (default, supported) in FIXED_OPTIONS.items():
        check.option(opt, name, default, supported=supported)
    bad = [k for k in REQUIRED_INTS if type(opt.get(k)) is not int]
    check.extend(f"opt: {k} must be an integer (got {opt.get(k)!r})" for k in bad)
    check.require(opt.get("num_kv", 0) in (0, opt.get("heads")),
                  f"num_kv={opt.get('num_kv')!r} is not supported (supported: 0 or heads)")
    activation = check.choice("pos_ffn_activation_fn", opt.get("pos_ffn_activation_fn", "relu"),
                              SUPPORTED_ACTIVATIONS, fallback="relu")
    width = _width(opt, check)
    ids = _special_ids(vocab, str(opt.get("decoder_start_token", SPECIALS["bos"])), check)
    share_all = bool(opt.get("share_embeddings", False))
    share_output = bool(opt.get("share_decoder_embeddings", False))
    if bad or width is None or len(ids) < len(SPECIALS):
        return None
    return check.config(
        src_vocab_size=len(vocab["src"]), tgt_vocab_size=len(vocab["tgt"]), d_model=width,
        n_heads=opt["heads"], d_ff=opt["transformer_ff"], encoder_layers=opt["enc_layers"],
        decoder_layers=opt["dec_layers"], activation=activation, normalize_before=True,
        positions="sinusoidal_interleaved", max_positions=MAX_POSITIONS, scale_embedding=True,
        shared_embeddings="all" if share_all and share_output
        else "decoder" if share_output else "none",
        output_bias=output_bias, layer_norm_eps=float(opt.get("norm_eps", 1e-6)),
        dropout=_first(opt.get("dropout", 0.3)),
        attention_dropout=_first(opt.get("attention_dropout", 0.1)),
        pad_id=ids["pad"], eos_id=ids["eos"], unk_id=ids["unk"], decoder_start_id=ids["bos"],
        source_eos=False)


def load_checkpoint(path: Path) -> Any:
    """torch.load(weights_only=True); pickled objects are refused with the way out."""
    if not path.is_file():
        raise ConversionError(f"OpenNMT-py checkpoint {path}", ["no such file"])
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
        detail = f" (it pickles {found.group(1)})" if found else ""
        raise ConversionError(f"OpenNMT-py checkpoint {path}", [
            f"it cannot be read with torch.load(weights_only=True){detail}: it holds pickled "
            "Python objects (such as an argparse Namespace 'opt' or torchtext vocabularies) "
            f"and unpickling them could run arbitrary code; {RESAVE_RECIPE}"]) from None


def checkpoint_parts(checkpoint: Any, check: Checker) -> tuple[
        dict[str, Any], dict[str, list[str]], dict[str, Tensor]]:
    """(opt, vocab, state) with the generator's tensors under `generator.`."""
    if not isinstance(checkpoint, dict):
        check.add("not a checkpoint dict with 'model', 'generator', 'vocab' and 'opt'")
        return {}, {"src": [], "tgt": []}, {}
    check.extend(f"the checkpoint lacks {key!r}" for key in ("model", "generator", "vocab", "opt")
                 if key not in checkpoint)
    opt = checkpoint.get("opt", {})
    check.require(isinstance(opt, dict), "'opt' must be a plain dict; " + RESAVE_RECIPE)
    vocab = checkpoint.get("vocab", {})
    plain = isinstance(vocab, dict) and all(
        isinstance(vocab.get(side), list) and all(isinstance(t, str) for t in vocab[side])
        for side in ("src", "tgt"))
    check.require(plain, "'vocab' must be {'src': [tokens], 'tgt': [tokens]} of strings")
    model, generator = checkpoint.get("model", {}), checkpoint.get("generator", {})
    check.require(isinstance(model, dict) and isinstance(generator, dict),
                  "'model' and 'generator' must be state dicts")
    state = dict(model) if isinstance(model, dict) else {}
    # v3 saves the generator as nn.Linear ("weight"), older versions as nn.Sequential ("0.").
    if isinstance(generator, dict):
        state |= {f"generator.{k.removeprefix('0.')}": v for k, v in generator.items()}
    return (opt if isinstance(opt, dict) else {}, vocab if plain else {"src": [], "tgt": []},
            state)


def _read_spm(path: Path, label: str, check: Checker) -> bytes:
    if not path.is_file():
        check.add(f"{label} {path}: no such file")
        return b""
    data = path.read_bytes()
    try:
        spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError:
        check.add(f"{label} {path}: not a sentencepiece model")
    return data


def convert_opennmt(checkpoint: Path, *, source_spm: Path, target_spm: Path) -> dict[str, bytes]:
    """Backbone artifact files from an OpenNMT-py Transformer checkpoint; raises
    ConversionError listing every problem (options, vocabulary, tensors) at once."""
    check = Checker(f"OpenNMT-py checkpoint {checkpoint}")
    spms = (_read_spm(source_spm, "source spm", check),
            _read_spm(target_spm, "target spm", check))
    try:
        raw = load_checkpoint(checkpoint)
    except ConversionError as error:  # fatal, but report the spm problems with it
        raise ConversionError(check.what, [*check.problems, *error.problems]) from None
    opt, vocab, state = checkpoint_parts(raw, check)
    bad = [k for k, v in state.items() if not isinstance(v, Tensor)]
    check.extend(f"state entry {k!r} is not a tensor" for k in bad)
    config = backbone_config(opt, vocab, output_bias="generator.bias" in state, check=check)
    tensors: dict[str, Tensor] = {}
    if config is not None and not bad:
        tensors, problems = fill(tensor_source(opt), state, expected_shapes(config))
        check.extend(problems)
    if config is None or check.problems:
        raise ConversionError(check.what, check.problems or ["no usable options"])
    return backbone_files(config, tensors, source_spm=spms[0], target_spm=spms[1],
                          source_vocab=vocab["src"], target_vocab=vocab["tgt"])
