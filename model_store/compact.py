"""A backbone re-stored compactly serves the modules of the backbone it re-stores.

Publishing a backbone's weights in a smaller encoding (int8 with per-channel scales,
server/engine/row_int8.py) changes its weights file, so its fingerprint, so it is a new
version. Its weights are those of the version it re-stores, rounded (within 0.1 BLEU,
benchmarks/results/compact_weights.md), so the modules and routers built for that version
serve on it unchanged: the new version's manifest names the fingerprint it re-stores in
`provenance.compact_of`, and the store, the server and the uploads accept artifacts built
for either fingerprint. An operator's own modules trained on the float16 built-in keep
serving after the package ships its compact re-store.
"""

from __future__ import annotations

from contract.manifest import Manifest

COMPACT_OF = "compact_of"  # provenance key: {"version", "backbone_fingerprint", "storage"}


def served_fingerprints(backbone: Manifest) -> frozenset[str]:
    """The fingerprints whose modules serve on `backbone`: its own, and the one of the
    version it re-stores compactly (if it does)."""
    found = {backbone.backbone_fingerprint}
    restored = backbone.provenance.get(COMPACT_OF)
    if isinstance(restored, dict) and isinstance(restored.get("backbone_fingerprint"), str):
        found.add(restored["backbone_fingerprint"])
    return frozenset(found)
