"""The server says at start-up which CPU path the engine took (server/engine/host_paths.py):
in the log and the `nmt_engine_cpu_path` metric; an impossible explicit path stops the
start with the reason."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from conftest import build_store, make_settings
from fastapi.testclient import TestClient

import server.app
from server.engine import host_paths
from server.engine.host_paths import HostFeatures, UnsupportedPath

AVX2 = HostFeatures(frozenset({"fpu", "avx2", "fma"}), ("x86", "fbgemm", "onednn"), "x86",
                    False)


def test_the_server_says_which_path_it_took(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings(build_store(tmp_path / "store"), engine={"cpu_path": "int8"})
    engine = host_paths.detect()
    want = host_paths.choose_quantized_engine(engine)
    with caplog.at_level(logging.INFO, logger="server.app"), \
            TestClient(server.app.create_app(settings)) as http:
        assert http.get("/health/ready").status_code == 200
        metrics = http.get("/metrics").text
        assert torch.backends.quantized.engine == want
    assert f'nmt_engine_cpu_path{{path="int8",quantized_engine="{want}"}} 1.0' in metrics
    assert any("engine CPU path: int8" in r.getMessage() for r in caplog.records)


def test_the_server_does_not_start_on_an_impossible_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_paths, "detect", lambda: AVX2)
    settings = make_settings(build_store(tmp_path / "store"), engine={"cpu_path": "bfloat16"})
    with pytest.raises(UnsupportedPath, match="bfloat16 needs a CPU with"), \
            TestClient(server.app.create_app(settings)):
        pass
