"""Crash safety of the sidecar process: `kill -9` mid-training, then SIGTERM mid-training,
then a run to the end. Nothing half-written is ever visible, the registry stays intact,
and the published module is bit-identical to an uninterrupted run with the same seed."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import torch

from model_store import Store
from tests.e2e.processes import start_sidecar, step_of, stop, wait_for
from tests.trainer.sidecar_store import NEW_DOMAIN, build_store, submit, worker_settings
from trainer.jobs.domain_job import run_dir_of
from trainer.sidecar.worker import Sidecar

LONG = {"max_epochs": 25, "eval_every": 1000}  # long enough to be interrupted twice


def reference_module(root: Path) -> str:
    """The module of an uninterrupted in-process run."""
    with Store.open(build_store(root), builtin_dir=None) as store:
        submit(store, config=LONG)
        assert Sidecar(store, worker_settings()).run(once=True) == 1
        return store.record("module", NEW_DOMAIN).manifest.files["module.safetensors"].sha256


def assert_nothing_half_written(store: Store, root: Path, job_id: str) -> None:
    job = store.registry.get_job(job_id)
    assert job.state in ("running", "queued")
    assert store.registry.list_versions("module", NEW_DOMAIN) == []
    assert store.registry.list_versions("classifier", "router") == [1]
    assert store.storage.list(".staging") == []
    assert not (root / "modules" / NEW_DOMAIN).exists()
    with sqlite3.connect(root / "registry.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    checkpoint = torch.load(run_dir_of(store, job_id) / "checkpoint.pt", weights_only=True)
    assert checkpoint["progress"]["step"] >= 1


def test_kill_sigterm_and_resume_equal_an_uninterrupted_run(tmp_path: Path) -> None:
    expected = reference_module(tmp_path / "reference")
    root = build_store(tmp_path / "store")
    log = tmp_path / "sidecar.log"
    with Store.open(root, builtin_dir=None) as store:
        job = submit(store, config=LONG)
        run_dir = run_dir_of(store, job.id)

        first = start_sidecar(root, log)
        wait_for(lambda: step_of(run_dir) >= 8, timeout=600, what="8 training steps")
        first.send_signal(signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
        killed_at = step_of(run_dir)
        assert_nothing_half_written(store, root, job.id)
        assert store.registry.get_job(job.id).state == "running"

        second = start_sidecar(root, log)  # same worker name: takes its job over at once
        wait_for(lambda: step_of(run_dir) >= killed_at + 8, timeout=600,
                 what="training to go on after the restart")
        assert stop(second) == 0  # SIGTERM: finish the step, checkpoint, exit cleanly
        assert_nothing_half_written(store, root, job.id)
        requeued = store.registry.get_job(job.id)
        assert (requeued.state, requeued.worker, requeued.attempts) == ("queued", None, 1)

        third = start_sidecar(root, log, "--once")
        assert third.wait(600) == 0, log.read_text()[-3000:]
        done = store.registry.get_job(job.id)
        assert done.state == "published", done
        published = store.record("module", NEW_DOMAIN).manifest
        assert store.registry.list_versions("module", NEW_DOMAIN) == [1]
    text = log.read_text()
    assert text.count("resumed at step") == 2 and "SIGTERM: stopping" in text
    assert published.files["module.safetensors"].sha256 == expected
