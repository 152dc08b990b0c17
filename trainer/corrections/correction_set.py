"""Which of a domain's corrections a refresh trains on, and which it holds back.

In order:
1. near duplicates: corrections whose sources are the same text up to case, Unicode
   form, whitespace and punctuation are one; of several different corrected targets the
   one sent by the most contributors wins (then the newest). The others are merged into
   it (used with it, never trained on).
2. a correction of a sentence of the domain's dev set is left out: it would leak the
   gate's own test into training; so is one of a sentence of the domain's own training
   data whose corrected target differs from that data's: it contradicts the pairs the
   served module was trained and gated with (a term flipped in sentences copied from
   public data is the cheapest poisoning there is).
3. per-key share: one API key's corrections are at most `max_key_share` of the set (the
   oldest of a key are kept; the rest wait for a later refresh). A single key can thus
   never refresh a domain alone; admin-approved anonymous corrections are not capped.
4. a seeded `held_out_fraction` is held back: extra dev data the gate must see improve.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from model_store.correction_rows import CorrectionRecord
from trainer.jobs.refresh_settings import RefreshSettings

_NOT_WORD = re.compile(r"[^\w\s]+")


def near_key(text: str) -> str:
    """Texts equal up to case, Unicode form, whitespace and punctuation share a key."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_WORD.sub(" ", folded).split())


def contributor(record: CorrectionRecord) -> str | None:
    """The key a correction counts against (None: anonymous, approved by an admin)."""
    return record.key_id


@dataclass
class CorrectionSet:
    train: list[CorrectionRecord] = field(default_factory=list)
    held_out: list[CorrectionRecord] = field(default_factory=list)
    merged: list[CorrectionRecord] = field(default_factory=list)
    in_dev: list[CorrectionRecord] = field(default_factory=list)
    contradicting: list[CorrectionRecord] = field(default_factory=list)
    over_share: list[CorrectionRecord] = field(default_factory=list)
    key_cap: int | None = None  # corrections per key at most (None: no key was capped)

    def used(self) -> list[CorrectionRecord]:
        """Marked as used when the refresh is published."""
        return self.train + self.held_out + self.merged

    def summary(self) -> dict[str, Any]:
        keys = Counter(contributor(r) or "approved" for r in self.train + self.held_out)
        return {"train": len(self.train), "held_out": len(self.held_out),
                "merged_duplicates": len(self.merged), "in_dev_set": len(self.in_dev),
                "contradict_own_data": len(self.contradicting),
                "over_key_share": len(self.over_share), "key_cap": self.key_cap,
                "contributors": len(keys)}


def select_corrections(records: Sequence[CorrectionRecord], *, dev_sources: Iterable[str],
                       settings: RefreshSettings, seed: int,
                       own: Iterable[tuple[str, str]] = ()) -> CorrectionSet:
    """`own`: the domain's training pairs."""
    chosen = CorrectionSet()
    kept = _merge_near_duplicates(records, chosen.merged)
    dev = {near_key(source) for source in dev_sources}
    known: dict[str, set[str]] = defaultdict(set)
    for source, target in own:
        known[near_key(source)].add(near_key(target))
    fresh: list[CorrectionRecord] = []
    for record in kept:
        source = near_key(record.source)
        if source in dev:
            chosen.in_dev.append(record)
        elif source in known and near_key(record.corrected) not in known[source]:
            chosen.contradicting.append(record)
        else:
            fresh.append(record)
    capped = _cap_keys(fresh, settings.max_key_share, chosen)
    if len(capped) >= 2:
        ranked = sorted(capped, key=lambda r: (_order(f"{r.source}\0{r.corrected}", seed), r.id))
        count = min(settings.max_held_out,
                    max(1, round(settings.held_out_fraction * len(capped))))
        held = {r.id for r in ranked[:count]}
        chosen.held_out = [r for r in capped if r.id in held]
        chosen.train = [r for r in capped if r.id not in held]
    else:
        chosen.train = capped
    return chosen


def _merge_near_duplicates(records: Sequence[CorrectionRecord],
                           merged: list[CorrectionRecord]) -> list[CorrectionRecord]:
    by_source: dict[str, list[CorrectionRecord]] = defaultdict(list)
    for record in records:
        by_source[near_key(record.source)].append(record)
    kept: list[CorrectionRecord] = []
    for group in by_source.values():
        variants: dict[str, list[CorrectionRecord]] = defaultdict(list)
        for record in group:
            variants[near_key(record.corrected)].append(record)

        def support(variant: list[CorrectionRecord]) -> tuple[int, Any, str]:
            senders = {contributor(r) or r.id for r in variant}
            newest = max(variant, key=lambda r: (r.created_at, r.id))
            return len(senders), newest.created_at, newest.id

        best = max(variants.values(), key=support)
        winner = max(best, key=lambda r: (r.created_at, r.id))
        kept.append(winner)
        merged += [r for r in group if r.id != winner.id]
    return sorted(kept, key=lambda r: (r.created_at, r.id))


def _cap_keys(records: list[CorrectionRecord], share: float,
              chosen: CorrectionSet) -> list[CorrectionRecord]:
    """Keep each key's oldest corrections up to the largest cap under which no key holds
    more than `share` of what is kept."""
    counts = Counter(contributor(r) for r in records)
    free = counts.pop(None, 0)
    if not counts or share >= 1:
        return records
    cap = _largest_cap(sorted(counts.values(), reverse=True), free, share)
    if cap >= max(counts.values()):
        return records
    chosen.key_cap = cap
    taken: Counter[str | None] = Counter()
    kept: list[CorrectionRecord] = []
    for record in records:
        key = contributor(record)
        if key is not None and taken[key] >= cap:
            chosen.over_share.append(record)
            continue
        taken[key] += 1
        kept.append(record)
    return kept


def _largest_cap(counts: Sequence[int], free: int, share: float) -> int:
    for cap in range(counts[0], 0, -1):
        total = free + sum(min(n, cap) for n in counts)
        if min(counts[0], cap) <= share * total:
            return cap
    return 0


def _order(text: str, seed: int) -> str:
    """A seeded order of the texts (not of the random row ids: the same corrections are
    held back however often they are stored)."""
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()


def correction_pairs(records: Iterable[CorrectionRecord]) -> list[tuple[str, str]]:
    return [(r.source, r.corrected) for r in records]


def explain_empty(chosen: CorrectionSet, settings: RefreshSettings) -> str:
    """Why a refresh has too few corrections to train and gate on."""
    parts = [f"{len(chosen.train)} correction(s) to train on and {len(chosen.held_out)} to "
             "hold back"]
    if chosen.over_share:
        parts.append(f"{len(chosen.over_share)} left out because one API key may send at "
                     f"most {settings.max_key_share:.0%} of a refresh's corrections "
                     "(NMT_TRAINER__REFRESH__MAX_KEY_SHARE): corrections from other keys, "
                     "or approved ones, are needed")
    if chosen.merged:
        parts.append(f"{len(chosen.merged)} duplicate(s) merged")
    if chosen.in_dev:
        parts.append(f"{len(chosen.in_dev)} of sentences of the dev set left out")
    if chosen.contradicting:
        parts.append(f"{len(chosen.contradicting)} left out because they contradict the "
                     "domain's own training pairs of the same sentences")
    return "; ".join(parts)
