"""Artifacts that failed to load: why, and when to try again.

A module (or classifier) version that cannot be loaded (a flipped byte, an unreadable
file, a torch error) takes out only its own domain; the runtime records the failure here
and retries it with exponential backoff (`RETRY_FIRST_S`, doubling up to `RETRY_MAX_S`),
so a file that was repaired in place heals without an operator, while a version that stays
broken costs one attempt per backoff period, not one per poll.

Messages shown to clients name no server path: the store root and any other absolute
path in an exception's text are replaced by a short placeholder.
"""

from __future__ import annotations

import re
import time
from collections.abc import Hashable
from dataclasses import dataclass

from model_store import StoreError

RETRY_FIRST_S = 1.0
RETRY_MAX_S = 300.0
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[\w.@+-]+/)*[\w.@+-]+")


@dataclass(frozen=True)
class Failure:
    problem: str
    attempts: int
    retry_at: float  # time.monotonic() of the next attempt


class FailureBook:
    """The failed loads, keyed by what failed (e.g. `(domain, version)`)."""

    def __init__(self, *, first_s: float = RETRY_FIRST_S, max_s: float = RETRY_MAX_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._failures: dict[Hashable, Failure] = {}

    def record(self, key: Hashable, problem: str) -> Failure:
        previous = self._failures.get(key)
        attempts = 1 if previous is None else previous.attempts + 1
        delay = min(self.max_s, self.first_s * 2 ** (attempts - 1))
        failure = Failure(problem, attempts, time.monotonic() + delay)
        self._failures[key] = failure
        return failure

    def waiting(self, key: Hashable) -> Failure | None:
        """The failure of `key` while its next attempt is not due yet; None when it may be
        (re)tried now."""
        failure = self._failures.get(key)
        if failure is None or failure.retry_at <= time.monotonic():
            return None
        return failure

    def due_now(self) -> None:
        """Make every failure due (the registry changed: the store may hold a fix)."""
        now = time.monotonic()
        self._failures = {key: Failure(f.problem, f.attempts, min(f.retry_at, now))
                          for key, f in self._failures.items()}

    def clear(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def retry_due(self) -> bool:
        now = time.monotonic()
        return any(f.retry_at <= now for f in self._failures.values())

    def forget_except(self, keys: set[Hashable]) -> None:
        """Drop failures of versions nobody asks for any more (replaced or deleted)."""
        for key in [k for k in self._failures if k not in keys]:
            del self._failures[key]


def describe(error: BaseException) -> str:
    """A one-line, path-free description of why a load failed: the message of an error
    that explains itself (store, validation), else the error's type and first line."""
    if isinstance(error, OSError) and error.strerror:
        return f"{type(error).__name__}: {error.strerror}"
    lines = str(error).splitlines()
    text = lines[0] if lines else ""
    if not isinstance(error, (StoreError, ValueError)):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return _ABSOLUTE_PATH.sub("<path>", text)
