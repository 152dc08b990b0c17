"""The repository stays small enough to clone and ship with both built-in directions
(en->fr and fr->en: backbones, modules and routers) inside it: the weights are stored as
int8 with per-channel scales (server/engine/row_int8.py, docs/ARCHITECTURE.md)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_TRACKED_BYTES = 60_000_000  # 60 MB


def tracked_files() -> list[Path]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    return [ROOT / name for name in listed if name and (ROOT / name).is_file()]


def test_the_tracked_files_stay_under_60_mb() -> None:
    sizes = {path: path.stat().st_size for path in tracked_files()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
    assert total < MAX_TRACKED_BYTES, (
        f"tracked files hold {total / 1e6:.1f} MB (limit {MAX_TRACKED_BYTES / 1e6:.0f} MB); "
        "largest: " + ", ".join(f"{p.relative_to(ROOT)} {sizes[p] / 1e6:.1f} MB"
                                for p in largest))


def test_the_shipped_weights_are_int8_with_scales() -> None:
    weights = [path for path in tracked_files()
               if path.match("model_store/builtin/*s/*/v*/*.safetensors")
               or path.match("model_store/builtin/directions/*/*s/*/v*/*.safetensors")]
    assert weights, "no built-in weights are tracked"
    for path in weights:
        data = path.read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        int8 = [name for name, info in header.items()
                if name != "__metadata__" and info["dtype"] == "I8"]
        assert int8, f"{path.relative_to(ROOT)} holds no int8 tensor"
        assert all(name + "::row_scale" in header for name in int8)
