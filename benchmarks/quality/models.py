"""What the evaluation runs: the backbone engine, every domain module, the classifier.

- served modules: the active version of every domain (what the server would serve);
- other families: module artifacts of a family other than the served one, published in
  the store (any version, e.g. `medical` v2 with family `highway`, or a name such as
  `medical-gated`) or in a separate `--families-store` built for the same backbone;
- the word-level mixture (family "mixing"): ONE module that holds every domain and needs
  no label (served under a name such as `mixed`, not a domain's). The store's active one,
  else its newest, else the families store's newest; it is never a served domain here
  (the ensembles and label rows are over per-domain modules only).

Engine module ids carry the artifact's weights hash, so cached translations never outlive
the weights that produced them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from contract.artifacts import MODULE_WEIGHTS_FILE
from contract.families import mixes_domains
from model_store import ArtifactRecord, LoadedArtifact, Manifest, Store, StoreError
from server.core.settings import RoutingSettings
from server.engine.artifacts import backbone_parts, build_engine, module_params
from server.engine.engine import Engine, EngineOptions
from server.engine.families import ModuleConfigError, get_family
from server.routing.classifier import FastTextClassifier, RouterOrigin, load_classifier
from server.routing.shared_router import shared_router
from server.textproc.languages import language_pair


@dataclass(frozen=True)
class ModuleInfo:
    domain: str
    family: str
    name: str  # artifact name
    version: int
    module_id: str  # id registered in the engine
    parameters: int


@dataclass(frozen=True)
class MixingInfo(ModuleInfo):
    """A word-level mixture: `domain` is its artifact name; `domains` are the ones it mixes."""

    domains: tuple[str, ...]


@dataclass
class Models:
    backbone: Manifest
    backbone_files: Mapping[str, bytes]
    engine: Engine
    backbone_parameters: int
    served: dict[str, ModuleInfo]  # domain -> active module
    families: dict[str, dict[str, ModuleInfo]]  # family row key -> domain -> module
    classifier: FastTextClassifier | None
    notes: list[str] = field(default_factory=list)
    mixing: MixingInfo | None = None  # the word-level mixture, when a store has one

    @property
    def served_family(self) -> str:
        counts = Counter(info.family for info in self.served.values())
        return counts.most_common(1)[0][0] if counts else "adapter"


def domain_of(name: str, domains: Iterable[str]) -> str | None:
    """The domain an artifact name belongs to: `medical`, `medical-gated`, `gated-medical`."""
    for domain in sorted(domains, key=len, reverse=True):
        if name == domain or name.startswith((f"{domain}-", f"{domain}_")):
            return domain
        if name.endswith((f"-{domain}", f"_{domain}")):
            return domain
    return None


def _engine_id(loaded: LoadedArtifact, prefix: str = "") -> str:
    manifest = loaded.manifest
    weights = manifest.files.get(MODULE_WEIGHTS_FILE)
    digest = weights.sha256[:12] if weights is not None else "x"
    return f"{prefix}{manifest.name}@{manifest.version}#{digest}"


def _info(loaded: LoadedArtifact, domain: str, engine: Engine, module_id: str) -> ModuleInfo:
    family = get_family(str(loaded.manifest.config.get("family")))
    config = family.normalise(dict(loaded.manifest.config))
    size = family.parameter_count(engine.config, config)
    return ModuleInfo(domain, family.name, loaded.manifest.name, loaded.manifest.version,
                      module_id, size)


def _register(engine: Engine, loaded: LoadedArtifact, module_id: str) -> None:
    engine.register_module(module_id, dict(loaded.manifest.config), module_params(loaded.files))


def _load_served(store: Store, engine: Engine, fingerprint: str,
                 notes: list[str], scope: str) -> dict[str, ModuleInfo]:
    served: dict[str, ModuleInfo] = {}
    for domain, version in sorted(store.active_domains(scope).items()):
        try:
            if mixes_domains(_family_of(store.record("module", domain, version,
                                                     backbone=scope))):
                notes.append(f"module {domain} v{version} is a word-level mixture: evaluated "
                             "as the no-label mixing row, not as a served domain")
                continue
            loaded = store.load("module", domain, version, expected_fingerprint=fingerprint,
                                backbone=scope)
            module_id = _engine_id(loaded)
            info = _info(loaded, domain, engine, module_id)
            _register(engine, loaded, module_id)
        except (StoreError, ValueError) as error:
            notes.append(f"served module {domain} v{version} skipped: {error}")
            continue
        served[domain] = info
    return served


def _family_candidates(store: Store, domains: Iterable[str], skip_family: str | None,
                       scope: str | None) -> dict[tuple[str, str], ArtifactRecord]:
    """(family, domain) -> the newest module record of that family for that domain among
    backbone `scope`'s (None: every backbone's; modules of `skip_family`, e.g. older
    versions of the served ones, are left out)."""
    chosen: dict[tuple[str, str], ArtifactRecord] = {}
    for record in store.registry.list_artifacts("module", backbone=scope):
        domain = domain_of(record.name, domains)
        family = _family_of(record)
        if domain is None or family == skip_family or mixes_domains(family):  # no domain's
            continue
        current = chosen.get((family, domain))
        if current is None or record.version > current.version:
            chosen[(family, domain)] = record
    return chosen


def _load_families(stores: Mapping[str, Store], engine: Engine, models: Models,
                   domains: list[str]) -> None:
    for label, store in stores.items():
        skip = models.served_family if label == "store" else None
        candidates = _family_candidates(store, domains, skip, _scope(models, label))
        for (family, domain), record in sorted(candidates.items()):
            key = family if family != models.served_family else f"{family}-{label}"
            try:
                loaded = store.load("module", record.name, record.version,
                                    expected_fingerprint=models.backbone.backbone_fingerprint,
                                    backbone=record.backbone)
                module_id = _engine_id(loaded, prefix=f"{label}:")
                info = _info(loaded, domain, engine, module_id)
                _register(engine, loaded, module_id)
            except (StoreError, ValueError, ModuleConfigError) as error:
                models.notes.append(f"{label} module {record.name} v{record.version} "
                                    f"({family}) skipped: {error}")
                continue
            models.families.setdefault(key, {})[domain] = info


def _family_of(record: ArtifactRecord) -> str:
    return str(record.manifest.config.get("family", ""))


def _scope(models: Models, label: str) -> str | None:
    """The backbone whose modules a store's rows are read from: the evaluated one in the
    evaluated store; the families store's own default (it is built for that backbone)."""
    return models.backbone.name if label == "store" else None


def mixing_candidate(store: Store, scope: str | None = None) -> ArtifactRecord | None:
    """The word-level mixture of backbone `scope` (None: the default): the active one,
    else the newest published one."""
    records = [r for r in store.registry.list_artifacts("module", backbone=scope)
               if mixes_domains(_family_of(r))]
    active = store.active_domains(scope)
    serving = [r for r in records if active.get(r.name) == r.version]
    return max(serving or records, key=lambda r: (r.created_at, r.version), default=None)


def _load_mixing(stores: Mapping[str, Store], engine: Engine, models: Models) -> None:
    """Register the first store's mixture (store before families store)."""
    for label, store in stores.items():
        record = mixing_candidate(store, _scope(models, label))
        if record is None:
            continue
        try:
            loaded = store.load("module", record.name, record.version,
                                expected_fingerprint=models.backbone.backbone_fingerprint,
                                backbone=record.backbone)
            module_id = _engine_id(loaded, prefix=f"{label}:")
            info = _info(loaded, record.name, engine, module_id)
            _register(engine, loaded, module_id)
        except (StoreError, ValueError, ModuleConfigError) as error:
            models.notes.append(f"{label} mixing module {record.name} v{record.version} "
                                f"skipped: {error}")
            continue
        domains = tuple(str(d) for d in loaded.manifest.config.get("domains", []))
        models.mixing = MixingInfo(**vars(info), domains=domains)
        return


def _classifier(store: Store, notes: list[str], backbone: Manifest) -> FastTextClassifier | None:
    """The router the server would route `backbone` with: its own, else the one of a
    direction of the same source language (server/routing/shared_router.py)."""
    name, scope = RoutingSettings().classifier, backbone.name
    owner, version = scope, store.registry.get_active("classifier", name, backbone=scope)
    if version is None:
        default = store.registry.default_backbone()
        pair = language_pair(backbone)
        found = shared_router(store, name, backbone=scope,
                              source=pair.source if pair is not None else None,
                              served=sorted(store.active_backbones(),
                                            key=lambda b: (b != default, b)),
                              domains=store.active_domains(scope))
        if isinstance(found, str):
            notes.append(f"no active classifier {name!r} ({found}): predicted-label and "
                         "routing rows skipped")
            return None
        owner, version = found.backbone, found.version
        notes.append(f"routed with {owner}'s router v{version}: {scope} has none of its own "
                     "and reads the same source language")
    try:
        loaded = store.load("classifier", name, version, backbone=owner)
        return load_classifier(loaded.files, loaded.manifest.config, version=version,
                               origin=RouterOrigin(owner, name, version, shared=owner != scope))
    except (StoreError, ValueError, OSError) as error:
        notes.append(f"classifier {name} v{version} failed to load: {error}")
        return None


def _module_artifacts(store: Store) -> int:
    return len(store.registry.list_artifacts("module"))


def load_models(store: Store, *, backbone: str | None, domains: list[str],
                families_store: Store | None = None,
                options: EngineOptions | None = None) -> Models:
    """Build the engine (`options`: its device and dtype; float32 on the CPU by default) and
    register every module the evaluation can use."""
    loaded = store.load_backbone(backbone)
    parts = backbone_parts(loaded.files)
    count = _module_artifacts(store) + (_module_artifacts(families_store) if families_store
                                        else 0)
    engine = build_engine(loaded.files, replace(options or EngineOptions(),
                                                host_capacity=max(64, count + 8)))
    size = sum(t.numel() for t in parts.tensors.values())
    notes: list[str] = []
    fingerprint = loaded.manifest.backbone_fingerprint
    scope = loaded.manifest.name  # its modules and router only, in a store of several
    served = _load_served(store, engine, fingerprint, notes, scope)
    models = Models(loaded.manifest, loaded.files, engine, size, served, {},
                    _classifier(store, notes, loaded.manifest), notes)
    stores = {"store": store} | ({"families-store": families_store} if families_store else {})
    _load_families(stores, engine, models, domains)
    _load_mixing(stores, engine, models)
    return models


def parameter_summary(models: Models) -> dict[str, Any]:
    """The "#P" column: backbone vs each module (served and other families)."""
    total = models.backbone_parameters

    def row(info: ModuleInfo) -> dict[str, Any]:
        return {"family": info.family, "artifact": f"{info.name} v{info.version}",
                "parameters": info.parameters,
                "percent_of_backbone": round(100.0 * info.parameters / max(total, 1), 2)}

    mixing = models.mixing
    return {"backbone": {"name": models.backbone.name, "version": models.backbone.version,
                         "parameters": total},
            "served": {d: row(i) for d, i in sorted(models.served.items())},
            "families": {k: {d: row(i) for d, i in sorted(v.items())}
                         for k, v in sorted(models.families.items())},
            "mixing": (row(mixing) | {"name": mixing.name, "domains": list(mixing.domains)}
                       if mixing else None)}
