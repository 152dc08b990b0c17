"""Speed of a hot add: how soon a live server serves a new module, and how long the
sidecar takes to train a ~5,000-pair domain on this CPU.

    python -m benchmarks.speed.serve.hot_add --data ../shared/data [--quick]
                                             [--out benchmarks/results]

1. a scratch store: the package's built-in artifacts (backbone `default-en-fr`, its
   domains and router) layered under an empty root (or `--store-dir` as it is);
2. `python -m server` on it (a live server, default poll interval unless
   `--poll-interval`);
3. flips: publish `--flips` versions of a module shaped like the backbone's active ones
   (the default model's size), then activate each in turn in the registry while a client
   sends requests for that domain back-to-back; latency = first response served by the
   new version - the moment the registry transaction committed;
4. a hot add through the API: `POST /admin/domains` with the train (and dev) split of an
   en-fr domain under a new name (`medical` as `hot-medical`), `python -m trainer --once`
   trains, gates and publishes it; reported: training time, job wall time, and upload ->
   first request served by the new module.

Writes <out>/hot_add.json and hot_add.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch

from benchmarks.live_server import ends_with_parent, live_server
from benchmarks.locations import DEFAULT_DATA, REPO, RESULTS_DIR
from benchmarks.report_files import write_report
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import backbone_parts, module_files
from server.engine.families import get_family

QUICK_JOB = {"max_epochs": 1, "max_minutes": 2.0, "eval_every": 1000}


@dataclass
class Probe:
    """A client sending requests for one domain back-to-back, recording every answer."""

    base_url: str
    domain: str
    text: str
    answers: list[tuple[float, int, int | None]] = field(default_factory=list)
    pause_s: float = 0.01  # between answers that are not 200 (the domain is not served yet)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        body = {"text": self.text, "domain": self.domain,
                "options": {"beam_size": 1, "max_length": 16}}
        with httpx.Client(base_url=self.base_url, timeout=60) as http:
            while not self._stop.is_set():
                response = http.post("/translate", json=body)
                version = (response.json()["routing"]["module_version"]
                           if response.status_code == 200 else None)
                self.answers.append((time.time(), response.status_code, version))
                if response.status_code != 200:
                    time.sleep(self.pause_s)

    def first_served(self, version: int, *, after: float, timeout: float) -> float:
        """Seconds from `after` to the first answer served by `version`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, status, seen in list(self.answers):
                if at >= after and status == 200 and seen == version:
                    return at - after
            time.sleep(0.002)
        raise TimeoutError(f"{self.domain} v{version} not served within {timeout:g} s")

    def stop(self) -> None:
        self._stop.set()


def prepare_store(args: argparse.Namespace) -> Path:
    if args.store_dir is not None:
        return Path(args.store_dir)
    root: Path = args.out / "tmp" / "hot_add" / "store"
    shutil.rmtree(root, ignore_errors=True)
    with Store.open(root, builtin_dir=BUILTIN_DIR):
        pass  # registers the built-in artifacts
    return root


def publish_flip_versions(store: Store, *, backbone: str, name: str,
                          count: int) -> tuple[list[int], dict[str, Any]]:
    """`count` inactive versions of `name`, shaped like an active module of the backbone;
    returns the versions and their module config."""
    loaded = store.load_backbone(backbone)
    config = backbone_parts(loaded.files).config
    active = sorted(store.active_domains())
    module_config = (dict(store.load("module", active[0]).manifest.config) if active
                     else {"family": "adapter", "bottleneck": config.d_model // 2})
    family = get_family(str(module_config["family"]))
    versions = []
    for seed in range(count):
        generator = torch.Generator().manual_seed(seed)
        params = {k: v + 1e-3 * torch.randn(v.shape, generator=generator)
                  for k, v in family.initial(config, module_config, generator).items()}
        manifest = store.publish("module", name, module_files(params, half=True),
                                 config=module_config,
                                 backbone_fingerprint=loaded.manifest.backbone_fingerprint,
                                 provenance={"recipe":
                                             "benchmarks/speed/serve/hot_add.py (random)"})
        versions.append(manifest.version)
    return versions, module_config


def measure_flips(store: Store, base_url: str, *, name: str, versions: Sequence[int],
                  text: str) -> list[float]:
    probe = Probe(base_url, name, text)
    thread = threading.Thread(target=probe.run, daemon=True)
    thread.start()
    latencies = []
    try:
        for version in versions:
            store.registry.set_active("module", name, version)
            committed = time.time()
            latencies.append(probe.first_served(version, after=committed, timeout=120))
            time.sleep(0.2)
    finally:
        probe.stop()
        thread.join(60)
    return latencies


def read_split(data: Path, domain: str, split: str, limit: int) -> list[tuple[str, str]]:
    base = data / "en-fr" / "domains" / domain
    sources = (base / f"{split}.en").read_text(encoding="utf-8").splitlines()
    targets = (base / f"{split}.fr").read_text(encoding="utf-8").splitlines()
    pairs = [(s.strip(), t.strip()) for s, t in zip(sources, targets, strict=True)
             if s.strip() and t.strip() and "\t" not in s + t]
    return pairs[:limit]


def tsv(pairs: Sequence[tuple[str, str]]) -> bytes:
    return "".join(f"{s}\t{t}\n" for s, t in pairs).encode("utf-8")


def hot_add(args: argparse.Namespace, root: Path, base_url: str, token: str) -> dict[str, Any]:
    """Upload a domain, run the sidecar once, measure until the new module serves."""
    train = read_split(args.data, args.domain, "train", args.pairs)
    dev = read_split(args.data, args.domain, "dev", 500)
    config = json.dumps(QUICK_JOB if args.quick else json.loads(args.config))
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, timeout=120, headers=headers) as http:
        uploaded = time.time()
        response = http.post("/admin/domains", data={"name": args.name, "config": config},
                             files={"train": ("train.tsv", tsv(train)),
                                    "dev": ("dev.tsv", tsv(dev))})
        response.raise_for_status()
        probe = Probe(base_url, args.name, dev[0][0])
        thread = threading.Thread(target=probe.run, daemon=True)
        sidecar = start_sidecar(args, root)
        try:
            job = follow_job(http, response.headers["location"], sidecar, thread)
            if job["state"] != "published":
                raise RuntimeError(f"the job did not publish: {json.dumps(job)}")
            version = int(job["result"]["module_version"])
            first = probe.first_served(version, after=uploaded, timeout=300)
        finally:
            probe.stop()
            sidecar.kill()
            if thread.is_alive():
                thread.join(60)
    return {"domain": args.name, "data": f"en-fr/domains/{args.domain}", "pairs": len(train),
            "dev_pairs": len(dev), "job": job,
            "upload_to_published_s": round(_seconds(job["created_at"], job["updated_at"]), 2),
            "served_at": uploaded + first, "upload_to_first_served_s": round(first, 2)}


def _seconds(start: str, end: str) -> float:
    parse = datetime.datetime.fromisoformat
    return (parse(end) - parse(start)).total_seconds()


def follow_job(http: httpx.Client, job_url: str, sidecar: subprocess.Popen[bytes],
               probe: threading.Thread) -> dict[str, Any]:
    """Poll the job until the sidecar exits. The probe starts once training is over, so
    that its requests do not compete with training for the CPU."""
    while True:
        job: dict[str, Any] = http.get(job_url).json()
        if job["state"] != "running" and not probe.is_alive():
            probe.start()
        if sidecar.poll() is not None:
            if sidecar.returncode != 0:
                raise RuntimeError(f"the sidecar exited with {sidecar.returncode}")
            return http.get(job_url).json()  # type: ignore[no-any-return]
        time.sleep(0.5)


def start_sidecar(args: argparse.Namespace, root: Path,
                  log_name: str = "sidecar.log") -> subprocess.Popen[bytes]:
    """`python -m trainer --once` on the store (output in results/tmp/hot_add/`log_name`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMT_TRAINER__WORKER")}
    env |= {"NMT_STORE_DIR": str(root), "NMT_BUILTIN_ARTIFACTS": str(args.builtin).lower(),
            "NMT_TRAINER__WORKER_NAME": "hot-add-bench", "NMT_TRAINER__THREADS":
            str(args.threads), "PYTHONPATH": str(REPO)}
    log = args.out / "tmp" / "hot_add" / log_name
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "trainer", "--once", "--log-level",
                                 "info"], cwd=REPO, env=env, stdout=sink,
                                stderr=subprocess.STDOUT, preexec_fn=ends_with_parent)


def activation_time(store: Store, name: str, version: int) -> float:
    """When the registry transaction that activated `name` v`version` committed."""
    events = [e for e in store.registry.events_since(0) if e.kind == "module"
              and e.name == name and e.version == version and e.action == "activate"]
    return events[-1].at.timestamp()


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = prepare_store(args)
    token = secrets.token_hex(16)
    settings = {"NMT_STORE_DIR": str(root), "NMT_ADMIN_TOKEN": token,
                "NMT_BUILTIN_ARTIFACTS": str(args.builtin).lower(), "NMT_BACKBONE": args.backbone,
                "NMT_POLL_INTERVAL_S": str(args.poll_interval)}
    log = args.out / "tmp" / "hot_add" / "server.log"
    with Store.open(root, builtin_dir=BUILTIN_DIR if args.builtin else None) as store, \
            live_server(settings, log) as base_url:
        versions, module_config = publish_flip_versions(
            store, backbone=args.backbone, name=args.flip_name, count=args.flips)
        probe_text = "The patient takes one tablet a day."
        flips = measure_flips(store, base_url, name=args.flip_name, versions=versions,
                              text=probe_text)
        added = hot_add(args, root, base_url, token)
        version = int(added["job"]["result"]["module_version"])
        flipped = activation_time(store, args.name, version)
        added["flip_to_first_served_s"] = round(added.pop("served_at") - flipped, 3)
        module = store.record("module", args.name, version).manifest
    return {
        "benchmark": "hot_add", "quick": args.quick, "backbone": args.backbone,
        "poll_interval_s": args.poll_interval, "machine": platform.machine(),
        "cpus": os.cpu_count(), "torch_threads": args.threads,
        "flip": {"module_config": module_config, "flips": len(flips),
                 "latency_s": [round(x, 3) for x in flips], "summary": summary(flips)},
        "hot_add": added | {"train_seconds": module.provenance.get("train_seconds"),
                            "steps": module.provenance.get("steps"),
                            "stop_reason": module.provenance.get("stop_reason")},
    }


def markdown(result: dict[str, Any]) -> str:
    flip, added = result["flip"], result["hot_add"]
    job = added["job"]
    lines = [
        "# Hot add", "",
        f"Backbone `{result['backbone']}`, server poll interval {result['poll_interval_s']} s, "
        f"{result['cpus']} CPUs, {result['torch_threads']} torch thread(s) in the sidecar"
        + (" (quick run: not representative)." if result["quick"] else "."), "",
        "## Registry flip -> first request served by the new module", "",
        f"Module config {flip['module_config']}, {flip['flips']} flips.", "",
        "| min | median | max |", "|---|---|---|",
        "| {min} s | {median} s | {max} s |".format(**flip["summary"]), "",
        f"## Adding `{added['domain']}` ({added['pairs']} pairs of {added['data']})", "",
        "| step | value |", "|---|---|",
        f"| training (sidecar) | {added['train_seconds']} s, {added['steps']} steps, "
        f"stopped by {added['stop_reason']} |",
        f"| upload -> job published (sidecar start, train, gate, router, publish) | "
        f"{added['upload_to_published_s']} s |",
        f"| upload -> first request served | {added['upload_to_first_served_s']} s |",
        f"| registry flip -> first request served | {added['flip_to_first_served_s']} s |",
        f"| dev BLEU module / backbone | {job['scores']['module']['bleu']} / "
        f"{job['scores']['backbone']['bleu']} |", ""]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--store-dir", type=Path, help="use this store as it is")
    parser.add_argument("--no-builtin", dest="builtin", action="store_false",
                        help="do not layer the package's built-in artifacts")
    parser.add_argument("--backbone", default="default-en-fr")
    parser.add_argument("--domain", default="medical", help="en-fr domain whose data is used")
    parser.add_argument("--name", default="hot-medical", help="the new domain's name")
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--config", default="{}", help="job config JSON (default: defaults)")
    parser.add_argument("--flip-name", default="hot-flip")
    parser.add_argument("--flips", type=int, default=5)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help=f"job config {QUICK_JOB}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    write_report(args.out, "hot_add", result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
