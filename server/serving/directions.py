"""Directions: the backbones one server serves, and which one a request uses.

A direction is a backbone with everything that hangs off it (docs/DIRECTIONS.md): its own
runtime (engine, domain modules, router), scheduler, translator, default glossaries and
admin. Directions share the engine thread and the text preparation stage only: their schedulers
each form batches of their own backbone (a batch never mixes backbones) and hand them to
the one engine thread, whose queue runs them in order of arrival. A scheduler waits for
its batch before it forms the next, so directions with waiting work take turns batch by
batch: one direction's bulk traffic cannot starve another's.

A request picks its direction with `source` and `target`; without them it uses the
default direction (the server's as before directions existed). `source: "auto"` detects
the language of the request's texts (`detect_source`) before the direction is picked; a
language that no served backbone translates is refused (400) with the served directions.
Two backbones of the same pair (an imported en->de beside the package's): the pair goes to
the one the operator published or imported, not the built-in one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from model_store import Store
from model_store.layering import BUILTIN_SCHEME
from server.core.errors import NotReady, UnsupportedLanguage
from server.core.metrics import Metrics
from server.engine.live_batches import LiveBatches
from server.execution.engine_thread import EngineThread
from server.execution.text_worker import TextWorker
from server.memories.admin import MemoryAdmin
from server.memories.book import MemoryBook
from server.memories.imports import MemoryImports
from server.quality.review import QualityReview
from server.routing.policy import RoutingPolicy
from server.scheduling.continuous import ContinuousScheduler
from server.scheduling.preparation import PreparationGate
from server.scheduling.scheduler import Scheduler
from server.serving.admin import DomainAdmin
from server.serving.glossaries import GlossaryBook
from server.serving.residency import BackboneResidency, ResidentTranslator
from server.serving.runtime import Runtime
from server.serving.translation import Translator
from server.settings import Settings
from server.textproc.languages import (
    Detection,
    LanguageDetectors,
    LanguagePair,
    language_pair,
    pair_of_name,
)

AUTO = "auto"
# Detection over every language py3langid knows decides alone only when at least this
# sure (or when it names a served source language); otherwise the served languages are
# ranked among themselves, as LibreTranslate ranks among the languages it installed: short
# texts are far more reliable among a few candidates than among ~100.
CONFIDENT = 0.9


@dataclass(frozen=True)
class Direction:
    runtime: Runtime
    scheduler: Scheduler
    translator: Translator
    glossaries: GlossaryBook
    admin: DomainAdmin
    memories: MemoryBook | None = None  # its translation memories (None: turned off)

    @property
    def name(self) -> str:
        """The backbone's name."""
        return self.runtime.scope or ""

    @property
    def pair(self) -> LanguagePair | None:
        """The languages it translates; None until loaded, or when it does not say."""
        backbone = self.runtime.backbone
        return None if backbone is None else language_pair(backbone)

    async def domains(self) -> list[str]:
        """Its served domains; an unloaded backbone's: the registry's active ones (they are
        loaded with it on its next request)."""
        runtime = self.runtime
        if runtime.engine is not None or runtime.scope is None:
            return sorted(runtime.state.domains)
        return sorted(await asyncio.to_thread(runtime.store.active_domains, runtime.scope))

    def memory_admin(self, imports: MemoryImports) -> MemoryAdmin | None:
        """Its memories' management (None: memories are off)."""
        if self.memories is None:
            return None
        pair = self.pair
        return MemoryAdmin(self.memories, imports,
                           languages=(pair.source, pair.target) if pair is not None else None)

    @property
    def serving(self) -> bool:
        """Loaded, or unloaded by the residency limit and loaded again on demand."""
        return self.runtime.available


@dataclass(frozen=True)
class Choice:
    direction: Direction
    detected: Detection | None  # with source "auto"


class Directions:
    """Every served direction; the first is the default one."""

    def __init__(self, directions: Sequence[Direction], detectors: LanguageDetectors) -> None:
        if not directions:
            raise ValueError("a server serves at least one direction")
        self.all = list(directions)
        self.default = self.all[0]
        self.detectors = detectors
        # built in or not, by backbone name and version (a version's location never moves)
        self._shipped: dict[tuple[str, int], bool] = {}

    def by_name(self, backbone: str) -> Direction | None:
        return next((d for d in self.all if d.name == backbone), None)

    def served(self) -> list[tuple[LanguagePair, Direction]]:
        """The loaded directions that say their languages, the default first."""
        found = []
        for direction in self.all:
            pair = direction.pair
            if pair is not None and direction.serving:
                found.append((pair, direction))
        return found

    def readiness(self) -> tuple[bool, dict[str, str]]:
        """(ready, one line per direction): ready while any direction serves; a damaged
        backbone fails its own direction only (its requests get 503 saying why)."""
        checks: dict[str, str] = {}
        for direction in self.all:
            _, own = direction.runtime.readiness()
            pair = direction.pair or pair_of_name(direction.name)
            line = f"{pair.source}->{pair.target}: " if pair is not None else ""
            line += own["backbone"]  # loaded (...), unloaded (...): ..., or failed: ...
            broken = own.get("broken")
            if broken:
                line += "; broken domains: " + ", ".join(broken)
            router = own.get("classifier", "")
            if router.startswith("shared:") or direction.runtime.state.router_note:
                line += "; router " + router  # routing per source language: whose, or why none
            checks[direction.name] = line
        return any(d.runtime.readiness()[0] for d in self.all), checks

    def describe(self) -> str:
        """`en->fr, fr->en` (for error messages)."""
        return ", ".join(f"{p.source}->{p.target}" for p, _ in self.served()) or "none"

    async def choose(self, source: str | None, target: str | None,
                     texts: Sequence[str]) -> Choice:
        """The direction of a request (the default one when it names no language)."""
        if source is None and target is None:
            return Choice(self.default, None)
        detected = None
        if source == AUTO:
            detected = await self.detect_source("\n".join(texts))
            source = detected.language if detected is not None else None
        return Choice(self.pick(source, target, detected=detected), detected)

    def pick(self, source: str | None, target: str | None, *,
             detected: Detection | None = None) -> Direction:
        """The served direction from `source` into `target` (either may be None: any)."""
        matches = [d for pair, d in self.served()
                   if source in (None, pair.source) and target in (None, pair.target)]
        if len(matches) > 1 and matches[0] is not self.default \
                and len({d.pair for d in matches}) == 1:  # naming the pair cannot choose
            matches = [d for d in matches if not self._shipped_with(d)] or matches
        if len(matches) == 1 or (matches and matches[0] is self.default):
            return matches[0]
        what = _wanted(source, target, detected)
        if not matches:
            damaged = self._damaged(source, target)
            if damaged:  # a damaged backbone fails its own direction only, with why
                raise NotReady(f"the backbone that translates {what} is not serving: "
                               f"{damaged}; see /health/ready")
        if matches:
            options = ", ".join(f"{d.pair.source}->{d.pair.target}" for d in matches
                                if d.pair is not None)
            raise UnsupportedLanguage(f"{what} is served by several directions ({options}); "
                                      "name both source and target", field="target")
        raise UnsupportedLanguage(f"no served backbone translates {what}; served "
                                  f"directions: {self.describe()}",
                                  field="source" if source is not None else "target")

    def _shipped_with(self, direction: Direction) -> bool:
        """Whether the direction's loaded backbone version is one the package ships; read
        from the registry once per version."""
        backbone = direction.runtime.backbone
        if backbone is None:
            return False
        key = (backbone.name, backbone.version)
        if key not in self._shipped:
            record = direction.runtime.store.record("backbone", backbone.name, backbone.version)
            self._shipped[key] = record.location.startswith(BUILTIN_SCHEME)
        return self._shipped[key]

    def _damaged(self, source: str | None, target: str | None) -> str:
        """Why the directions from `source` into `target` that failed to load are not
        serving ('' when there is none)."""
        found = []
        for direction in self.all:
            pair = direction.pair or (pair_of_name(direction.name) if direction.name else None)
            if (pair is not None and not direction.serving
                    and source in (None, pair.source) and target in (None, pair.target)):
                why = direction.runtime.state.failures.get("backbone", "not loaded")
                found.append(f"{direction.name} ({why})")
        return "; ".join(found)

    async def detect_source(self, text: str) -> Detection | None:
        """The language of `text`: py3langid over every language it knows, trusted when
        it names a served source language or is sure (>= CONFIDENT); otherwise ranked
        among the served languages. None for a text without letters to read."""
        if not text.strip():
            return None
        ranked = await asyncio.to_thread(self.detectors.get([]).rank, text)
        served = self.served()
        sources = {pair.source for pair, _ in served}
        if ranked and (ranked[0].language in sources or ranked[0].confidence >= CONFIDENT):
            return ranked[0]
        languages = sorted(sources | {pair.target for pair, _ in served})
        among = await asyncio.to_thread(self.detectors.get(languages).rank, text)
        return among[0] if among else (ranked[0] if ranked else None)


def _wanted(source: str | None, target: str | None, detected: Detection | None) -> str:
    parts = []
    if source is not None:
        shown = (f"{source} (detected, confidence {detected.confidence:.2f})"
                 if detected is not None else source)
        parts.append(f"from {shown}")
    if target is not None:
        parts.append(f"into {target}")
    return " ".join(parts) or "this text (its language could not be detected)"


def served_backbones(store: Store, preferred: str | None, *, every: bool) -> list[str | None]:
    """The backbones to serve, the default direction first: `preferred`, else the
    store's default backbone when it is active, else the store's choice (None: the only
    backbone, or the only active one, as before directions existed); then, with `every`,
    every other active backbone."""
    active = sorted(store.active_backbones())
    default: str | None = preferred
    if default is None and len(active) > 1:
        fallback = store.registry.default_backbone()
        default = fallback if fallback in active else active[0]
    others = [name for name in active if every and name != default]
    if default is None and others:  # one active backbone: it is the default
        return [None]
    return [default, *others]


def residency_for(settings: Settings, metrics: Metrics,
                  backbones: int) -> BackboneResidency | None:
    """The residency limit (`NMT_DIRECTIONS__RESIDENT`), when it is below the number of
    backbones served (otherwise every backbone stays loaded)."""
    limit = settings.directions.resident
    if limit == 0 or limit >= backbones:
        return None
    return BackboneResidency(limit, metrics=metrics, wait_s=settings.directions.wait_s)


async def open_direction(store: Store, settings: Settings, *, backbone: str | None,
                         metrics: Metrics, engine_thread: EngineThread,
                         preparation: PreparationGate | None = None,
                         quality: QualityReview | None = None,
                         residency: BackboneResidency | None = None,
                         text_worker: TextWorker | None = None,
                         served: Sequence[str] = ()) -> Direction:
    """Load one backbone with its modules and router (under `residency`: making room for
    it), and start its scheduler. `preparation`: the gate of another direction (one for
    all); without one, a gate of its own that hands large texts to `text_worker`.
    `served`: every backbone the server serves (a direction without a router of its own
    routes with the router of one of the same source language)."""
    runtime = Runtime(store, settings, metrics=metrics, engine_thread=engine_thread,
                      backbone=backbone, served=served)
    if residency is None:
        await runtime.refresh()
    scheduler: Scheduler
    if settings.scheduler.continuous:
        scheduler = ContinuousScheduler(
            LiveBatches(runtime.current_engine), engine_thread, settings.scheduler,
            max_modules=settings.engine.slots_per_bank, metrics=metrics, residency=runtime)
    else:
        scheduler = Scheduler(runtime.run_batch, engine_thread, settings.scheduler,
                              max_modules=settings.engine.slots_per_bank, metrics=metrics,
                              residency=runtime)
    scheduler.start()
    policy = RoutingPolicy(settings.routing, max_members=settings.engine.slots_per_bank)
    glossaries = await asyncio.to_thread(GlossaryBook, store.registry, settings.limits,
                                         backbone=runtime.scope)
    memories = await asyncio.to_thread(lambda: MemoryBook(
        store.registry, settings.memories,
        backbone=store.registry.scope("module", runtime.scope))
    ) if settings.memories.enabled else None
    if residency is not None:
        residency.add(runtime, scheduler)
        await residency.admit(runtime)
    make_translator: Callable[..., Translator] = (
        Translator if residency is None else partial(ResidentTranslator, residency=residency))
    translator = make_translator(
        runtime, scheduler, policy, limits=settings.limits, decoding=settings.decoding,
        timeout_s=settings.scheduler.request_timeout_s, metrics=metrics,
        glossaries=glossaries, quality=quality, memories=memories,
        preparation=preparation or PreparationGate(
            max_chars=settings.limits.max_preparing_chars,
            retry_after_s=settings.scheduler.retry_after_s, worker=text_worker))
    admin = DomainAdmin(store, runtime, drain_timeout_s=settings.drain_timeout_s)
    return Direction(runtime, scheduler, translator, glossaries, admin, memories)
