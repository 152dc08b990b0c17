"""Suite-wide hooks: GPU tests run only where CUDA is available; tiny models run on one
torch thread (faster than two threads fighting a busy machine for its cores)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


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
