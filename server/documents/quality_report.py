"""Per-unit quality of a translated document (issue #44), sent beside the file as the
`X-NMT-Quality` header: a post-editor learns which units to look at first without a
format of its own for it (a header suits every format, and keeps the file as written).

A unit is one of the document's text segments, numbered from 0 in document order (the
segments `X-NMT-Segments` counts); its quality is the lowest of its sentences', and it is
flagged when one of them fell below the server's `min_quality`. The header lists the
flagged units (the first MAX_LISTED of them) and summary numbers; a document without a
scored sentence gets none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

QUALITY_HEADER = "X-NMT-Quality"
MAX_LISTED = 100  # keeps the header under ~600 bytes whatever the document's size


@dataclass(frozen=True)
class UnitQuality:
    quality: float | None  # None: nothing in the unit was scored
    flagged: bool = False


def merged(parts: Sequence[UnitQuality]) -> UnitQuality:
    """One unit translated in several pieces: its lowest quality, flagged if any was."""
    scored = [p.quality for p in parts if p.quality is not None]
    return UnitQuality(min(scored) if scored else None, any(p.flagged for p in parts))


def summary(units: Sequence[UnitQuality]) -> dict[str, Any] | None:
    scored = [(index, u) for index, u in enumerate(units) if u.quality is not None]
    if not scored:
        return None
    qualities = [u.quality for _, u in scored if u.quality is not None]
    flagged = [index for index, u in scored if u.flagged]
    return {"units": len(units), "scored": len(scored),
            "mean": round(sum(qualities) / len(qualities), 4),
            "lowest": round(min(qualities), 4), "flagged": len(flagged),
            "flagged_units": flagged[:MAX_LISTED]}
