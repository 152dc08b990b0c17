"""End-to-end tests: the server and the sidecar on a tiny store."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_nmt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("NMT_"):
            monkeypatch.delenv(key)

