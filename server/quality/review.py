"""Every decoded sentence reviewed before the answer leaves: scored, checked by the
detectors, and re-decoded when a detector fires.

1. features of each best hypothesis from the search alone (its score, the beam's other
   hypotheses, length, copy, repetition) -> the backbone's estimator -> `quality` in
   [0, 1]; the detectors;
2. the scoring pass (server/quality/signals.py: token log-probs, entropies, attention
   coverage), on the engine thread with other requests' waiting passes
   (server/quality/batching.py), only where needed: for every sentence when the
   estimator was fitted with pass features, else only for outputs short enough for the
   dropped-content rule to read coverage (a few percent). At saturation the pass cost
   41% of the tokens/s; the search-only estimator ranks as well on the dev sets;
3. recovery, for the sentences with an issue: a re-decode with a wider beam and, when the
   sentence used a domain module, one by the generic backbone; the candidates are scored
   the same way (each under the model that produced it) and the best kept: one without
   an issue before one with, then the higher quality. `recovered` names the issue when a
   re-decode replaced the output with one free of issues.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from model_store import Manifest
from server.core.metrics import Metrics
from server.core.settings import QualitySettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine.engine import Engine, Member, SentenceJob
from server.execution.engine_thread import EngineThread
from server.quality.batching import ScoringBatcher
from server.quality.detectors import Issue, ReadsAsSource, detect, needs_coverage
from server.quality.estimator import Estimator
from server.quality.estimators import EstimatorBook
from server.quality.features import PASS_FEATURES, Candidate, features
from server.quality.signals import Signals
from server.textproc.languages import LanguageDetectors, language_pair

RunJobs = Callable[[list[SentenceJob], SearchOptions], Awaitable[list[list[Hypothesis]]]]


@dataclass(frozen=True)
class Assessment:
    """What the review found for one sentence."""

    quality: float
    issues: tuple[Issue, ...] = ()
    recovered: Issue | None = None  # the issue a re-decode fixed (its output replaced)


@dataclass(frozen=True)
class _Scored:
    hypotheses: list[Hypothesis]
    assessment: Assessment
    current: tuple[Issue, ...]  # the issues of the output kept now
    found: Mapping[str, float] = field(default_factory=dict)  # its features


class QualityReview:
    def __init__(self, engine_thread: EngineThread, settings: QualitySettings, *,
                 metrics: Metrics, max_beam: int, estimators: EstimatorBook,
                 languages: LanguageDetectors) -> None:
        self.engine_thread = engine_thread
        self.settings = settings
        self.metrics = metrics
        self.max_beam = max_beam
        self.estimators = estimators
        self.languages = languages
        self.batcher = ScoringBatcher(engine_thread)

    def threshold(self, backbone: Manifest | None) -> float:
        """The default min_quality: the setting, or the estimator's fitted threshold."""
        chosen = self.settings.min_quality
        return chosen if chosen is not None else self.estimators.get(backbone).threshold

    def _reads_as_source(self, backbone: Manifest | None) -> ReadsAsSource:
        pair = language_pair(backbone) if backbone is not None else None
        if pair is None or pair.source == pair.target:
            return None
        detector = self.languages.get(pair.codes)
        return lambda text: any(d.language == pair.source and d.confidence > 0.5
                                for d in detector.rank(text)[:1])

    async def review(self, engine: Engine, backbone: Manifest | None,
                     jobs: Sequence[SentenceJob], sources: Sequence[str],
                     hypotheses: list[list[Hypothesis]], *, options: SearchOptions,
                     run: RunJobs) -> tuple[list[list[Hypothesis]], list[Assessment]]:
        """Per sentence: its hypotheses (the best replaced when recovery found better) and
        its assessment. `sources[i]` is the text `jobs[i]` encodes."""
        judge = _Judge(engine, self.estimators.get(backbone), self._reads_as_source(backbone))
        scored = await self._judge_all(engine, judge, jobs, sources, hypotheses)
        troubled = [i for i, s in enumerate(scored) if s.assessment.issues]
        if troubled and self.settings.recover:
            await self._recover(engine, judge, jobs, sources, scored, troubled, options, run)
        for found in scored:
            self.metrics.quality.observe(found.assessment.quality)
            for issue in found.assessment.issues:
                self.metrics.quality_issues.labels(issue=issue).inc()
            if found.assessment.recovered is not None:
                self.metrics.quality_recoveries.labels(issue=found.assessment.recovered).inc()
        return [s.hypotheses for s in scored], [s.assessment for s in scored]

    async def _judge_all(self, engine: Engine, judge: _Judge, jobs: Sequence[SentenceJob],
                         sources: Sequence[str], hypotheses: Sequence[list[Hypothesis]]
                         ) -> list[_Scored]:
        """Every sentence judged from its search alone; the scoring pass runs (one batched
        call) only for the sentences whose estimator or detectors need what it gives."""
        scored = [judge(job, source, own, None) for job, source, own
                  in zip(jobs, sources, hypotheses, strict=True)]
        again = [i for i, found in enumerate(scored) if judge.needs_pass(found)]
        if again:
            signals = await self._score(engine, [jobs[i] for i in again],
                                        [hypotheses[i][0] for i in again])
            for index, signal in zip(again, signals, strict=True):
                scored[index] = judge(jobs[index], sources[index], hypotheses[index], signal)
        return scored

    async def _score(self, engine: Engine, jobs: list[SentenceJob],
                     best: list[Hypothesis]) -> list[Signals]:
        return await self.batcher.score(engine, jobs, [h.tokens for h in best])

    async def _recover(self, engine: Engine, judge: _Judge, jobs: Sequence[SentenceJob],
                       sources: Sequence[str], scored: list[_Scored], troubled: list[int],
                       options: SearchOptions, run: RunJobs) -> None:
        wider = replace(options, beam_size=min(self.max_beam, max(
            self.settings.recovery_beam, options.beam_size)), n_best=1)
        tries: list[tuple[int, SentenceJob, SearchOptions]] = []
        for index in troubled:
            job = jobs[index]
            if wider.beam_size > options.beam_size:
                tries.append((index, job, wider))
            if any(member.module_id is not None for member in job.members):
                generic = SentenceJob(job.source_ids, (Member(None),), job.max_length)
                tries.append((index, generic, replace(options, n_best=1)))
        if not tries:
            return
        found: list[Hypothesis] = []
        for chosen in (wider, replace(options, n_best=1)):
            mine = [t for t in tries if t[2] == chosen]
            if mine:
                out = await run([t[1] for t in mine], chosen)
                found.extend(h[0] for h in out)
        ordered = [t for t in tries if t[2] == wider] + [t for t in tries if t[2] != wider]
        candidates = await self._judge_all(engine, judge, [t[1] for t in ordered],
                                           [sources[t[0]] for t in ordered],
                                           [[h] for h in found])
        for (index, _, _), hypothesis, candidate in zip(ordered, found, candidates,
                                                        strict=True):
            current = scored[index]
            if _rank(candidate) > _rank(current):
                issues = current.assessment.issues  # what was found in the first output
                fixed = issues[0] if not candidate.current else None  # else only better
                scored[index] = _Scored([hypothesis, *current.hypotheses[1:]], replace(
                    candidate.assessment, issues=issues, recovered=fixed), candidate.current)


def _rank(found: _Scored) -> tuple[bool, float]:
    """A candidate without issues beats one with; then the higher quality."""
    return (not found.current, found.assessment.quality)


class _Judge:
    """Features, estimate and detectors of one decoded sentence."""

    def __init__(self, engine: Engine, estimator: Estimator,
                 reads_as_source: ReadsAsSource) -> None:
        self.decode = engine.target_tokenizer.decode
        self.source_eos = engine.config.source_eos
        self.estimator = estimator
        self.reads_as_source = reads_as_source
        # an estimator fitted with pass features (an older file) has every sentence scored
        self.always_pass = any(name in PASS_FEATURES for name in estimator.features)

    def needs_pass(self, scored: _Scored) -> bool:
        return self.always_pass or needs_coverage(scored.found)

    def __call__(self, job: SentenceJob, source: str, hypotheses: list[Hypothesis],
                 signals: Signals | None) -> _Scored:
        best = hypotheses[0]
        output = self.decode(best.tokens)
        others = [h.tokens for h in hypotheses[1:]]
        candidate = Candidate(source, output, job.source_ids, best.tokens, others,
                              [h.score for h in hypotheses], source_eos=self.source_eos,
                              alternative_outputs=[self.decode(t) for t in others])
        found = features(candidate, signals)
        issues = detect(found, source=source, output=output,
                        reads_as_source=self.reads_as_source,
                        hit_length_limit=len(best.tokens) >= job.max_length)
        return _Scored(hypotheses, Assessment(round(self.estimator.predict(found), 4),
                                              tuple(issues)), tuple(issues), found)
