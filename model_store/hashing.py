"""Content hashes and the backbone fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from contract.artifacts import BACKBONE_WEIGHTS_FILE, FINGERPRINT_FILES


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
    tokenizer and vocabulary files enter when present, any other file is ignored.
    """
    if BACKBONE_WEIGHTS_FILE not in file_hashes:
        raise ValueError(f"a backbone fingerprint needs the sha256 of {BACKBONE_WEIGHTS_FILE}")
    files = {name: file_hashes[name] for name in FINGERPRINT_FILES if name in file_hashes}
    payload = canonical_json({"config": dict(config), "files": files})
    return sha256_hex(payload.encode("utf-8"))
