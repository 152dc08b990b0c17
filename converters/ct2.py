"""Export a backbone (or a backbone with a mergeable module folded in) to CTranslate2.

The CTranslate2 model is declared with its Python spec API (`TransformerSpec.from_config`),
filled from one table that maps every CTranslate2 variable to engine tensors, validated by
the spec, optionally quantized, and saved. Position tables are always passed explicitly:
CTranslate2's built-in sinusoidal table is tensor2tensor's (timescale step
log(10000)/(d/2 - 1), positions from 1), which matches neither Marian's nor OpenNMT-py's.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from ctranslate2.specs import common_spec, model_spec, transformer_spec
from torch import Tensor

from contract.backbone import BackboneConfig
from server.engine.artifacts import backbone_parts
from server.engine.families import Params, get_family
from server.engine.layers import sinusoidal_table
from server.engine.tokenizer import Tokenizer

ACTIVATIONS = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
               "gelu_tanh": common_spec.Activation.GELUTanh,
               "swish": common_spec.Activation.SWISH}
QUANTIZATIONS: tuple[str, ...] = tuple(model_spec.ACCEPTED_MODEL_TYPES)
Array = npt.NDArray[np.float32]

# CTranslate2 variable inside a layer -> engine tensors inside that layer, concatenated
# along the output dimension (CTranslate2 fuses q|k|v of self-attention and k|v of
# cross-attention). `{p}`: weight/bias for linears; norms map gamma/beta to weight/bias.
_LINEARS = {
    "self_attention/linear_0": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "self_attention/linear_1": ("self_attn.o_proj",),
    "ffn/linear_0": ("ffn.fc1",), "ffn/linear_1": ("ffn.fc2",)}
_CROSS_LINEARS = {
    "attention/linear_0": ("cross_attn.q_proj",),
    "attention/linear_1": ("cross_attn.k_proj", "cross_attn.v_proj"),
    "attention/linear_2": ("cross_attn.o_proj",)}
_NORMS = {"self_attention/layer_norm": "self_attn_norm", "ffn/layer_norm": "ffn_norm"}
_CROSS_NORMS = {"attention/layer_norm": "cross_attn_norm"}


class ExportError(ValueError):
    """A backbone or module that cannot be exported; the message says why."""


def embedding_names(config: BackboneConfig) -> tuple[str, str, str]:
    """Engine names of the (source embedding, target embedding, output projection)."""
    if config.shared_embeddings == "all":
        return "embed.weight", "embed.weight", "embed.weight"
    output = "output.weight" if config.shared_embeddings == "none" else "decoder.embed.weight"
    return "encoder.embed.weight", "decoder.embed.weight", output


def variable_table(config: BackboneConfig) -> dict[str, tuple[str, ...]]:
    """Every CTranslate2 variable -> the engine tensors it is made of (the declaration)."""
    source, target, output = embedding_names(config)
    table: dict[str, tuple[str, ...]] = {
        "encoder/embeddings_0/weight": (source,), "decoder/embeddings/weight": (target,),
        "decoder/projection/weight": (output,)}
    if config.output_bias:
        table["decoder/projection/bias"] = ("output_bias",)
    for side, layers in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        linears, norms = dict(_LINEARS), dict(_NORMS)
        if side == "decoder":
            linears |= _CROSS_LINEARS
            norms |= _CROSS_NORMS
        for i in range(layers):
            ct2, engine = f"{side}/layer_{i}", f"{side}.layers.{i}"
            for p in ("weight", "bias"):
                table |= {f"{ct2}/{k}/{p}": tuple(f"{engine}.{m}.{p}" for m in v)
                          for k, v in linears.items()}
            for k, m in norms.items():
                table |= {f"{ct2}/{k}/gamma": (f"{engine}.{m}.weight",),
                          f"{ct2}/{k}/beta": (f"{engine}.{m}.bias",)}
        if config.normalize_before:
            table[f"{side}/layer_norm/gamma"] = (f"{side}.final_norm.weight",)
            table[f"{side}/layer_norm/beta"] = (f"{side}.final_norm.bias",)
        if config.positions == "learned":
            table[f"{side}/position_encodings/encodings"] = (f"{side}.positions.weight",)
    return table


def _array(tensor: Tensor) -> Array:
    return tensor.detach().to(torch.float32).contiguous().numpy()


def spec_variables(config: BackboneConfig, tensors: Mapping[str, Tensor]) -> dict[str, Array]:
    """The filled table (plus the computed sinusoidal tables); lists every missing tensor."""
    table = variable_table(config)
    missing = sorted({n for names in table.values() for n in names if n not in tensors})
    if missing:
        raise ExportError(f"the backbone lacks {len(missing)} tensors: {', '.join(missing)}")
    values = {k: _array(torch.cat([tensors[n] for n in names])) for k, names in table.items()}
    if config.positions != "learned":
        positions = _array(sinusoidal_table(
            config.max_positions, config.d_model,
            interleaved=config.positions == "sinusoidal_interleaved"))
        values["encoder/position_encodings/encodings"] = positions
        values["decoder/position_encodings/encodings"] = positions
    return values


def _assign(spec: Any, path: str, value: object) -> None:
    """spec.<path> = value, where `layer_3` names item 3 of the list `layer`."""
    *parents, leaf = path.split("/")
    node = spec
    for part in parents:
        indexed = re.fullmatch(r"(.+)_(\d+)", part)
        if hasattr(node, part) or indexed is None:
            node = getattr(node, part)
        else:
            node = getattr(node, indexed.group(1))[int(indexed.group(2))]
    setattr(node, leaf, value)  # the spec refuses names it does not declare


def tokens(tokenizer: Tokenizer) -> list[str]:
    """The token strings of a side: its vocabulary file, else the sentencepiece pieces."""
    if tokenizer.vocab is not None:
        return list(tokenizer.vocab)
    processor = tokenizer.processor
    return [str(processor.id_to_piece(i)) for i in range(processor.get_piece_size())]


def build_spec(config: BackboneConfig, tensors: Mapping[str, Tensor], *,
               source_tokens: list[str], target_tokens: list[str]) -> Any:
    """A validated CTranslate2 TransformerSpec equivalent to the engine's backbone."""
    sizes = [(side, len(found), want) for side, found, want in (
        ("source", source_tokens, config.src_vocab_size),
        ("target", target_tokens, config.tgt_vocab_size)) if len(found) != want]
    if sizes:
        raise ExportError("; ".join(f"the {side} vocabulary has {n} tokens, the model {want}"
                                    for side, n, want in sizes))
    spec = transformer_spec.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers), config.n_heads,
        pre_norm=config.normalize_before, activation=ACTIVATIONS[config.activation])
    for path, value in spec_variables(config, tensors).items():
        _assign(spec, path, value)
    spec.encoder.scale_embeddings = config.scale_embedding
    spec.decoder.scale_embeddings = config.scale_embedding
    spec.register_source_vocabulary(source_tokens)
    spec.register_target_vocabulary(target_tokens)
    spec.config.unk_token = target_tokens[config.unk_id]
    spec.config.eos_token = target_tokens[config.eos_id]
    spec.config.bos_token = target_tokens[config.decoder_start_id]
    spec.config.decoder_start_token = target_tokens[config.decoder_start_id]
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    spec.validate()
    return spec


def save_spec(spec: Any, out_dir: Path, *, quantization: str | None) -> Path:
    """Quantize and save into `out_dir` (absent or empty), via a sibling temporary
    directory so that a failed export leaves nothing behind."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ExportError(f"quantization {quantization!r} is not supported "
                          f"(supported: {', '.join(QUANTIZATIONS)})")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ExportError(f"{out_dir} exists and is not an empty directory")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = out_dir.parent / f".{out_dir.name}.partial-{uuid.uuid4().hex}"
    partial.mkdir()
    try:
        spec.optimize(quantization=quantization)
        spec.save(str(partial))
        partial.replace(out_dir)  # POSIX rename onto an empty directory replaces it
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return out_dir


def export_ct2(files: Mapping[str, bytes], out_dir: Path, *,
               quantization: str | None = None) -> Path:
    """Write the backbone artifact `files` as a CTranslate2 model directory `out_dir`."""
    parts = backbone_parts(files)
    spec = build_spec(parts.config, parts.tensors, source_tokens=tokens(parts.source_tokenizer),
                      target_tokens=tokens(parts.target_tokenizer))
    return save_spec(spec, out_dir, quantization=quantization)


def merge_module(config: BackboneConfig, tensors: Params, module_config: Mapping[str, Any],
                 module_params: Params) -> tuple[Params, BackboneConfig]:
    """Backbone weights with the module folded in; refused (with the family's reason) when
    the family cannot be folded into plain Transformer weights."""
    family = get_family(str(module_config.get("family")))
    if not family.mergeable:
        raise ExportError(f"cannot export a {family.name!r} module to CTranslate2: "
                          f"{family.merge_refusal}")
    normalised = family.normalise(dict(module_config))
    shapes = family.shapes(config, normalised)
    problems = [f"missing module tensor {k!r}" for k in shapes if k not in module_params]
    problems += [f"module tensor {k!r} has shape {list(v.shape)}, expected {list(shapes[k])}"
                 for k, v in module_params.items() if k in shapes and tuple(v.shape) != shapes[k]]
    problems += [f"unexpected module tensor {k!r}" for k in module_params if k not in shapes]
    if problems:
        raise ExportError(f"the {family.name!r} module does not fit the backbone: "
                          + "; ".join(problems))
    return family.merge(tensors, module_params, config)


def export_ct2_domain(backbone_files: Mapping[str, bytes], module_config: Mapping[str, Any],
                      module_params: Params, out_dir: Path, *,
                      quantization: str | None = None) -> Path:
    """Export backbone + module as one plain CTranslate2 model (mergeable families only)."""
    parts = backbone_parts(backbone_files)
    tensors, config = merge_module(parts.config, parts.tensors, module_config, module_params)
    spec = build_spec(config, tensors, source_tokens=tokens(parts.source_tokenizer),
                      target_tokens=tokens(parts.target_tokenizer))
    return save_spec(spec, out_dir, quantization=quantization)
