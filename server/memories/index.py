"""One memory's pairs in memory: exact lookup by normalised source, fuzzy lookup by
similarity.

Fuzzy lookup cannot score every pair (100,000 pairs x ~1 us each per sentence is 0.1 s),
so it scores only candidates: an inverted index maps each word to the pairs whose source
holds it; the query's rarest words vote for pairs (words that a large share of the pairs
hold, "the", "de", vote only when the query has too few rarer ones), a length filter drops
pairs that cannot reach the threshold (a similarity of t needs the shorter text to be at
least t / (2 - t) of the longer), and the pairs with the most votes are scored with
rapidfuzz's `ratio` (normalised Indel similarity, 0-100). Exact sources of the query
never show up as fuzzy matches: the caller uses them as exact ones.

Writes come from the registry's change feed (a worker thread) while lookups run on
request threads: a lock guards the maps; scoring runs outside it, on a snapshot. Removed
pairs leave stale ids in the postings (lists: a set per word would cost four times the
memory at 100k pairs); lookups skip them, and the postings are rebuilt once stale ids
are a fifth of them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from server.memories.normalisation import folded, normalised, source_key, words

CANDIDATES = 64  # pairs scored per lookup
COMMON_SHARE = 0.05  # a word in more than this share of the pairs is common...
COMMON_MIN = 200  # ... once it is in at least this many
RARE_ENOUGH = 2  # the query's words that must vote (the rarest, common or not)
VOTE_BUDGET = 20_000  # postings counted per lookup, past the rarest words


@dataclass(frozen=True)
class Entry:
    id: int
    source: str
    target: str
    tuid: str | None
    origin: str
    key: str  # source_key(source)
    folded: str  # folded(source)


@dataclass(frozen=True)
class Scored:
    score: float  # 0-100
    entry: Entry


def entry(pair_id: int, source: str, target: str, *, tuid: str | None = None,
          origin: str = "api", key: str | None = None) -> Entry:
    plain = normalised(source)
    return Entry(pair_id, source, target, tuid, origin, key or source_key(plain, done=True),
                 plain.casefold())


class PairIndex:
    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, Entry] = {}
        self._exact: dict[str, list[int]] = {}
        self._postings: dict[str, list[int]] = {}
        self._stale = 0  # stale ids in the postings
        self._total = 0  # ids in the postings
        for one in entries:
            self._add(one)

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, new: Entry) -> None:
        with self._lock:
            if new.id in self._entries:
                self._drop(new.id)
            self._add(new)
            self._maybe_rebuild()

    def remove(self, pair_id: int) -> None:
        with self._lock:
            if pair_id in self._entries:
                self._drop(pair_id)
                self._maybe_rebuild()

    def entries(self) -> list[Entry]:
        """Every pair, oldest first (a snapshot)."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.id)

    def exact(self, text: str) -> Entry | None:
        """The newest pair whose normalised source is `text`'s."""
        key = source_key(text)
        with self._lock:
            ids = self._exact.get(key)
            return self._entries[max(ids)] if ids else None

    def fuzzy(self, text: str, *, threshold: float, limit: int) -> list[Scored]:
        """Pairs whose source is at least `threshold` (0-100) similar to `text`, best first
        (ties: the newest first); the text's exact pairs are left out."""
        query = folded(text)
        wanted = words(query)
        if not wanted or limit <= 0:
            return []
        share = threshold / 100
        shortest, longest = len(query) * share / (2 - share), len(query) * (2 - share) / share
        key = source_key(text)
        with self._lock:
            votes = self._votes(wanted)
            chosen = [self._entries[i] for i, _ in votes.most_common(CANDIDATES * 4)
                      if i in self._entries]
        chosen = [e for e in chosen if shortest <= len(e.folded) <= longest
                  and e.key != key][:CANDIDATES]
        found = process.extract(query, {i: e.folded for i, e in enumerate(chosen)},
                                scorer=fuzz.ratio, score_cutoff=threshold, limit=None)
        scored = [Scored(_score(text, chosen[i], score), chosen[i]) for _, score, i in found]
        scored.sort(key=lambda s: (-s.score, -s.entry.id))
        return scored[:limit]

    # -- inside the lock -----------------------------------------------------------------
    def _votes(self, wanted: list[str]) -> Counter[int]:
        """Votes of the query's rarest words: a pair as similar as the threshold asks
        shares most of the query's words, so it holds one of its rarest half and one more
        (prefix filtering); the rarest RARE_ENOUGH always vote, the others while they are
        not common and the votes counted stay within VOTE_BUDGET."""
        common = max(COMMON_MIN, int(len(self._entries) * COMMON_SHARE))
        lists = sorted((self._postings.get(word, []) for word in wanted), key=len)
        voters = len(lists) // 2 + 1
        budget = VOTE_BUDGET
        votes: Counter[int] = Counter()
        for rank, posting in enumerate(lists):
            if rank >= RARE_ENOUGH and (rank >= voters or len(posting) > min(common,
                                                                               budget)):
                break
            votes.update(posting)
            budget -= len(posting)
        return votes

    def _add(self, new: Entry) -> None:
        self._entries[new.id] = new
        self._exact.setdefault(new.key, []).append(new.id)
        for word in words(new.folded):
            self._postings.setdefault(word, []).append(new.id)
            self._total += 1

    def _drop(self, pair_id: int) -> None:
        old = self._entries.pop(pair_id)
        ids = self._exact[old.key]
        ids.remove(pair_id)
        if not ids:
            del self._exact[old.key]
        self._stale += len(words(old.folded))

    def _maybe_rebuild(self) -> None:
        if self._stale * 5 <= max(self._total, 1000):
            return
        self._postings = {}
        self._stale = self._total = 0
        for kept in self._entries.values():
            for word in words(kept.folded):
                self._postings.setdefault(word, []).append(kept.id)
                self._total += 1


def _score(text: str, found: Entry, score: float) -> float:
    """A case-insensitive 100 that is not the same text is 99: 100 means exact."""
    rounded = round(score, 1)
    if rounded >= 100 and normalised(text) != normalised(found.source):
        return 99.0
    return rounded
