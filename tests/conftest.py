"""Suite-wide hooks: GPU tests run only where CUDA is available; tiny models run on one
torch thread (faster than two threads fighting a busy machine for its cores). Registry
fixtures: one throwaway PostgreSQL server per session, and `registry_url`, which runs a
test once on SQLite and once on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.postgres import PostgresServer, start_postgres


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    # Per test, so a test that changes the thread count (benchmarks) cannot leak it into
    # tests that compare bit-exact results with a one-thread subprocess.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the whole session (skipped locally, failed in CI, when
    PostgreSQL is not installed)."""
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty registry database: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.sqlite'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database()
