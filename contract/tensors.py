"""Safetensors bytes, read and written in one place: a torch-free structural check, and
a reader / writer that import torch only when called."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# safetensors refuses headers above 100 MB; the same bound keeps a corrupt length
# prefix from making us allocate gigabytes.
MAX_HEADER_BYTES = 100_000_000


def check_safetensors(data: bytes) -> str | None:
    """Describe why `data` is not a well-formed safetensors file, or None if it is.

    Checks the length prefix, the JSON header and that the tensors' byte ranges cover
    the data exactly (a truncated file fails here), without importing torch.
    """
    if len(data) < 8:
        return f"corrupt safetensors: {len(data)} bytes, shorter than the 8-byte header length"
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > MAX_HEADER_BYTES or 8 + header_len > len(data):
        return f"corrupt safetensors: header length {header_len} exceeds file size {len(data)}"
    try:
        header = json.loads(data[8 : 8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"corrupt safetensors: header is not JSON ({exc})"
    if not isinstance(header, dict):
        return "corrupt safetensors: header is not a JSON object"
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and 0 <= offsets[0] <= offsets[1]):
            return f"corrupt safetensors: tensor {name!r} has no valid data_offsets"
        end = max(end, int(offsets[1]))
    body = len(data) - 8 - header_len
    if end != body:
        return f"corrupt safetensors: tensors cover {end} bytes but the file holds {body}"
    return None


def tensors_from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    """The tensors of safetensors bytes; ValueError ("corrupt safetensors: ...") when they
    are malformed. torch is imported here, on first use: the registry, the sidecar's job
    loop and the API import this package without it."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    problem = check_safetensors(data)
    if problem is not None:
        raise ValueError(problem)
    try:
        return load(data)
    except SafetensorError as error:
        raise ValueError(f"corrupt safetensors: {error}") from error


def tensors_to_bytes(tensors: Mapping[str, torch.Tensor], *, half: bool = False) -> bytes:
    """safetensors bytes; `half` stores float tensors as float16 (half the disk)."""
    from safetensors.torch import save

    prepared = {k: (v.half() if half and v.is_floating_point() else v).contiguous()
                for k, v in tensors.items()}
    return save(prepared)
