"""Errors raised by the model store; one base class so callers can map them to HTTP once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class StoreError(Exception):
    """Base class of every model-store error."""


class ArtifactError(StoreError):
    """An artifact (or an upload) is invalid; `problems` lists every problem found."""

    def __init__(self, label: str, problems: Sequence[str]) -> None:
        self.label = label
        self.problems = list(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(
            f"artifact {label} is invalid: {count} {noun}: " + "; ".join(self.problems)
        )


class NotFoundError(StoreError, LookupError):
    """Something named does not exist; the message names what does."""

    def __init__(self, what: str, name: str | int, known: Iterable[object] | None = None) -> None:
        self.what = what
        self.name = name
        self.known = None if known is None else [str(item) for item in known]
        shown = repr(name) if isinstance(name, str) else str(name)
        message = f"no {what} {shown}"
        if self.known is not None:
            message += "; known: " + (", ".join(self.known) if self.known else "none")
        super().__init__(message)


class ConflictError(StoreError):
    """The operation conflicts with the current state (a version taken, a name reused)."""
