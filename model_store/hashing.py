"""Content hashes and the backbone fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from contract.artifacts import (
    BACKBONE_WEIGHTS_FILE,
    FINGERPRINT_FILES,
    effective_vocabulary_hashes,
)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def short_hash(digest: str) -> str:
    """Abbreviated digest for error messages."""
    return digest[:12] + ".."


def canonical_json(value: object) -> str:
    """Deterministic JSON: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def backbone_fingerprint(config: Mapping[str, object], file_hashes: Mapping[str, str]) -> str:
    """sha256 of the canonical JSON of the config and the hashes of the fingerprint files.

    `file_hashes` maps relpath -> sha256 hex; `model.safetensors` is required, the
    tokenizer and vocabulary files enter when present (a shared vocabulary's target ones
    as the source ones: one file or two identical ones, the same fingerprint), any other
    file is ignored.
    """
    if BACKBONE_WEIGHTS_FILE not in file_hashes:
        raise ValueError(f"a backbone fingerprint needs the sha256 of {BACKBONE_WEIGHTS_FILE}")
    hashes = effective_vocabulary_hashes(file_hashes)
    files = {name: hashes[name] for name in FINGERPRINT_FILES if name in hashes}
    payload = canonical_json({"config": dict(config), "files": files})
    return sha256_hex(payload.encode("utf-8"))
