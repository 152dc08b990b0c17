"""Build engine objects from artifact contents (bytes already verified by model_store).

The engine never reads paths: callers hand over the files of a verified artifact.
Backbone artifact files: `config.json`, `model.safetensors`, `source.spm`, `target.spm`,
optional `source.vocab` / `target.vocab` (one piece per line, line number = model id).
Module artifact files: `module.safetensors`; its config is the manifest's `config`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes
from torch import Tensor

from server.engine.config import BackboneConfig
from server.engine.engine import Engine, EngineOptions
from server.engine.families import Params
from server.engine.residency import Loader, Observer
from server.engine.tokenizer import Tokenizer

BACKBONE_FILES = ("config.json", "model.safetensors", "source.spm", "target.spm")
MODULE_FILE = "module.safetensors"


@dataclass(frozen=True)
class BackboneParts:
    config: BackboneConfig
    tensors: dict[str, Tensor]
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer


def tensors_from_bytes(data: bytes) -> dict[str, Tensor]:
    try:
        return load_safetensors_bytes(data)
    except Exception as error:  # safetensors raises several types for corrupt input
        raise ValueError(f"not a valid safetensors file: {error}") from error


def tensors_to_bytes(tensors: Mapping[str, Tensor], *, half: bool = False) -> bytes:
    """safetensors bytes; `half` stores float tensors as float16 (half the disk)."""
    prepared = {k: (v.half() if half and v.is_floating_point() else v).contiguous()
                for k, v in tensors.items()}
    return save_safetensors_bytes(prepared)


def _vocab(files: Mapping[str, bytes], name: str) -> list[str] | None:
    data = files.get(name)
    return data.decode("utf-8").split("\n")[:-1] if data is not None else None


def backbone_parts(files: Mapping[str, bytes]) -> BackboneParts:
    missing = [name for name in BACKBONE_FILES if name not in files]
    if missing:
        raise ValueError(f"backbone artifact lacks {missing}; it needs {list(BACKBONE_FILES)}")
    config = BackboneConfig.from_dict(json.loads(files["config.json"]))
    tensors = {k: v.float() for k, v in tensors_from_bytes(files["model.safetensors"]).items()}
    source = Tokenizer(files["source.spm"], vocab=_vocab(files, "source.vocab"),
                       eos_id=config.eos_id, unk_id=config.unk_id, pad_id=config.pad_id,
                       add_eos=config.source_eos)
    target = Tokenizer(files["target.spm"], vocab=_vocab(files, "target.vocab"),
                       eos_id=config.eos_id, unk_id=config.unk_id, pad_id=config.pad_id)
    return BackboneParts(config, tensors, source, target)


def build_engine(files: Mapping[str, bytes], options: EngineOptions | None = None, *,
                 loader: Loader | None = None, observer: Observer | None = None) -> Engine:
    parts = backbone_parts(files)
    return Engine(parts.config, parts.tensors, source_tokenizer=parts.source_tokenizer,
                  target_tokenizer=parts.target_tokenizer, options=options, loader=loader,
                  observer=observer)


def module_params(files: Mapping[str, bytes]) -> Params:
    if MODULE_FILE not in files:
        raise ValueError(f"module artifact lacks {MODULE_FILE!r}")
    return {k: v.float() for k, v in tensors_from_bytes(files[MODULE_FILE]).items()}


def backbone_files(config: BackboneConfig, tensors: Mapping[str, Tensor], *,
                   source_spm: bytes, target_spm: bytes, source_vocab: list[str] | None = None,
                   target_vocab: list[str] | None = None, half: bool = False) -> dict[str, bytes]:
    """The files of a backbone artifact (the inverse of `backbone_parts`)."""
    files: dict[str, bytes] = {
        "config.json": json.dumps(config.to_dict(), indent=1, sort_keys=True).encode(),
        "model.safetensors": tensors_to_bytes(tensors, half=half),
        "source.spm": source_spm, "target.spm": target_spm}
    for name, vocab in (("source.vocab", source_vocab), ("target.vocab", target_vocab)):
        if vocab is not None:
            files[name] = "".join(piece + "\n" for piece in vocab).encode("utf-8")
    return files


def module_files(params: Params, *, half: bool = False) -> dict[str, bytes]:
    return {MODULE_FILE: tensors_to_bytes(params, half=half)}

