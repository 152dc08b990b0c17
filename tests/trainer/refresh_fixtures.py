"""Corrections for refresh tests: stored in the registry as the server stores them, for
the tiny store's religion domain (word-by-word "translations", tests/trainer/sidecar_store.py)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence

from model_store import Store
from model_store.correction_rows import CorrectionFilter, CorrectionRecord, NewCorrection
from tests.trainer.sidecar_store import BACKBONE, LEXICON, NEW_DOMAIN

# A wrong but consistent "translation" of every word: the corrections a saboteur sends.
SCRAMBLED = dict(zip(LEXICON, list(LEXICON.values())[3:] + list(LEXICON.values())[:3],
                     strict=True))


def translate(source: str, lexicon: dict[str, str] = LEXICON) -> str:
    return " ".join(lexicon[w] for w in source.split())


def fresh_sources(count: int, *, avoid: Sequence[str], seed: int) -> list[str]:
    """Distinct religion sentences not among `avoid` (the domain's own data)."""
    rng, words, taken = random.Random(seed), list(LEXICON), set(avoid)
    found: list[str] = []
    while len(found) < count:
        source = " ".join(rng.choice(words) for _ in range(rng.randint(3, 7)))
        if source not in taken:
            taken.add(source)
            found.append(source)
    return found


def add(store: Store, sources: Sequence[str], *, key: str | None,
        correct: Callable[[str], str] = translate, domain: str = NEW_DOMAIN,
        status_approved: bool = False, routed: str | None = None) -> list[CorrectionRecord]:
    added: list[CorrectionRecord] = []
    for source in sources:
        corrected = correct(source)
        digest = hashlib.sha256(f"{key}\0{source}\0{corrected}".encode()).hexdigest()
        record = store.registry.add_correction(NewCorrection(
            source=source, machine=None, corrected=corrected, domain=domain, routed=routed,
            direction="en-fr", backbone=BACKBONE, key_id=key, key_name=key,
            fingerprint=digest))
        added.append(record)
    if status_approved:
        store.registry.review_corrections(CorrectionFilter(ids=[r.id for r in added]),
                                          approve=True)
    return added
