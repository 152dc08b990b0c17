"""Weights as float16 safetensors shards of at most 16 MiB: what a device call brings back
(at most 8 files of 16 MiB, 64 MiB together, under $OUT).

Whole tensors are packed greedily, in name order, into `<prefix>-NN.safetensors`; a tensor
larger than a shard is refused (the shapes this run trains have none). Reading joins every
shard of a prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

SHARD_LIMIT = 16 * 2**20
HEADER_ALLOWANCE = 64 * 2**10  # the JSON header of a shard: names, shapes, offsets
RETURN_FILES = 8
RETURN_BYTES = 64 * 2**20


def shard_plan(tensors: Mapping[str, Tensor], limit: int = SHARD_LIMIT) -> list[list[str]]:
    """Names per shard, each shard's float16 bytes within `limit` minus a header."""
    room = limit - HEADER_ALLOWANCE
    shards: list[list[str]] = [[]]
    used = 0
    for name in sorted(tensors):
        size = tensors[name].numel() * 2
        if size > room:
            raise ValueError(f"tensor {name} takes {size} bytes as float16, more than a "
                             f"shard of {limit} bytes")
        if used + size > room:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += size
    return [s for s in shards if s]


def float16_bytes(tensors: Mapping[str, Tensor]) -> int:
    return sum(t.numel() * 2 for t in tensors.values())


def write_shards(tensors: Mapping[str, Tensor], folder: Path, prefix: str,
                 limit: int = SHARD_LIMIT) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for number, names in enumerate(shard_plan(tensors, limit)):
        path = folder / f"{prefix}-{number:02d}.safetensors"
        save_file({n: tensors[n].detach().to("cpu", torch.float16).contiguous()
                   for n in names}, str(path))
        if path.stat().st_size > limit:
            raise ValueError(f"{path} is {path.stat().st_size} bytes, over {limit}")
        paths.append(path)
    return paths


def read_shards(folder: Path, prefix: str) -> dict[str, Tensor]:
    """Every tensor of `prefix`'s shards, as float32."""
    paths = sorted(folder.glob(f"{prefix}-[0-9][0-9].safetensors"))
    if not paths:
        raise FileNotFoundError(f"no {prefix}-NN.safetensors shard in {folder}")
    out: dict[str, Tensor] = {}
    for path in paths:
        out |= {k: v.float() for k, v in load_file(str(path)).items()}
    return out
