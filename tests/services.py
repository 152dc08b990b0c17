"""System programs and services the tests use (PostgreSQL, Chromium, LibreOffice, pandoc, a
C compiler, curl, a Ray cluster).

`make test` installs the Debian packages of these programs (the Makefile's SYSTEM_PACKAGES)
when it runs as root on a machine with apt. Elsewhere, a test whose program is missing is
skipped with a reason that names the package. CI sets NMT_TEST_REQUIRE_SERVICES=1, and there
the same absence fails the test: a green CI run must have exercised every program for real.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import NoReturn

import pytest

REQUIRE_ENV = "NMT_TEST_REQUIRE_SERVICES"

# Each program a test runs that neither Python's packages nor a Debian base system bring,
# and the Debian packages it needs. tests/contract/test_system_programs.py checks that every
# program the tests name is here and that every package is in the Makefile's SYSTEM_PACKAGES.
DEBIAN_PACKAGES: dict[str, tuple[str, ...]] = {
    # Debian keeps the server's programs off PATH (tests/postgres.py looks for them)
    "initdb": ("postgresql",),
    "pg_ctl": ("postgresql",),
    "chromium": ("chromium",),
    # one package per application: the conversions write text, sheets and slides
    "soffice": ("libreoffice-writer-nogui", "libreoffice-calc-nogui",
                "libreoffice-impress-nogui"),
    "pandoc": ("pandoc",),
    # the grouped int8 kernel's compiler, and the C library's headers it includes
    "cc": ("gcc", "libc6-dev"),
    "curl": ("curl",),  # the README's and docs' curl examples run for real
    "git": ("git",),
    "make": ("make",),
    # Debian's Python makes the Weblate venv (`make weblate-venv`), which sees the GObject
    # and cairo bindings that Weblate imports from Debian (tests/weblate/requirements.txt)
    "python3": ("python3-venv", "python3-gi-cairo", "gir1.2-pango-1.0"),
}


def _required(environ: Mapping[str, str]) -> bool:
    return environ.get(REQUIRE_ENV, "").strip() not in ("", "0", "false", "no")


# Read when the session starts (tests/conftest.py imports this module): the server and e2e
# tests clear every NMT_* variable for each test, so that their settings start clean.
_REQUIRED_AT_START = _required(os.environ)


def services_required() -> bool:
    return _REQUIRED_AT_START or _required(os.environ)


def unavailable(reason: str) -> NoReturn:
    """Skip (locally) or fail (CI) a test whose service is missing, naming what is missing."""
    if services_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set: a missing service is a failure)")
    pytest.skip(reason)


def install_hint(program: str) -> str:
    """Where `program` comes from, for a skip's reason."""
    packages = DEBIAN_PACKAGES[program]
    if len(packages) == 1:
        return f"Debian package {packages[0]}: `make test` installs it when run as root"
    return f"Debian packages {' '.join(packages)}: `make test` installs them when run as root"


def require_program(program: str, *, at: str | None = None) -> str:
    """The path of `program` on PATH, or of `at` (a path or a name on PATH, where the test
    was told to look), else unavailable() naming its Debian package."""
    hint = install_hint(program)  # first: an unlisted program fails here, installed or not
    wanted = at or program
    found = wanted if os.path.isabs(wanted) and os.access(wanted, os.X_OK) else \
        shutil.which(wanted)
    if found is None:
        unavailable(f"{wanted} not found ({hint})")
    return found
