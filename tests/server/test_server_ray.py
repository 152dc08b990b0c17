"""Ray Serve: `python -m server.ray_serve --replicas 2` on a tiny store, through Ray's HTTP
proxy. Both replicas answer, an admin write through either reaches both, a replica killed
with SIGKILL is replaced by Ray and only requests in flight at that moment fail, and
SIGTERM stops every process the command started.

One module-scoped cluster (Ray starts slowly); each replica reserves one CPU and runs one
torch thread.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import TOKEN, admin_headers, build_store, publish_module

from model_store import Store
from server.scheduling.preparation import PreparationGate
from tests.services import unavailable

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 240
SETTINGS_ENV = {
    "NMT_BUILTIN_ARTIFACTS": "false", "NMT_BACKBONE": "tiny", "NMT_ADMIN_TOKEN": TOKEN,
    "NMT_POLL_INTERVAL_S": "0.2", "NMT_ENGINE__SLOTS_PER_BANK": "4",
    "NMT_DECODING__BEAM_SIZE": "1", "NMT_DECODING__MAX_LENGTH": "8", "NMT_LOG_LEVEL": "warning",
}


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    base: str
    root: Path
    process: subprocess.Popen[bytes]
    ray_dir: Path  # RAY_TMPDIR of the command: every Ray process it starts runs under it
    log: Path
    seen_pids: set[int] = field(default_factory=set)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def replica_pid(name: str) -> int:
    return int(name.rpartition(":")[2])


def until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s: {what}"
        time.sleep(0.1)


def ready_replicas(http: httpx.Client, *, tries: int = 40) -> dict[str, dict[str, Any]]:
    """replica name -> its latest /health/ready body, over `tries` requests."""
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(tries):
        try:
            answer = http.get("/health/ready")
        except httpx.TransportError:
            continue
        if answer.status_code == 200:
            seen[answer.json()["replica"]] = answer.json()
    return seen


def ray_processes(ray_dir: Path) -> list[int]:
    """Live processes whose command line or environment names `ray_dir`."""
    marker = str(ray_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes() or \
                    marker in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not readable
            continue
    return found


def stop_command(cluster: Cluster) -> int:
    if cluster.process.poll() is None:
        cluster.process.send_signal(signal.SIGTERM)
    try:
        return cluster.process.wait(120)
    except subprocess.TimeoutExpired:
        cluster.process.kill()
        return cluster.process.wait(30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = build_store(tmp_path_factory.mktemp("ray") / "store", domains=("law", "it"))
    ray_dir = Path(tempfile.mkdtemp(prefix="nmtray", dir="/tmp"))  # Unix socket paths are short
    log = root.parent / "serve.log"
    port = free_port()
    env = os.environ | SETTINGS_ENV | {"NMT_STORE_DIR": str(root), "RAY_TMPDIR": str(ray_dir),
                                        "PYTHONPATH": str(REPO)}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "server.ray_serve", "--replicas", "2", "--host",
             "127.0.0.1", "--port", str(port)], cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT)
    running = Cluster(f"http://127.0.0.1:{port}", root, process, ray_dir, log)
    try:
        with httpx.Client(base_url=running.base, timeout=30) as http:
            deadline = time.monotonic() + START_TIMEOUT_S
            while len(ready_replicas(http, tries=10)) < 2:
                if process.poll() is not None or time.monotonic() > deadline:
                    unavailable(f"a local Ray cluster with 2 replicas did not start:\n"
                                f"{running.log_tail()}")
                time.sleep(1)
        yield running
    finally:
        stop_command(running)
        for pid in ray_processes(ray_dir):  # only if the command failed to clean up
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(ray_dir, ignore_errors=True)


def test_both_replicas_answer_and_name_themselves(cluster: Cluster) -> None:
    with httpx.Client(base_url=cluster.base, timeout=30) as http:
        names: set[str] = set()
        for _ in range(40):
            answer = http.post("/translate", json={"text": "Click the button.", "domain": "it"})
            assert answer.status_code == 200, answer.text
            names.add(answer.headers["x-nmt-replica"])
        errors = {http.get("/translate").headers["x-nmt-replica"] for _ in range(20)}
    assert len(names) == 2, names  # Ray's proxy spreads requests over both
    assert errors <= names  # a 405 names its replica too
    pids = {replica_pid(name) for name in names}
    assert os.getpid() not in pids and len(pids) == 2
    cluster.seen_pids |= pids


def test_a_large_request_is_prepared_in_a_worker_process_of_a_replica(
        cluster: Cluster) -> None:
    """Over SMALL_CHARS a request's text work runs in a spawned worker process; inside a
    Ray replica (whose main module is Ray's worker) it starts and answers too."""
    text = " ".join(["Click the button."] * 150)
    assert PreparationGate.is_large(len(text))
    with httpx.Client(base_url=cluster.base, timeout=60) as http:
        for _ in range(4):
            answer = http.post("/translate", json={"text": text, "domain": "it"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["translation"]


def converge(http: httpx.Client, check: Callable[[dict[str, Any]], bool], *,
             replicas: int = 2, timeout: float = 30) -> dict[str, dict[str, Any]]:
    """Wait until `replicas` distinct replicas each answered /health/ready with a body that
    passes `check`; returns those bodies."""
    passed: dict[str, dict[str, Any]] = {}

    def done() -> bool:
        for name, body in ready_replicas(http, tries=10).items():
            if check(body):
                passed[name] = body
            else:
                passed.pop(name, None)
        return len(passed) >= replicas

    until(done, timeout=timeout, what="every replica to apply the change")
    return passed


def test_admin_writes_through_one_replica_reach_both(cluster: Cluster) -> None:
    with Store.open(cluster.root, builtin_dir=None) as store, \
            httpx.Client(base_url=cluster.base, timeout=30) as http:
        publish_module(store, "law", 7, activate=False)  # a trainer's publish: law v2
        answer = http.post("/admin/domains/law/activate", json={"version": 2},
                           headers=admin_headers())
        assert answer.status_code == 200, answer.text
        latest = store.registry.latest_event_id()
        bodies = converge(http, lambda body: body["registry_revision"] == latest
                          and body["checks"]["modules"].get("law") == "loaded (v2)")
        assert len(bodies) == 2
        versions = {}
        for _ in range(40):
            result = http.post("/translate", json={"text": "The council.", "domain": "law"})
            versions[result.headers["x-nmt-replica"]] = result.json()["routing"][
                "module_version"]
        assert set(versions.values()) == {2} and len(versions) == 2

        rolled_back = http.post("/admin/domains/law/activate", json={"version": 1},
                                headers=admin_headers())
        removed = http.delete("/admin/domains/it", headers=admin_headers())
        assert rolled_back.status_code == 200 and removed.status_code == 200
        latest = store.registry.latest_event_id()
        converge(http, lambda body: body["registry_revision"] == latest
                 and body["checks"]["modules"] == {"law": "loaded (v1)"})


@dataclass(frozen=True)
class Sent:
    started: float
    finished: float
    status: int  # 0: no HTTP answer
    replica: str | None


def load(base: str, stop: threading.Event, out: list[Sent]) -> None:
    with httpx.Client(base_url=base, timeout=60) as http:
        while not stop.is_set():
            started = time.monotonic()
            try:
                answer = http.post("/translate", json={"text": "Open the file.", "domain": "law"})
                status, replica = answer.status_code, answer.headers.get("x-nmt-replica")
            except httpx.TransportError:
                status, replica = 0, None
            out.append(Sent(started, time.monotonic(), status, replica))


def test_a_killed_replica_is_replaced_and_only_its_requests_fail(cluster: Cluster) -> None:
    with httpx.Client(base_url=cluster.base, timeout=30) as http:
        before = set(ready_replicas(http))
    assert len(before) == 2
    victim = sorted(before)[0]
    stop, sent = threading.Event(), [list[Sent]() for _ in range(6)]
    clients = [threading.Thread(target=load, args=(cluster.base, stop, out)) for out in sent]
    for client in clients:
        client.start()
    try:
        time.sleep(2)
        killed_at = time.monotonic()
        os.kill(replica_pid(victim), signal.SIGKILL)
        until(lambda: any(s.replica not in before | {None} for out in sent for s in out),
              timeout=180, what="Ray to start a replacement replica")
        time.sleep(1)
    finally:
        stop.set()
        for client in clients:
            client.join(90)
    requests = [s for out in sent for s in out]
    failed = [s for s in requests if s.status != 200]
    in_flight = [s for s in requests if s.started <= killed_at <= s.finished]
    assert all(s.started <= killed_at for s in failed), failed  # later ones are routed around
    assert len(failed) <= len(in_flight) <= len(clients)
    assert not any(s.replica == victim and s.started > killed_at for s in requests)
    after: set[str] = set()
    with httpx.Client(base_url=cluster.base, timeout=30) as http:
        def both_seen() -> bool:
            # the proxy may send one sample of 40 probes all to one replica while the
            # replacement warms up: gather what answers until two have
            after.update(ready_replicas(http))
            return len(after) >= 2

        until(both_seen, timeout=120, what="two ready replicas after the replacement")
        answers = [http.post("/translate", json={"text": "a", "domain": "law"})
                   for _ in range(20)]
    assert len(after) == 2 and victim not in after and (after & before)
    assert all(a.status_code == 200 for a in answers)
    cluster.seen_pids |= {replica_pid(name) for name in after}


def test_sigterm_stops_everything_the_command_started(cluster: Cluster) -> None:
    assert cluster.seen_pids and ray_processes(cluster.ray_dir)
    assert stop_command(cluster) == 0, cluster.log_tail()
    until(lambda: not ray_processes(cluster.ray_dir), timeout=60,
          what="every Ray process of the command to exit")
    for pid in cluster.seen_pids:
        assert not Path(f"/proc/{pid}").exists(), f"replica {pid} outlived the command"


def test_replicas_get_this_commands_settings_and_code(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from server.ray_serve.__main__ import CODE_ROOT, replica_environment
    from server.settings import Settings

    monkeypatch.chdir(tmp_path)
    environ = {"NMT_STORE_DIR": "store", "NMT_ADMIN_TOKEN": TOKEN, "HOME": "/root",
               "PYTHONPATH": f"/elsewhere{os.pathsep}{CODE_ROOT}"}
    monkeypatch.setenv("NMT_STORE_DIR", "store")
    env = replica_environment(Settings(), cpus_per_replica=2, environ=environ)
    assert env == {"NMT_STORE_DIR": str(tmp_path / "store"), "NMT_ADMIN_TOKEN": TOKEN,
                   "NMT_LOG_LEVEL": "info",
                   "PYTHONPATH": f"{CODE_ROOT}{os.pathsep}/elsewhere", "OMP_NUM_THREADS": "2"}
    assert CODE_ROOT == REPO
