"""Tiny artifacts for model_store tests, built without torch so that spawned worker
processes start quickly."""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

from model_store import LocalStorage, Manifest, PublishHook, Store

BACKBONE_CONFIG: dict[str, object] = {"d_model": 8, "layers": 1, "vocab": 16}


def make_safetensors(values: list[float], *, name: str = "w") -> bytes:
    """A valid safetensors file holding one float32 vector."""
    body = struct.pack(f"<{len(values)}f", *values)
    header = {name: {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, len(body)]}}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
    return struct.pack("<Q", len(raw)) + raw + body


def backbone_files(seed: float = 1.0) -> dict[str, bytes | Path]:
    return {
        "config.json": json.dumps(BACKBONE_CONFIG).encode(),
        "model.safetensors": make_safetensors([seed, 2.0, 3.0]),
        "source.spm": b"source sentencepiece model",
        "target.spm": b"target sentencepiece model",
    }


def publish_backbone(store: Store, *, name: str = "default-en-fr", seed: float = 1.0) -> Manifest:
    return store.publish(
        "backbone",
        name,
        backbone_files(seed),
        config=BACKBONE_CONFIG,
        provenance={"recipe": "tiny"},
    )


def publish_module(
    store: Store,
    name: str,
    fingerprint: str,
    *,
    seed: float = 0.5,
    hook: PublishHook | None = None,
) -> Manifest:
    return store.publish(
        "module",
        name,
        {"module.safetensors": make_safetensors([seed, -seed])},
        config={"family": "adapter", "bottleneck": 4},
        provenance={"data": f"{name}.tsv", "pairs": 100},
        scores={"bleu": 30.0},
        backbone_fingerprint=fingerprint,
        hook=hook,
    )


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int, float]]:
    """Every path below `root` with its bytes (files), mode and mtime."""
    result: dict[str, tuple[bytes | None, int, float]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        result[path.relative_to(root).as_posix()] = (data, info.st_mode, info.st_mtime)
    return result


def set_read_only(root: Path, read_only: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chmod(os.path.join(dirpath, name), 0o555 if read_only else 0o755)
    os.chmod(root, 0o555 if read_only else 0o755)


def store_root(store: Store) -> Path:
    assert isinstance(store.storage, LocalStorage)
    return store.storage.root
