"""Two sidecar processes on one PostgreSQL registry and one store: each queued job is
trained by exactly one of them, and both domains end up served with a router that knows
both (the second flip redoes its router update on top of the first)."""

from __future__ import annotations

from pathlib import Path

from model_store import Store
from tests.e2e.processes import start_sidecar
from tests.postgres import PostgresServer
from tests.trainer.sidecar_store import NEW_DOMAIN, build_store, submit

DOMAINS = (NEW_DOMAIN, "scripture")


def test_two_sidecars_train_each_job_exactly_once(tmp_path: Path,
                                                  postgres: PostgresServer) -> None:
    url = postgres.create_database()
    root = build_store(tmp_path / "store", registry_url=url)
    log = tmp_path / "sidecars.log"
    with Store.open(root, registry_url=url, builtin_dir=None) as store:
        jobs = [submit(store, name=name) for name in DOMAINS]
        sidecars = [start_sidecar(root, log, "--once", NMT_REGISTRY_URL=url,
                                  NMT_TRAINER__WORKER_NAME=f"trainer-{n}") for n in range(2)]
        codes = [process.wait(600) for process in sidecars]

        assert codes == [0, 0], log.read_text()[-3000:]
        done = [store.registry.get_job(job.id) for job in jobs]
        assert [(job.state, job.attempts) for job in done] == [("published", 1)] * 2
        assert {job.worker for job in done} == {"trainer-0", "trainer-1"}  # one job each
        assert {name: store.active_domains().get(name) for name in DOMAINS} == {
            name: 1 for name in DOMAINS}
        labels = store.load("classifier", "router").manifest.config["labels"]
        assert set(DOMAINS) <= set(labels)
