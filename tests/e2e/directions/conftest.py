"""The web page on a server of three directions (tests/two_directions.py: tiny en->fr,
fr->en and en->de, en->fr the default): one live server for every test of this folder, a
fresh page per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.browser import chromium, page_at
from tests.e2e.processes import live_server
from tests.trainer.sidecar_store import server_settings
from tests.two_directions import EN_FR, build_two_directions

TIMEOUT_MS = 30_000
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="package")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_two_directions(tmp_path_factory.mktemp("web-directions") / "store",
                                german=True)
    with live_server(server_settings(root, backbone=EN_FR)) as url:
        yield url


@pytest.fixture
def page(base: str) -> Iterator[Page]:
    with chromium() as browser, page_at(browser, base, timeout_ms=TIMEOUT_MS) as opened:
        yield opened
