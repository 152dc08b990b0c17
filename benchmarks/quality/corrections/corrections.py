"""A domain's module refreshed from 200, 500 and 1,000 corrections, measured on its test
split while a live server answers requests (issue #49, `make bench-corrections`).

    python -m benchmarks.quality.corrections.corrections [--data DIR] [--domain medical] [--quick]

The shipped modules were trained on the whole train split of their domain, so no unused
in-domain pairs are left to simulate corrections from. The bench therefore trains its own
baseline module of the domain on the first `--baseline-lines` (3,000) lines of the train
split, with the shipped recipe's settings (trainer/recipes/default_en_fr.py
ADAPTER_SETTINGS; the shipped module's 516 steps over 4,899 pairs scaled to the lines),
through the sidecar as an added domain's job: it stands in for the shipped module. The
corrections are simulated from the rest of the train split, which the baseline never
saw: the machine output is the baseline's translation, the correction the reference
(pairs whose reference equals the output are no correction and are skipped).

Everything else is the real path, in a scratch store layered on the built-in artifacts:
1. `python -m server` on the store (keys off); this process (the sidecar's job runner)
   then runs below it, as `python -m trainer` does (trainer/sidecar/priority.py); the baseline job
   is run by the sidecar's job runner (`Sidecar.run(once=True)`), which also retrains
   the router for it;
2. stages (cumulative, as corrections arrive): the next corrections are sent with
   `POST /corrections` (anonymous: pending), approved with `POST
   /admin/corrections/review`, a refresh is queued with `POST /admin/corrections/refresh`
   and run by the sidecar's job runner (train, gate, router, publish), while two clients
   send translation requests to every served domain; a stage ends when the server
   serves the new version. Reported per stage: test BLEU/chrF of the served module, the
   gate's scores, the router check, failed requests, and the other domains' module
   digests and translations (must be bit-identical);
3. a poisoning: `--term` flipped to `--flip` in the baseline's own training lines, sent
   by two keys' worth of anonymous senders and approved: left out before training (they
   contradict the domain's data).
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch

from benchmarks.live_server import live_server
from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR
from benchmarks.provenance import command_line, host_label
from benchmarks.quality.corrections.corrections_report import markdown
from benchmarks.report_files import write_report
from contract.training import DEV_FILE, TRAIN_FILE, job_key
from contract.tsv import Pair, pairs_to_bytes
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import backbone_parts, module_params
from server.engine.engine import load_backbone
from server.engine.families import get_family
from server.engine.single import SingleModuleHooks
from server.serving.admin_jobs import parse_job_config
from trainer.jobs.refresh_settings import RefreshSettings
from trainer.jobs.settings import WorkerSettings
from trainer.recipes.default_en_fr import ADAPTER, ADAPTER_SETTINGS
from trainer.sidecar.priority import lower_priority
from trainer.sidecar.worker import Sidecar
from trainer.training.evaluate import evaluate_texts

SHIPPED_STEPS, SHIPPED_PAIRS = 516, 4899  # the shipped medical module's provenance
DEFAULT_BASELINE_LINES = 3000
REQUEST_OPTIONS = {"beam_size": 1, "max_length": 48}


def read_pairs(folder: Path, split: str) -> list[Pair]:
    source = (folder / f"{split}.en").read_text(encoding="utf-8").splitlines()
    target = (folder / f"{split}.fr").read_text(encoding="utf-8").splitlines()
    return [(s, t) for s, t in zip(source, target, strict=True) if s.strip() and t.strip()]


@dataclass
class Load:
    """Clients sending translation requests to every served domain until stopped."""

    base_url: str
    domains: Sequence[str]
    texts: Sequence[str]
    clients: int = 2
    pause_s: float = 0.2  # light load: the refresh trains on the same CPUs
    statuses: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _client(self, seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=self.base_url, timeout=120) as http:
            while not self._stop.is_set():
                body = {"text": rng.choice(self.texts), "domain": rng.choice(self.domains),
                        "options": REQUEST_OPTIONS}
                try:
                    answer = http.post("/translate", json=body)
                    status = answer.status_code
                    if status != 200:
                        self.failures.append(f"{body['domain']}: {status} {answer.text[:300]}")
                except httpx.HTTPError as error:
                    status = 0
                    self.failures.append(f"{body['domain']}: {type(error).__name__} {error}")
                self.statuses.append(status)
                time.sleep(self.pause_s)

    def __enter__(self) -> Load:
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                         for i in range(self.clients)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def summary(self) -> dict[str, Any]:
        return {"requests": len(self.statuses),
                "failed": sum(status != 200 for status in self.statuses),
                "failures": self.failures[:20]}


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.store = Store.open(root, builtin_dir=BUILTIN_DIR)
        self.backbone = self.store.registry.default_backbone()
        self.manifest = self.store.record("backbone", self.backbone).manifest
        parts = backbone_parts(self.store.load("backbone", self.backbone).files)
        self.parts = parts
        self.model = load_backbone(parts.config, parts.tensors)
        self.settings = WorkerSettings(worker_name="bench", checkpoint_every_s=600.0,
                                       refresh=RefreshSettings(
                                           data_dir=args.data, min_new_corrections=0,
                                           max_original_pairs=args.original_pairs))

    def active(self, name: str) -> int:
        version = self.store.registry.get_active("module", name, backbone=self.backbone)
        assert version is not None, f"no active module {name!r}"
        return version

    def translate(self, version: int, sources: Sequence[Pair]) -> tuple[dict[str, float],
                                                                          list[str]]:
        loaded = self.store.load("module", self.args.domain, version, backbone=self.backbone)
        hooks = SingleModuleHooks(get_family(str(loaded.manifest.config["family"])),
                                  module_params(loaded.files))
        scores, hypotheses = evaluate_texts(self.model, self.parts.source_tokenizer,
                                            self.parts.target_tokenizer, sources, hooks=hooks)
        return scores.as_dict(), hypotheses

    def modules(self) -> dict[str, str]:
        """Every active module's weights digest but the bench's domain."""
        out = {}
        for name, version in self.store.registry.active_versions(
                "module", backbone=self.backbone).items():
            if name != self.args.domain:
                record = self.store.record("module", name, version, backbone=self.backbone)
                out[name] = f"v{version} {record.manifest.files['module.safetensors'].sha256}"
        return out

    def run_job(self, job_id: str) -> dict[str, Any]:
        started = time.monotonic()
        assert Sidecar(self.store, self.settings).run(once=True) == 1
        job = self.store.registry.get_job(job_id)
        assert job.state in ("published", "failed"), job.state
        return {"id": job.id, "state": job.state, "error": job.error, "scores": job.scores,
                "result": job.result, "seconds": round(time.monotonic() - started, 1)}

    def train_baseline(self, train: list[Pair], dev: list[Pair]) -> dict[str, Any]:
        """The stand-in for the shipped module: a job of the domain's first lines, created
        as `POST /admin/domains` would (the API refuses a name that is served: the bench
        deactivates the shipped module first)."""
        steps = round(SHIPPED_STEPS * len(train) / SHIPPED_PAIRS)
        s = ADAPTER_SETTINGS
        options = {"lr": s.lr, "warmup_steps": s.warmup_steps, "max_tokens": s.max_tokens,
                   "max_epochs": s.max_epochs, "max_steps": self.args.baseline_steps or steps,
                   "max_minutes": 120.0, "eval_every": s.eval_every, "patience": s.patience}
        config = parse_job_config(json.dumps(ADAPTER | options), self.parts.config)
        config |= {"data": {"train_pairs": len(train), "dev_pairs": len(dev),
                            "source": f"first {len(train)} lines of the train split"},
                   "backbone": {"name": self.manifest.name, "version": self.manifest.version,
                                "fingerprint": self.manifest.backbone_fingerprint}}
        job_id = f"baseline-{secrets.token_hex(4)}"
        self.store.storage.write_bytes(job_key(job_id, TRAIN_FILE), pairs_to_bytes(train))
        self.store.storage.write_bytes(job_key(job_id, DEV_FILE), pairs_to_bytes(dev))
        # The registry creates a domain's first job only when no module of it is active:
        # the shipped one is deactivated (kept, as a version) and the baseline replaces it.
        self.store.registry.clear_active("module", self.args.domain, backbone=self.backbone)
        self.store.registry.create_domain_job(self.args.domain, config=config,
                                              data_location=job_key(job_id), job_id=job_id,
                                              backbone=self.backbone)
        return self.run_job(job_id) | {"options": options}


def other_translations(http: httpx.Client, domains: Sequence[str], texts: Sequence[str]
                       ) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for domain in domains:
        out[domain] = [http.post("/translate", json={
            "text": text, "domain": domain, "options": REQUEST_OPTIONS}).json()["translation"]
            for text in texts]
    return out


def wait_served(http: httpx.Client, domain: str, version: int, text: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answer = http.post("/translate", json={"text": text, "domain": domain,
                                               "options": REQUEST_OPTIONS})
        if answer.status_code == 200 and answer.json()["routing"]["module_version"] == version:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{domain} v{version} not served within 120 s")


def send(http: httpx.Client, corrections: Sequence[tuple[str, str, str]], domain: str
         ) -> dict[str, Any]:
    """POST /corrections each (source, machine, corrected), then approve them."""
    refused: list[str] = []
    for source, machine, corrected in corrections:
        answer = http.post("/corrections", json={"source": source, "machine": machine,
                                                 "corrected": corrected, "domain": domain})
        if answer.status_code != 201:
            refused.append(f"{answer.status_code} {answer.json().get('error', answer.text)}")
    approved = http.post("/admin/corrections/review",
                         json={"action": "approve", "domain": domain})
    approved.raise_for_status()
    return {"sent": len(corrections), "refused": len(refused), "refusals": refused[:5],
            "approved": approved.json()["changed"]}


def stage(bench: Bench, http: httpx.Client, load_texts: Sequence[str], count: int,
          new: Sequence[tuple[str, str, str]], test: list[Pair]) -> dict[str, Any]:
    domain = bench.args.domain
    sent = send(http, new, domain)
    queued = http.post("/admin/corrections/refresh", json={
        "domain": domain, "options": {"max_epochs": bench.args.refresh_epochs}})
    assert queued.status_code == 202, queued.text
    served = sorted(bench.store.registry.active_versions("module", backbone=bench.backbone))
    with Load(str(http.base_url), served, load_texts) as load:
        job = bench.run_job(queued.json()["id"])
        version = bench.active(domain)
        wait_served(http, domain, version, load_texts[0])
    scores, _ = bench.translate(version, test)
    row = {"corrections": count, "sent": sent, "job": job, "active_version": version,
           "test": scores, "load": load.summary()}
    trained = (job["result"] or {}).get("module_version")
    if trained is not None and trained != version:  # refused: what it would have scored
        row["test_refused_candidate"] = bench.translate(trained, test)[0]
    return row


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    folder = args.data / "en-fr" / "domains" / args.domain
    train, dev, test = (read_pairs(folder, split) for split in ("train", "dev", "test"))
    base_train, pool = train[:args.baseline_lines], train[args.baseline_lines:]
    bench = Bench(args, root)
    shipped = bench.active(args.domain)
    shipped_test, _ = bench.translate(shipped, test)
    others_before = bench.modules()
    token = secrets.token_hex(16)
    settings = {"NMT_STORE_DIR": str(root), "NMT_ADMIN_TOKEN": token,
                "NMT_POLL_INTERVAL_S": "1.0"}
    texts = [s for s, _ in test[:40]]
    result: dict[str, Any] = {"shipped": {"version": shipped, "test": shipped_test},
                              "test_lines": len(test)}
    with live_server(settings, args.out / "tmp" / "corrections" / "server.log") as url, \
            httpx.Client(base_url=url, timeout=120,
                         headers={"Authorization": f"Bearer {token}"}) as http:
        lower_priority(bench.settings.niceness)  # where `python -m trainer` runs
        others = sorted(others_before)
        translations_before = other_translations(http, others, texts[:5])
        baseline_job = bench.train_baseline(base_train, dev)
        baseline = bench.active(args.domain)
        wait_served(http, args.domain, baseline, texts[0])
        baseline_test, _ = bench.translate(baseline, test)
        result["baseline"] = {"version": baseline, "test": baseline_test, "job": baseline_job,
                              "lines": len(base_train)}
        wanted = max(args.counts)
        _, machine = bench.translate(baseline, pool[:int(wanted * 1.2) + 20])
        corrections = [(s, m, t) for (s, t), m in zip(pool, machine, strict=False)
                       if " ".join(m.split()) != " ".join(t.split())][:wanted]
        result["simulated"] = {"pool": len(pool), "translated": len(machine),
                               "unchanged_skipped": len(machine) - len(
                                   [1 for (s, t), m in zip(pool, machine, strict=False)
                                    if " ".join(m.split()) != " ".join(t.split())])}
        stages, done = [], 0
        for count in args.counts:
            stages.append(stage(bench, http, texts, count, corrections[done:count], test))
            done = count
            print(json.dumps({k: stages[-1][k] for k in ("corrections", "test", "load",
                                                         "active_version")}), flush=True)
        result["stages"] = stages
        flipped = [(s, t, t.replace(args.term, args.flip)) for s, t in base_train
                   if args.term in t][:args.poison_lines]
        poison = send(http, flipped, args.domain)
        queued = http.post("/admin/corrections/refresh", json={"domain": args.domain})
        result["poison"] = {"term": args.term, "flip": args.flip, "sent": poison,
                            "queued": queued.status_code,
                            "job": bench.run_job(queued.json()["id"])
                            if queued.status_code == 202 else queued.json()}
        result["others"] = {
            "modules_unchanged": bench.modules() == others_before,
            "translations_unchanged": other_translations(http, others, texts[:5])
            == translations_before, "domains": others}
    bench.store.close()
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--domain", default="medical")
    parser.add_argument("--baseline-lines", type=int, default=DEFAULT_BASELINE_LINES,
                        help="a domain module of this many lines stands in for the shipped "
                             "one (another number writes corrections-<lines>.md)")
    parser.add_argument("--baseline-steps", type=int, default=0,
                        help="the baseline's step cap (it also stops at the recipe's epoch "
                             "limit or when dev BLEU stops improving); 0: the shipped "
                             "module's steps scaled to the lines")
    parser.add_argument("--counts", default="200,500,1000",
                        help="corrections received before each refresh (cumulative)")
    parser.add_argument("--original-pairs", type=int, default=500,
                        help="the baseline's own pairs replayed in a refresh")
    parser.add_argument("--refresh-epochs", type=int, default=3,
                        help="passes of a refresh (the refresh default: 3)")
    parser.add_argument("--term", default="comprimé", help="the poisoner's flipped term")
    parser.add_argument("--flip", default="gélule")
    parser.add_argument("--poison-lines", type=int, default=200)
    parser.add_argument("--quick", action="store_true",
                        help="1,000 baseline lines, 60 steps, 50 and 100 corrections")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    args.data = args.data.resolve()
    args.counts = [int(c) for c in args.counts.split(",")]
    if args.quick:
        args.baseline_lines, args.baseline_steps, args.counts = 1000, 60, [50, 100]
        args.poison_lines = 40
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(1)
    with tempfile.TemporaryDirectory(prefix="bench-corrections-") as tmp:
        result = run(args, Path(tmp) / "store")
    if args.quick:
        name = "corrections-quick"
    elif args.baseline_lines == DEFAULT_BASELINE_LINES:
        name = "corrections"
    else:
        name = f"corrections-{args.baseline_lines}"
    saved = {"command": command_line(), "host": host_label(),
             "args": {k: str(v) for k, v in vars(args).items()}} | result
    paths = write_report(args.out, name, saved, markdown(result, args))
    print(paths[-1].read_text())


if __name__ == "__main__":
    main()
