"""System services the tests start for themselves (PostgreSQL, Chromium, a Ray cluster).

On a developer's machine without the service, a test that needs it is skipped with a visible
reason. CI sets NMT_TEST_REQUIRE_SERVICES=1 (.ci/run installs every service), and there the
same absence fails the test: a green CI run must have exercised every service for real.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

REQUIRE_ENV = "NMT_TEST_REQUIRE_SERVICES"


def services_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip (locally) or fail (CI) a test whose service is missing, naming what is missing."""
    if services_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set: a missing service is a failure)")
    pytest.skip(reason)


def require_executable(name: str, *, hint: str) -> str:
    """The path of `name` on PATH (or an absolute path that exists), else unavailable()."""
    found = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
    if found is None:
        unavailable(f"{name} not found ({hint})")
    return found
