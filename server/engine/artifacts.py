"""Build engine objects from artifact contents (bytes already verified by model_store).

The engine never reads paths: callers hand over the files of a verified artifact.
Backbone artifact files: `config.json`, `model.safetensors`, `source.spm`, `target.spm`
(absent: the target vocabulary is the source one), optional `source.vocab` /
`target.vocab` (one piece per line, line number = model id).
Module artifact files: `module.safetensors`; its config is the manifest's `config`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from torch import Tensor

from contract.artifacts import (
    BACKBONE_CONFIG_FILE,
    BACKBONE_FILES,
    BACKBONE_WEIGHTS_FILE,
    MODULE_WEIGHTS_FILE,
    SOURCE_SPM_FILE,
    SOURCE_VOCAB_FILE,
    TARGET_SPM_FILE,
    TARGET_VOCAB_FILE,
    target_vocabulary_files,
    vocabulary_problems,
)
from contract.backbone import BackboneConfig
from contract.tensors import tensors_from_bytes, tensors_to_bytes
from server.engine.engine import Engine, EngineOptions
from server.engine.families import Params
from server.engine.residency import Loader, Observer
from server.engine.row_int8 import dequantize_rows, quantize_rows
from server.engine.tokenizer import Tokenizer


@dataclass(frozen=True)
class BackboneParts:
    config: BackboneConfig
    tensors: dict[str, Tensor]
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer


def _vocab(files: Mapping[str, bytes], name: str) -> list[str] | None:
    data = files.get(name)
    return data.decode("utf-8").split("\n")[:-1] if data is not None else None


def backbone_parts(files: Mapping[str, bytes]) -> BackboneParts:
    missing = [name for name in BACKBONE_FILES if name not in files]
    if missing:
        raise ValueError(f"backbone artifact lacks {missing}; it needs {list(BACKBONE_FILES)}")
    raw_config = json.loads(files[BACKBONE_CONFIG_FILE])
    problems = vocabulary_problems(files, raw_config)
    if problems:
        raise ValueError("backbone artifact: " + "; ".join(problems))
    config = BackboneConfig.from_dict(raw_config)
    tensors = dequantize_rows(tensors_from_bytes(files[BACKBONE_WEIGHTS_FILE]))
    source = Tokenizer(files[SOURCE_SPM_FILE], vocab=_vocab(files, SOURCE_VOCAB_FILE),
                       eos_id=config.eos_id, unk_id=config.unk_id, pad_id=config.pad_id,
                       add_eos=config.source_eos)
    target_spm, target_vocab = target_vocabulary_files(files)  # shared: the source's
    target = Tokenizer(files[target_spm], vocab=_vocab(files, target_vocab),
                       eos_id=config.eos_id, unk_id=config.unk_id, pad_id=config.pad_id)
    return BackboneParts(config, tensors, source, target)


def build_engine(files: Mapping[str, bytes], options: EngineOptions | None = None, *,
                 loader: Loader | None = None, observer: Observer | None = None) -> Engine:
    parts = backbone_parts(files)
    return Engine(parts.config, parts.tensors, source_tokenizer=parts.source_tokenizer,
                  target_tokenizer=parts.target_tokenizer, options=options, loader=loader,
                  observer=observer)


def module_params(files: Mapping[str, bytes]) -> Params:
    if MODULE_WEIGHTS_FILE not in files:
        raise ValueError(f"module artifact lacks {MODULE_WEIGHTS_FILE!r}")
    return dequantize_rows(tensors_from_bytes(files[MODULE_WEIGHTS_FILE]))


def backbone_files(config: BackboneConfig, tensors: Mapping[str, Tensor], *,
                   source_spm: bytes, target_spm: bytes, source_vocab: list[str] | None = None,
                   target_vocab: list[str] | None = None, half: bool = False,
                   int8_rows: bool = False) -> dict[str, bytes]:
    """The files of a backbone artifact (the inverse of `backbone_parts`). `int8_rows`
    stores the matrices as int8 with per-row scales (server/engine/row_int8.py). When the
    target vocabulary is the source one (the same bytes), it is written once: no
    target.spm (contract/artifacts.py)."""
    weights = (tensors_to_bytes(quantize_rows(tensors)) if int8_rows
               else tensors_to_bytes(tensors, half=half))
    files: dict[str, bytes] = {
        BACKBONE_CONFIG_FILE: json.dumps(config.to_dict(), indent=1, sort_keys=True).encode(),
        BACKBONE_WEIGHTS_FILE: weights, SOURCE_SPM_FILE: source_spm}
    shared = (target_spm == source_spm and target_vocab == source_vocab
              and config.src_vocab_size == config.tgt_vocab_size)
    sides = [(SOURCE_VOCAB_FILE, source_vocab)]
    if not shared:
        files[TARGET_SPM_FILE] = target_spm
        sides.append((TARGET_VOCAB_FILE, target_vocab))
    for name, vocab in sides:
        if vocab is not None:
            files[name] = "".join(piece + "\n" for piece in vocab).encode("utf-8")
    return files


def module_files(params: Params, *, half: bool = False,
                 int8_rows: bool = False) -> dict[str, bytes]:
    """The files of a module artifact (the inverse of `module_params`). `int8_rows` stores
    the banks `[layers, in, out]` as int8 with per-output-column scales (row_int8.py)."""
    weights = (tensors_to_bytes(quantize_rows(params, rank=3)) if int8_rows
               else tensors_to_bytes(params, half=half))
    return {MODULE_WEIGHTS_FILE: weights}

