"""Per-key rate limits: two token buckets per key (requests and characters per minute).

A bucket holds at most one minute's allowance and refills continuously, so a key may
burst up to its per-minute limit and then sustains the limit. A request takes one request
token and one token per character; when either bucket lacks them nothing is taken and
the caller learns how long until both would have them (Retry-After). Limits are per
replica: N replicas allow N times the limit in all.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Bucket:
    tokens: float
    updated: float

    def refill(self, now: float, *, capacity: float, per_second: float) -> None:
        self.tokens = min(capacity, self.tokens + (now - self.updated) * per_second)
        self.updated = now

    def wait_for(self, amount: float, *, per_second: float) -> float:
        """Seconds until `amount` tokens are there (0 when they are)."""
        return max(0.0, (amount - self.tokens) / per_second)


@dataclass(frozen=True)
class Refusal:
    limit: str  # "requests" or "characters"
    retry_after_s: int
    message: str
    never: bool = False  # the request alone exceeds the per-minute limit


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key_id: str, *, chars: int, requests_per_minute: int,
             chars_per_minute: int) -> Refusal | None:
        """Take one request and `chars` characters from the key's allowance, or refuse."""
        now = self.clock()
        wanted = {"requests": (1.0, float(requests_per_minute)),
                  "characters": (float(chars), float(chars_per_minute))}
        with self._lock:
            buckets: dict[str, Bucket] = {}
            for limit, (_amount, per_minute) in wanted.items():
                bucket = self._buckets.setdefault((key_id, limit), Bucket(per_minute, now))
                bucket.refill(now, capacity=per_minute, per_second=per_minute / 60)
                buckets[limit] = bucket
            for limit, (amount, per_minute) in wanted.items():
                if amount > per_minute:
                    return Refusal(limit, 60, f"a request of {int(amount)} {limit} exceeds "
                                              f"this key's limit of {int(per_minute)} "
                                              f"{limit} per minute", never=True)
                wait = buckets[limit].wait_for(amount, per_second=per_minute / 60)
                if wait > 0:
                    return Refusal(limit, max(1, math.ceil(wait)),
                                   f"this key's limit of {int(per_minute)} {limit} per "
                                   f"minute is used up; retry in {math.ceil(wait)} s")
            for limit, (amount, _) in wanted.items():
                buckets[limit].tokens -= amount
        return None

    def used(self, key_id: str, *, chars_per_minute: int) -> int:
        """Characters of the key's per-minute allowance in use now (0: all available)."""
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get((key_id, "characters"))
            if bucket is None:
                return 0
            bucket.refill(now, capacity=chars_per_minute, per_second=chars_per_minute / 60)
            return max(0, math.ceil(chars_per_minute - bucket.tokens))

    def forget(self, key_id: str) -> None:
        with self._lock:
            for limit in ("requests", "characters"):
                self._buckets.pop((key_id, limit), None)
