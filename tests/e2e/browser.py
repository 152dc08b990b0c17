"""Headless Chromium driven by Playwright for Python: the system's chromium (Debian's
package, which `make test` installs), never a downloaded browser."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from playwright.sync_api import Browser, Page, sync_playwright

from tests.services import require_program

CHROMIUM = os.environ.get("NMT_TEST_CHROMIUM", "/usr/bin/chromium")


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    executable = require_program("chromium", at=CHROMIUM)
    with sync_playwright() as playwright:
        # --no-sandbox: CI and this machine run the tests as root, where Chromium's sandbox
        # refuses to start.
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def page_at(browser: Browser, base: str, *, timeout_ms: int) -> Iterator[Page]:
    """A page of its own context (a fresh session storage) on `base`, waiting up to
    `timeout_ms` for anything (the machine may be busy); fails if the page threw."""
    context = browser.new_context(base_url=base)
    context.set_default_timeout(timeout_ms)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert errors == [], f"the page threw: {errors}"
