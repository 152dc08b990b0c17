"""A long benchmark's finished parts kept in a work folder, so a killed run (or a later
session) continues where it stopped instead of starting over.

Each part is one JSON file named by the part and a fingerprint of everything that decides
its result (settings, sentence counts, beam): a part measured under other settings is
never reused, and one measured under the same is never measured twice. Files are written
whole (to a temporary name, then renamed), so a run killed mid-write leaves no half part.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def fingerprint(settings: Mapping[str, Any]) -> str:
    """12 hex digits that change whenever any of `settings` does."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class WorkCache:
    """Parts of a run under `folder` (None: nothing kept, every part computed)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.reused = 0
        self.computed = 0
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def path(self, part: str, settings: Mapping[str, Any]) -> Path | None:
        if self.folder is None:
            return None
        safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in part)
        return self.folder / f"{safe}.{fingerprint(settings)}.json"

    def get_or_compute(self, part: str, settings: Mapping[str, Any],
                       compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The part's stored result, else `compute()`'s (stored before it is returned)."""
        path = self.path(part, settings)
        if path is not None and path.is_file():
            self.reused += 1
            stored: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["result"]
            return stored
        result = compute()
        self.computed += 1
        if path is not None:
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"part": part, "settings": dict(settings),
                                             "result": result}, ensure_ascii=False,
                                            default=str), encoding="utf-8")
            temporary.replace(path)
        return result
