"""End-to-end tests: the server and the sidecar on a tiny store."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _no_nmt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("NMT_"):
            monkeypatch.delenv(key)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> Iterator[None]:
    # Tiny models: one thread is faster than two fighting a busy machine for its cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
