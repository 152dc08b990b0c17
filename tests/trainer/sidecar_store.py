"""A tiny store for sidecar tests: a tiny backbone, three random `adapter` domains and a
fastText router trained with its examples as hashed features (`features.npz.xz`), plus
synthetic data of a new domain (word-by-word "translations", so a module can learn
something)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from contract.artifacts import CLASSIFIER_FEATURES_FILE
from model_store import Job, Store
from server.engine.artifacts import backbone_parts, module_files
from server.serving.admin_jobs import DomainUpload, submit_domain
from server.settings import Settings
from tests.tiny import random_module, tiny_backbone_files, tiny_config
from trainer.jobs.settings import WorkerSettings
from trainer.routers.classifier import ClassifierSettings
from trainer.routers.classifier import train_classifier as fit_classifier
from trainer.routers.features import features_to_bytes, featurize, pruned
from trainer.routers.settings import RouterSettings

BACKBONE = "tiny"
WORDS = {
    "medical": ["patient", "tablet", "medicine", "dose", "children", "doctor", "pain"],
    "law": ["council", "regulation", "member", "states", "directive", "decision", "article"],
    "it": ["click", "button", "window", "file", "files", "menu", "folder"],
}
NEW_DOMAIN = "religion"
LEXICON = {"god": "dieu", "merciful": "miséricordieux", "name": "nom", "prayer": "prière",
           "faith": "foi", "heaven": "ciel", "mercy": "pitié", "lord": "seigneur",
           "the": "le", "of": "de", "in": "dans", "is": "est"}
NEW_TEXT = "the lord is merciful in heaven"
# 30 sentences a class of a few words: every feature is kept (min_examples 1), or the
# classes would share most of what is left
ROUTER = RouterSettings(bucket=20_000, dim=16, min_examples=1, quantize=False)
FAST_JOB: dict[str, Any] = {"max_epochs": 4, "eval_every": 4, "patience": 0, "lr": 0.01,
                            "warmup_steps": 4, "max_tokens": 1000}


def sentences(words: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 6))) for _ in range(count)]


def router_texts() -> list[tuple[str, str]]:
    """The (domain, sentence) examples the store's router learns from."""
    return [(d, s) for i, (d, w) in enumerate(WORDS.items()) for s in sentences(w, 30, i)]


def new_domain_pairs(count: int = 48, seed: int = 7) -> list[tuple[str, str]]:
    """Distinct source sentences with their word-by-word translations."""
    found: dict[str, str] = {}
    rng = random.Random(seed)
    words = list(LEXICON)
    while len(found) < count:
        source = " ".join(rng.choice(words) for _ in range(rng.randint(3, 7)))
        found[source] = " ".join(LEXICON[w] for w in source.split())
    return list(found.items())


def tsv(pairs: list[tuple[str, str]]) -> bytes:
    return "".join(f"{s}\t{t}\n" for s, t in pairs).encode("utf-8")


def build_store(root: Path, *, examples: bool = True, router: bool = True,
                backbone_files: dict[str, bytes] | None = None,
                router_temperature: float | None = None,
                registry_url: str | None = None) -> Path:
    """A store with the tiny backbone, a random adapter per domain of WORDS and a router
    (calibrated with `router_temperature` when given); with other `backbone_files` (e.g. an
    imported OPUS-MT model), that backbone alone. `registry_url`: default SQLite in `root`."""
    with Store.open(root, registry_url=registry_url, builtin_dir=None) as store:
        files = backbone_files or tiny_backbone_files()
        backbone = store.publish("backbone", BACKBONE, files,
                                 config=json.loads(files["config.json"]))
        store.activate("backbone", BACKBONE, backbone.version)
        if backbone_files is not None:
            return root
        fingerprint = backbone.backbone_fingerprint
        for seed, domain in enumerate(WORDS, start=1):
            config, params = random_module(tiny_config(), "adapter", seed=seed, bottleneck=4)
            manifest = store.publish("module", domain, module_files(params), config=config,
                                     backbone_fingerprint=fingerprint)
            store.activate("module", domain, manifest.version)
        if router:
            settings = classifier_settings()
            data = pruned(featurize(router_texts(), settings.features()), settings.min_examples)
            files = {"classifier.bin": fit_classifier(data, settings)}
            if examples:
                files[CLASSIFIER_FEATURES_FILE] = features_to_bytes(data)
            config: dict[str, Any] = {"labels": sorted(WORDS),
                                      "features": settings.features().as_config()}
            if router_temperature is not None:
                config["temperature"] = router_temperature
            manifest = store.publish("classifier", "router", files, config=config,
                                     backbone_fingerprint=fingerprint)
            store.activate("classifier", "router", manifest.version)
    return root


def classifier_settings() -> ClassifierSettings:
    return ROUTER.classifier_settings()


def worker_settings(**overrides: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "worker_name": "test-worker", "poll_interval_s": 0.1, "heartbeat_interval_s": 0.2,
        "heartbeat_timeout_s": 30.0, "checkpoint_every_s": 0.0, "progress_every_steps": 1,
        "router": ROUTER}
    return WorkerSettings(**(values | overrides))


def submit(store: Store, *, name: str = NEW_DOMAIN, config: dict[str, Any] | None = None,
           pairs: list[tuple[str, str]] | None = None) -> Job:
    """What `POST /admin/domains` does, without HTTP."""
    backbone = store.load_backbone(BACKBONE)
    upload = DomainUpload(name=name, train=tsv(pairs or new_domain_pairs()),
                          config=json.dumps(FAST_JOB | (config or {})))
    return submit_domain(store, upload, backbone=backbone.manifest,
                         backbone_config=backbone_parts(backbone.files).config,
                         min_pairs=20)


def sidecar_env(root: Path, **extra: str) -> dict[str, str]:
    """Environment of a `python -m trainer` subprocess on `root` with test settings."""
    settings = worker_settings()
    env = {
        "NMT_STORE_DIR": str(root), "NMT_BUILTIN_ARTIFACTS": "false",
        "NMT_TRAINER__WORKER_NAME": settings.worker_name,
        "NMT_TRAINER__POLL_INTERVAL_S": "0.1", "NMT_TRAINER__HEARTBEAT_INTERVAL_S": "0.2",
        "NMT_TRAINER__CHECKPOINT_EVERY_S": "0", "NMT_TRAINER__PROGRESS_EVERY_STEPS": "1",
        "NMT_TRAINER__THREADS": "1", "NMT_TRAINER__ROUTER__BUCKET": str(ROUTER.bucket),
        "NMT_TRAINER__ROUTER__DIM": str(ROUTER.dim), "NMT_TRAINER__ROUTER__QUANTIZE": "false",
        "NMT_TRAINER__ROUTER__MIN_EXAMPLES": str(ROUTER.min_examples),
    }
    return env | extra


TOKEN = "sidecar-test-token"


def server_settings(root: Path, **overrides: Any) -> Settings:
    """A server on the tiny store: greedy, short outputs, fast polling."""
    values: dict[str, Any] = {
        "store_dir": root, "builtin_artifacts": False, "backbone": BACKBONE,
        "admin_token": TOKEN, "poll_interval_s": 0.05,
        "engine": {"slots_per_bank": 4, "host_capacity": 16},
        "decoding": {"beam_size": 1, "max_length": 8},
        "scheduler": {"max_wait_ms": 2.0, "request_timeout_s": 60.0},
        "limits": {"min_domain_pairs": 20}}
    return Settings(**(values | overrides))


def admin_headers(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
