"""The server shortens Python's thread switch interval while it runs, so the engine thread
gets the GIL back quickly after each torch op while the event loop is busy."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import build_store, make_settings
from fastapi.testclient import TestClient
from pydantic import ValidationError

from server.app import create_app
from server.execution.settings import ExecutionSettings


def test_the_switch_interval_holds_while_serving_and_is_restored(tmp_path: Path) -> None:
    before = sys.getswitchinterval()
    settings = make_settings(build_store(tmp_path / "store", domains=()),
                             engine={"gil_switch_interval_ms": 0.25})
    with TestClient(create_app(settings)) as client:
        assert client.get("/health/live").status_code == 200
        assert sys.getswitchinterval() == pytest.approx(0.00025)
    assert sys.getswitchinterval() == before


def test_the_default_is_shorter_than_pythons_and_bounds_are_checked() -> None:
    assert ExecutionSettings().gil_switch_interval_ms < 5.0  # Python's default is 5 ms
    with pytest.raises(ValidationError, match="gil_switch_interval_ms"):
        ExecutionSettings(gil_switch_interval_ms=0)
