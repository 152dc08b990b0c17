"""The translation pipeline of one request, from texts to results.

1. check the size limits (characters per text, items, characters per request);
2. under the deadline and the preparation stage's character budget
   (server/scheduling/preparation.py: 429 beyond it; a small request on the event loop,
   a large one on a preparation thread): route every text (policy +
   classifier), split it into sentences (server/textproc/sentences.py; a large request's
   texts in the text worker process) and tokenize them, within the caps on sentences and
   source tokens per request (413);
3. hold the routed module versions (runtime) so they stay loaded until the request ends;
4. submit every sentence to the scheduler and await them under the request's deadline;
5. decode (off the loop for a large request), restore markup, placeholders and glossary
   terms (server/textproc); sentences whose markers were lost are translated again run by run
   (a second round under the same deadline, never refused: the request was admitted);
   rejoin each text's layout;
6. on request (debug), a word-level mixture's per-token domain proportions, from a separate
   encoder pass on the engine thread (translation batches never record them).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from server.core.errors import DeadlineExceeded, NotReady
from server.core.metrics import Metrics
from server.core.settings import DecodingSettings, LimitSettings
from server.core.tenancy import current_scope
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, Member, SentenceJob
from server.memories.book import MemoryBook
from server.quality import casing, policy
from server.quality.policy import QualityRequest
from server.quality.review import Assessment, QualityReview
from server.routing.policy import RoutingDecision, RoutingPolicy
from server.scheduling.preparation import PreparationGate, check_deadline
from server.scheduling.scheduler import Scheduler
from server.serving.glossaries import GlossaryBook
from server.serving.memory_retrieval import with_neighbours
from server.serving.memory_use import apply_memories
from server.serving.request_limits import (
    RequestCaps,
    check_limits,
    check_mixtures,
    check_not_broken,
    search_options,
)
from server.serving.requests import (
    DecodingRequest,
    Item,
    ItemProportions,
    ItemResult,
    Prepared,
    SentenceProportions,
)
from server.serving.results import Decode, n_best_alternatives, per_item
from server.serving.runtime import Runtime
from server.serving.sentence_jobs import sentence_jobs
from server.serving.state import ServingState
from server.serving.tenant_view import routable
from server.serving.term_bans import avoiding, bans_of, with_bans
from server.textproc.document import Document, build_document
from server.textproc.documents import DocumentSpec, TooManySentences, build_documents
from server.textproc.glossary import Glossary
from server.textproc.masking import TermMode

T = TypeVar("T")
HOLD_ATTEMPTS = 3
DEFAULT_QUALITY = QualityRequest()


class Translator:
    def __init__(self, runtime: Runtime, scheduler: Scheduler, policy: RoutingPolicy, *,
                 limits: LimitSettings, decoding: DecodingSettings, timeout_s: float,
                 metrics: Metrics, glossaries: GlossaryBook,
                 terms: TermMode = "inline", preparation: PreparationGate | None = None,
                 quality: QualityReview | None = None,
                 memories: MemoryBook | None = None) -> None:
        self.runtime = runtime
        self.scheduler = scheduler
        self.policy = policy
        self.limits = limits
        self.decoding = decoding
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.glossaries = glossaries
        self.terms = terms
        self.quality = quality
        self.memories = memories  # this direction's translation memories (None: off)
        # one gate for all directions (open_direction's); without one, a gate of its own
        # with no text worker process (large texts are split on its thread)
        self.preparation = preparation or PreparationGate(
            max_chars=limits.max_preparing_chars, retry_after_s=scheduler.settings.retry_after_s)

    async def translate(self, items: Sequence[Item], request: DecodingRequest, *,
                        proportions: bool = False, explain: bool = False,
                        quality: QualityRequest = DEFAULT_QUALITY,
                        deadline_s: float | None = None) -> list[ItemResult]:
        """`proportions` (debug): also return each text's per-token domain proportions;
        every text must then be translated by a word-level mixture. `explain`: the same for
        the texts a mixture translates, without requiring one. `deadline_s`: the client's
        own deadline (at most the server's; admission refuses what cannot meet it)."""
        self.check_limits(items)
        options = self.search_options(request)
        chars = sum(len(item.text) for item in items)
        seconds = self.deadline_for(chars)
        if deadline_s is not None:
            seconds = min(seconds, deadline_s)
        deadline = time.monotonic() + seconds
        small = not self.preparation.is_large(chars)
        prepared, held = await self._prepare_held(items, request, deadline, chars)
        shown: list[ItemProportions | None] = [None] * len(prepared)
        try:
            if proportions:
                check_mixtures(prepared)
            jobs = [job for item in prepared for job in item.jobs]
            if deadline_s is None:  # the server's own deadline: as long as the rate needs
                deadline = self.scheduler.grown_deadline(jobs, options, deadline)
            # every beam hypothesis comes back: their agreement is a quality signal
            hypotheses = await self._run(jobs, replace(options, n_best=options.beam_size),
                                         deadline, judged=deadline_s is not None)
            hypotheses, assessed = await self._review(prepared, jobs, hypotheses, options,
                                                      deadline)
            hypotheses = await self._avoid([i.document.forbidden for i in prepared for _ in
                                            i.jobs], jobs, hypotheses, options, deadline)
            restored = await self._text_work(small, self._restore, prepared, hypotheses)
            retried = await self._retry(prepared, restored, request, options, deadline)
            if proportions or explain:
                shown = [await self._proportions(item) if item.mixture is not None else None
                         for item in prepared]
        finally:
            self.runtime.release(held)
        results = await self._text_work(small, self._finish, prepared, hypotheses, restored,
                                        retried, request.n_best, assessed, quality)
        return [replace(result, proportions=extra) for result, extra in
                zip(results, shown, strict=True)]

    def deadline_for(self, chars: int) -> float:
        """The server's deadline of a request of `chars` characters: the base plus a
        per-character budget, capped, so a large request waits its share instead of
        being refused for its size."""
        settings = self.scheduler.settings
        return min(max(settings.max_timeout_s, self.timeout_s),
                   self.timeout_s + settings.timeout_per_char_s * chars)

    @staticmethod
    async def _text_work(small: bool, function: Callable[..., T], *args: Any) -> T:
        """Restoring and rendering: on a worker thread for a large request, so the event
        loop keeps answering; inline for a small one, whose text work (tens of
        microseconds) costs less than the two thread hand-offs would."""
        if small:
            return function(*args)
        return await asyncio.to_thread(function, *args)

    # -- 1. limits and options ---------------------------------------------------------
    def check_limits(self, items: Sequence[Item]) -> None:
        check_limits(items, self.limits)

    def search_options(self, request: DecodingRequest) -> SearchOptions:
        return search_options(request, self.decoding)

    # -- 2./3. routing, splitting, tokenizing, holding --------------------------------
    async def _prepare_held(self, items: Sequence[Item], request: DecodingRequest,
                            deadline: float, chars: int) -> tuple[list[Prepared], list[str]]:
        for _attempt in range(HOLD_ATTEMPTS):
            state = self.runtime.state
            engine = self.runtime.engine
            if engine is None:
                raise NotReady("no backbone is loaded; see /health/ready")
            prepared = await self.preparation.run(chars, deadline, self._prepare, items,
                                                  request, state, engine, deadline)
            held = [m for item in prepared for m in item.module_ids]
            if self.runtime.hold(held):
                for item in prepared:
                    self._count(item.decision)
                return prepared, held
        raise NotReady("the served modules changed while routing this request; retry")

    def _prepare(self, items: Sequence[Item], request: DecodingRequest, state: ServingState,
                 engine: Engine, deadline: float) -> list[Prepared]:
        served = routable(state)  # what this request's tenant may route to
        versions, mixtures = served.versions, served.mixtures
        prepared: list[Prepared] = []
        caps = RequestCaps(self.limits)
        broken = served.scope.visible("domain", state.broken())
        glossaries = []
        for item in items:
            check_not_broken(item, broken)
            glossaries.append(self.glossaries.explicit(item.glossary))
        built = self._documents(items, glossaries, deadline)
        for index, (item, glossary) in enumerate(zip(items, glossaries, strict=True)):
            check_deadline(deadline)
            found = built[index] if built is not None and index < len(built) else None
            if isinstance(found, TooManySentences):
                # the worker stopped at this text; 413 unless a domain's default glossary
                # (applied below, after routing) makes fewer sentences of it
                caps.check_sentences(found.sentences, field=item.text_field)
                found = None
            document = found if found is not None else build_document(
                item.text, fmt=item.format, glossary=glossary, terms=self.terms,
                split=item.split)
            routed = document.plain_text() if item.format == "html" else item.text
            if item.context:  # as DeepL reads `context`: to disambiguate, never output
                routed = f"{item.context} {routed}"
            decision = self.policy.decide(item.domain, routed, domains=versions,
                                          classifier=served.classifier,
                                          field=item.domain_field, mixtures=mixtures)
            if glossary is None and decision.domain is not None:
                glossary = self.glossaries.domain_default(decision.domain)
                if glossary is not None:
                    document = build_document(item.text, fmt=item.format, glossary=glossary,
                                              terms=self.terms, split=item.split)
            document, memory = apply_memories(self.memories, item.memory, item.text, document,
                                              html=item.format == "html",
                                              domain=decision.domain)
            members = tuple(Member(state.domains[d].module_id if d else None, w)
                            for d, w in decision.members)
            shouted = tuple(map(casing.is_shouted, document.sources()))
            texts = [casing.fold(t) if loud else t
                     for t, loud in zip(document.sources(), shouted, strict=True)]
            caps.add_sentences(len(texts), field=item.text_field)
            ids = engine.source_tokenizer.encode(texts) if texts else []
            caps.add_tokens(sum(len(source) for source in ids), field=item.text_field)
            jobs = sentence_jobs(engine, ids, members, request, self.decoding,
                                 field=item.text_field)
            jobs, memory = with_neighbours(self.memories, item.memory, decision.domain,
                                           memory, texts, jobs, engine)
            if glossary is not None:  # its forbidden terms are banned from the search
                jobs = with_bans(engine.target_tokenizer, glossary.forbidden, jobs)
            used = {d: versions[d] for d in decision.module_domains}
            module_ids = [m.module_id for m in members if m.module_id is not None]
            single = decision.domain if len(decision.members) == 1 else None
            mixture = (state.domains[single].module_id if single in mixtures else None)
            prepared.append(Prepared(document, glossary is not None, decision, used,
                                     module_ids, jobs, mixture, tuple(texts), shouted, memory))
        return prepared

    def _documents(self, items: Sequence[Item], glossaries: Sequence[Glossary | None],
                   deadline: float) -> list[Document | TooManySentences] | None:
        """A large request's documents, built in the text worker process up to
        the text that crosses the sentence cap; None for a small one (built here)."""
        if not PreparationGate.is_large(sum(len(item.text) for item in items)):
            return None
        specs = [DocumentSpec(item.text, item.format, glossary, item.split)
                 for item, glossary in zip(items, glossaries, strict=True)]
        return self.preparation.apart(deadline, functools.partial(
            build_documents, specs, terms=self.terms,
            max_sentences=self.limits.max_request_sentences))

    def _count(self, decision: RoutingDecision) -> None:
        self.metrics.routing_decisions.labels(mode=decision.mode).inc()
        if decision.predicted is not None:
            # a tenant's domain is counted under its tenant's bucket (bounded labels)
            label = current_scope().metric_label("domain", decision.predicted)
            self.metrics.predicted_domains.labels(domain=label).inc()
        if decision.confidence is not None:
            self.metrics.confidence.observe(decision.confidence)

    # -- 4. scheduling -----------------------------------------------------------------
    async def _run(self, jobs: list[SentenceJob], options: SearchOptions, deadline: float, *,
                   admitted: bool = False, judged: bool = False) -> list[list[Hypothesis]]:
        """`judged`: the client chose the deadline, so admission may refuse it (504) at
        once; the server's own deadline (grown with the size) waits its turn instead."""
        if not jobs:
            return []
        futures = self.scheduler.submit(jobs, options, deadline=deadline, admitted=admitted,
                                        judged=judged)
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                return list(await asyncio.gather(*futures))
        except TimeoutError:
            raise DeadlineExceeded("the request's deadline passed before it finished; retry "
                                   "later, or send a batch with \"async\": true") from None
        finally:
            for future in futures:
                future.cancel()  # withdraws what has not run (no-op for finished ones)

    async def _review(self, prepared: list[Prepared], jobs: list[SentenceJob],
                      hypotheses: list[list[Hypothesis]], options: SearchOptions,
                      deadline: float) -> tuple[list[list[Hypothesis]], list[Assessment] | None]:
        """Quality of every sentence (server/quality/review.py); recovery's re-decodes run
        under the same deadline, never refused (the request was admitted)."""
        engine = self.runtime.engine
        if self.quality is None or engine is None:
            return hypotheses, None
        if not jobs:
            return hypotheses, []
        sources = [text for item in prepared for text in item.sources]

        async def run(more: list[SentenceJob], chosen: SearchOptions) -> list[list[Hypothesis]]:
            return await self._run(more, chosen, deadline, admitted=True)

        return await self.quality.review(engine, self.runtime.backbone, jobs, sources,
                                         hypotheses, options=options, run=run)

    async def _avoid(self, forbidden: list[tuple[str, ...]], jobs: list[SentenceJob],
                     hypotheses: list[list[Hypothesis]], options: SearchOptions,
                     deadline: float) -> list[list[Hypothesis]]:
        """Sentences that spelt a forbidden term the bans missed, decoded again."""
        engine = self.runtime.engine
        return hypotheses if engine is None else await avoiding(
            engine.target_tokenizer, forbidden, jobs, hypotheses,
            lambda more: self._run(more, options, deadline, admitted=True))

    # -- 6. a mixture's proportions (debug) --------------------------------------------
    async def _proportions(self, item: Prepared) -> ItemProportions:
        engine = self.runtime.engine
        if engine is None or item.mixture is None:
            raise NotReady("the backbone was unloaded")
        sources = [job.source_ids for job in item.jobs]
        report = await self.runtime.engine_thread.run(engine.proportions, item.mixture, sources)
        tokenizer = engine.source_tokenizer
        sentences_ = [SentenceProportions(tokenizer.pieces(ids),
                                          found.round(decimals=4).tolist())
                      for ids, found in zip(sources, report.sentences, strict=True)]
        return ItemProportions(item.decision.domain or "", report.domains, sentences_)

    # -- 5. decoding, restoring, retrying lost markers, rejoining -----------------------
    def _restore(self, prepared: list[Prepared],
                 hypotheses: list[list[Hypothesis]]) -> list[list[str | None]]:
        """Per item and unit: the best translation with its markers restored, or None."""
        decode = self._decoder()
        out: list[list[str | None]] = []
        for item, own in zip(prepared, per_item(prepared, hypotheses), strict=True):
            texts = [decode(h[0]) if h else "" for h in own]
            out.append(item.document.restore([casing.unfold(t) if loud else t for t, loud
                                              in zip(texts, item.shouted, strict=True)]))
        return out

    async def _retry(self, prepared: list[Prepared], restored: list[list[str | None]],
                     request: DecodingRequest, options: SearchOptions,
                     deadline: float) -> list[list[str]]:
        """Units whose markers were lost: their runs, translated one by one (same members)."""
        texts = [item.document.retry_texts(done) for item, done in zip(prepared, restored,
                                                                        strict=True)]
        if not any(texts):
            return [[] for _ in prepared]
        engine = self.runtime.engine
        if engine is None:
            raise NotReady("the backbone was unloaded")
        jobs = [sentence_jobs(engine, engine.source_tokenizer.encode(own),
                              item.jobs[0].members, request, self.decoding, field="text",
                              guides=bans_of(item.jobs[0]))
                if own else [] for item, own in zip(prepared, texts, strict=True)]
        flat = [job for own in jobs for job in own]
        # admitted with its first pass: a refusal now would waste it
        once = replace(options, n_best=1)
        banned = [i.document.forbidden for i, own in zip(prepared, jobs, strict=True) for _ in own]
        hypotheses = await self._avoid(banned, flat, await self._run(
            flat, once, deadline, admitted=True), once, deadline)
        decode = self._decoder()
        decoded = iter([decode(h[0]) if h else "" for h in hypotheses])
        return [[next(decoded) for _ in own] for own in jobs]

    def _finish(self, prepared: list[Prepared], hypotheses: list[list[Hypothesis]],
                restored: list[list[str | None]], retried: list[list[str]],
                n_best: int, assessed: list[Assessment] | None = None,
                quality: QualityRequest = DEFAULT_QUALITY) -> list[ItemResult]:
        decode = self._decoder()
        results: list[ItemResult] = []
        threshold = quality.min_quality
        if threshold is None:
            threshold = (self.quality.threshold(self.runtime.backbone)
                         if self.quality is not None else 0.0)
        cursor = 0
        for item, own, done, again in zip(prepared, per_item(prepared, hypotheses), restored,
                                          retried, strict=True):
            document = item.document
            finals = document.finals(done, again)
            sentences = None
            if assessed is not None:
                mine = assessed[cursor: cursor + len(item.jobs)]
                cursor += len(item.jobs)
                finals, sentences = policy.apply(document, finals, mine, threshold=threshold,
                                                 action=quality.on_low_quality)
                for _ in filter(lambda sentence: sentence.flagged, sentences):
                    self.metrics.quality_low.labels(action=quality.on_low_quality).inc()
            alternatives = (n_best_alternatives(document, own, finals, decode, n_best=n_best)
                            if n_best > 1 else None)
            report = document.glossary_report(finals) if item.glossary else None
            results.append(ItemResult(document.render(finals), item.decision, item.versions,
                                      alternatives, glossary=report, sentences=sentences,
                                      memory=item.memory))
        return results

    def _decoder(self) -> Decode:
        engine = self.runtime.engine
        if engine is None:
            raise NotReady("the backbone was unloaded")
        tokenizer = engine.target_tokenizer
        return lambda hypothesis: tokenizer.decode(hypothesis.tokens)


