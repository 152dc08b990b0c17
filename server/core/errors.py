"""Errors that the serving layers raise for a caller's request.

Each class is one kind of outcome; `server/api/errors.py` maps every class to exactly one
HTTP status in one table. Below the API nothing knows about HTTP.
"""

from __future__ import annotations


class ServingError(Exception):
    """Base class: a stable machine-readable `code`, a message, and the field at fault."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(ServingError):
    """The request is well-formed JSON but a value is not acceptable."""

    code = "invalid_request"


class InvalidArtifact(ServingError):
    """An uploaded artifact failed verification; the message lists every problem."""

    code = "invalid_artifact"


class TooLarge(ServingError):
    """A size limit (characters, items, tokens, upload bytes) is exceeded."""

    code = "too_large"


class UnsupportedMediaType(ServingError):
    """A file of a type the server cannot translate; the message lists the supported ones."""

    code = "unsupported_media_type"


class UnknownDomain(ServingError):
    """A domain that is not served; the message names the known ones."""

    code = "unknown_domain"


class UnsupportedLanguage(ServingError):
    """A source or target language (given or detected) that no served backbone
    translates; the message names it and the served directions."""

    code = "unsupported_language"


class NotFound(ServingError):
    """A named thing (domain version, job) does not exist."""

    code = "not_found"


class Conflict(ServingError):
    """The operation conflicts with the current state."""

    code = "conflict"


class Busy(ServingError):
    """The request queue is full: retry after `retry_after` seconds."""

    code = "queue_full"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimited(Busy):
    """An API key used up its allowance of requests or characters per minute (429)."""

    code = "rate_limited"


class TooManyJobs(Busy):
    """A client has as many unfinished batch (or document) jobs as one client may (429)."""

    code = "too_many_jobs"


class DeadlineUnreachable(Busy):
    """The deadline the client asked for (`X-NMT-Deadline`) cannot be met behind the work
    queued now (504 with Retry-After: when the queue will have drained)."""

    code = "deadline_unreachable"


class DeadlineExceeded(ServingError):
    """The request did not finish within its deadline."""

    code = "timeout"


class NotReady(ServingError):
    """The server cannot serve this yet (no backbone loaded, a module failed to load)."""

    code = "not_ready"


class Draining(NotReady):
    """The server shuts down and stopped waiting for this work (its drain bound passed):
    retry after `retry_after` seconds, on another replica."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unauthorized(ServingError):
    """Missing or malformed credentials."""

    code = "unauthorized"


class Forbidden(ServingError):
    """Credentials present but not accepted (or the admin API is disabled)."""

    code = "forbidden"
