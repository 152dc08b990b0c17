"""Model stores for the serving benchmark, and what the benchmark reads back from them.

- the default store: an empty writable root with the package's built-in artifacts layered
  under it (`Store.open(root)`), i.e. exactly what `python -m server` serves out of the box;
- a tiny store (`--tiny`, tests): a toy Marian backbone converted by `converters.marian`
  and a few residual adapters with random weights, no classifier (automatic routing then
  uses the plain backbone).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.speed import model as speed_model
from benchmarks.speed.data import read_test_sets, training_lines
from benchmarks.speed.engine.systems import random_adapter
from benchmarks.speed.serve.loadstats import TokenCounter
from contract.artifacts import BACKBONE_CONFIG_FILE
from contract.backbone import BackboneConfig
from converters.marian import convert_marian
from model_store import BUILTIN_DIR, Store, StoreError
from server.engine.artifacts import backbone_parts, module_files, module_params
from server.engine.families import Params
from server.engine.tokenizer import Tokenizer

TINY_BACKBONE = "tiny"
TINY_DOMAINS = ("medical", "law", "it")


@dataclass(frozen=True)
class StoreSpec:
    """Where a benchmark store lives and how the server must open it."""

    root: Path
    builtin: bool  # layer the package's built-in artifacts
    backbone: str | None  # None: the store's only backbone

    def environment(self) -> dict[str, str]:
        """The server's NMT_* variables for this store."""
        env = {"NMT_STORE_DIR": str(self.root),
               "NMT_BUILTIN_ARTIFACTS": "true" if self.builtin else "false"}
        if self.backbone is not None:
            env["NMT_BACKBONE"] = self.backbone
        return env

    def open(self) -> Store:
        return Store.open(self.root, builtin_dir=BUILTIN_DIR if self.builtin else None)


def seed_default_store(root: Path) -> StoreSpec:
    """A fresh writable root over the built-in artifacts; refuses a store with no backbone
    (the serving benchmark needs one: build the default model, or use --tiny)."""
    spec = StoreSpec(root, builtin=True, backbone=None)
    with spec.open() as store:
        names = store.registry.list_names("backbone")
        default = store.registry.default_backbone()
    if not names:
        raise SystemExit(f"the built-in store ({BUILTIN_DIR}) holds no backbone; add the "
                         "default model's artifacts first (see model_store/builtin/README.md) "
                         "or run with --tiny")
    # The built-in store ships several directions: name the server's default one, which
    # the benchmarks measure, so reading its files does not need an only backbone.
    return replace(spec, backbone=default)


def seed_tiny_store(root: Path, *, domains: Sequence[str] = TINY_DOMAINS,
                    lines: Sequence[str] = (), bottleneck: int = 8) -> StoreSpec:
    """A toy backbone (via a Marian checkpoint and the Marian converter) and one random
    adapter per domain, published and activated."""
    with tempfile.TemporaryDirectory(prefix="tiny-marian-") as scratch:
        checkpoint, _ = speed_model.build_checkpoint(Path(scratch) / "marian",
                                                     speed_model.TINY, lines=lines)
        files = convert_marian(checkpoint.path)
    config = BackboneConfig.from_dict(json.loads(files[BACKBONE_CONFIG_FILE]))
    spec = StoreSpec(root, builtin=False, backbone=TINY_BACKBONE)
    with spec.open() as store:
        manifest = store.publish("backbone", TINY_BACKBONE, files, config=config.to_dict())
        store.activate("backbone", TINY_BACKBONE, manifest.version)
        for seed, domain in enumerate(domains, start=1):
            module_config, params = random_adapter(config, bottleneck=bottleneck, seed=seed,
                                                   std=0.3)
            published = store.publish("module", domain, module_files(params),
                                      config=module_config,
                                      backbone_fingerprint=manifest.backbone_fingerprint)
            store.activate("module", domain, published.version)
    return spec


def backbone_files(spec: StoreSpec) -> dict[str, bytes]:
    """The served backbone's verified files."""
    with spec.open() as store:
        return dict(store.load_backbone(spec.backbone).files)


def target_tokenizer(files: Mapping[str, bytes]) -> Tokenizer:
    return backbone_parts(files).target_tokenizer


def load_module(spec: StoreSpec, name: str, version: int) -> tuple[dict[str, Any], Params]:
    """A module version's config and tensors, verified by the store."""
    with spec.open() as store:
        try:
            loaded = store.load("module", name, version)
        except StoreError as error:
            raise RuntimeError(f"cannot load module {name} v{version}: {error}") from error
        return dict(loaded.manifest.config), module_params(loaded.files)


def text_sets(data: Path | None, *, per_set: int) -> dict[str, list[str]]:
    """The en-fr test sets, or synthetic text per tiny domain when there are none."""
    sets = read_test_sets(data, per_set=per_set)
    if sets:
        return sets
    return {domain: speed_model.synthetic_lines(per_set, seed=seed)
            for seed, domain in enumerate(TINY_DOMAINS, start=1)}


def token_counter(spec: StoreSpec) -> TokenCounter:
    tokenizer = target_tokenizer(backbone_files(spec))
    return lambda text: len(tokenizer.encode([text], add_eos=False)[0])


def seed_store(root: Path, *, tiny: bool, data: Path | None) -> StoreSpec:
    if tiny:
        return seed_tiny_store(root, lines=training_lines(data, per_file=500))
    return seed_default_store(root)
