"""Batched decoding through `Engine.translate`, with a resumable per-(system, set) cache.

Every sentence is one `SentenceJob` whose members are a single module, the plain backbone
or a weighted ensemble: the engine mixes ensemble members at every step exactly as the
server does. Sentences are sorted by source length and cut into batches of at most
`batch_size` sentences and `max_rows` decoder rows (sentences x members x beam).

Caching: each (system, set) result is written to `<cache>/<engine label>/<set>/<system>.json`
with a signature of what produced it (engine label, beam, sources, members); a re-run
with the same signature reuses it, so an interrupted evaluation resumes. Within a run a
sentence already decoded with the same members (by another system) is reused too, e.g.
"adapter with the predicted label" only decodes the sentences the classifier got wrong.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.quality.data import EvalSet
from server.core.settings import DecodingSettings
from server.decoding.search import SearchOptions
from server.engine.engine import Engine, Member, SentenceJob

Members = tuple[Member, ...]
GENERIC_MEMBERS: Members = (Member(None, 1.0),)


@dataclass(frozen=True)
class DecodeSettings:
    beam_size: int
    batch_size: int = 64
    max_rows: int = 512  # sentences x members x beam per engine call
    length_limit: int = DecodingSettings().max_length  # the server's target-length cap


@dataclass(frozen=True)
class Decoded:
    hypotheses: list[str]
    seconds: float  # decoding time (of the run that decoded it, when cached)
    decoded: int  # sentences decoded by the engine
    reused: int  # sentences taken from another system's identical job
    cached: bool  # the whole result came from the run-dir cache
    target_tokens: int  # tokens generated (EOS included)

    def timing(self) -> dict[str, float | int | bool]:
        rate = self.target_tokens / self.seconds if self.seconds > 0 else 0.0
        return {"seconds": round(self.seconds, 2), "decoded": self.decoded,
                "reused": self.reused, "cached": self.cached,
                "target_tokens": self.target_tokens, "tokens_per_s": round(rate, 1)}


def members_key(members: Members) -> str:
    return "+".join(f"{m.module_id or 'generic'}*{m.weight:.6g}" for m in members)


def _signature(label: str, beam: int, dataset: EvalSet, keys: Sequence[str]) -> str:
    payload = json.dumps([label, beam, dataset.sources, list(keys)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)


def plan_batches(jobs: Sequence[SentenceJob], *, beam_size: int, batch_size: int,
                 max_rows: int) -> list[list[int]]:
    """Job indices sorted by source length, cut so that a batch has at most `batch_size`
    sentences and `max_rows` decoder rows (sentences x widest members x beam); a single
    sentence wider than `max_rows` still gets a batch of its own."""
    order = sorted(range(len(jobs)), key=lambda i: len(jobs[i].source_ids))
    batches: list[list[int]] = []
    current: list[int] = []
    widest = 1
    for index in order:
        width = len(jobs[index].members) * beam_size
        rows = (len(current) + 1) * max(widest, width)
        if current and (len(current) >= batch_size or rows > max_rows):
            batches.append(current)
            current, widest = [], 1
        current.append(index)
        widest = max(widest, width)
    if current:
        batches.append(current)
    return batches


class Decoder:
    """One engine at one beam size; `label` names the engine's weights in cache keys."""

    def __init__(self, engine: Engine, *, label: str, settings: DecodeSettings,
                 cache_dir: Path | None, fresh: bool = False) -> None:
        self.engine = engine
        self.label = label
        self.settings = settings
        self.cache_dir = cache_dir
        self.fresh = fresh
        self._memo: dict[tuple[str, str], tuple[str, int]] = {}

    def run(self, system: str, dataset: EvalSet, members: Sequence[Members]) -> Decoded:
        """Translate `dataset` with per-sentence `members`; cached by (system, set)."""
        if len(members) != len(dataset):
            raise ValueError(f"{system}/{dataset.name}: {len(members)} member lists for "
                             f"{len(dataset)} sentences")
        keys = [members_key(m) for m in members]
        signature = _signature(self.label, self.settings.beam_size, dataset, keys)
        path = self._path(system, dataset)
        cached = self._load(path, signature)
        if cached is not None:
            self._remember(dataset.sources, keys, cached.hypotheses)
            return cached
        todo = [i for i, (s, k) in enumerate(zip(dataset.sources, keys, strict=True))
                if (s, k) not in self._memo]
        started = time.perf_counter()
        fresh = self._decode([dataset.sources[i] for i in todo], [members[i] for i in todo])
        seconds = time.perf_counter() - started
        for index, translated in zip(todo, fresh, strict=True):
            self._memo[(dataset.sources[index], keys[index])] = translated
        hypotheses = [self._memo[(s, k)][0] for s, k in zip(dataset.sources, keys, strict=True)]
        generated = sum(count for _, count in fresh)
        result = Decoded(hypotheses, seconds, len(todo), len(dataset) - len(todo), False,
                         generated)
        self._save(path, signature, result)
        return result

    def _remember(self, sources: Sequence[str], keys: Sequence[str],
                  hypotheses: Sequence[str]) -> None:
        for source, key, hypothesis in zip(sources, keys, hypotheses, strict=True):
            self._memo.setdefault((source, key), (hypothesis, 0))

    def _decode(self, sources: Sequence[str], members: Sequence[Members]) -> list[tuple[str, int]]:
        """(translation, generated tokens) per sentence, in input order."""
        if not sources:
            return []
        engine, settings = self.engine, self.settings
        limit = engine.config.max_positions
        ids = [source if len(source) <= limit else source[: limit - 1] + source[-1:]
               for source in engine.source_tokenizer.encode(list(sources))]
        jobs = [SentenceJob(i, m, engine.max_length(len(i), limit=settings.length_limit))
                for i, m in zip(ids, members, strict=True)]
        out: list[tuple[str, int]] = [("", 0)] * len(jobs)
        options = SearchOptions(beam_size=settings.beam_size)
        for batch in plan_batches(jobs, beam_size=settings.beam_size,
                                  batch_size=settings.batch_size, max_rows=settings.max_rows):
            results = engine.translate([jobs[i] for i in batch], options)
            for index, hypotheses in zip(batch, results, strict=True):
                best = hypotheses[0].tokens if hypotheses else []
                out[index] = (engine.target_tokenizer.decode(best), len(best) + 1)
        return out

    def _path(self, system: str, dataset: EvalSet) -> Path | None:
        if self.cache_dir is None:
            return None
        beam = f"beam{self.settings.beam_size}"
        return (self.cache_dir / _safe(self.label) / beam /
                f"{_safe(dataset.name)}.{dataset.split}" / f"{_safe(system)}.json")

    def _load(self, path: Path | None, signature: str) -> Decoded | None:
        """The cached result (with the timing of the run that decoded it), or None."""
        if path is None or self.fresh or not path.exists():
            return None
        saved = json.loads(path.read_text(encoding="utf-8"))
        hypotheses = saved.get("hypotheses")
        if saved.get("signature") != signature or not isinstance(hypotheses, list):
            return None
        return Decoded([str(h) for h in hypotheses], float(saved.get("seconds", 0.0)),
                       int(saved.get("decoded", 0)), int(saved.get("reused", 0)), True,
                       int(saved.get("target_tokens", 0)))

    def _save(self, path: Path | None, signature: str, result: Decoded) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        payload = {"signature": signature, "hypotheses": result.hypotheses,
                   "seconds": result.seconds, "decoded": result.decoded,
                   "reused": result.reused, "target_tokens": result.target_tokens}
        tmp.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)
