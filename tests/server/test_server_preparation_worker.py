"""Large requests' text work runs in the text worker process (server/execution/
text_worker.py; server/scheduling/preparation.py hands it the work): its own process at
the calling thread's priority, bounded by the deadline, replaced when it dies; the
documents it builds stop at the sentence cap and translate as documents built in the
server's process do."""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import build_store, make_settings
from fastapi.testclient import TestClient

from server.app import create_app
from server.core.errors import DeadlineExceeded
from server.execution.priorities import lower_own_priority, own_niceness
from server.execution.text_worker import TextWorker
from server.scheduling.preparation import SMALL_CHARS, PreparationGate
from server.textproc.document import Document
from server.textproc.documents import DocumentSpec, TooManySentences, build_documents


def later(seconds: float = 60.0) -> float:
    return time.monotonic() + seconds


def exit_unless_in(parent: int) -> str:
    """Kills the worker process it runs in; in the server's process it answers."""
    if os.getpid() != parent:
        os._exit(3)
    return "in the server process"


@pytest.fixture
def worker() -> Iterator[TextWorker]:
    found = TextWorker()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def gate(worker: TextWorker) -> Iterator[PreparationGate]:
    found = PreparationGate(max_chars=1_000_000, retry_after_s=1, worker=worker)
    try:
        yield found
    finally:
        found.close()


def test_documents_stop_at_the_text_that_crosses_the_sentence_cap() -> None:
    specs = [DocumentSpec(" ".join(["It is here."] * count), "text", None)
             for count in (3, 3, 5, 2)]
    built = build_documents(specs, terms="inline", max_sentences=8)
    assert [type(found) for found in built] == [Document, Document, TooManySentences]
    assert built[2] == TooManySentences(5)
    assert len(build_documents(specs, terms="inline", max_sentences=13)) == 4


def test_work_apart_runs_in_another_process_at_the_callers_priority(
        gate: PreparationGate) -> None:
    found: dict[str, int] = {}

    def lowered_caller() -> None:  # as the serving threads are
        found["caller"] = lower_own_priority(2)
        found["worker pid"] = gate.apart(later(), os.getpid)
        found["worker nice"] = gate.apart(later(), own_niceness)

    thread = threading.Thread(target=lowered_caller)
    thread.start()
    thread.join()
    assert found["worker pid"] != os.getpid()
    if os.uname().sysname == "Linux":
        assert found["worker nice"] == found["caller"]


def test_work_apart_past_its_deadline_is_refused(gate: PreparationGate) -> None:
    with pytest.raises(DeadlineExceeded, match="deadline passed"):
        gate.apart(later(0.3), time.sleep, 5)


def test_a_dead_worker_is_replaced_and_the_call_works_in_its_thread(
        gate: PreparationGate) -> None:
    first = gate.apart(later(), os.getpid)
    assert gate.apart(later(), functools.partial(exit_unless_in, os.getpid())) == \
        "in the server process"
    second = gate.apart(later(), os.getpid)
    assert second not in (first, os.getpid())


def new_children(known: set[int], *, timeout: float = 60.0) -> set[int]:
    """Child processes of this one that are not in `known`, once there is one (or at the
    timeout: then the empty set)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {child.pid for child in multiprocessing.active_children()} - known
        if found or time.monotonic() > deadline:
            return {pid for pid in found if pid is not None}
        time.sleep(0.05)


def test_a_started_worker_is_the_one_large_requests_use(worker: TextWorker,
                                                        gate: PreparationGate) -> None:
    known = {child.pid for child in multiprocessing.active_children() if child.pid}
    worker.start()  # returns at once; the worker starts on a thread of the caller's
    started = new_children(known)
    assert len(started) == 1
    assert gate.apart(later(), os.getpid) in started
    assert new_children(known | started, timeout=0.5) == set()  # no second one


def test_a_closed_worker_starts_no_process_and_work_runs_in_its_thread() -> None:
    worker = TextWorker()
    gate = PreparationGate(max_chars=1_000, retry_after_s=1, worker=worker)
    worker.close()
    known = {child.pid for child in multiprocessing.active_children() if child.pid}
    worker.start()
    assert gate.apart(later(), os.getpid) == os.getpid()
    assert new_children(known, timeout=0.5) == set()


@pytest.mark.parametrize("at_start", [True, False])
def test_the_server_starts_the_worker_unless_told_not_to(tmp_path: Path,
                                                         at_start: bool) -> None:
    settings = make_settings(build_store(tmp_path / "store"),
                             execution={"start_text_worker": at_start})
    known = {child.pid for child in multiprocessing.active_children() if child.pid}
    with TestClient(create_app(settings)) as http:
        assert http.get("/health/ready").status_code == 200
        started = new_children(known, timeout=60.0 if at_start else 0.5)
        assert len(started) == (1 if at_start else 0)


def test_the_server_stops_its_worker_when_it_stops(tmp_path: Path) -> None:
    settings = make_settings(build_store(tmp_path / "store"),
                             execution={"start_text_worker": True})
    known = {child.pid for child in multiprocessing.active_children() if child.pid}
    with TestClient(create_app(settings)) as http:
        assert http.get("/health/ready").status_code == 200
        started = new_children(known)
        assert len(started) == 1
    deadline = time.monotonic() + 60
    while started & {child.pid for child in multiprocessing.active_children()}:
        assert time.monotonic() < deadline, "the text worker outlived the server"
        time.sleep(0.05)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = make_settings(build_store(tmp_path / "store"),
                             limits={"max_request_sentences": 200})
    with TestClient(create_app(settings)) as found:
        yield found


def test_a_large_request_over_the_cap_is_413_at_the_crossing_text(client: TestClient) -> None:
    text = "Yes. " * 150  # 750 characters, 150 sentences
    assert PreparationGate.is_large(3 * len(text))
    answer = client.post("/translate/batch", json={"items": [{"text": text}] * 3})
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["field"] == "items[1].text"
    assert "more than 200 sentences (300 so far" in error["message"]


def test_a_large_html_document_built_apart_keeps_every_tag(client: TestClient) -> None:
    page = "<p>the patient takes <b>one tablet</b> a day.</p>\n" * 60
    assert len(page) > SMALL_CHARS
    answer = client.post("/translate", json={"text": page, "format": "html",
                                             "domain": "medical"})
    assert answer.status_code == 200, answer.text
    translated = answer.json()["translation"]
    assert re.findall(r"</?[pb]>", translated) == re.findall(r"</?[pb]>", page)
