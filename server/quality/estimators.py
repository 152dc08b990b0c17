"""Where a backbone's quality estimator lives, and which one a served backbone uses.

An estimator is a file `quality/<backbone name>.json.xz` (xz-compressed JSON:
server/quality/estimator.py) holding the fingerprint of the backbone it was fitted for; a
`<backbone name>.json` of plain JSON (what older versions wrote) is read where no `.json.xz`
is. The store root's copy (a refit
after a backbone or module publication) comes before the one shipped in the package
(`model_store/builtin/quality/`); a file fitted for another fingerprint is ignored, and a
backbone without any estimator is scored by the prior (the mean token log-probability).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from model_store import Manifest
from model_store.compact import served_fingerprints
from model_store.store import BUILTIN_DIR
from server.quality.estimator import PRIOR, Estimator, EstimatorError

QUALITY_DIR = "quality"
BUILTIN_QUALITY_DIR = BUILTIN_DIR / QUALITY_DIR
log = logging.getLogger(__name__)


def estimator_path(root: Path, backbone: str) -> Path:
    """Where `write_estimator` writes the backbone's estimator."""
    return root / f"{backbone}.json.xz"


def legacy_estimator_path(root: Path, backbone: str) -> Path:
    """Plain JSON, as older versions wrote it: read only where `estimator_path` is absent."""
    return root / f"{backbone}.json"


def found_estimator_path(root: Path, backbone: str) -> Path:
    """The file read for `backbone` under `root` (it may not exist)."""
    path = estimator_path(root, backbone)
    legacy = legacy_estimator_path(root, backbone)
    return legacy if not path.is_file() and legacy.is_file() else path


def write_estimator(root: Path, backbone: str, estimator: Estimator) -> Path:
    """Atomically (temporary file, then rename): a reader sees the old file or the new."""
    root.mkdir(parents=True, exist_ok=True)
    target = estimator_path(root, backbone)
    handle, temporary = tempfile.mkstemp(dir=root, prefix=f".{backbone}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(estimator.to_file_bytes())
        # mkstemp makes it 0600: a server running as another user than the sidecar reads it
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    legacy_estimator_path(root, backbone).unlink(missing_ok=True)  # superseded
    return target


class EstimatorBook:
    """The estimator of each served backbone; the files are looked at again at most every
    `recheck_s` seconds and reread when one changed (a refit is served without a restart)."""

    def __init__(self, roots: Sequence[Path], *, recheck_s: float = 5.0) -> None:
        self.roots = list(roots)  # searched in order
        self.recheck_s = recheck_s
        # fingerprint -> (estimator, the files' modification times, when they were checked)
        self._found: dict[str, tuple[Estimator, list[float], float]] = {}
        self._lock = threading.Lock()

    def get(self, backbone: Manifest | None) -> Estimator:
        if backbone is None:
            return PRIOR
        fingerprint = backbone.backbone_fingerprint
        now = time.monotonic()
        with self._lock:
            known = self._found.get(fingerprint)
            if known is not None and now - known[2] < self.recheck_s:
                return known[0]
            stamps = self._stamps(backbone.name)
            if known is None or stamps != known[1]:
                known = (self._read(backbone.name, served_fingerprints(backbone)), stamps, now)
            self._found[fingerprint] = (known[0], stamps, now)
            return known[0]

    def _stamps(self, name: str) -> list[float]:
        paths = [found_estimator_path(root, name) for root in self.roots]
        return [p.stat().st_mtime if p.is_file() else -1.0 for p in paths]

    def _read(self, name: str, fingerprints: frozenset[str]) -> Estimator:
        """The first estimator fitted for the backbone (or the one it re-stores compactly:
        model_store/compact.py)."""
        for root in self.roots:
            path = found_estimator_path(root, name)
            if not path.is_file():
                continue
            try:
                estimator = Estimator.from_json(path.read_bytes())
            except (OSError, EstimatorError) as error:
                log.error("quality estimator %s unusable: %s", path, error)
                continue
            if estimator.backbone_fingerprint in fingerprints:
                log.info("quality estimator of %s: %s", name, path)
                return estimator
            log.warning("quality estimator %s was fitted for another backbone", path)
        return PRIOR
