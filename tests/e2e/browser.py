"""Headless Chromium driven by Playwright for Python: the system's chromium (Debian's
package, installed by .ci/run), never a downloaded browser."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from playwright.sync_api import Browser, sync_playwright

from tests.services import require_executable

CHROMIUM = os.environ.get("NMT_TEST_CHROMIUM", "/usr/bin/chromium")


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    executable = require_executable(CHROMIUM, hint="apt-get install chromium")
    with sync_playwright() as playwright:
        # --no-sandbox: CI and this machine run the tests as root, where Chromium's sandbox
        # refuses to start.
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
