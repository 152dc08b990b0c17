"""The serving threads run below the engine's CPU priority (Linux): the event loop and the
threads it starts after the engine thread get `front_niceness` more nice levels, the
engine thread keeps the process's."""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from conftest import build_store, make_settings, where_things_run
from fastapi.testclient import TestClient
from pydantic import ValidationError

from server.app import create_app
from server.execution.priorities import MAX_NICE, lower_own_priority, own_niceness
from server.execution.settings import ExecutionSettings

T = TypeVar("T")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="nice values of single threads are Linux's")


def in_new_thread(function: Callable[[], T]) -> T:
    """`function()` called in a thread of its own (its nice value starts as ours)."""
    found: list[T] = []
    thread = threading.Thread(target=lambda: found.append(function()))
    thread.start()
    thread.join()
    return found[0]


@linux_only
def test_lowering_changes_this_thread_and_its_later_children_only() -> None:
    before = own_niceness()
    started = threading.Event()
    earlier: list[int] = []

    def lower_then_report() -> tuple[int, int, int]:
        lowered = lower_own_priority(3)
        return lowered, own_niceness(), in_new_thread(own_niceness)

    def sibling() -> None:
        started.wait(5)
        earlier.append(own_niceness())

    other = threading.Thread(target=sibling)
    other.start()
    lowered, own, child = in_new_thread(lower_then_report)
    started.set()
    other.join()

    assert lowered == own == child == min(MAX_NICE, before + 3)
    assert earlier == [before]  # a thread that existed already is untouched
    assert own_niceness() == before  # and so is the caller's


@linux_only
def test_the_cap_and_a_zero_increment() -> None:
    def lower(increment: int) -> tuple[int, int]:
        return lower_own_priority(increment), own_niceness()

    found = [in_new_thread(functools.partial(lower, increment)) for increment in (0, 100)]
    before = own_niceness()
    assert found == [(before, before), (MAX_NICE, MAX_NICE)]


@linux_only
def test_the_event_loop_and_its_preparation_threads_run_below_the_engine(
        tmp_path: Path) -> None:
    settings = make_settings(build_store(tmp_path / "store", domains=()),
                             engine={"front_niceness": 4})
    with TestClient(create_app(settings)) as client:
        found = where_things_run(client, own_niceness)
        assert client.post("/translate", json={"text": "the patient"}).status_code == 200
    assert found.worker_pid != os.getpid()  # not the fallback in this process
    assert found.front == found.small == found.large == found.worker == min(
        MAX_NICE, found.engine + 4)


def test_front_niceness_bounds() -> None:
    assert ExecutionSettings().front_niceness == 10
    with pytest.raises(ValidationError, match="front_niceness"):
        ExecutionSettings(front_niceness=20)
    with pytest.raises(ValidationError, match="front_niceness"):
        ExecutionSettings(front_niceness=-1)
